-- A writer's articles, newest first: what their export pages through and what their account's deletion removes
-- (leaving.go). Behind Vitess the article table is sharded by board_id, so these reads by writer go to every shard
-- (a scatter): acceptable for an export or a deletion, which are rare, and each shard answers from this index.
ALTER TABLE article ADD INDEX idx_writer_id_article_id (writer_id, article_id DESC);
