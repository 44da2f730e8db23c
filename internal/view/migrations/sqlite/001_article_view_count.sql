-- The backup of each article's view count. Redis holds the live count; this row only lags it, and only grows.
CREATE TABLE article_view_count (
    article_id INTEGER NOT NULL PRIMARY KEY,
    view_count INTEGER NOT NULL
);
