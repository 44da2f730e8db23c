-- See the mysql migration for the reasons behind each table.
CREATE TABLE article_like (
    article_like_id INTEGER  NOT NULL PRIMARY KEY,
    article_id      INTEGER  NOT NULL,
    user_id         INTEGER  NOT NULL,
    created_at      DATETIME NOT NULL
);

CREATE UNIQUE INDEX idx_article_id_user_id ON article_like (article_id, user_id);

CREATE TABLE article_like_count (
    article_id INTEGER NOT NULL PRIMARY KEY,
    like_count INTEGER NOT NULL,
    version    INTEGER NOT NULL
);
