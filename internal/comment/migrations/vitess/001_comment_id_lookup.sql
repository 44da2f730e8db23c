-- Behind Vitess, comments are sharded by article_id with their article's count and events. A request that names only
-- a comment_id (read, delete) finds its shard here: one row per comment, sharded by comment_id, written by vtgate
-- with the comment (the consistent_lookup_unique vindexes of vschema.json).
CREATE TABLE IF NOT EXISTS comment_id_lookup (
    comment_id  BIGINT         NOT NULL PRIMARY KEY,
    keyspace_id VARBINARY(128) NOT NULL
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS comment_v2_id_lookup (
    comment_id  BIGINT         NOT NULL PRIMARY KEY,
    keyspace_id VARBINARY(128) NOT NULL
) ENGINE = InnoDB;
