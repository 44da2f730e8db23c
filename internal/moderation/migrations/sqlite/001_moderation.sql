-- See the mysql migration for the reasons behind each table.
CREATE TABLE moderation_target (
    target_type        TEXT     NOT NULL,
    target_id          INTEGER  NOT NULL,
    article_id         INTEGER  NOT NULL,
    board_id           INTEGER  NOT NULL,
    writer_id          INTEGER  NOT NULL,
    excerpt            TEXT     NOT NULL,
    hidden             TEXT     NOT NULL DEFAULT '',
    removed_reason      TEXT     NOT NULL DEFAULT '',
    locked             BOOLEAN  NOT NULL DEFAULT FALSE,
    pinned             BOOLEAN  NOT NULL DEFAULT FALSE,
    moderation_version INTEGER  NOT NULL DEFAULT 0,
    open_reports       INTEGER  NOT NULL DEFAULT 0,
    queued_at          DATETIME NULL,
    PRIMARY KEY (target_type, target_id)
);

CREATE INDEX idx_moderation_target_queued_at ON moderation_target (queued_at);
CREATE INDEX idx_moderation_target_article_id ON moderation_target (article_id);

CREATE TABLE report (
    report_id     INTEGER  NOT NULL PRIMARY KEY,
    board_id      INTEGER  NOT NULL,
    target_type   TEXT     NOT NULL,
    target_id     INTEGER  NOT NULL,
    article_id    INTEGER  NOT NULL,
    reporter_id   INTEGER  NOT NULL,
    reason        TEXT     NOT NULL,
    text          TEXT     NOT NULL,
    created_at    DATETIME NOT NULL,
    resolution_id INTEGER  NOT NULL DEFAULT 0
);

CREATE UNIQUE INDEX idx_target_reporter_resolution ON report (target_type, target_id, reporter_id, resolution_id);
CREATE INDEX idx_report_article_id ON report (article_id);

CREATE TABLE board_pin (
    board_id  INTEGER NOT NULL PRIMARY KEY,
    pin_count INTEGER NOT NULL
);

CREATE TABLE ban (
    user_id      INTEGER  NOT NULL PRIMARY KEY,
    reason       TEXT     NOT NULL,
    until        DATETIME NULL,
    moderator_id INTEGER  NOT NULL,
    created_at   DATETIME NOT NULL,
    ban_version  INTEGER  NOT NULL,
    active       BOOLEAN  NOT NULL
);

CREATE TABLE modlog (
    log_id       INTEGER  NOT NULL PRIMARY KEY,
    shard_key    INTEGER  NOT NULL,
    action       TEXT     NOT NULL,
    target_type  TEXT     NOT NULL,
    target_id    INTEGER  NOT NULL,
    article_id   INTEGER  NOT NULL,
    moderator_id INTEGER  NOT NULL,
    reason       TEXT     NOT NULL,
    created_at   DATETIME NOT NULL,
    resolution_id INTEGER NOT NULL DEFAULT 0
);
