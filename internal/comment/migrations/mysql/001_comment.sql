-- v1 comments (adjacency list). A root's parent_comment_id is its own id, so ordering by (parent_comment_id,
-- comment_id) lists each root right before its replies; the index serves that order within an article and, as a
-- secondary index, also holds comment_id, so it covers the id-only walk that skips an offset.
CREATE TABLE IF NOT EXISTS comment (
    comment_id        BIGINT        NOT NULL PRIMARY KEY,
    content           VARCHAR(3000) NOT NULL,
    article_id        BIGINT        NOT NULL,
    parent_comment_id BIGINT        NOT NULL,
    writer_id         BIGINT        NOT NULL,
    deleted           BOOLEAN       NOT NULL DEFAULT FALSE,
    created_at        DATETIME(3)   NOT NULL,
    KEY idx_article_id_parent_comment_id_comment_id (article_id, parent_comment_id, comment_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- v2 comments (path enumeration). path compares byte by byte (utf8mb4_bin), so that 0-9 < A-Z < a-z and ordering
-- by path is depth-first tree order; the unique index makes a path unique within its article.
CREATE TABLE IF NOT EXISTS comment_v2 (
    comment_id BIGINT        NOT NULL PRIMARY KEY,
    content    VARCHAR(3000) NOT NULL,
    article_id BIGINT        NOT NULL,
    writer_id  BIGINT        NOT NULL,
    path       VARCHAR(25)   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    deleted    BOOLEAN       NOT NULL DEFAULT FALSE,
    created_at DATETIME(3)   NOT NULL,
    UNIQUE KEY idx_article_id_path (article_id, path)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Comments of both versions per article. version counts the row's changes; events carry it (internal/event).
CREATE TABLE IF NOT EXISTS article_comment_count (
    article_id    BIGINT NOT NULL PRIMARY KEY,
    comment_count BIGINT NOT NULL,
    version       BIGINT NOT NULL DEFAULT 0
) ENGINE = InnoDB;
