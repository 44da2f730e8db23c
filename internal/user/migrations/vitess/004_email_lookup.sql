-- Behind Vitess, users are sharded by user_id. A reset names only an address: its shard is found here, one row per
-- verified address, sharded by the address, written by vtgate with the user (the consistent_lookup_unique vindex of
-- vschema.json, which ignores NULLs), which also keeps verified addresses unique across shards.
CREATE TABLE IF NOT EXISTS email_lookup (
    email       VARCHAR(254)   NOT NULL PRIMARY KEY,
    keyspace_id VARBINARY(128) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
