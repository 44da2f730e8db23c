package like

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/existence"
	"board/internal/existence/existencetest"
	"board/internal/fault"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// t0 has sub-millisecond digits and a non-UTC zone: stores must keep milliseconds in UTC.
var t0 = time.Date(2026, 1, 2, 12, 4, 5, 6_789_123, time.FixedZone("KST", 9*60*60))

// t0ms is t0 as stored.
var t0ms = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

// firstID is above 2^53 so that a float64 on the way would lose digits.
const firstID = 1<<60 + 1

// eventIDs issues the tests' event ids: one generator for the package, as one process has one.
var eventIDs = func() *snowflake.Generator {
	g, err := snowflake.New(3, nil)
	if err != nil {
		panic(err)
	}
	return g
}()

// testEnv is a like service under test with the record of articles it checks and the stand-in article service
// that record looks unknown articles up at, which has every article unless told otherwise; and its record of
// comments with the stand-in comment service that one looks unknown comments up at, which has none unless told.
type testEnv struct {
	db            *sqldb.DB
	svc           *Service
	articles      *existence.Registry
	origin        *existencetest.Origin
	comments      *Comments
	commentOrigin *commentOrigin
}

func newTestEnv(t testing.TB, db *sqldb.DB, strategy Strategy) testEnv {
	origin := existencetest.NewOrigin(t)
	articles := origin.Registry("like", db)
	co := newCommentOrigin(t)
	comments := NewComments(db, co.url, nil)
	store := NewStore(db, outbox.New(db, outbox.DefaultShards, eventIDs, time.Now, nil, nil), articles, comments)
	svc := NewService(store, snowflaketest.NewIDs(firstID), func() time.Time { return t0 }, strategy)
	return testEnv{db, svc, articles, origin, comments, co}
}

// newTestService returns a like service over db for which every article exists.
func newTestService(t testing.TB, db *sqldb.DB, strategy Strategy) *Service {
	return newTestEnv(t, db, strategy).svc
}

func wantKind(t *testing.T, err error, kind fault.Kind, code, what string) {
	t.Helper()
	fe, _ := fault.As(err)
	if fault.KindOf(err) != kind || fe.Code != code {
		t.Errorf("%s: error = %v, want kind %d code %s", what, err, kind, code)
	}
}

// sent is one event of the outbox, decoded: Payload for an article's like, Comment for a comment's.
type sent struct {
	Type    event.Type
	Payload event.Like
	Comment event.CommentLike
}

func (s sent) isComment() bool { return s.Type == event.CommentLiked || s.Type == event.CommentUnliked }

// counted is the count and version the event carries.
func (s sent) counted() [2]int64 {
	if s.isComment() {
		return [2]int64{s.Comment.CommentLikeCount, s.Comment.CommentLikeCountVersion}
	}
	return [2]int64{s.Payload.ArticleLikeCount, s.Payload.ArticleLikeCountVersion}
}

// sameTime compares event times by the instant they name.
var sameTime = cmp.Comparer(func(a, b apijson.Time) bool { return time.Time(a).Equal(time.Time(b)) })

