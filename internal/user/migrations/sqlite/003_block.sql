-- See the mysql migration.
CREATE TABLE block (
    user_id         INTEGER  NOT NULL,
    blocked_user_id INTEGER  NOT NULL,
    blocked         BOOLEAN  NOT NULL,
    version         INTEGER  NOT NULL,
    created_at      DATETIME NOT NULL,
    PRIMARY KEY (user_id, blocked_user_id)
);
