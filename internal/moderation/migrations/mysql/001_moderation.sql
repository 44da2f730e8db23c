-- One row per article or comment that moderation knows of: reported, hidden, locked or pinned. It holds the
-- target's whole moderation state and its version (the moderationVersion of its events), and is the lock every
-- change of the target takes first, so that a target's reports, resolutions, locks and pins happen one at a time.
-- A target with open reports is in the moderators' queue from queued_at, the time of its first open report.
-- article_id is the target's article (itself for an article), so that an article's delete removes its comments' rows.
CREATE TABLE IF NOT EXISTS moderation_target (
    target_type        VARCHAR(16)   NOT NULL,
    target_id          BIGINT        NOT NULL,
    article_id         BIGINT        NOT NULL,
    board_id           BIGINT        NOT NULL,
    writer_id          BIGINT        NOT NULL,
    excerpt            VARCHAR(255)  NOT NULL,
    hidden             VARCHAR(16)   NOT NULL DEFAULT '',
    removed_reason      VARCHAR(600)  NOT NULL DEFAULT '',
    locked             BOOLEAN       NOT NULL DEFAULT FALSE,
    pinned             BOOLEAN       NOT NULL DEFAULT FALSE,
    moderation_version BIGINT        NOT NULL DEFAULT 0,
    open_reports       BIGINT        NOT NULL DEFAULT 0,
    queued_at          DATETIME(3)   NULL,
    PRIMARY KEY (target_type, target_id),
    KEY idx_queued_at (queued_at),
    KEY idx_article_id (article_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Every report, open (resolution_id 0) or resolved (the id of the resolution that closed it). The unique key allows
-- one open report per user per target, and any number of resolved ones.
CREATE TABLE IF NOT EXISTS report (
    report_id     BIGINT        NOT NULL PRIMARY KEY,
    board_id      BIGINT        NOT NULL,
    target_type   VARCHAR(16)   NOT NULL,
    target_id     BIGINT        NOT NULL,
    article_id    BIGINT        NOT NULL,
    reporter_id   BIGINT        NOT NULL,
    reason        VARCHAR(16)   NOT NULL,
    text          VARCHAR(500)  NOT NULL,
    created_at    DATETIME(3)   NOT NULL,
    resolution_id BIGINT        NOT NULL DEFAULT 0,
    UNIQUE KEY idx_target_reporter_resolution (target_type, target_id, reporter_id, resolution_id),
    KEY idx_article_id (article_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Pinned articles per board, so that the limit holds under concurrent pins: a pin takes a place with one
-- conditional UPDATE (pin_count < limit), which the row lock serializes.
CREATE TABLE IF NOT EXISTS board_pin (
    board_id  BIGINT NOT NULL PRIMARY KEY,
    pin_count BIGINT NOT NULL
) ENGINE = InnoDB;

-- A user's latest ban, active or lifted. until is NULL for a ban for good; ban_version is the banVersion of the
-- user's ban events.
CREATE TABLE IF NOT EXISTS ban (
    user_id      BIGINT        NOT NULL PRIMARY KEY,
    reason       VARCHAR(500)  NOT NULL,
    until        DATETIME(3)   NULL,
    moderator_id BIGINT        NOT NULL,
    created_at   DATETIME(3)   NOT NULL,
    ban_version  BIGINT        NOT NULL,
    active       BOOLEAN       NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- What moderators did (moderator_id 0: the reports' threshold), listed newest first by log_id, a Snowflake id.
-- shard_key is the target's board, or the banned user: the shard key of the transaction that writes the entry.
-- resolution_id is, for a resolution, the id its reports were closed with (the report rows keep it), else 0.
CREATE TABLE IF NOT EXISTS modlog (
    log_id       BIGINT        NOT NULL PRIMARY KEY,
    shard_key    BIGINT        NOT NULL,
    action       VARCHAR(16)   NOT NULL,
    target_type  VARCHAR(16)   NOT NULL,
    target_id    BIGINT        NOT NULL,
    article_id   BIGINT        NOT NULL,
    moderator_id BIGINT        NOT NULL,
    reason       VARCHAR(600)  NOT NULL,
    created_at   DATETIME(3)   NOT NULL,
    resolution_id BIGINT       NOT NULL DEFAULT 0
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
