package comment

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
	for _, path := range []string{"/v1/comments", "/v2/comments"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
				h, clock := httpHandler(t, db)
				post := func(path, body string) idempotencytest.Request {
					return idempotencytest.Request{Handler: httpiotest.As(h, 9), Method: "POST", Path: path, Body: body}
				}
				other := "/v2/comments"
				if path == other {
					other = "/v1/comments"
				}
				idempotencytest.Check(t, idempotencytest.Case{
					Request: func(n int) idempotencytest.Request {
						return post(path, fmt.Sprintf(`{"articleId":"7","content":"comment %d"}`, n))
					},
					// The same body on the other version's endpoint.
					Other: func(n int) idempotencytest.Request {
						return post(other, fmt.Sprintf(`{"articleId":"7","content":"comment %d"}`, n))
					},
					Writes: func(t testing.TB) int {
						var n int
						if err := db.QueryRowContext(context.Background(), "SELECT (SELECT COUNT(*) FROM comment) + (SELECT COUNT(*) FROM comment_v2)").
							Scan(&n); err != nil {
							t.Fatal(err)
						}
						return n
					},
					Advance: func(d time.Duration) { clock.Add(d) },
					Status:  http.StatusCreated,
				})
			})
		})
	}
}
