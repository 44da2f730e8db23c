package like

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/existence"
	"board/internal/existence/existencetest"
	"board/internal/fault"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// forever is a linger no test outlives: a batch then starts only when it is full, so a test knows its batches.
const forever = time.Hour

// batchedService returns a service over env's store that batches as b says, with ids of its own from first.
func batchedService(env testEnv, first int64, b Batching) *Service {
	return NewService(env.svc.store, snowflaketest.NewIDs(first), func() time.Time { return t0 }, "").WithBatching(b)
}

// TestLikesShareTransactions sends 30 likes of one article, or of one comment, at once to a service that starts a
// transaction only when 10 wait for it: they are all in flight together, and take exactly three transactions, with
// every strategy.
// Each like still has its own event, whose count and version are those of its place in the sequence. One
// transaction per like, as before batching, makes 30.
func TestLikesShareTransactions(t *testing.T) {
	t.Parallel()
	const likes, batch = 30, 10
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		env := newTestEnv(t, db, "")
		svc := batchedService(env, firstID+1_000_000, Batching{Max: batch, Linger: forever})
		for i, st := range Strategies {
			article := int64(5000 + i)
			existencetest.Apply(t, env.articles, existencetest.Created(article, 1))
			for _, tg := range []target{{article: article}, env.comment(t, int64(5100+i), article)} {
				t.Run(string(st)+"/"+tg.String(), func(t *testing.T) {
					before := svc.Stats(st)
					errs := concurrently(likes, likes, func(u int) error {
						_, err := likeOf(context.Background(), svc, st, tg, int64(u+1))
						return err
					})
					for u, err := range errs {
						if err != nil {
							t.Fatalf("like by user %d: %v", u+1, err)
						}
					}
					after := svc.Stats(st)
					if got := after.Transactions - before.Transactions; got != likes/batch {
						t.Errorf("%d likes took %d transactions, want %d", likes, got, likes/batch)
					}
					if got := after.Writes - before.Writes; got != likes {
						t.Errorf("Stats.Writes grew by %d, want %d", got, likes)
					}
					checkSequence(t, db, svc, tg, likes, likes)
				})
			}
		}
	})
}

// checkSequence checks that an article's or a comment's count and rows are want and that the events under its
// article of its type, in version order, are a sequence of single steps from version 1 and count 0: each like one up, each
// unlike one down, to (want, version).
func checkSequence(t *testing.T, db *sqldb.DB, svc *Service, tg target, want, version int64) {
	t.Helper()
	count, v, err := svc.store.count(context.Background(), tg)
	if err != nil || count != want || v != version {
		t.Errorf("count, version = %d, %d (%v); want %d, %d", count, v, err, want, version)
	}
	if n := rowsOf(t, db, tg); n != want {
		t.Errorf("like rows = %d, want %d", n, want)
	}
	var events []sent
	for _, e := range outboxOf(t, db, tg.article) {
		if (e.Type == tg.tables().liked || e.Type == tg.tables().unliked) && int64(e.Comment.CommentID) == tg.comment {
			events = append(events, e)
		}
	}
	sort.Slice(events, func(i, j int) bool { return events[i].counted()[1] < events[j].counted()[1] })
	if int64(len(events)) != version {
		t.Errorf("%d events, want one per version: %d", len(events), version)
	}
	var c int64
	for i, e := range events {
		if e.Type == tg.tables().liked {
			c++
		} else {
			c--
		}
		if got := e.counted(); got != [2]int64{c, int64(i + 1)} {
			t.Errorf("event %d (%s) carries count, version %v; want %v", i+1, e.Type, got, [2]int64{c, int64(i + 1)})
		}
	}
}

