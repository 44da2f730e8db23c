-- What moderation has made of each article (SPEC §3.9), from the moderation topic's ARTICLE_MODERATED: one row per
-- article ever moderated, removed with the article. moderation_version is the version of the latest event applied,
-- so duplicates and late events change nothing. board_id is the shard key, as for the article itself: a page reads
-- its articles' rows with one query on its board.
CREATE TABLE IF NOT EXISTS article_moderation (
    article_id         BIGINT        NOT NULL PRIMARY KEY,
    board_id           BIGINT        NOT NULL,
    hidden             VARCHAR(16)   NOT NULL,
    removed_reason      VARCHAR(1000) NOT NULL,
    locked             BOOLEAN       NOT NULL,
    pinned             BOOLEAN       NOT NULL,
    moderation_version BIGINT        NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
