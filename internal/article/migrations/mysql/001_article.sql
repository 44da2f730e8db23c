-- Articles are read newest first within a board, so the index keeps them in that order: skipping an offset is a
-- forward walk (faster in InnoDB than a backward one). Queries name it with FORCE INDEX, because MariaDB's planner
-- otherwise uses board_id alone for "article_id < ?" and reads every newer entry (docs/paging.md has the numbers).
-- As a secondary index it holds the primary key too, so it covers "select article_id where board_id = ?".
-- version (and board_article_count.version) count the row's changes; events carry them so that consumers can
-- apply events in any order (internal/event).
CREATE TABLE IF NOT EXISTS article (
    article_id  BIGINT        NOT NULL PRIMARY KEY,
    title       VARCHAR(100)  NOT NULL,
    content     VARCHAR(3000) NOT NULL,
    board_id    BIGINT        NOT NULL,
    writer_id   BIGINT        NOT NULL,
    created_at  DATETIME(3)   NOT NULL,
    modified_at DATETIME(3)   NOT NULL,
    version     BIGINT        NOT NULL DEFAULT 1,
    KEY idx_board_id_article_id (board_id, article_id DESC)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS board_article_count (
    board_id      BIGINT NOT NULL PRIMARY KEY,
    article_count BIGINT NOT NULL,
    version       BIGINT NOT NULL DEFAULT 0
) ENGINE = InnoDB;
