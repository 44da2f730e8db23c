-- See the mysql migration for the reasons behind each table.

CREATE TABLE media (
    media_id     INTEGER       NOT NULL PRIMARY KEY,
    owner_id     INTEGER       NOT NULL,
    blob_key     TEXT  NOT NULL,
    thumb_key    TEXT  NOT NULL,
    content_type TEXT  NOT NULL,
    width        INTEGER          NOT NULL,
    height       INTEGER          NOT NULL,
    bytes        INTEGER       NOT NULL,
    created_at   DATETIME  NOT NULL
);

CREATE INDEX media_idx_blob_key ON media (blob_key);

CREATE INDEX media_idx_thumb_key ON media (thumb_key);

CREATE TABLE media_blob (
    blob_key  TEXT  NOT NULL PRIMARY KEY,
    leased_at DATETIME  NOT NULL
);

CREATE INDEX media_blob_idx_leased_at ON media_blob (leased_at);

CREATE TABLE media_ref (
    post_type TEXT NOT NULL,
    post_id   INTEGER      NOT NULL,
    blob_key  TEXT NOT NULL,
    PRIMARY KEY (post_type, post_id, blob_key)
);

CREATE INDEX media_ref_idx_blob_key ON media_ref (blob_key);

CREATE TABLE media_post (
    post_type TEXT NOT NULL,
    post_id   INTEGER      NOT NULL,
    version   INTEGER      NOT NULL,
    PRIMARY KEY (post_type, post_id)
);

CREATE TABLE avatar (
    user_id  INTEGER      NOT NULL PRIMARY KEY,
    media_id INTEGER      NOT NULL,
    set_at   DATETIME NOT NULL
);

CREATE INDEX avatar_idx_media_id ON avatar (media_id);

CREATE TABLE media_usage (
    user_id     INTEGER NOT NULL PRIMARY KEY,
    day         INTEGER NOT NULL,
    day_bytes   INTEGER NOT NULL,
    total_bytes INTEGER NOT NULL
);
