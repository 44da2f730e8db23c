-- See the MySQL migration for what each table is for.
CREATE TABLE article_existence (
    article_id      INTEGER NOT NULL PRIMARY KEY,
    deleted         BOOLEAN NOT NULL,
    article_version INTEGER NOT NULL
);

CREATE TABLE article_purge (
    article_id INTEGER  NOT NULL PRIMARY KEY,
    queued_at  DATETIME NOT NULL
);
