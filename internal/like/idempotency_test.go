package like

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"board/internal/existence/existencetest"
	"board/internal/httpio/httpiotest"
	"board/internal/idempotency/idempotencytest"
	"board/internal/outbox"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// keyedHandler is the like service's whole port over db, with a clock of the test's.
func keyedHandler(t testing.TB, db *sqldb.DB) (http.Handler, *Service, *snowflaketest.Clock) {
	store := NewStore(db, outbox.New(db, outbox.DefaultShards, eventIDs, time.Now, nil, nil), existencetest.NewOrigin(t).Registry("like", db),
		NewComments(db, newCommentOrigin(t).url, nil))
	clock := snowflaketest.NewClock(t0)
	svc := NewService(store, snowflaketest.NewIDs(firstID), clock.Now, "")
	return httpiotest.Handler("like", Routes(svc, httpiotest.Logger)), svc, clock
}

func likeRequest(h http.Handler, article, user int64, suffix string) idempotencytest.Request {
	return idempotencytest.Request{Handler: httpiotest.As(h, user), Method: "POST",
		Path: fmt.Sprintf("/v1/article-likes/articles/%d/users/%d%s", article, user, suffix)}
}

func countLikes(t testing.TB, db *sqldb.DB) int {
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM article_like").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _, clock := keyedHandler(t, db)
		idempotencytest.Check(t, idempotencytest.Case{
			Request: func(n int) idempotencytest.Request { return likeRequest(h, 7, int64(n+1), "") },
			// Another article, with another strategy's path.
			Other:   func(n int) idempotencytest.Request { return likeRequest(h, 8, int64(n+1), "/pessimistic-lock-2") },
			Writes:  func(t testing.TB) int { return countLikes(t, db) },
			Advance: func(d time.Duration) { clock.Add(d) },
			Status:  http.StatusCreated,
		})
	})
}

// TestCommentIdempotencyKey: a like of a comment takes an Idempotency-Key as a like of an article does.
func TestCommentIdempotencyKey(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, svc, clock := keyedHandler(t, db)
		env := testEnv{comments: svc.store.comments}
		env.comment(t, 7, 70)
		env.comment(t, 8, 70)
		request := func(comment int64, suffix string) func(n int) idempotencytest.Request {
			return func(n int) idempotencytest.Request {
				return idempotencytest.Request{Handler: httpiotest.As(h, int64(n+1)), Method: "POST",
					Path: commentLikePath(comment, int64(n+1)) + suffix}
			}
		}
		idempotencytest.Check(t, idempotencytest.Case{
			Request: request(7, ""),
			Other:   request(8, "/pessimistic-lock-2"), // another comment, with another strategy's path
			Writes: func(t testing.TB) int {
				return int(rowsOf(t, db, target{article: 70, comment: 7}) + rowsOf(t, db, target{article: 70, comment: 8}))
			},
			Advance: func(d time.Duration) { clock.Add(d) },
			Status:  http.StatusCreated,
		})
	})
}

// TestKeyedLikesShareTransactions: likes of one article share transactions (group commit), keyed ones among them,
// and a keyed like sent several times at once, in one batch or in the next, is made once and answered alike, never
// 409 ALREADY_LIKED.
func TestKeyedLikesShareTransactions(t *testing.T) {
	t.Parallel()
	for _, st := range Strategies {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
				h, svc, _ := keyedHandler(t, db)
				const users, copies = 20, 3
				replies := make([][copies]httpiotest.Reply, users+1)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for u := 1; u <= users; u++ {
					for c := range copies {
						wg.Go(func() {
							<-start
							req := likeRequest(h, 7, int64(u), "/"+string(st))
							if u%4 == 0 { // some without a key, sent once, share the batches
								if c == 0 {
									replies[u][c] = httpiotest.Call(req.Handler, req.Method, req.Path, "")
								}
								return
							}
							replies[u][c] = idempotencytest.Send(req, fmt.Sprintf("like-%d", u))
						})
					}
				}
				close(start)
				wg.Wait()
				for u := 1; u <= users; u++ {
					for c := range copies {
						r := replies[u][c]
						if u%4 == 0 && c > 0 {
							continue
						}
						if r.Status != http.StatusCreated || r.Body != replies[u][0].Body {
							t.Errorf("user %d, copy %d: %d %s, want 201 %s", u, c, r.Status, r.Body, replies[u][0].Body)
						}
					}
				}
				if n := countLikes(t, db); n != users {
					t.Errorf("%d likes, want %d", n, users)
				}
				if count, err := svc.count(context.Background(), 7); err != nil || count != users {
					t.Errorf("count = %d, %v; want %d", count, err, users)
				}
			})
		})
	}
}

// TestKeyTakenInABatch: one key sent at once for likes of two articles, among likes without a key of both. Each
// article's batch claims the key in its own transaction; the one that loses it fails whole, and runs again like by
// like, so only the keyed like is refused (409) and every other like of its batch is made.
func TestKeyTakenInABatch(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, svc, _ := keyedHandler(t, db)
		const rounds, others = 5, 8
		made := map[int64]int64{}
		for round := range int64(rounds) {
			keyed := 1000 + round // likes both articles with one key
			start := make(chan struct{})
			var wg sync.WaitGroup
			var keyedReplies [2]httpiotest.Reply
			otherReplies := make([]httpiotest.Reply, 2*others)
			for i, article := range []int64{7, 8} {
				wg.Go(func() {
					<-start
					keyedReplies[i] = idempotencytest.Send(likeRequest(h, article, keyed, ""), fmt.Sprintf("round-%d", round))
				})
				for u := range int64(others) {
					wg.Go(func() {
						<-start
						req := likeRequest(h, article, 2000+round*100+u, "")
						otherReplies[int64(i)*others+u] = httpiotest.Call(req.Handler, req.Method, req.Path, "")
					})
				}
			}
			close(start)
			wg.Wait()
			statuses := []int{keyedReplies[0].Status, keyedReplies[1].Status}
			if !(statuses[0] == http.StatusCreated) != (statuses[1] == http.StatusCreated) {
				t.Errorf("round %d: the keyed likes answered %v %s %s, want one 201 and one 409", round, statuses,
					keyedReplies[0].Body, keyedReplies[1].Body)
			}
			for i, r := range keyedReplies {
				if r.Status == http.StatusCreated {
					made[[]int64{7, 8}[i]]++
				} else {
					httpiotest.WantError(t, r, http.StatusConflict, "IDEMPOTENCY_KEY_REUSED")
				}
			}
			for i, r := range otherReplies {
				if r.Status != http.StatusCreated {
					t.Errorf("round %d: a like without a key answered %d %s", round, r.Status, r.Body)
					continue
				}
				made[[]int64{7, 8}[i/others]]++
			}
		}
		for _, article := range []int64{7, 8} {
			if count, err := svc.count(context.Background(), article); err != nil || count != made[article] {
				t.Errorf("article %d: count %d, %v; want the %d likes answered 201", article, count, err, made[article])
			}
		}
	})
}
