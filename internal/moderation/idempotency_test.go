package moderation

import (
	"context"
	"fmt"
	"net/http"
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
		f := newFixture(t, db, 100)
		const reporter = 50
		report := func(article int64) idempotencytest.Request {
			return idempotencytest.Request{Handler: httpiotest.As(f.h, reporter), Method: "POST", Path: "/v1/reports",
				Body: fmt.Sprintf(`{"targetType":"article","targetId":"%d","reason":"spam"}`, article)}
		}
		for n := range int64(4) {
			f.origins.addArticle(100+n, board, fmt.Sprintf("article %d", n))
		}
		idempotencytest.Check(t, idempotencytest.Case{
			Request: func(n int) idempotencytest.Request { return report(100 + int64(n)) },
			Other:   func(n int) idempotencytest.Request { return report(102 + int64(n)) },
			Writes: func(t testing.TB) int {
				var n int
				if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM report").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
			Advance: func(d time.Duration) { f.clock.Add(d) },
			Status:  http.StatusCreated,
		})
	})
}