// TestBatchMixesLikesAndUnlikes sends, at once, likes and unlikes that one transaction carries: duplicates, unlikes
// of likes that are not there, and a like and an unlike of one user in either order. Each answer is what it would
// be with a transaction per request in some order, the others commit beside the ones that fail, and the events
// step the count one by one.
func TestBatchMixesLikesAndUnlikes(t *testing.T) {
	t.Parallel()
	type request struct {
		user   int64
		unlike bool
	}
	requests := []request{
		{1, false},             // liked already: 409
		{2, true},              // liked: 204
		{3, true},              // never liked: 404
		{4, false},             // 201
		{5, false}, {5, false}, // 201 and 409
		{6, true}, {6, true}, // liked: 204 and 404
		{7, false}, {7, true}, // never liked: 201 then 204, or 404 then 201
		{8, true}, {8, false}, // liked: 204 then 201, or 409 then 204
		{9, false}, {9, true}, // as 7
		{10, true}, {10, false}, // as 8
		{11, false}, {11, false}, // 201 and 409
		{12, false}, {12, true}, // as 7
		{13, true}, {13, false}, // as 8
		{14, true},               // never liked: 404
		{15, false}, {16, false}, // 201 each
		{100, true}, {101, false}, // liked: 204; liked already: 409
	}
	liked := map[int64]bool{1: true, 2: true, 6: true, 8: true, 10: true, 13: true, 100: true, 101: true}
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		svc := batchedService(env, firstID+1_000_000, Batching{Max: len(requests), Linger: forever})
		for i, st := range Strategies {
			t.Run(string(st), func(t *testing.T) {
				article := int64(6000 + i)
				for u := range liked {
					if _, err := env.svc.Like(ctx, st, article, u); err != nil {
						t.Fatal(err)
					}
				}
				before := svc.Stats(st)
				errs := concurrently(len(requests), len(requests), func(i int) error {
					if r := requests[i]; r.unlike {
						return svc.Unlike(ctx, st, article, r.user)
					}
					_, err := svc.Like(ctx, st, article, requests[i].user)
					return err
				})
				if got := svc.Stats(st).Transactions - before.Transactions; got != 1 {
					t.Errorf("%d transactions, want 1", got)
				}
				// Per user: the answers, and what a like and an unlike did, which say whether a like is left.
				answers := map[int64][]string{}
				succeeded := map[int64]int{} // likes minus unlikes that succeeded
				var changes int64
				for i, err := range errs {
					r := requests[i]
					code := "ok"
					if err != nil {
						fe, ok := fault.As(err)
						if !ok {
							t.Fatalf("user %d: %v", r.user, err)
						}
						code = fe.Code
					} else if r.unlike {
						succeeded[r.user]--
						changes++
					} else {
						succeeded[r.user]++
						changes++
					}
					answers[r.user] = append(answers[r.user], code)
				}
				for u, codes := range answers {
					sort.Strings(codes)
					answers[u] = codes
				}
				want := map[int64][]string{
					1: {"ALREADY_LIKED"}, 2: {"ok"}, 3: {"LIKE_NOT_FOUND"}, 4: {"ok"}, 5: {"ALREADY_LIKED", "ok"},
					6: {"LIKE_NOT_FOUND", "ok"}, 11: {"ALREADY_LIKED", "ok"}, 14: {"LIKE_NOT_FOUND"}, 15: {"ok"}, 16: {"ok"},
					100: {"ok"}, 101: {"ALREADY_LIKED"},
				}
				for _, u := range []int64{7, 9, 12} { // like and unlike of a user who had not liked
					if c := strings.Join(answers[u], ","); c != "ok,ok" && c != "LIKE_NOT_FOUND,ok" {
						t.Errorf("user %d: answers %s, want ok,ok or LIKE_NOT_FOUND,ok", u, c)
					}
					want[u] = answers[u]
				}
				for _, u := range []int64{8, 10, 13} { // unlike and like of a user who had liked
					if c := strings.Join(answers[u], ","); c != "ok,ok" && c != "ALREADY_LIKED,ok" {
						t.Errorf("user %d: answers %s, want ok,ok or ALREADY_LIKED,ok", u, c)
					}
					want[u] = answers[u]
				}
				if diff := cmp.Diff(want, answers); diff != "" {
					t.Errorf("answers by user (-want +got):\n%s", diff)
				}
				var left int64
				for u := int64(1); u <= 101; u++ {
					was := 0
					if liked[u] {
						was = 1
					}
					now := was + succeeded[u]
					if now != 0 && now != 1 {
						t.Fatalf("user %d: %d likes left by the answers", u, now)
					}
					_, err := svc.Get(ctx, article, u)
					if has := err == nil; has != (now == 1) {
						t.Errorf("user %d: like stored %v, want %v by the answers (%v)", u, has, now == 1, err)
					}
					left += int64(now)
				}
				checkSequence(t, db, svc, target{article: article}, left, int64(len(liked))+changes)
			})
		}
	})
}

