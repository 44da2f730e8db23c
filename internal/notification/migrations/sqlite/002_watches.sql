-- See the mysql migration for the reasons behind each table and column.
CREATE TABLE watch (
    user_id     INTEGER  NOT NULL,
    target_type TEXT     NOT NULL,
    target_id   INTEGER  NOT NULL,
    level       TEXT     NOT NULL,
    watch_id    INTEGER  NOT NULL,
    created_at  DATETIME NOT NULL,
    PRIMARY KEY (user_id, target_type, target_id)
);

CREATE UNIQUE INDEX idx_watch_user_watch ON watch (user_id, watch_id);

CREATE TABLE watcher (
    target_id   INTEGER NOT NULL,
    target_type TEXT    NOT NULL,
    user_id     INTEGER NOT NULL,
    PRIMARY KEY (target_id, target_type, user_id)
);

ALTER TABLE inbox ADD COLUMN want_mention BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE inbox ADD COLUMN want_watched BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE inbox ADD COLUMN auto_watch BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE article_ref ADD COLUMN mentioned TEXT NOT NULL DEFAULT '';
ALTER TABLE article_ref ADD COLUMN announced BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE comment_ref ADD COLUMN mentioned TEXT NOT NULL DEFAULT '';
