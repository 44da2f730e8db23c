package sqldb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// A service's database behind Vitess's vtgate is a keyspace, usually sharded. Each table of a sharded keyspace needs
// a primary vindex in the keyspace's VSchema, which tells vtgate the shard a row lives on; a component declares those
// of its tables in migrations/vitess/vschema.json, in Vitess's own VSchema format, and Migrate applies it through
// vtgate with ALTER VSCHEMA (vtgate must allow it: --vschema-ddl-authorized-users). Tables only Vitess needs (the
// lookup tables of lookup vindexes) are created by migrations/vitess/NNN_*.sql.
//
// A keyspace can also be unsharded: one shard, VSchema {"sharded": false}, where vtgate routes every table to that
// shard without vindexes. Migrate then declares none (a vindex would make the keyspace's VSchema sharded), for the
// tables of every component that shares the database (the outbox's, too). A component whose transactions need one
// shard says "sharded": false in its vschema.json, and Migrate refuses a sharded keyspace for it.

// isVitess reports whether the server conn talks to is Vitess's vtgate, which reports a version ending in "-Vitess".
func isVitess(ctx context.Context, conn *sql.DB) (bool, error) {
	var version string
	if err := conn.QueryRowContext(ctx, "SELECT @@version").Scan(&version); err != nil {
		return false, fmt.Errorf("read the server's version: %w", err)
	}
	return strings.Contains(version, "Vitess"), nil
}

// vschemaLock names the lock that serializes VSchema changes. It is the only named lock board takes through vtgate,
// and only for as long as the changes take: vtgate (v0.24) renews a session's named locks with a heartbeat every 5 s
// and crashes (a nil pointer) when a heartbeat meets a lock session that has just ended, so no lock is held around
// whole migrations, which can take longer.
const vschemaLock = "board.vschema"

// vschema is the part of a Vitess keyspace VSchema (vschema.proto's Keyspace, as JSON) that a component declares.
type vschema struct {
	// Sharded false declares that the component's transactions need its keyspace in one shard; absent, it is sharded.
	Sharded  *bool             `json:"sharded"`
	Vindexes map[string]vindex `json:"vindexes"`
	Tables   map[string]struct {
		ColumnVindexes []columnVindex `json:"column_vindexes"`
	} `json:"tables"`
}

type vindex struct {
	Type   string            `json:"type"`
	Params map[string]string `json:"params"`
	Owner  string            `json:"owner"`
}

type columnVindex struct {
	Column string `json:"column"`
	Name   string `json:"name"`
}

// migrationsVSchema is the VSchema of schema_migrations itself: hashed by version, so that each shard holds some of
// the records (DDL runs on every shard; a record only says it ran).
const migrationsVSchema = `{
	"vindexes": {"hash": {"type": "hash"}},
	"tables": {"schema_migrations": {"column_vindexes": [{"column": "version", "name": "hash"}]}}
}`

// unsharded reports whether vs declares its keyspace unsharded.
func (vs vschema) unsharded() bool { return vs.Sharded != nil && !*vs.Sharded }