// TestLikeKeepsItsDeadlineWhileTheDatabaseHangs holds the article's count row (on SQLite: the database's one
// writer) while two likes wait for it: one with a short deadline is answered 503 at that deadline, with the
// database still held; the other, without one, commits once the row is free, whatever became of the first one's
// transaction. The count stays that of the rows.
func TestLikeKeepsItsDeadlineWhileTheDatabaseHangs(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		const article = 7000
		if _, err := env.svc.Like(ctx, "", article, 1); err != nil {
			t.Fatal(err)
		}
		patient := make(chan error, 1)
		err := db.Transact(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE article_like_count SET version = version WHERE article_id = ?", article); err != nil {
				return err
			}
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			hasty := make(chan error, 1)
			go func() { _, err := env.svc.Like(short, "", article, 2); hasty <- err }()
			go func() { _, err := env.svc.Like(ctx, "", article, 3); patient <- err }()
			wantKind(t, <-hasty, fault.Unavailable, "DATABASE_UNAVAILABLE", "like with a deadline, the database held")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := <-patient; err != nil {
			t.Errorf("like without a deadline, after the database was freed: %v", err)
		}
		n, _, err := env.svc.VersionedCount(ctx, article)
		if err != nil || n != likeRows(t, db, article) || n < 2 {
			t.Errorf("count %d (%v) with %d rows; want the rows, at least 2", n, err, likeRows(t, db, article))
		}
	})
}

// idsFailingOnce fails its first call, then issues ids from ids.
type idsFailingOnce struct {
	ids    outbox.IDGenerator
	failed atomic.Bool
}

func (f *idsFailingOnce) Next() (int64, error) {
	if f.failed.CompareAndSwap(false, true) {
		return 0, errors.New("no ids for now")
	}
	return f.ids.Next()
}

// TestFailedBatchLeavesTheNextOne sends 10 likes of one article at once in batches of 5, and the first batch fails
// (its first event gets no id): its 5 likes are answered 503, and the other 5 commit in the next batch.
func TestFailedBatchLeavesTheNextOne(t *testing.T) {
	t.Parallel()
	const likes, batch = 10, 5
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		env := newTestEnv(t, db, "")
		const article = 7500
		existencetest.Apply(t, env.articles, existencetest.Created(article, 1))
		store := NewStore(db, outbox.New(db, outbox.DefaultShards, &idsFailingOnce{ids: eventIDs}, time.Now, nil, nil), env.articles, env.comments)
		svc := NewService(store, snowflaketest.NewIDs(firstID+2_000_000), func() time.Time { return t0 }, "").
			WithBatching(Batching{Max: batch, Linger: forever})
		errs := concurrently(likes, likes, func(u int) error {
			_, err := svc.Like(context.Background(), "", article, int64(u+1))
			return err
		})
		kinds := map[string]int{}
		for _, err := range errs {
			fe, _ := fault.As(err)
			if err != nil && fe == nil {
				t.Fatalf("like: %v", err)
			}
			if err == nil {
				kinds["ok"]++
			} else {
				kinds[fe.Code]++
			}
		}
		if diff := cmp.Diff(map[string]int{"ok": batch, "ID_UNAVAILABLE": batch}, kinds); diff != "" {
			t.Errorf("answers by code (-want +got):\n%s", diff)
		}
		checkSequence(t, db, svc, target{article: article}, batch, batch)
	})
}

