-- See the MySQL migration for what the table is for.
CREATE TABLE article_moderation (
    article_id         INTEGER NOT NULL PRIMARY KEY,
    board_id           INTEGER NOT NULL,
    hidden             TEXT    NOT NULL,
    removed_reason      TEXT    NOT NULL,
    locked             BOOLEAN NOT NULL,
    pinned             BOOLEAN NOT NULL,
    moderation_version INTEGER NOT NULL
);
