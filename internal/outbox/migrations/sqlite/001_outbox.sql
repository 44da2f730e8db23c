-- One row per event not yet acknowledged by the broker. shard_key = record key mod the logical shard count; the
-- relay polls a shard's oldest rows through (shard_key, created_at). record_key is the Kafka record key itself.
CREATE TABLE outbox (
    outbox_id  INTEGER  NOT NULL PRIMARY KEY,
    shard_key  INTEGER  NOT NULL,
    event_type TEXT     NOT NULL,
    record_key INTEGER  NOT NULL,
    payload    TEXT     NOT NULL,
    created_at DATETIME NOT NULL
);

CREATE INDEX idx_shard_key_created_at ON outbox (shard_key, created_at);
