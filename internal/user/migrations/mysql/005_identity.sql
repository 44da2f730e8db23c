-- Sign-in with OpenID Connect (docs/identity.md). user_identity: an account at a provider (its subject there) that
-- signs in as user_id. identity_hash = sha256(provider || 0x00 || subject) is the one-column key Vitess's lookup vindex
-- needs (vschema.json) and compares byte for byte, as subjects are case-sensitive; provider and subject are kept for
-- reading. email is what the provider said at the linking, shown on the account page.
CREATE TABLE IF NOT EXISTS user_identity (
    identity_hash VARBINARY(32) NOT NULL PRIMARY KEY,
    provider      VARCHAR(32)   NOT NULL,
    subject       VARCHAR(255)  NOT NULL,
    user_id       BIGINT        NOT NULL,
    email         VARCHAR(254)  NULL,
    linked_at     DATETIME(3)   NOT NULL,
    KEY idx_user_id (user_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A sign-in begun and not yet finished: keyed by sha256 of its state (the state itself only travels with the
-- browser), single use (its callback deletes it), valid until expires_at. link_user_id: the signed-in user the
-- identity is to be linked to, NULL for a sign-in.
CREATE TABLE IF NOT EXISTS oidc_state (
    state_hash    VARBINARY(32) NOT NULL PRIMARY KEY,
    provider      VARCHAR(32)   NOT NULL,
    nonce         VARCHAR(64)   NOT NULL,
    code_verifier VARCHAR(128)  NOT NULL,
    link_user_id  BIGINT        NULL,
    expires_at    DATETIME(3)   NOT NULL,
    KEY idx_expires_at (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
