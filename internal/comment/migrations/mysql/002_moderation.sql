-- What moderation has made of articles and comments here (SPEC §3.9), from the moderation topic: whether an article
-- is locked (no new comments), and whether a comment is hidden. moderation_version is the version of the latest
-- event applied, so duplicates and late events change nothing. Every row keeps its article_id, the shard key; the
-- purge of a deleted article removes its rows along the index.
CREATE TABLE IF NOT EXISTS article_lock (
    article_id         BIGINT  NOT NULL PRIMARY KEY,
    locked             BOOLEAN NOT NULL,
    moderation_version BIGINT  NOT NULL
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS comment_moderation (
    comment_id         BIGINT        NOT NULL PRIMARY KEY,
    article_id         BIGINT        NOT NULL,
    hidden             VARCHAR(16)   NOT NULL,
    removed_reason      VARCHAR(1000) NOT NULL,
    moderation_version BIGINT        NOT NULL,
    KEY idx_article_id_comment_id (article_id, comment_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
