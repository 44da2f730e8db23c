-- Behind Vitess a comment's rows are sharded by its article_id. A like names only the comment: this finds the shard
-- of its comment_existence row, one row per comment, sharded by comment_id and written by vtgate with that row (the
-- consistent_lookup_unique vindex of vschema.json). The row then gives the article, which every statement of the
-- like's transaction names.
CREATE TABLE IF NOT EXISTS comment_existence_lookup (
    comment_id  BIGINT         NOT NULL PRIMARY KEY,
    keyspace_id VARBINARY(128) NOT NULL
) ENGINE = InnoDB;
