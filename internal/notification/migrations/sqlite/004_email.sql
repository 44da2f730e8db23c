-- See the mysql migration.
ALTER TABLE inbox ADD COLUMN email_mode TEXT NOT NULL DEFAULT 'off';

CREATE TABLE email_address (
    user_id        INTEGER  NOT NULL PRIMARY KEY,
    email          TEXT     NOT NULL DEFAULT '',
    email_version  INTEGER  NOT NULL DEFAULT 0,
    digest_pending BOOLEAN  NOT NULL DEFAULT FALSE,
    last_digest_at DATETIME NOT NULL DEFAULT '2000-01-01 00:00:00',
    digest_seq     INTEGER  NOT NULL DEFAULT 0
);

CREATE INDEX idx_digest_due ON email_address (digest_pending, last_digest_at);

CREATE TABLE unsubscribe_token (
    user_id    INTEGER  NOT NULL,
    token_hash TEXT     NOT NULL,
    created_at DATETIME NOT NULL,
    PRIMARY KEY (user_id, token_hash)
);

CREATE INDEX idx_user_created ON unsubscribe_token (user_id, created_at);
