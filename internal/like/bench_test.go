package like

import (
	"context"
	"os"
	"testing"

	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// BenchmarkLikeWarmArticle likes one article the service knows, by a new user each time, through the Service with
// the default strategy: the cost of a like as clients see it, the existence check included (it must look nothing
// up).
func BenchmarkLikeWarmArticle(b *testing.B) {
	run := func(b *testing.B, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(b, db, "")
		const article = 1
		if _, err := env.svc.Like(ctx, "", article, 1); err != nil { // known and counted from here on
			b.Fatal(err)
		}
		lookups := env.origin.Calls()
		user := int64(1)
		for b.Loop() {
			user++
			if _, err := env.svc.Like(ctx, "", article, user); err != nil {
				b.Fatal(err)
			}
		}
		if got := env.origin.Calls() - lookups; got != 0 {
			b.Fatalf("likes of a known article made %d lookups, want none", got)
		}
	}
	b.Run("sqlite", func(b *testing.B) { run(b, sqldbtest.OpenSQLite(b, Migrate)) })
	if os.Getenv(sqldbtest.MySQLDSNEnv) != "" {
		b.Run("mysql", func(b *testing.B) { run(b, sqldbtest.OpenMySQL(b, Migrate)) })
	}
}
