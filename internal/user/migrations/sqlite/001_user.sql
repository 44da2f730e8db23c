-- Usernames are stored lower-cased, so the unique index makes them unique regardless of case.
-- password_hash is an argon2id PHC string ($argon2id$v=19$m=..,t=..,p=..$salt$hash).
CREATE TABLE users (
    user_id       INTEGER  NOT NULL PRIMARY KEY,
    username      TEXT     NOT NULL,
    password_hash TEXT     NOT NULL,
    role          TEXT     NOT NULL,
    created_at    DATETIME NOT NULL
);

CREATE UNIQUE INDEX uk_username ON users (username);

-- The Ed25519 keys access tokens are signed with, shared by every instance of the user service (internal/user,
-- KeyRing). private_key is the 64-byte Go ed25519.PrivateKey.
CREATE TABLE signing_key (
    key_id      TEXT     NOT NULL PRIMARY KEY,
    private_key BLOB     NOT NULL,
    created_at  DATETIME NOT NULL
);
