-- See the MySQL migration. SQLite's index names are the database's, not the table's: hence the v2 in one.
CREATE INDEX idx_writer_id_comment_id ON comment (writer_id, comment_id DESC);
CREATE INDEX idx_v2_writer_id_comment_id ON comment_v2 (writer_id, comment_id DESC);
