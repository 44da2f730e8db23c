-- One row per Idempotency-Key a user sent with a write, kept 24 h: the first answer, replayed to a retry.
-- user_key is "<user id>:<key>"; shard_key, the shard key of the rows the write made, matters behind Vitess only
-- (see the MySQL migration); fingerprint is the SHA-256 of the request (method, path, body).
CREATE TABLE idempotency_key (
    user_key    TEXT     NOT NULL PRIMARY KEY,
    shard_key   INTEGER  NOT NULL,
    fingerprint BLOB     NOT NULL,
    status      INTEGER  NOT NULL,
    body        BLOB     NOT NULL,
    created_at  DATETIME NOT NULL
);

CREATE INDEX idx_idempotency_key_created_at ON idempotency_key (created_at);
