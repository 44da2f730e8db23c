-- Behind Vitess, articles are sharded by board_id, so that a board's pages come from one shard. A request that names
-- only an article_id finds the article's shard here: one row per article, itself sharded by article_id, written by
-- vtgate with the article (the consistent_lookup_unique vindex of vschema.json).
CREATE TABLE IF NOT EXISTS article_id_lookup (
    article_id  BIGINT         NOT NULL PRIMARY KEY,
    keyspace_id VARBINARY(128) NOT NULL
) ENGINE = InnoDB;
