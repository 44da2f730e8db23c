-- article_id is the rowid, so the index covers id-only scans of a board. It is kept newest first because lists
-- read newest first: skipping an offset is then a forward walk (docs/paging.md).
CREATE TABLE article (
    article_id  INTEGER  NOT NULL PRIMARY KEY,
    title       TEXT     NOT NULL,
    content     TEXT     NOT NULL,
    board_id    INTEGER  NOT NULL,
    writer_id   INTEGER  NOT NULL,
    created_at  DATETIME NOT NULL,
    modified_at DATETIME NOT NULL,
    version     INTEGER  NOT NULL DEFAULT 1
);

CREATE INDEX idx_board_id_article_id ON article (board_id, article_id DESC);

CREATE TABLE board_article_count (
    board_id      INTEGER NOT NULL PRIMARY KEY,
    article_count INTEGER NOT NULL,
    version       INTEGER NOT NULL DEFAULT 0
);