// keyspaceSharded reports whether the VSchema vtgate serves of keyspace is sharded.
func keyspaceSharded(ctx context.Context, conn *sql.Conn, keyspace string) (bool, error) {
	rows, err := conn.QueryContext(ctx, "SHOW VSCHEMA KEYSPACES")
	if err != nil {
		return false, fmt.Errorf("read vtgate's keyspaces: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		// Columns: Keyspace, Sharded ("true" or "false"), Foreign Key, Comment.
		var name, sharded, fk, comment sql.NullString
		if err := rows.Scan(&name, &sharded, &fk, &comment); err != nil {
			return false, err
		}
		if name.String == keyspace {
			return sharded.String == "true", nil
		}
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	return false, fmt.Errorf("vtgate does not serve the keyspace %s", keyspace)
}

// readVSchema reads a component's migrations/vitess/vschema.json; ok is false when it has none.
func readVSchema(fsys fs.FS) (vs vschema, ok bool, err error) {
	body, err := fs.ReadFile(fsys, "migrations/vitess/vschema.json")
	if errors.Is(err, fs.ErrNotExist) {
		return vschema{}, false, nil
	}
	if err != nil {
		return vschema{}, false, err
	}
	if err := json.Unmarshal(body, &vs); err != nil {
		return vschema{}, false, fmt.Errorf("migrations/vitess/vschema.json: %w", err)
	}
	return vs, true, nil
}

// applyVSchema adds to the keyspace's VSchema the column vindexes of vs it lacks, in each table's order (the first is
// its primary vindex), and waits until vtgate routes by them. A table whose primary vindex differs is an error: moving
// rows to other shards is Vitess's work (a MoveTables or Reshard workflow), not a migration's.
//
// Changes to every keyspace's VSchema are serialized by one named lock (vtgate takes named locks on one shard for
// all keyspaces): each change rebuilds the VSchema vtgates serve from all keyspaces', and two rebuilds at once can
// lose one of the changes (see vschemaLock).
func applyVSchema(ctx context.Context, conn *sql.Conn, keyspace string, vs vschema) error {
	if err := takeLock(ctx, conn, vschemaLock, "the VSchema lock"); err != nil {
		return err
	}
	defer func() {
		// It fails only with the connection, and the session's end releases the lock too.
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", vschemaLock)
	}()
	tables := make([]string, 0, len(vs.Tables))
	for t := range vs.Tables {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	for _, table := range tables {
		want := vs.Tables[table].ColumnVindexes
		have, err := columnVindexes(ctx, conn, table)
		if err != nil {
			return err
		}
		if err := checkPrimary(keyspace, table, have, want); err != nil {
			return err
		}
		changed, stale := false, false
		for _, cv := range want {
			if slices.Contains(have, cv.Name) {
				continue
			}
			v, ok := vs.Vindexes[cv.Name]
			if !ok {
				return fmt.Errorf("vschema of %s: table %s names vindex %s, which it does not define", keyspace, table, cv.Name)
			}
			stmt := "ALTER VSCHEMA ON " + QuoteIdent(table) + " ADD VINDEX " + QuoteIdent(cv.Name) + "(" +
				QuoteIdent(cv.Column) + ") USING " + v.Type + vindexParams(keyspace, v)
			_, err := conn.ExecContext(ctx, stmt)
			switch {
			case err == nil:
				// It wrote the keyspace's VSchema whole, as the topology holds it: what was lost is back too.
				changed, stale = true, false
			case definedAlready(err):
				// The topology's VSchema of the keyspace has it, the one vtgate serves has lost it (see refreshVSchema).
				stale = true
			default:
				return fmt.Errorf("%w in: %s (vtgate must let this user change VSchemas: --vschema-ddl-authorized-users)", err, stmt)
			}
		}
		if stale {
			if err := refreshVSchema(ctx, conn, keyspace); err != nil {
				return err
			}
		}
		if changed || stale {
			if have, err = awaitVindexes(ctx, conn, table, len(want)); err != nil {
				return err
			}
			if err := checkPrimary(keyspace, table, have, want); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkPrimary reports a table whose primary vindex, first of have, is not the one board declares, first of want.
func checkPrimary(keyspace, table string, have []string, want []columnVindex) error {
	if len(have) > 0 && len(want) > 0 && have[0] != want[0].Name {
		return fmt.Errorf("vschema of %s.%s: its primary vindex is %s, board shards it by %s(%s)",
			keyspace, table, have[0], want[0].Name, want[0].Column)
	}
	return nil
}

// definedAlready reports vtgate's refusal to add a column vindex that the table has in the topology's VSchema of the
// keyspace, which ALTER VSCHEMA reads and changes (topotools.ApplyVSchemaDDL).
func definedAlready(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && strings.Contains(my.Message, " already defined on table ")
}

// refreshVindex names the vindex that refreshVSchema creates and drops at once.
const refreshVindex = "board_vschema_refresh"

// refreshVSchema makes vtgate serve the topology's VSchema of keyspace again, when the one it serves has lost part
// of it. vtgate (v0.24) serves the SrvVSchema, all keyspaces' VSchemas in one record, and an ALTER VSCHEMA writes it
// whole: the keyspace it changes as the topology holds it, every other keyspace as vtgate's own copy holds it. That
// copy follows the record through a watch, which can deliver an older record after the one an ALTER just wrote, so
// that an ALTER on another keyspace at that moment writes back that keyspace's older VSchema (vitessio/vitess#17398
// tracks VSchema writes that are lost). Nothing rewrites it until an ALTER VSCHEMA on the keyspace succeeds: this
// one creates a vindex that no table uses, and drops it.
func refreshVSchema(ctx context.Context, conn *sql.Conn, keyspace string) error {
	name := QuoteIdent(keyspace) + "." + QuoteIdent(refreshVindex)
	// A refresh cut short leaves the vindex in place: dropping it then refreshes as well.
	if _, err := conn.ExecContext(ctx, "ALTER VSCHEMA CREATE VINDEX "+name+" USING hash"); err != nil &&
		!strings.Contains(err.Error(), " already exists in keyspace ") {
		return fmt.Errorf("refresh the VSchema vtgate serves of %s: %w", keyspace, err)
	}
	if _, err := conn.ExecContext(ctx, "ALTER VSCHEMA DROP VINDEX "+name); err != nil {
		return fmt.Errorf("refresh the VSchema vtgate serves of %s: %w", keyspace, err)
	}
	return nil
}

// vindexParams is the WITH clause of a vindex's parameters and owner, each written as an identifier (a quoted
// string would keep its quotes in the VSchema). A lookup table named without its keyspace is this keyspace's: vtgate
// needs it qualified.
func vindexParams(keyspace string, v vindex) string {
	keys := make([]string, 0, len(v.Params))
	for k := range v.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var params []string
	for _, k := range keys {
		val := QuoteIdent(v.Params[k])
		if k == "table" {
			ks, table, ok := strings.Cut(v.Params[k], ".")
			if !ok {
				ks, table = keyspace, v.Params[k]
			}
			val = QuoteIdent(ks) + "." + QuoteIdent(table)
		}
		params = append(params, k+"="+val)
	}
	if v.Owner != "" {
		params = append(params, "owner="+QuoteIdent(v.Owner))
	}
	if len(params) == 0 {
		return ""
	}
	return " WITH " + strings.Join(params, ", ")
}

// columnVindexes returns the names of table's column vindexes in the VSchema vtgate serves, primary first; none for
// a table it does not declare (vtgate answers VT05005, "table does not exist", for a table of a sharded keyspace that
// its VSchema leaves out, even one that exists).
func columnVindexes(ctx context.Context, conn *sql.Conn, table string) ([]string, error) {
	// Columns: Columns, Name, Type, Params, Owner.
	names, err := stringColumn(ctx, conn, "SHOW VSCHEMA VINDEXES ON "+QuoteIdent(table), 1)
	if err != nil && strings.Contains(err.Error(), "VT05005") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the VSchema of %s: %w", table, err)
	}
	return names, nil
}

// awaitVindexes waits until vtgate's VSchema, which follows the topology asynchronously, shows n column vindexes on
// table, and returns their names.
func awaitVindexes(ctx context.Context, conn *sql.Conn, table string, n int) ([]string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		have, err := columnVindexes(ctx, conn, table)
		if err != nil {
			return nil, err
		}
		if len(have) >= n {
			return have, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("vtgate did not show the VSchema of %s within 30s", table)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stringColumn returns column i of every row of query.
func stringColumn(ctx context.Context, conn *sql.Conn, query string, i int) ([]string, error) {
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for j := range vals {
			ptrs[j] = &vals[j]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, vals[i].String)
	}
	return out, rows.Err()
}
