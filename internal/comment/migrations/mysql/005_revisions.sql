-- Edits (SPEC §3.12). version counts a comment's edits (1 as written, +1 per edit) and orders its COMMENT_UPDATED
-- events for consumers (internal/event); modified_at is the last edit's time, NULL for a comment never edited.
ALTER TABLE comment ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE comment ADD COLUMN modified_at DATETIME(3) NULL;
ALTER TABLE comment_v2 ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE comment_v2 ADD COLUMN modified_at DATETIME(3) NULL;

-- Every edit keeps what it replaced (internal/revision): revision n is the content as version n read, the edit that
-- replaced it by editor_id at created_at, moderator when a moderator edited someone else's comment. Comments of both
-- versions (their ids are unique together). article_id is the shard key, as for the comment itself, so an edit and
-- its revision are one transaction on one shard; the rows go with their comment (delete, purge).
CREATE TABLE IF NOT EXISTS comment_revision (
    comment_id BIGINT        NOT NULL,
    revision   BIGINT        NOT NULL,
    article_id BIGINT        NOT NULL,
    editor_id  BIGINT        NOT NULL,
    content    VARCHAR(3000) NOT NULL,
    created_at DATETIME(3)   NOT NULL,
    moderator  BOOLEAN       NOT NULL,
    PRIMARY KEY (comment_id, revision)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
