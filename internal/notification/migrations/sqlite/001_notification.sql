-- See the mysql migration for the reasons behind each table.
CREATE TABLE inbox (
    user_id            INTEGER NOT NULL PRIMARY KEY,
    seq                INTEGER NOT NULL DEFAULT 0,
    unread             INTEGER NOT NULL DEFAULT 0,
    want_reply         BOOLEAN NOT NULL DEFAULT TRUE,
    want_comment_reply BOOLEAN NOT NULL DEFAULT TRUE,
    want_like          BOOLEAN NOT NULL DEFAULT TRUE,
    want_moderation    BOOLEAN NOT NULL DEFAULT TRUE
);

CREATE TABLE notification (
    user_id         INTEGER  NOT NULL,
    notification_id INTEGER  NOT NULL,
    seq             INTEGER  NOT NULL,
    kind            TEXT     NOT NULL,
    dedupe_key      TEXT     NULL,
    article_id      INTEGER  NOT NULL DEFAULT 0,
    article_title   TEXT     NOT NULL DEFAULT '',
    comment_id      INTEGER  NOT NULL DEFAULT 0,
    actor_ids       TEXT     NOT NULL DEFAULT '',
    actor_count     INTEGER  NOT NULL DEFAULT 0,
    action          TEXT     NOT NULL DEFAULT '',
    reason          TEXT     NOT NULL DEFAULT '',
    is_read         BOOLEAN  NOT NULL DEFAULT FALSE,
    created_at      DATETIME NOT NULL,
    updated_at      DATETIME NOT NULL,
    PRIMARY KEY (user_id, notification_id)
);

CREATE UNIQUE INDEX idx_notification_user_seq ON notification (user_id, seq);
CREATE UNIQUE INDEX idx_notification_user_dedupe ON notification (user_id, dedupe_key);
CREATE INDEX idx_notification_user_article ON notification (user_id, article_id);
CREATE INDEX idx_notification_user_unread ON notification (user_id, is_read);

CREATE TABLE like_actor (
    user_id    INTEGER NOT NULL,
    article_id INTEGER NOT NULL,
    actor_id   INTEGER NOT NULL,
    PRIMARY KEY (user_id, article_id, actor_id)
);

CREATE TABLE article_ref (
    article_id INTEGER NOT NULL PRIMARY KEY,
    writer_id  INTEGER NOT NULL,
    title      TEXT    NOT NULL,
    deleted    BOOLEAN NOT NULL DEFAULT FALSE
);

CREATE TABLE comment_ref (
    article_id INTEGER NOT NULL,
    comment_id INTEGER NOT NULL,
    path       TEXT    NOT NULL,
    parent_id  INTEGER NOT NULL,
    writer_id  INTEGER NOT NULL,
    deleted    BOOLEAN NOT NULL DEFAULT FALSE,
    hidden     BOOLEAN NOT NULL DEFAULT FALSE,
    created    BOOLEAN NOT NULL DEFAULT TRUE,
    PRIMARY KEY (article_id, comment_id)
);

CREATE INDEX idx_comment_ref_article_path ON comment_ref (article_id, path);
