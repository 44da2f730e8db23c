-- Likes of comments, as article_like is of articles. article_id is the comment's article: behind Vitess it is the
-- shard key of every table here, so that a comment's likes, its count, its article's existence and the outbox row
-- of each change are on one shard (docs/likes.md, "Likes of comments").
CREATE TABLE IF NOT EXISTS comment_like (
    comment_like_id BIGINT      NOT NULL PRIMARY KEY,
    article_id      BIGINT      NOT NULL,
    comment_id      BIGINT      NOT NULL,
    user_id         BIGINT      NOT NULL,
    created_at      DATETIME(3) NOT NULL,
    UNIQUE KEY idx_comment_id_user_id (comment_id, user_id),
    KEY idx_article_id (article_id)
) ENGINE = InnoDB;

-- The like count per comment, kept as article_like_count is, created at zero before a comment's first like.
CREATE TABLE IF NOT EXISTS comment_like_count (
    comment_id BIGINT NOT NULL PRIMARY KEY,
    article_id BIGINT NOT NULL,
    like_count BIGINT NOT NULL,
    version    BIGINT NOT NULL,
    KEY idx_article_id (article_id)
) ENGINE = InnoDB;

-- What this service knows of each comment, from the comment topic and from lookups at the comment service: its
-- article, and whether it is deleted. One row per comment, never removed (a deleted comment stays deleted).
CREATE TABLE IF NOT EXISTS comment_existence (
    comment_id BIGINT  NOT NULL PRIMARY KEY,
    article_id BIGINT  NOT NULL,
    deleted    BOOLEAN NOT NULL
) ENGINE = InnoDB;
