package article

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"board/internal/httpio/httpiotest"
	"board/internal/idempotency/idempotencytest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, clock := testHandler(t, db)
		post := func(body string) idempotencytest.Request {
			return idempotencytest.Request{Handler: httpiotest.As(h, 9), Method: "POST", Path: "/v1/articles", Body: body}
		}
		idempotencytest.Check(t, idempotencytest.Case{
			Request: func(n int) idempotencytest.Request {
				return post(fmt.Sprintf(`{"title":"article %d","content":"c","boardId":"7"}`, n))
			},
			Other: func(n int) idempotencytest.Request {
				return post(fmt.Sprintf(`{"title":"another %d","content":"c","boardId":"8"}`, n))
			},
			Writes: func(t testing.TB) int {
				var n int
				if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM article").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
			Advance: func(d time.Duration) { clock.Add(d) },
			Status:  http.StatusCreated,
		})
	})
}

// BenchmarkCreateWithKey is what a key costs a create through the handler: a read before the transaction, and the
// claim and the answer in it, beside the same create without a key.
func BenchmarkCreateWithKey(b *testing.B) {
	run := func(b *testing.B, db *sqldb.DB) {
		h, _ := testHandler(b, db)
		h = httpiotest.As(h, 9)
		n := 0 // across runs: every request is a new one
		for _, keyed := range []bool{false, true} {
			b.Run(fmt.Sprintf("key=%v", keyed), func(b *testing.B) {
				for b.Loop() {
					n++
					r := idempotencytest.Request{Handler: h, Method: "POST", Path: "/v1/articles",
						Body: fmt.Sprintf(`{"title":"article %d","content":"c","boardId":"7"}`, n)}
					key := ""
					if keyed {
						key = fmt.Sprintf("bench-%d", n)
					}
					if got := idempotencytest.Send(r, key); got.Status != http.StatusCreated {
						b.Fatalf("create: %d %s", got.Status, got.Body)
					}
				}
			})
		}
	}
	b.Run("sqlite", func(b *testing.B) { run(b, sqldbtest.OpenSQLite(b, Migrate)) })
	if os.Getenv(sqldbtest.MySQLDSNEnv) != "" {
		b.Run("mysql", func(b *testing.B) { run(b, sqldbtest.OpenMySQL(b, Migrate)) })
	}
}
