-- See the MySQL migration.
CREATE INDEX idx_writer_id_article_id ON article (writer_id, article_id DESC);
