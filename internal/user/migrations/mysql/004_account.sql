-- Accounts people can keep (SPEC §3.14, docs/identity.md "E-mail and passwords").
-- token_epoch: tokens minted before the user's current epoch are void; a password change, a reset and "end every
-- session" bump it (the deletion too). email is the verified address, one account's at most (uk_email; NULLs do not
-- collide); pending_email the one waiting for its link; email_version counts the changes of email, so that a reader
-- of USER_EMAIL_VERIFIED keeps the newest. deleted_at marks a deleted account (docs/identity.md, leaving).
ALTER TABLE users ADD COLUMN token_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN email VARCHAR(254) NULL;
ALTER TABLE users ADD COLUMN pending_email VARCHAR(254) NULL;
ALTER TABLE users ADD COLUMN email_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN deleted_at DATETIME(3) NULL;
CREATE UNIQUE INDEX uk_email ON users (email);

-- Single-use tokens mailed to a user: purpose verify-email (email is the address it verifies) or password-reset
-- (email is the verified address it went to). Only sha256 of the secret is kept. Keyed by user_id first, so that
-- behind Vitess a token lives on its user's shard and its redemption is one shard's transaction. used_at is set once,
-- by the redemption or by a newer token of the same purpose.
CREATE TABLE IF NOT EXISTS account_token (
    user_id    BIGINT        NOT NULL,
    token_hash VARBINARY(32) NOT NULL,
    purpose    VARCHAR(16)   NOT NULL,
    email      VARCHAR(254)  NOT NULL,
    created_at DATETIME(3)   NOT NULL,
    expires_at DATETIME(3)   NOT NULL,
    used_at    DATETIME(3)   NULL,
    PRIMARY KEY (user_id, token_hash),
    KEY idx_expires_at (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
