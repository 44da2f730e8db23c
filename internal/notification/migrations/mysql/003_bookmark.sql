-- A user's bookmarks, on the user's shard. bookmark_id is a Snowflake id, so its order is the order they were made
-- in: the list pages by it, newest first. A target has one bookmark per user (uk_bookmark_target), so a second PUT
-- adds nothing. article_id is the target's article (the article itself for an article).
CREATE TABLE IF NOT EXISTS bookmark (
    user_id     BIGINT      NOT NULL,
    bookmark_id BIGINT      NOT NULL,
    target_type VARCHAR(8)  NOT NULL,
    target_id   BIGINT      NOT NULL,
    article_id  BIGINT      NOT NULL,
    created_at  DATETIME(3) NOT NULL,
    PRIMARY KEY (user_id, bookmark_id),
    UNIQUE KEY uk_bookmark_target (user_id, target_type, target_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- What the list of bookmarks shows of their targets, and whether a target is out of sight: the start of an
-- article's or comment's plain text, and an article hidden by moderation (a comment's hidden is there already).
ALTER TABLE article_ref ADD COLUMN excerpt VARCHAR(255) NOT NULL DEFAULT '';
ALTER TABLE article_ref ADD COLUMN hidden BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE comment_ref ADD COLUMN excerpt VARCHAR(255) NOT NULL DEFAULT '';
-- A comment is bookmarked by its id alone.
CREATE INDEX idx_comment_ref_comment ON comment_ref (comment_id);