// kill9Env tells the test binary that it is the process TestLikesSurviveKill9 kills: "<dialect> <path or DSN>".
const kill9Env = "BOARD_LIKE_KILL9_DATABASE"

// kill9Article is the article the killed process likes.
const kill9Article = 8000

// TestLikesSurviveKill9 runs a like service in a process of its own, 50 clients liking one article as distinct
// users, and kills it with SIGKILL after 300 likes were answered, while others are in flight. Every answered like
// is stored, the count is that of the rows, every row has its event with a count and version in sequence, and the
// service goes on counting from there.
func TestLikesSurviveKill9(t *testing.T) {
	if spec := os.Getenv(kill9Env); spec != "" {
		likeUntilKilled(t, spec)
		return
	}
	t.Parallel()
	const answered = 300
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		existencetest.Apply(t, env.articles, existencetest.Created(kill9Article, 1))
		spec := "sqlite " + db.Name
		if db.Dialect == sqldb.MySQL {
			spec = "mysql " + sqldbtest.DSN(t, db.Name)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestLikesSurviveKill9$")
		cmd.Env = append(os.Environ(), kill9Env+"="+spec)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := map[int64]bool{}
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			var user int64
			if _, err := fmt.Sscanf(lines.Text(), "liked %d", &user); err != nil {
				continue
			}
			acked[user] = true
			if len(acked) == answered {
				_ = cmd.Process.Kill()
			}
		}
		_ = cmd.Wait() // killed: the exit status says so
		if len(acked) < answered {
			t.Fatalf("the liking process stopped by itself after %d likes:\n%s", len(acked), stderr.String())
		}
		rows := likeRows(t, db, kill9Article)
		t.Logf("%d likes answered, %d stored", len(acked), rows)
		for user := range acked {
			if _, err := env.svc.Get(ctx, kill9Article, user); err != nil {
				t.Errorf("answered like by user %d: %v", user, err)
			}
		}
		checkSequence(t, db, env.svc, target{article: kill9Article}, rows, rows)
		// A service started afresh counts on from what the killed one left.
		for user := int64(1 << 40); user < 1<<40+3; user++ { // above any the killed process reached
			if _, err := env.svc.Like(ctx, "", kill9Article, user); err != nil {
				t.Fatal(err)
			}
		}
		checkSequence(t, db, env.svc, target{article: kill9Article}, rows+3, rows+3)
	})
}

// likeUntilKilled is the killed process: 50 clients like kill9Article with the default strategy and batching, as
// new users each time, and print "liked <user>" for each like answered.
func likeUntilKilled(t *testing.T, spec string) {
	ctx := context.Background()
	dialect, source, _ := strings.Cut(spec, " ")
	var db *sqldb.DB
	var err error
	if dialect == string(sqldb.MySQL) {
		db, err = sqldb.OpenMySQL(ctx, source, 60)
	} else {
		db, err = sqldb.OpenSQLite(source)
	}
	if err != nil {
		t.Fatal(err)
	}
	ids, err := snowflake.New(7, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := NewStore(db, outbox.New(db, outbox.DefaultShards, ids, time.Now, nil, nil), existence.New(db, existence.Config{Service: "like"}), nil)
	svc := NewService(store, ids, time.Now, "")
	var next atomic.Int64
	errs := concurrently(50, 50, func(int) error {
		for {
			user := next.Add(1)
			if _, err := svc.Like(ctx, "", kill9Article, user); err != nil {
				return err
			}
			fmt.Printf("liked %d\n", user)
		}
	})
	t.Fatalf("likes stopped before the kill: %v", errs)
}
