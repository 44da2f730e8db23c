-- One row per event not yet acknowledged by the broker. shard_key = record key mod the logical shard count; the
-- relay polls a shard's oldest rows through (shard_key, created_at). record_key is the Kafka record key itself.
CREATE TABLE IF NOT EXISTS outbox (
    outbox_id  BIGINT      NOT NULL PRIMARY KEY,
    shard_key  INT         NOT NULL,
    event_type VARCHAR(64) NOT NULL,
    record_key BIGINT      NOT NULL,
    payload    MEDIUMTEXT  NOT NULL,
    created_at DATETIME(3) NOT NULL,
    KEY idx_shard_key_created_at (shard_key, created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
