-- Comment likes (SPEC §3.13): like_count is the comment's likes as the like service last told (COMMENT_LIKED and
-- COMMENT_UNLIKED carry the absolute count), like_count_version that count's version, so that a duplicate or a late
-- event changes nothing (internal/event). A count lives on its comment's row and goes with it: no row is left for a
-- removed comment.
ALTER TABLE comment ADD COLUMN like_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE comment ADD COLUMN like_count_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE comment_v2 ADD COLUMN like_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE comment_v2 ADD COLUMN like_count_version BIGINT NOT NULL DEFAULT 0;

-- The flat orders of an article's v2 comments (sort=newest, sort=top), each walked from its start like the path
-- index: newest first, and most liked first, newest first among equals. As secondary indexes both hold comment_id,
-- so they cover the id-only walk that skips an offset. Descending, like articles' (docs/paging.md): both engines
-- walk an index forward faster than backward.
ALTER TABLE comment_v2 ADD INDEX idx_v2_article_id_comment_id (article_id, comment_id DESC);
ALTER TABLE comment_v2 ADD INDEX idx_v2_article_id_like_count_comment_id (article_id, like_count DESC, comment_id DESC);
