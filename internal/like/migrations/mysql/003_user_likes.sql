-- A user's likes, for their departure (removed in batches) and their export (read newest first: like ids are
-- Snowflake ids, in the order the likes were made).
CREATE INDEX idx_article_like_user ON article_like (user_id, article_like_id);
CREATE INDEX idx_comment_like_user ON comment_like (user_id, comment_like_id);
