-- One row per (article, user) like. The unique key is what makes a second like by the same user a 409, however
-- many arrive at once; it also serves "has this user liked this article" lookups.
CREATE TABLE IF NOT EXISTS article_like (
    article_like_id BIGINT      NOT NULL PRIMARY KEY,
    article_id      BIGINT      NOT NULL,
    user_id         BIGINT      NOT NULL,
    created_at      DATETIME(3) NOT NULL,
    UNIQUE KEY idx_article_id_user_id (article_id, user_id)
) ENGINE = InnoDB;

-- The like count per article, kept in the same transaction as the likes so that it never drifts from them.
-- version counts the row's changes: the optimistic strategy updates "WHERE version = ?", and events carry it so
-- that consumers can apply them in any order (internal/event). A row with like_count 0 and version 0 is created,
-- on its own, before an article's first like (see Store.ensureCount).
CREATE TABLE IF NOT EXISTS article_like_count (
    article_id BIGINT NOT NULL PRIMARY KEY,
    like_count BIGINT NOT NULL,
    version    BIGINT NOT NULL
) ENGINE = InnoDB;
