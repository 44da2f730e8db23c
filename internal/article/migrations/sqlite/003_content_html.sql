-- See the MySQL migration.
ALTER TABLE article ADD COLUMN content_html TEXT;
ALTER TABLE article ADD COLUMN content_text TEXT;