// outboxOf returns the events written for an article, in no particular order.
func outboxOf(t *testing.T, db *sqldb.DB, articleID int64) []sent {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT event_type, payload FROM outbox WHERE record_key = ?", articleID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []sent
	for rows.Next() {
		var typ, body string
		if err := rows.Scan(&typ, &body); err != nil {
			t.Fatal(err)
		}
		s := sent{Type: event.Type(typ)}
		into := any(&s.Payload)
		if s.isComment() {
			into = &s.Comment
		}
		if err := json.Unmarshal([]byte(body), into); err != nil {
			t.Fatalf("payload %s: %v", body, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// likeRows counts an article's rows in article_like.
func likeRows(t *testing.T, db *sqldb.DB, articleID int64) int64 {
	t.Helper()
	return rowsOf(t, db, target{article: articleID})
}

// rowsOf counts the like rows of an article or a comment.
func rowsOf(t testing.TB, db *sqldb.DB, tg target) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+tg.tables().likes+" WHERE "+tg.tables().key, tg.args()...).
		Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestParseStrategy(t *testing.T) {
	t.Parallel()
	for _, st := range Strategies {
		if got, err := ParseStrategy(string(st)); err != nil || got != st {
			t.Errorf("ParseStrategy(%q) = %q, %v", st, got, err)
		}
	}
	for _, bad := range []string{"", "optimistic", "PESSIMISTIC-LOCK-1", " optimistic-lock"} {
		if _, err := ParseStrategy(bad); err == nil {
			t.Errorf("ParseStrategy(%q) accepted", bad)
		}
	}
}

func TestNewServiceDefaultStrategy(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, Migrate)
	if got := newTestService(t, db, "").defaultStrategy; got != PessimisticLock1 {
		t.Errorf("default strategy = %q, want %q", got, PessimisticLock1)
	}
	if got := newTestService(t, db, OptimisticLock).defaultStrategy; got != OptimisticLock {
		t.Errorf("default strategy = %q, want %q", got, OptimisticLock)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewService accepted an unknown strategy")
		}
	}()
	newTestService(t, db, "no-lock")
}

// TestLikeLifecycle runs like, get, count and unlike with each strategy, and checks the events they write.
func TestLikeLifecycle(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		svc := env.svc
		for i, st := range Strategies {
			t.Run(string(st), func(t *testing.T) {
				article, user := int64(100+i), int64(7)
				lookups := env.origin.Calls()
				if n, err := svc.count(ctx, article); err != nil || n != 0 {
					t.Fatalf("count before any like = %d, %v; want 0", n, err)
				}
				wantKind(t, svc.Unlike(ctx, st, article, user), fault.NotFound, "LIKE_NOT_FOUND", "unlike of a never-liked article")
				_, err := svc.Get(ctx, article, user)
				wantKind(t, err, fault.NotFound, "LIKE_NOT_FOUND", "get before like")

				l, err := svc.Like(ctx, st, article, user)
				if err != nil {
					t.Fatal(err)
				}
				want := Like{ID: l.ID, ArticleID: article, UserID: user, CreatedAt: t0ms}
				if diff := cmp.Diff(want, l); diff != "" {
					t.Errorf("Like (-want +got):\n%s", diff)
				}
				got, err := svc.Get(ctx, article, user)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("Get (-want +got):\n%s", diff)
				}
				if got.CreatedAt.Location() != time.UTC {
					t.Errorf("createdAt not in UTC: %v", got.CreatedAt.Location())
				}

				_, err = svc.Like(ctx, st, article, user)
				wantKind(t, err, fault.Conflict, "ALREADY_LIKED", "second like")
				other, err := svc.Like(ctx, st, article, user+1)
				if err != nil {
					t.Fatal(err)
				}
				if n, err := svc.count(ctx, article); err != nil || n != 2 {
					t.Fatalf("count after two likes = %d, %v; want 2", n, err)
				}
				wantKind(t, svc.Unlike(ctx, st, article, user+2), fault.NotFound, "LIKE_NOT_FOUND", "unlike by a user who never liked")
				if err := svc.Unlike(ctx, st, article, user); err != nil {
					t.Fatal(err)
				}
				wantKind(t, svc.Unlike(ctx, st, article, user), fault.NotFound, "LIKE_NOT_FOUND", "second unlike")
				_, err = svc.Get(ctx, article, user)
				wantKind(t, err, fault.NotFound, "LIKE_NOT_FOUND", "get after unlike")
				if n, err := svc.count(ctx, article); err != nil || n != 1 {
					t.Fatalf("count after unlike = %d, %v; want 1", n, err)
				}
				// Liking again after an unlike is a new like.
				again, err := svc.Like(ctx, st, article, user)
				if err != nil {
					t.Fatal(err)
				}
				if n, err := svc.count(ctx, article); err != nil || n != 2 {
					t.Fatalf("count after liking again = %d, %v; want 2", n, err)
				}

				// One event per change, with the count and its version as that transaction left them; an unlike
				// carries the like it removed. Failed requests wrote none.
				ev := func(typ event.Type, l Like, count, version int64) sent {
					return sent{Type: typ, Payload: event.Like{ArticleLikeID: apijson.ID(l.ID), ArticleID: apijson.ID(article),
						UserID: apijson.ID(l.UserID), CreatedAt: apijson.Time(t0ms), ArticleLikeCount: count,
						ArticleLikeCountVersion: version}}
				}
				wantEvents := []sent{
					ev(event.ArticleLiked, l, 1, 1),
					ev(event.ArticleLiked, other, 2, 2),
					ev(event.ArticleUnliked, l, 1, 3),
					ev(event.ArticleLiked, again, 2, 4),
				}
				gotEvents := outboxOf(t, db, article)
				sort.Slice(gotEvents, func(i, j int) bool {
					return gotEvents[i].Payload.ArticleLikeCountVersion < gotEvents[j].Payload.ArticleLikeCountVersion
				})
				if diff := cmp.Diff(wantEvents, gotEvents, sameTime); diff != "" {
					t.Errorf("outbox (-want +got):\n%s", diff)
				}
				if got := svc.Stats(st).Writes; got != 4 {
					t.Errorf("Stats(%s).Writes = %d, want 4", st, got)
				}
				// The article's first write looked it up; it was known from then on.
				if got := env.origin.Calls() - lookups; got != 1 {
					t.Errorf("%d lookups of the article at the article service, want 1", got)
				}
			})
		}
	})
}

