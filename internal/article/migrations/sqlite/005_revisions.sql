-- See the MySQL migration for what the table is for.
CREATE TABLE article_revision (
    article_id INTEGER  NOT NULL,
    revision   INTEGER  NOT NULL,
    board_id   INTEGER  NOT NULL,
    editor_id  INTEGER  NOT NULL,
    title      TEXT     NOT NULL,
    content    TEXT     NOT NULL,
    created_at DATETIME NOT NULL,
    moderator  BOOLEAN  NOT NULL,
    PRIMARY KEY (article_id, revision)
);
