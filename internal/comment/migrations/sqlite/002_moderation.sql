-- See the MySQL migration for what each table is for.
CREATE TABLE article_lock (
    article_id         INTEGER NOT NULL PRIMARY KEY,
    locked             BOOLEAN NOT NULL,
    moderation_version INTEGER NOT NULL
);

CREATE TABLE comment_moderation (
    comment_id         INTEGER NOT NULL PRIMARY KEY,
    article_id         INTEGER NOT NULL,
    hidden             TEXT    NOT NULL,
    removed_reason      TEXT    NOT NULL,
    moderation_version INTEGER NOT NULL
);

CREATE INDEX idx_article_id_comment_id ON comment_moderation (article_id, comment_id);
