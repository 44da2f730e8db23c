-- See the mysql migration.
CREATE TABLE search_current (
    singleton INTEGER NOT NULL PRIMARY KEY CHECK (singleton = 1),
    name      TEXT    NOT NULL
);
