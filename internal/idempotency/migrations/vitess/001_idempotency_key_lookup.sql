-- Behind Vitess, a key's record lives on the shard of the rows it guards (hash(shard_key)), but a retry names only
-- the user and the key: this table, sharded by user_key and written by vtgate with each record (the
-- consistent_lookup_unique vindex of vschema.json), finds the record's shard and keeps a key unique across shards.
CREATE TABLE IF NOT EXISTS idempotency_key_lookup (
    user_key    VARBINARY(300) NOT NULL PRIMARY KEY,
    keyspace_id VARBINARY(128) NOT NULL
) ENGINE = InnoDB;
