-- One row per Idempotency-Key a user sent with a write, kept 24 h: the first answer, replayed to a retry.
-- user_key is "<user id>:<key>", unique per database (behind Vitess through the lookup vindex). shard_key is the
-- shard key of the rows the write made (a board for articles and reports, an article for comments and likes), so that
-- the record commits on their shard, in their transaction. fingerprint is the SHA-256 of the request (method, path,
-- body): the same key with another request is refused.
CREATE TABLE IF NOT EXISTS idempotency_key (
    user_key    VARBINARY(300) NOT NULL PRIMARY KEY,
    shard_key   BIGINT         NOT NULL,
    fingerprint BINARY(32)     NOT NULL,
    status      SMALLINT       NOT NULL,
    body        MEDIUMBLOB     NOT NULL,
    created_at  DATETIME(3)    NOT NULL,
    KEY idx_created_at (created_at)
) ENGINE = InnoDB;
