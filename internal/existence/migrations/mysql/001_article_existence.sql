-- What this service knows of each article, from the article topic and from lookups at the article service: one
-- row per article, never removed (a deleted article stays deleted). article_version is the highest version seen
-- (0 when only a lookup without one vouched for the article).
CREATE TABLE IF NOT EXISTS article_existence (
    article_id      BIGINT  NOT NULL PRIMARY KEY,
    deleted         BOOLEAN NOT NULL,
    article_version BIGINT  NOT NULL
) ENGINE = InnoDB;

-- Deleted articles whose rows in this service are still being removed; a row leaves when nothing of the article is
-- left, so a purge interrupted by a crash resumes from here.
CREATE TABLE IF NOT EXISTS article_purge (
    article_id BIGINT      NOT NULL PRIMARY KEY,
    queued_at  DATETIME(3) NOT NULL
) ENGINE = InnoDB;
