-- One row per upload. blob_key and thumb_key are the content-addressed keys of the image and its thumbnail in the
-- blob store (sha256 of the bytes, then the extension); equal images share their blobs.
CREATE TABLE IF NOT EXISTS media (
    media_id     BIGINT       NOT NULL PRIMARY KEY,
    owner_id     BIGINT       NOT NULL,
    blob_key     VARCHAR(80)  NOT NULL,
    thumb_key    VARCHAR(80)  NOT NULL,
    content_type VARCHAR(32)  NOT NULL,
    width        INT          NOT NULL,
    height       INT          NOT NULL,
    bytes        BIGINT       NOT NULL,
    created_at   DATETIME(3)  NOT NULL,
    KEY idx_blob_key (blob_key),
    KEY idx_thumb_key (thumb_key)
) ENGINE = InnoDB;

-- One row per blob the store holds or is being written. It is the lock every upload, reference change and
-- collection of that blob takes first, so that they happen one at a time. leased_at is the last upload of the
-- blob or the last time a post stopped referencing it: a blob is collected only when that is a day past.
CREATE TABLE IF NOT EXISTS media_blob (
    blob_key  VARCHAR(80)  NOT NULL PRIMARY KEY,
    leased_at DATETIME(3)  NOT NULL,
    KEY idx_leased_at (leased_at)
) ENGINE = InnoDB;

-- Which posts (articles, comments) and avatars (post_type avatar, post_id the user) show which images.
CREATE TABLE IF NOT EXISTS media_ref (
    post_type VARCHAR(16) NOT NULL,
    post_id   BIGINT      NOT NULL,
    blob_key  VARCHAR(80) NOT NULL,
    PRIMARY KEY (post_type, post_id, blob_key),
    KEY idx_blob_key (blob_key)
) ENGINE = InnoDB;

-- The version of each post whose references are recorded, so that a late event never undoes a newer one; a
-- deleted post keeps its row (deleted) so that its creation, arriving late, adds nothing.
CREATE TABLE IF NOT EXISTS media_post (
    post_type VARCHAR(16) NOT NULL,
    post_id   BIGINT      NOT NULL,
    version   BIGINT      NOT NULL,
    PRIMARY KEY (post_type, post_id)
) ENGINE = InnoDB;

-- A user's avatar, one of their uploads.
CREATE TABLE IF NOT EXISTS avatar (
    user_id  BIGINT      NOT NULL PRIMARY KEY,
    media_id BIGINT      NOT NULL,
    set_at   DATETIME(3) NOT NULL,
    KEY idx_media_id (media_id)
) ENGINE = InnoDB;

-- A user's upload quota: bytes uploaded on day (days since the Unix epoch, UTC) and bytes kept in all.
CREATE TABLE IF NOT EXISTS media_usage (
    user_id     BIGINT NOT NULL PRIMARY KEY,
    day         BIGINT NOT NULL,
    day_bytes   BIGINT NOT NULL,
    total_bytes BIGINT NOT NULL
) ENGINE = InnoDB;
