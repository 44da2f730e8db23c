-- See the mysql migration.
ALTER TABLE users ADD COLUMN token_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN email TEXT NULL;
ALTER TABLE users ADD COLUMN pending_email TEXT NULL;
ALTER TABLE users ADD COLUMN email_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN deleted_at DATETIME NULL;
CREATE UNIQUE INDEX uk_email ON users (email);

CREATE TABLE account_token (
    user_id    INTEGER  NOT NULL,
    token_hash BLOB     NOT NULL,
    purpose    TEXT     NOT NULL,
    email      TEXT     NOT NULL,
    created_at DATETIME NOT NULL,
    expires_at DATETIME NOT NULL,
    used_at    DATETIME NULL,
    PRIMARY KEY (user_id, token_hash)
);

CREATE INDEX idx_account_token_expires_at ON account_token (expires_at);
