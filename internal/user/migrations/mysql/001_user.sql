-- Usernames are stored lower-cased, so the unique index makes them unique regardless of case (the column's
-- case-insensitive collation would too; lower-casing also keeps SQLite's byte-wise index right).
-- password_hash is an argon2id PHC string ($argon2id$v=19$m=..,t=..,p=..$salt$hash).
CREATE TABLE IF NOT EXISTS users (
    user_id       BIGINT       NOT NULL PRIMARY KEY,
    username      VARCHAR(30)  NOT NULL,
    password_hash VARCHAR(255) NOT NULL,
    role          VARCHAR(16)  NOT NULL,
    created_at    DATETIME(3)  NOT NULL,
    UNIQUE KEY uk_username (username)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- The Ed25519 keys access tokens are signed with, shared by every instance of the user service (internal/user,
-- KeyRing). private_key is the 64-byte Go ed25519.PrivateKey.
CREATE TABLE IF NOT EXISTS signing_key (
    key_id      VARCHAR(64)   NOT NULL PRIMARY KEY,
    private_key VARBINARY(64) NOT NULL,
    created_at  DATETIME(3)   NOT NULL
) ENGINE = InnoDB;
