package sqldb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Migrate applies, in version order, the migrations in fsys's migrations/<dialect>/ of component (a service, or a shared part
// such as the outbox that lives in several services' databases) not yet recorded in schema_migrations.
// Files are named NNN_description.sql. It is idempotent and safe to run from several instances at once: on MySQL
// a named lock serializes them, on SQLite the single write connection does. Behind Vitess it runs
// migrations/vitess/ too, recorded as the component "<component>/vitess", and then applies the component's VSchema
// (migrations/vitess/vschema.json). There no lock serializes the migrations (see vschemaLock), which are all
// re-runnable DDL anyway: instances that run one at once both run it, and the second record of it is ignored.
func Migrate(ctx context.Context, db *DB, component string, fsys fs.FS) error {
	err := migrate(ctx, db, component, fsys)
	// The VSchema vtgate serves can leave a table out for a moment (see vitessUnrouted): a statement then answers
	// that the table is not found. The migrations are idempotent; run them again once it is back.
	for deadline := time.Now().Add(vschemaSettle); db.vitess && vitessUnrouted(err) && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
		err = migrate(ctx, db, component, fsys)
	}
	return err
}

// vschemaSettle bounds how long Migrate waits for vtgate's VSchema to show a table again.
const vschemaSettle = 30 * time.Second

func migrate(ctx context.Context, db *DB, component string, fsys fs.FS) error {
	files, err := migrationFiles(fsys, path.Join("migrations", string(db.Dialect)))
	if err != nil {
		return err
	}
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return db.classify(err)
	}
	defer conn.Close()
	if db.Dialect == MySQL && !db.vitess {
		if err := takeMigrationLock(ctx, conn, db.Name); err != nil {
			return err
		}
		defer func() {
			// It fails only with the connection, and the session's end releases the lock too.
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", migrationLock(db.Name))
		}()
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		component VARCHAR(64) NOT NULL,
		version BIGINT NOT NULL,
		name VARCHAR(255) NOT NULL,
		PRIMARY KEY (component, version)
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	// An unsharded keyspace routes every table to its one shard: no vindexes (see vitess.go).
	sharded := false
	if db.vitess {
		if sharded, err = keyspaceSharded(ctx, conn, db.Name); err != nil {
			return err
		}
	}
	if sharded {
		var own vschema
		if err := json.Unmarshal([]byte(migrationsVSchema), &own); err != nil {
			return err
		}
		if err := applyVSchema(ctx, conn, db.Name, own); err != nil {
			return err
		}
	}
	if err := migrateFiles(ctx, db, conn, component, fsys, files); err != nil {
		return err
	}
	if !db.vitess {
		return nil
	}
	// The tables first, their VSchema after: vtgate shows a table's VSchema only once it knows the table.
	if files, err = migrationFiles(fsys, "migrations/vitess"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := migrateFiles(ctx, db, conn, component+"/vitess", fsys, files); err != nil {
		return err
	}
	vs, ok, err := readVSchema(fsys)
	if err != nil || !ok {
		return err
	}
	if vs.unsharded() && sharded {
		return fmt.Errorf("keyspace %s is sharded, but %s's transactions take rows of different keys together: "+
			"its keyspace must be unsharded (one shard, VSchema {\"sharded\": false})", db.Name, component)
	}
	if !sharded {
		return nil
	}
	if err := applyVSchema(ctx, conn, db.Name, vs); err != nil {
		return fmt.Errorf("%s vschema on %s: %w", component, db.Name, err)
	}
	return nil
}

// migrateFiles applies the migrations of files that schema_migrations does not record for component.
func migrateFiles(ctx context.Context, db *DB, conn *sql.Conn, component string, fsys fs.FS, files []migration) error {
	applied := map[int64]bool{}
	rows, err := conn.QueryContext(ctx, "SELECT version FROM schema_migrations WHERE component = ?", component)
	if err != nil {
		return err
	}
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		applied[v] = true
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, m := range files {
		if applied[m.version] {
			continue
		}
		if err := apply(ctx, db, conn, fsys, component, m); err != nil {
			return fmt.Errorf("%s migration %s on %s: %w", component, m.name, db.Name, err)
		}
	}
	return nil
}

type migration struct {
	version int64
	name    string
	path    string
}

func migrationFiles(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	entries = slices.DeleteFunc(entries, func(e fs.DirEntry) bool { return e.Name() == "vschema.json" })
	var out []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migration file %s/%s is not named NNN_description.sql", dir, name)
		}
		out = append(out, migration{version: v, name: name, path: path.Join(dir, name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// apply runs one migration file and records it. On SQLite the whole file is one transaction; MySQL commits DDL
// statement by statement, so its migrations are written to be re-runnable (IF NOT EXISTS, and see addedAlready).
func apply(ctx context.Context, db *DB, conn *sql.Conn, fsys fs.FS, component string, m migration) error {
	body, err := fs.ReadFile(fsys, m.path)
	if err != nil {
		return err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // ErrTxDone after the Commit; before it, the error returned says more
	for _, stmt := range statements(string(body)) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil && !addedAlready(err) {
			return fmt.Errorf("%w in: %s", err, stmt)
		}
	}
	insert := "INSERT INTO"
	if db.vitess {
		insert = "INSERT IGNORE INTO" // another instance may have run it at the same time (see Migrate)
	}
	if _, err := tx.ExecContext(ctx, insert+" schema_migrations (component, version, name) VALUES (?, ?, ?)",
		component, m.version, m.name); err != nil {
		return err
	}
	return tx.Commit()
}

// addedAlready reports whether a MySQL statement failed only because the column or index it adds is there. MySQL
// commits DDL statement by statement, so a migration can run again after its DDL took effect: cut short before its
// record was written, or, behind Vitess, run by two instances at once. CREATE TABLE has IF NOT EXISTS for that;
// MySQL's ADD COLUMN and ADD INDEX have none.
func addedAlready(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && (my.Number == 1060 || my.Number == 1061) // ER_DUP_FIELDNAME, ER_DUP_KEYNAME
}

// statements splits a migration into statements at semicolons that end a line, dropping "--" comment lines.
func statements(body string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(body, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// migrationLock names the lock of database name's migrations.
func migrationLock(name string) string { return name + ".migrate" }

// migrationLockWait is how long an instance waits for another's migrations to finish.
const migrationLockWait = 60 * time.Second

// takeMigrationLock takes the MySQL named lock that serializes migrations, asking in waits of a few seconds: one
// long GET_LOCK would outlast the driver's read timeout and read as a dead connection.
func takeMigrationLock(ctx context.Context, conn *sql.Conn, name string) error {
	return takeLock(ctx, conn, migrationLock(name), "the migration lock on "+name)
}

// takeLock takes the MySQL named lock lock (what says what it guards, for errors), asking in waits of a few seconds.
func takeLock(ctx context.Context, conn *sql.Conn, lock, what string) error {
	deadline := time.Now().Add(migrationLockWait)
	for {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 5)", lock).Scan(&got); err != nil {
			return fmt.Errorf("take %s: %w", what, err)
		}
		if got.Int64 == 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("take %s: another instance has held it for over %v", what, migrationLockWait)
		}
	}
}
