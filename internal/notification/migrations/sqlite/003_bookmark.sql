-- See the mysql migration.
CREATE TABLE bookmark (
    user_id     INTEGER  NOT NULL,
    bookmark_id INTEGER  NOT NULL,
    target_type TEXT     NOT NULL,
    target_id   INTEGER  NOT NULL,
    article_id  INTEGER  NOT NULL,
    created_at  DATETIME NOT NULL,
    PRIMARY KEY (user_id, bookmark_id)
);

CREATE UNIQUE INDEX uk_bookmark_target ON bookmark (user_id, target_type, target_id);

ALTER TABLE article_ref ADD COLUMN excerpt TEXT NOT NULL DEFAULT '';
ALTER TABLE article_ref ADD COLUMN hidden BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE comment_ref ADD COLUMN excerpt TEXT NOT NULL DEFAULT '';
CREATE INDEX idx_comment_ref_comment ON comment_ref (comment_id);
