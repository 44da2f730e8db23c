-- Behind Vitess, users are sharded by user_id. Sign-in names only a username: its shard is found here, one row per
-- username, sharded by the username, written by vtgate with the user (the consistent_lookup_unique vindex of
-- vschema.json), which also keeps usernames unique across shards.
CREATE TABLE IF NOT EXISTS username_lookup (
    username    VARCHAR(30)    NOT NULL PRIMARY KEY,
    keyspace_id VARBINARY(128) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
