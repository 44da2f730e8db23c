-- Who blocks whom (SPEC §3.13). An unblock keeps the row, with blocked FALSE: version counts every block and unblock
-- of the pair (the BlockVersion of its events), so that a later block is newer than the unblock every reader of the
-- block topic holds. created_at is when the block in force began. Rows live on the blocker's shard.
CREATE TABLE IF NOT EXISTS block (
    user_id         BIGINT      NOT NULL,
    blocked_user_id BIGINT      NOT NULL,
    blocked         BOOLEAN     NOT NULL,
    version         BIGINT      NOT NULL,
    created_at      DATETIME(3) NOT NULL,
    PRIMARY KEY (user_id, blocked_user_id)
) ENGINE = InnoDB;
