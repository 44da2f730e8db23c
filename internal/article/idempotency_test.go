package article

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