func TestLikeWithoutIDs(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, Migrate)
	store := NewStore(db, outbox.New(db, outbox.DefaultShards, eventIDs, time.Now, nil, nil), existencetest.NewOrigin(t).Registry("like", db), nil)
	svc := NewService(store, snowflaketest.FailingIDs{}, time.Now, "")
	_, err := svc.Like(context.Background(), "", 1, 1)
	wantKind(t, err, fault.Unavailable, "ID_UNAVAILABLE", "like without ids")
	if n, _ := svc.count(context.Background(), 1); n != 0 {
		t.Errorf("count = %d after a failed like, want 0", n)
	}
}

func TestUnknownStrategy(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, Migrate)
	svc := newTestService(t, db, "")
	if _, err := svc.Like(context.Background(), "no-lock", 1, 1); err == nil || fault.KindOf(err) != 0 {
		t.Errorf("like with an unknown strategy: %v, want an internal error", err)
	}
	if got := svc.Stats("no-lock"); got != (Stats{}) {
		t.Errorf("Stats of an unknown strategy = %+v, want zero", got)
	}
}

// concurrently runs fn(i) for i in [0, n) on workers goroutines and returns the errors, indexed by i.
func concurrently(n, workers int, fn func(i int) error) []error {
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				errs[i] = fn(i)
			}
		})
	}
	wg.Wait()
	return errs
}

// TestConcurrentLikes is the SPEC's claim: 3000 likes by distinct users from 100 concurrent clients at one article,
// or at one comment, count exactly 3000, with every strategy, and 3000 concurrent unlikes bring it back to 0. Every
// change writes one event whose count and version are those of its own transaction: with +1 per like, the k-th committed like leaves
// count k at version k, so the events' (count, version) pairs are exactly 1..3000 when none was lost or seen twice.
func TestConcurrentLikes(t *testing.T) {
	// Not in parallel: its 100 clients fill its MySQL database's pool of 50 connections, and two such tests
	// beside another package's would pass MariaDB's default max_connections (151).
	const likes, workers = 3000, 100
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		env := newTestEnv(t, db, "") // one service, so that like ids stay unique across strategies
		for i, st := range Strategies {
			for _, tg := range []target{{article: int64(1000 + i)}, env.comment(t, int64(1100+i), int64(1200+i))} {
				t.Run(string(st)+"/"+tg.String(), func(t *testing.T) { concurrentLikes(t, env, st, tg, likes, workers) })
			}
		}
	})
}

// concurrentLikes is a run of TestConcurrentLikes, on one target with one strategy.
func concurrentLikes(t *testing.T, env testEnv, st Strategy, tg target, likes, workers int) {
	ctx, svc, db := context.Background(), env.svc, env.db
	start := time.Now()
	errs := concurrently(likes, workers, func(u int) error {
		_, err := likeOf(ctx, svc, st, tg, int64(u+1))
		return err
	})
	liked := time.Since(start)
	for u, err := range errs {
		if err != nil {
			t.Fatalf("like by user %d: %v", u+1, err)
		}
	}
	checkCounted(t, db, svc, tg, int64(likes), tg.tables().liked, func(k int64) (int64, int64) { return k, k })

	start = time.Now()
	errs = concurrently(likes, workers, func(u int) error { return unlikeOf(ctx, svc, st, tg, int64(u+1)) })
	unliked := time.Since(start)
	for u, err := range errs {
		if err != nil {
			t.Fatalf("unlike by user %d: %v", u+1, err)
		}
	}
	checkCounted(t, db, svc, tg, 0, tg.tables().unliked, func(k int64) (int64, int64) { return int64(likes) - k, int64(likes) + k })
	t.Logf("%s of %s on %s: %d likes in %s, %d unlikes in %s, %+v", st, tg, db.Dialect, likes, liked.Round(time.Millisecond),
		likes, unliked.Round(time.Millisecond), svc.Stats(st))
}

