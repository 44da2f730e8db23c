-- See the MySQL migration for the reasoning. SQLite compares text with BINARY collation unless told otherwise,
-- which is the byte order path enumeration needs.
CREATE TABLE comment (
    comment_id        INTEGER  NOT NULL PRIMARY KEY,
    content           TEXT     NOT NULL,
    article_id        INTEGER  NOT NULL,
    parent_comment_id INTEGER  NOT NULL,
    writer_id         INTEGER  NOT NULL,
    deleted           BOOLEAN  NOT NULL DEFAULT FALSE,
    created_at        DATETIME NOT NULL
);

CREATE INDEX idx_article_id_parent_comment_id_comment_id ON comment (article_id, parent_comment_id, comment_id);

CREATE TABLE comment_v2 (
    comment_id INTEGER  NOT NULL PRIMARY KEY,
    content    TEXT     NOT NULL,
    article_id INTEGER  NOT NULL,
    writer_id  INTEGER  NOT NULL,
    path       TEXT     NOT NULL COLLATE BINARY,
    deleted    BOOLEAN  NOT NULL DEFAULT FALSE,
    created_at DATETIME NOT NULL
);

CREATE UNIQUE INDEX idx_article_id_path ON comment_v2 (article_id, path);

CREATE TABLE article_comment_count (
    article_id    INTEGER NOT NULL PRIMARY KEY,
    comment_count INTEGER NOT NULL,
    version       INTEGER NOT NULL DEFAULT 0
);
