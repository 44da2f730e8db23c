-- The backup of each article's view count. Redis holds the live count; this row only lags it, and only grows.
CREATE TABLE IF NOT EXISTS article_view_count (
    article_id BIGINT NOT NULL PRIMARY KEY,
    view_count BIGINT NOT NULL
) ENGINE = InnoDB;
