-- See the mysql migration.
CREATE TABLE user_identity (
    identity_hash BLOB     NOT NULL PRIMARY KEY,
    provider      TEXT     NOT NULL,
    subject       TEXT     NOT NULL,
    user_id       INTEGER  NOT NULL,
    email         TEXT     NULL,
    linked_at     DATETIME NOT NULL
);

CREATE INDEX idx_user_identity_user_id ON user_identity (user_id);

CREATE TABLE oidc_state (
    state_hash    BLOB     NOT NULL PRIMARY KEY,
    provider      TEXT     NOT NULL,
    nonce         TEXT     NOT NULL,
    code_verifier TEXT     NOT NULL,
    link_user_id  INTEGER  NULL,
    expires_at    DATETIME NOT NULL
);

CREATE INDEX idx_oidc_state_expires_at ON oidc_state (expires_at);