// checkCounted checks that an article's or a comment's count and rows are want, and that its events of type typ
// are exactly one per change k = 1..likes with the (count, version) that pair(k) gives.
func checkCounted(t *testing.T, db *sqldb.DB, svc *Service, tg target, want int64, typ event.Type, pair func(k int64) (int64, int64)) {
	t.Helper()
	const likes = 3000
	if n, _, err := svc.store.count(context.Background(), tg); err != nil || n != want {
		t.Errorf("count = %d, %v; want %d", n, err, want)
	}
	if n := rowsOf(t, db, tg); n != want {
		t.Errorf("like rows = %d, want %d", n, want)
	}
	var got [][2]int64
	for _, e := range outboxOf(t, db, tg.article) {
		if e.Type == typ {
			got = append(got, e.counted())
		}
	}
	sort.Slice(got, func(i, j int) bool { return got[i][1] < got[j][1] })
	wantPairs := make([][2]int64, likes)
	for k := range int64(likes) {
		c, v := pair(k + 1)
		wantPairs[k] = [2]int64{c, v}
	}
	if diff := cmp.Diff(wantPairs, got); diff != "" {
		t.Errorf("%s events' (count, version) (-want +got):\n%s", typ, diff)
	}
}

// TestConcurrentDuplicates fires 20 likes by one user at once at a never-liked article or comment (so they also
// race to create its count row), then 20 unlikes: exactly one of each succeeds, the rest are 409 and 404.
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	const tries = 20
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		svc := env.svc
		for i, st := range Strategies {
			for _, tg := range []target{{article: int64(2000 + i)}, env.comment(t, int64(2100+i), int64(2200+i))} {
				t.Run(string(st)+"/"+tg.String(), func(t *testing.T) {
					user := int64(5)
					kinds := func(errs []error) map[fault.Kind]int {
						out := map[fault.Kind]int{}
						for _, err := range errs {
							if err != nil && fault.KindOf(err) == 0 {
								t.Errorf("internal error: %v", err)
							}
							out[fault.KindOf(err)]++
						}
						return out
					}
					counted := func() int64 { n, _, _ := svc.store.count(ctx, tg); return n }
					errs := concurrently(tries, tries, func(int) error { _, err := likeOf(ctx, svc, st, tg, user); return err })
					if diff := cmp.Diff(map[fault.Kind]int{0: 1, fault.Conflict: tries - 1}, kinds(errs)); diff != "" {
						t.Errorf("likes: outcomes by kind (-want +got):\n%s", diff)
					}
					if n := counted(); n != 1 || rowsOf(t, db, tg) != 1 || len(outboxOf(t, db, tg.article)) != 1 {
						t.Errorf("after %d likes by one user: count %d, %d rows, %d events; want 1 each", tries, n,
							rowsOf(t, db, tg), len(outboxOf(t, db, tg.article)))
					}
					errs = concurrently(tries, tries, func(int) error { return unlikeOf(ctx, svc, st, tg, user) })
					if diff := cmp.Diff(map[fault.Kind]int{0: 1, fault.NotFound: tries - 1}, kinds(errs)); diff != "" {
						t.Errorf("unlikes: outcomes by kind (-want +got):\n%s", diff)
					}
					if n := counted(); n != 0 || rowsOf(t, db, tg) != 0 || len(outboxOf(t, db, tg.article)) != 2 {
						t.Errorf("after %d unlikes: count %d, %d rows, %d events; want 0, 0, 2", tries, n,
							rowsOf(t, db, tg), len(outboxOf(t, db, tg.article)))
					}
				})
			}
		}
	})
}

// TestMixedStrategies likes one article concurrently through all three strategies at once: they share the count
// row and its lock order, so the count stays exact.
func TestMixedStrategies(t *testing.T) {
	// Not in parallel: its 60 clients fill its MySQL database's pool of 50 connections, and two such tests
	// beside another package's would pass MariaDB's default max_connections (151).
	const likes, workers = 600, 60
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc := newTestService(t, db, "")
		article := int64(3000)
		errs := concurrently(likes, workers, func(u int) error {
			_, err := svc.Like(ctx, Strategies[u%len(Strategies)], article, int64(u+1))
			return err
		})
		errs = append(errs, concurrently(likes/2, workers, func(u int) error {
			return svc.Unlike(ctx, Strategies[(u+1)%len(Strategies)], article, int64(2*u+1))
		})...)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n, err := svc.count(ctx, article); err != nil || n != likes/2 || likeRows(t, db, article) != likes/2 {
			t.Errorf("count %d (%v), rows %d; want %d", n, err, likeRows(t, db, article), likes/2)
		}
		if n := len(outboxOf(t, db, article)); n != likes+likes/2 {
			t.Errorf("%d events, want %d", n, likes+likes/2)
		}
	})
}

