package sqldb_test

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// oneShardSchema is a component that declares its keyspace unsharded: its transaction below takes two rows of
// different keys.
var oneShardSchema = fstest.MapFS{
	"migrations/mysql/001_pair.sql":  {Data: []byte("CREATE TABLE IF NOT EXISTS pair (id BIGINT NOT NULL PRIMARY KEY, n BIGINT NOT NULL);\n")},
	"migrations/vitess/vschema.json": {Data: []byte(`{"sharded": false, "tables": {"pair": {}}}`)},
}

// shardedSchema is a component that declares a vindex, as the outbox does in every service's database.
var shardedSchema = fstest.MapFS{
	"migrations/mysql/001_keyed.sql": {Data: []byte("CREATE TABLE IF NOT EXISTS keyed (id BIGINT NOT NULL PRIMARY KEY);\n")},
	"migrations/vitess/vschema.json": {Data: []byte(`{"sharded": true, "vindexes": {"hash": {"type": "hash"}},
		"tables": {"keyed": {"column_vindexes": [{"column": "id", "name": "hash"}]}}}`)},
}

// TestMigrateKeepsAnUnshardedKeyspace checks, on vtgate (scripts/vitess makes the media keyspace unsharded), that
// migrations leave an unsharded keyspace's VSchema unsharded, also with a component that declares vindexes, so that a
// transaction across keys stays on its one shard; and that a component that declares itself unsharded is refused a
// sharded keyspace.
func TestMigrateKeepsAnUnshardedKeyspace(t *testing.T) {
	t.Parallel()
	if os.Getenv(sqldbtest.VitessPrefixesEnv) == "" {
		t.Skip("needs vtgate: set " + sqldbtest.VitessPrefixesEnv + " and " + sqldbtest.MySQLDSNEnv)
	}
	ctx := context.Background()
	prefix := sqldbtest.Databases(t, "", "media", "article")
	open := func(name string) *sqldb.DB {
		db, err := sqldb.OpenMySQL(ctx, sqldbtest.DSN(t, prefix+name), 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}

	media := open("media")
	for _, c := range []struct {
		name string
		fsys fstest.MapFS
	}{{"one", oneShardSchema}, {"keyed", shardedSchema}} {
		if err := sqldb.Migrate(ctx, media, c.name, c.fsys); err != nil {
			t.Fatalf("migrate %s into the unsharded keyspace %s: %v", c.name, media.Name, err)
		}
	}
	rows, err := media.QueryContext(ctx, "SHOW VSCHEMA KEYSPACES")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var keyspace, sharded, fk, comment string
		if err := rows.Scan(&keyspace, &sharded, &fk, &comment); err != nil {
			t.Fatal(err)
		}
		if keyspace == media.Name && sharded != "false" {
			t.Errorf("keyspace %s after the migrations: sharded %s, want false", keyspace, sharded)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := media.Transact(ctx, func(tx *sql.Tx) error {
		for _, id := range []int64{1, 2} {
			if _, err := tx.ExecContext(ctx, "INSERT INTO pair (id, n) VALUES (?, 0)", id); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO keyed (id) VALUES (3)")
		return err
	}); err != nil {
		t.Fatalf("a transaction across keys in the unsharded keyspace: %v", err)
	}

	article := open("article")
	err = sqldb.Migrate(ctx, article, "one", oneShardSchema)
	if err == nil || !strings.Contains(err.Error(), "must be unsharded") {
		t.Errorf("migrate a component that needs one shard into the sharded keyspace %s: %v, want a refusal", article.Name, err)
	}
}
