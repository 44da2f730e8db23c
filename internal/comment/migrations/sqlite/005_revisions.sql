-- See the MySQL migration for what the columns and the table are for.
ALTER TABLE comment ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE comment ADD COLUMN modified_at DATETIME;
ALTER TABLE comment_v2 ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE comment_v2 ADD COLUMN modified_at DATETIME;

CREATE TABLE comment_revision (
    comment_id INTEGER  NOT NULL,
    revision   INTEGER  NOT NULL,
    article_id INTEGER  NOT NULL,
    editor_id  INTEGER  NOT NULL,
    content    TEXT     NOT NULL,
    created_at DATETIME NOT NULL,
    moderator  BOOLEAN  NOT NULL,
    PRIMARY KEY (comment_id, revision)
);