// TestOptimisticRetry drives the retry loop with attempts that conflict a given number of times.
func TestOptimisticRetry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		conflicts int // conflicts before the attempt that succeeds
		other     error
		wantKind  fault.Kind
		wantCode  string
		wantTries int
	}{
		{name: "first try", conflicts: 0, wantTries: 1},
		{name: "after conflicts", conflicts: 4, wantTries: 5},
		{name: "on the last attempt", conflicts: 5, wantTries: 6},
		{name: "exhausted", conflicts: 6, wantKind: fault.Unavailable, wantCode: "LIKE_CONTENDED", wantTries: 6},
		{name: "other error ends it", conflicts: 2, other: fault.Conflictf("ALREADY_LIKED", "x"), wantKind: fault.Conflict,
			wantCode: "ALREADY_LIKED", wantTries: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newTestService(t, sqldbtest.OpenSQLite(t, Migrate), "")
			var waits []time.Duration
			svc.retry = retryPolicy{attempts: 6, base: time.Millisecond, max: 4 * time.Millisecond,
				sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
			tries := 0
			err := svc.write(context.Background(), OptimisticLock, func(st Strategy) (int, error) {
				if st != OptimisticLock {
					t.Errorf("attempt with %s", st)
				}
				tries++
				if tries <= tc.conflicts {
					return 0, errVersionConflict
				}
				return 1, tc.other
			})
			if tc.wantKind == 0 && err != nil {
				t.Fatalf("write: %v", err)
			}
			if tc.wantKind != 0 {
				wantKind(t, err, tc.wantKind, tc.wantCode, "write")
			}
			if tries != tc.wantTries {
				t.Errorf("%d attempts, want %d", tries, tc.wantTries)
			}
			if len(waits) != tries-1 {
				t.Errorf("%d waits between %d attempts", len(waits), tries)
			}
			// Each wait is below a ceiling that doubles from base up to max.
			for i, d := range waits {
				if ceiling := min(time.Millisecond<<i, 4*time.Millisecond); d < 0 || d >= ceiling {
					t.Errorf("wait %d = %s, want in [0, %s)", i+1, d, ceiling)
				}
			}
			stats := svc.Stats(OptimisticLock)
			if want := int64(min(tc.conflicts, 6)); stats.Conflicts != want {
				t.Errorf("Stats.Conflicts = %d, want %d", stats.Conflicts, want)
			}
			if stats.MostAttempts != int64(tc.wantTries) {
				t.Errorf("Stats.MostAttempts = %d, want %d", stats.MostAttempts, tc.wantTries)
			}
		})
	}
}

func TestRetryWaitsAreJittered(t *testing.T) {
	t.Parallel()
	p := retryPolicy{attempts: 10, base: time.Millisecond, max: 64 * time.Millisecond}
	seen := map[time.Duration]bool{}
	for range 50 {
		seen[p.wait(7)] = true
	}
	if len(seen) < 10 {
		t.Errorf("50 waits after attempt 7 took only %d distinct values: %v", len(seen), seen)
	}
	for _, attempt := range []int{1, 6, 7, 40, 1000} {
		if d := p.wait(attempt); d < 0 || d >= 64*time.Millisecond {
			t.Errorf("wait(%d) = %s, want in [0, 64ms)", attempt, d)
		}
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := defaultRetry.sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("sleep with a cancelled context: %v", err)
	}
	svc := newTestService(t, sqldbtest.OpenSQLite(t, Migrate), "")
	tries := 0
	err := svc.write(ctx, OptimisticLock, func(Strategy) (int, error) { tries++; return 0, errVersionConflict })
	if !errors.Is(err, context.Canceled) || tries != 1 {
		t.Errorf("write under a cancelled context: %v after %d attempts, want context.Canceled after 1", err, tries)
	}
	wantKind(t, err, fault.Unavailable, "LIKE_CONTENDED", "write under a cancelled context")
}

