-- Every update keeps what it replaced (internal/revision): revision n is the title and content as the article's
-- version n read, the update that replaced them by editor_id at created_at, moderator when a moderator edited
-- someone else's article. board_id is the shard key, as for the article itself, so an update and its revision are
-- one transaction on one shard; the rows go with their article.
CREATE TABLE IF NOT EXISTS article_revision (
    article_id BIGINT        NOT NULL,
    revision   BIGINT        NOT NULL,
    board_id   BIGINT        NOT NULL,
    editor_id  BIGINT        NOT NULL,
    title      VARCHAR(100)  NOT NULL,
    content    VARCHAR(3000) NOT NULL,
    created_at DATETIME(3)   NOT NULL,
    moderator  BOOLEAN       NOT NULL,
    PRIMARY KEY (article_id, revision)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
