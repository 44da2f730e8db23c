-- See the MySQL migration. SQLite's index names are the database's, not the table's: hence the v2 in them.
ALTER TABLE comment ADD COLUMN like_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE comment ADD COLUMN like_count_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE comment_v2 ADD COLUMN like_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE comment_v2 ADD COLUMN like_count_version INTEGER NOT NULL DEFAULT 0;

CREATE INDEX idx_v2_article_id_comment_id ON comment_v2 (article_id, comment_id DESC);
CREATE INDEX idx_v2_article_id_like_count_comment_id ON comment_v2 (article_id, like_count DESC, comment_id DESC);
