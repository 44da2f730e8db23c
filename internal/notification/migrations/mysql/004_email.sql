-- E-mail of notifications (docs/notifications.md, "E-mail"). email_mode is a preference like the others: off,
-- immediate or daily.
ALTER TABLE inbox ADD COLUMN email_mode VARCHAR(9) NOT NULL DEFAULT 'off';

-- A user's verified address, as USER_EMAIL_VERIFIED last told it (only a newer email_version replaces it), and the
-- daily digest's state: digest_pending is set when a notification arrives for a user on the daily digest, and
-- cleared when the digest is sent (at last_digest_at, of the notifications after the inbox's digest_seq). The digest
-- worker reads idx_digest_due over (TRUE, up to a day ago), so users with nothing to send cost it nothing.
CREATE TABLE IF NOT EXISTS email_address (
    user_id        BIGINT       NOT NULL PRIMARY KEY,
    email          VARCHAR(254) NOT NULL DEFAULT '',
    email_version  BIGINT       NOT NULL DEFAULT 0,
    digest_pending BOOLEAN      NOT NULL DEFAULT FALSE,
    last_digest_at DATETIME(3)  NOT NULL DEFAULT '2000-01-01 00:00:00',
    digest_seq     BIGINT       NOT NULL DEFAULT 0,
    KEY idx_digest_due (digest_pending, last_digest_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- The one-click unsubscribe tokens of the mails sent to a user: sha256 of each token's secret, in hex, never the
-- secret. One per mail (a secret kept only hashed cannot be put in the next mail), dropped after a while.
CREATE TABLE IF NOT EXISTS unsubscribe_token (
    user_id    BIGINT      NOT NULL,
    token_hash CHAR(64)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at DATETIME(3) NOT NULL,
    PRIMARY KEY (user_id, token_hash),
    KEY idx_user_created (user_id, created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
