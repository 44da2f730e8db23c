-- A comment's content rendered when written (internal/markdown): the sanitized HTML and the plain text, beside the
-- Markdown source in content. NULL for comments written before Markdown, which read as their escaped text.
-- MEDIUMTEXT: 3000 characters of Markdown can render to more than TEXT's 64 KiB (deeply nested quotes or lists).
ALTER TABLE comment ADD COLUMN content_html MEDIUMTEXT NULL;
ALTER TABLE comment ADD COLUMN content_text TEXT NULL;
ALTER TABLE comment_v2 ADD COLUMN content_html MEDIUMTEXT NULL;
ALTER TABLE comment_v2 ADD COLUMN content_text TEXT NULL;
