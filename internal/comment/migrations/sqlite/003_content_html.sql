-- See the MySQL migration.
ALTER TABLE comment ADD COLUMN content_html TEXT;
ALTER TABLE comment ADD COLUMN content_text TEXT;
ALTER TABLE comment_v2 ADD COLUMN content_html TEXT;
ALTER TABLE comment_v2 ADD COLUMN content_text TEXT;
