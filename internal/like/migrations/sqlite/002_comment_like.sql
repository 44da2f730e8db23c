-- See the mysql migration for the reasons behind each table.
CREATE TABLE comment_like (
    comment_like_id INTEGER  NOT NULL PRIMARY KEY,
    article_id      INTEGER  NOT NULL,
    comment_id      INTEGER  NOT NULL,
    user_id         INTEGER  NOT NULL,
    created_at      DATETIME NOT NULL
);

CREATE UNIQUE INDEX idx_comment_id_user_id ON comment_like (comment_id, user_id);
CREATE INDEX idx_comment_like_article_id ON comment_like (article_id);

CREATE TABLE comment_like_count (
    comment_id INTEGER NOT NULL PRIMARY KEY,
    article_id INTEGER NOT NULL,
    like_count INTEGER NOT NULL,
    version    INTEGER NOT NULL
);

CREATE INDEX idx_comment_like_count_article_id ON comment_like_count (article_id);

CREATE TABLE comment_existence (
    comment_id INTEGER NOT NULL PRIMARY KEY,
    article_id INTEGER NOT NULL,
    deleted    BOOLEAN NOT NULL
);
