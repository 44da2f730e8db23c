-- Behind Vitess, user_identity lives on its user's shard (sharded by user_id), so that a user made at a first
-- sign-in and their identity are one shard's transaction. A sign-in names only the identity: its shard is found
-- here, one row per identity, sharded by identity_hash, written by vtgate with the identity (the
-- consistent_lookup_unique vindex of vschema.json), which also keeps an identity on one account across shards.
CREATE TABLE IF NOT EXISTS identity_lookup (
    identity_hash VARBINARY(32)  NOT NULL PRIMARY KEY,
    keyspace_id   VARBINARY(128) NOT NULL
) ENGINE = InnoDB;
