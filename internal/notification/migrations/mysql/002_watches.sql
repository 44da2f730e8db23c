-- Watches (SPEC §3.13). watch is the truth: a user's watch of an article or a board, on the user's shard, read in
-- the same transaction as the inbox it decides for. watcher is the index the fan-out reads, "who may watch target
-- X", on the target's shard: written before a watch is made and after one is removed, so it holds every watch and
-- perhaps a few that are gone, which the fan-out drops when it reads the truth (docs/notifications.md).
CREATE TABLE IF NOT EXISTS watch (
    user_id     BIGINT      NOT NULL,
    target_type VARCHAR(8)  NOT NULL,
    target_id   BIGINT      NOT NULL,
    level       VARCHAR(8)  NOT NULL,
    watch_id    BIGINT      NOT NULL,
    created_at  DATETIME(3) NOT NULL,
    PRIMARY KEY (user_id, target_type, target_id),
    UNIQUE KEY idx_user_watch (user_id, watch_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS watcher (
    target_id   BIGINT     NOT NULL,
    target_type VARCHAR(8) NOT NULL,
    user_id     BIGINT     NOT NULL,
    PRIMARY KEY (target_id, target_type, user_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- The new kinds' preferences, and whether writing an article or a comment watches it.
ALTER TABLE inbox ADD COLUMN want_mention BOOLEAN NOT NULL DEFAULT TRUE,
    ADD COLUMN want_watched BOOLEAN NOT NULL DEFAULT TRUE,
    ADD COLUMN auto_watch BOOLEAN NOT NULL DEFAULT TRUE;

-- mentioned: the users a post's mentions told (or passed over), comma-separated, so that an edit tells only new
-- names. announced: an article's create was handled (its watchers and mentions told); rows from before are.
ALTER TABLE article_ref ADD COLUMN mentioned VARCHAR(2048) NOT NULL DEFAULT '',
    ADD COLUMN announced BOOLEAN NOT NULL DEFAULT TRUE;

ALTER TABLE comment_ref ADD COLUMN mentioned VARCHAR(2048) NOT NULL DEFAULT '';