// TestOptimisticConflictOnMySQL makes the conflict happen for certain: a transaction changes the count row and
// holds it while an optimistic like reads the old version and runs its versioned update, which blocks on the row;
// when that transaction commits, the update matches nothing (or, under MariaDB's snapshot isolation, fails with
// "record has changed since last read"). With one attempt allowed the client is told to try again and nothing is
// written; with two, the retry reads the new version and succeeds. (On SQLite a conflict cannot happen: the read
// runs under the database's write lock.)
func TestOptimisticConflictOnMySQL(t *testing.T) {
	t.Parallel()
	if os.Getenv(sqldbtest.MySQLDSNEnv) == "" {
		t.Skip("needs MariaDB or MySQL: set " + sqldbtest.MySQLDSNEnv)
	}
	for _, snapshotIsolation := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot isolation %v", snapshotIsolation), func(t *testing.T) {
			db := openMySQL(t, snapshotIsolation)
			ctx := context.Background()
			svc := newTestService(t, db, "")
			const article = 4000
			if _, err := svc.Like(ctx, OptimisticLock, article, 1); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				attempts int
				wantErr  bool
			}{{1, true}, {2, false}} {
				t.Run(fmt.Sprintf("%d attempts", tc.attempts), func(t *testing.T) {
					svc.retry.attempts = tc.attempts
					before := svc.Stats(OptimisticLock)
					user := int64(10 + tc.attempts)
					var likeErr error
					liked := make(chan struct{})
					err := db.Transact(ctx, func(tx *sql.Tx) error {
						if _, err := tx.ExecContext(ctx, "UPDATE article_like_count SET version = version + 1 WHERE article_id = ?", article); err != nil {
							return err
						}
						go func() {
							defer close(liked)
							_, likeErr = svc.Like(ctx, OptimisticLock, article, user)
						}()
						return waitForVersionedUpdate(ctx, db, liked)
					})
					if err != nil {
						t.Fatal(err)
					}
					<-liked
					err = likeErr
					if tc.wantErr {
						wantKind(t, err, fault.Unavailable, "LIKE_CONTENDED", "like with one attempt")
					} else if err != nil {
						t.Fatalf("like with a retry: %v", err)
					}
					if got := svc.Stats(OptimisticLock).Conflicts - before.Conflicts; got != 1 {
						t.Errorf("%d conflicts counted, want 1", got)
					}
					_, err = svc.Get(ctx, article, user)
					if tc.wantErr {
						wantKind(t, err, fault.NotFound, "LIKE_NOT_FOUND", "like that gave up")
					} else if err != nil {
						t.Errorf("like that retried was not stored: %v", err)
					}
				})
			}
			if n, _ := svc.count(ctx, article); n != 2 || len(outboxOf(t, db, article)) != 2 {
				t.Errorf("count = %d with %d events, want 2 and 2", n, len(outboxOf(t, db, article)))
			}
		})
	}
}

// openMySQL returns a migrated database of its own on the test server, its connections with MariaDB's
// innodb_snapshot_isolation on or off. It skips the test when the server has no such setting.
func openMySQL(t *testing.T, snapshotIsolation bool) *sqldb.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(sqldbtest.DatabaseDSN(t, "board_test_"+sqldbtest.RandomSuffix()))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["innodb_snapshot_isolation"] = map[bool]string{false: "OFF", true: "ON"}[snapshotIsolation]
	db, err := sqldb.OpenMySQL(context.Background(), cfg.FormatDSN(), 10)
	if err != nil {
		t.Skipf("no innodb_snapshot_isolation on this server: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if err := Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

// waitForVersionedUpdate returns once a connection to db's database is running the optimistic strategy's versioned
// UPDATE, or fails if done closes first. The like read the count before that statement started, while the test's
// transaction had not committed, so its UPDATE is bound to match no row, whether it is still waiting for the lock
// or not yet asking for it when the test commits. (The process list is live; information_schema.innodb_trx would be
// a cached snapshot.)
func waitForVersionedUpdate(ctx context.Context, db *sqldb.DB, done <-chan struct{}) error {
	for {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.processlist
			WHERE db = DATABASE() AND info LIKE 'UPDATE article_like_count SET % AND version = %'`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		select {
		case <-done:
			return errors.New("the like ended before its versioned update ran")
		case <-time.After(5 * time.Millisecond):
		}
	}
}
