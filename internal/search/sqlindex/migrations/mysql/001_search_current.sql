-- The name of the current index, in the one row there is (singleton = 1) once an index has been made current. The
-- indexes' own tables are made by Engine.Open, named after the index.
CREATE TABLE IF NOT EXISTS search_current (
    singleton TINYINT     NOT NULL PRIMARY KEY,
    name      VARCHAR(64) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = ascii COLLATE = ascii_bin;
