package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"

	"board/internal/fault"
)

// Errors as vtgate (v0.24) sent them to board's transactions during `Reshard switchtraffic` of the comment keyspace
// from -80,80- to -40,40-80,80-c0,c0- (cmd/board's TestReshard), and their look-alikes that are not cutovers.
var (
	cutoverNotServing = &mysql.MySQLError{Number: 1105, SQLState: [5]byte([]byte("HY000")),
		Message: "lookup.Delete: target: comment.80-.primary: vttablet: rpc error: code = Code(17) desc = operation not allowed in state NOT_SERVING"}
	cutoverStraddled = &mysql.MySQLError{Number: 1317, SQLState: [5]byte([]byte("70100")),
		Message: `multi-db transaction attempted: [target:{keyspace:"comment" shard:"-80" tablet_type:PRIMARY} transaction_id:1795910301191508361 tablet_alias:{cell:"local" uid:3} rows_affected:true target:{keyspace:"comment" shard:"40-80" tablet_type:PRIMARY} transaction_id:1795910382093937322 tablet_alias:{cell:"local" uid:24} rows_affected:true]`}
	acrossShards = &mysql.MySQLError{Number: 1317, SQLState: [5]byte([]byte("70100")),
		Message: `multi-db transaction attempted: [target:{keyspace:"comment" shard:"-80" tablet_type:PRIMARY} transaction_id:1 target:{keyspace:"comment" shard:"80-" tablet_type:PRIMARY} transaction_id:2]`}
	acrossKeyspaces = &mysql.MySQLError{Number: 1317, SQLState: [5]byte([]byte("70100")),
		Message: `multi-db transaction attempted: [target:{keyspace:"article" shard:"-80" tablet_type:PRIMARY} transaction_id:1 target:{keyspace:"comment" shard:"-40" tablet_type:PRIMARY} transaction_id:2]`}
	beingResharded = &mysql.MySQLError{Number: 1105, SQLState: [5]byte([]byte("HY000")),
		Message: "target: article.-80.primary: current keyspace is being resharded"}
	noHealthyTablet = &mysql.MySQLError{Number: 1105, SQLState: [5]byte([]byte("HY000")),
		Message: "target: article.-80.primary: no healthy tablet available: vttablet: rpc error: code = Unavailable desc = ..."}
)

func TestVitessCutover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"source shard not serving", cutoverNotServing, true},
		{"transaction across the switch", cutoverStraddled, true},
		{"vtgate found no serving primary during the switch", beingResharded, true},
		{"wrapped", fmt.Errorf("delete comment: %w", cutoverStraddled), true},
		{"disjoint shards", acrossShards, false},
		{"two keyspaces", acrossKeyspaces, false},
		{"no healthy tablet", noHealthyTablet, false},
		{"text only", errors.New(cutoverNotServing.Message), false},
		{"nil", nil, false},
	} {
		if got := vitessCutover(tc.err); got != tc.want {
			t.Errorf("%s: vitessCutover(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestKeyRangesOverlap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"-80", "-40", true}, {"-80", "40-80", true}, {"80-", "c0-", true}, {"80-", "80-c0", true},
		{"-80", "80-", false}, {"-80", "80-c0", false}, {"40-80", "80-c0", false}, {"-40", "c0-", false},
		{"0", "-80", true}, {"-", "c0-", true},
	} {
		if got := keyRangesOverlap(tc.a, tc.b); got != tc.want {
			t.Errorf("keyRangesOverlap(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := keyRangesOverlap(tc.b, tc.a); got != tc.want {
			t.Errorf("keyRangesOverlap(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}

// TestTransactRetriesCutoverBehindVitess checks that a transaction a reshard's switch cut off is run again, and is a
// 503 (not a 500) when the switch outlasts its attempts, behind Vitess only: on a SQLite database marked as behind
// Vitess, and on the same unmarked.
func TestTransactRetriesCutoverBehindVitess(t *testing.T) {
	t.Parallel()
	db, err := OpenSQLite(filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, vitess := range []bool{true, false} {
		db.vitess = vitess
		for _, cutover := range []error{cutoverNotServing, cutoverStraddled} {
			attempts := 0
			err := db.Transact(ctx, func(*sql.Tx) error {
				if attempts++; attempts == 1 {
					return cutover
				}
				return nil
			})
			if vitess && (err != nil || attempts != 2) {
				t.Errorf("behind Vitess, %v once: %v after %d attempts, want success after 2", cutover, err, attempts)
			}
			if !vitess && attempts != 1 {
				t.Errorf("without Vitess, %v: %d attempts, want 1", cutover, attempts)
			}
			err = db.Transact(ctx, func(*sql.Tx) error { return cutover })
			if got := fault.KindOf(err) == fault.Unavailable; vitess && !got {
				t.Errorf("behind Vitess, a cutover on every attempt: %v, want an Unavailable fault", err)
			}
		}
		err := db.Transact(ctx, func(*sql.Tx) error { return acrossShards })
		if fault.KindOf(err) == fault.Unavailable || !errors.Is(err, acrossShards) {
			t.Errorf("vitess %v, a transaction across disjoint shards: %v, want the error as it is (a bug)", vitess, err)
		}
	}
}
