-- A writer's comments, newest first: what their export pages through and what their account's deletion removes
-- (leaving.go). Behind Vitess the comment tables are sharded by article_id, so these reads by writer go to every
-- shard (a scatter): acceptable for an export or a deletion, which are rare, and each shard answers from this index.
ALTER TABLE comment ADD INDEX idx_writer_id_comment_id (writer_id, comment_id DESC);
ALTER TABLE comment_v2 ADD INDEX idx_v2_writer_id_comment_id (writer_id, comment_id DESC);
