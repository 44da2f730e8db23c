package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/event"
	"board/internal/notification"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

func benchFanout(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("bench fanout", `Usage: board bench fanout [flags]

Times the notification service's fan-out of a post to its watchers, in this process, over a scratch database
(notification_bench, on the configured SQL engine, e.g. --mysql-dsn 'root@tcp(127.0.0.1:3306)/'; emptied first).
--board-watchers users watch one board and --thread-watchers another set watch one article; each run hands the
handler a new article on the board (ARTICLE_CREATED) and a new comment on the article (COMMENT_CREATED), as the
consumer would, and times each watcher from the handler's start to the announcement of its inbox's change on Redis
(what the streams of every instance wait on): p50, p99 and the last, and inbox writes per second. The floor,
measured in the same run: the same rows inserted into the notification table in the same batches, one transaction
after another, with no inbox taken and nothing read: what the rows alone cost the engine.`, stderr)
	cfg.EngineFlags(fs)
	boardWatchers := fs.Int("board-watchers", 10000, "users who watch the board")
	threadWatchers := fs.Int("thread-watchers", 1000, "users who watch the article")
	runs := fs.Int("runs", 5, "timed posts of each kind (after one untimed)")
	batch := fs.Int("batch", notification.DefaultFanoutBatch, "inboxes per transaction (1 behind Vitess, whatever is given)")
	workers := fs.Int("workers", notification.DefaultFanoutWorkers, "transactions at once")
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *boardWatchers < 1 || *threadWatchers < 1 || *runs < 1 || *batch < 1 || *workers < 1 {
		return errors.New("--board-watchers, --thread-watchers, --runs, --batch and --workers must be at least 1")
	}
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()
	if err := e.StartRedis(ctx); err != nil {
		return err
	}
	db, _, ids, err := toolDatabase(ctx, e, "notification_bench", notification.Migrate)
	if err != nil {
		return err
	}
	for _, table := range []string{"notification", "inbox", "like_actor", "article_ref", "comment_ref", "watch", "watcher"} {
		if _, err := db.ExecContext(ctx, "DELETE /*vt+ MULTI_SHARD_AUTOCOMMIT=1 */ FROM "+table); err != nil {
			return fmt.Errorf("empty %s: %w", table, err)
		}
	}
	const board, threadBoard, writer, commenter = 1, 2, 1_000_000, 1_000_001
	boardUsers := userRange(10_000_000, *boardWatchers)
	threadUsers := userRange(20_000_000, *threadWatchers)
	thread, err := ids.Next()
	if err != nil {
		return err
	}
	if err := seedWatches(ctx, db, ids, boardUsers, notification.TargetBoard, board); err != nil {
		return err
	}
	if err := seedWatches(ctx, db, ids, threadUsers, notification.TargetArticle, thread); err != nil {
		return err
	}
	prefix := cfg.RedisPrefix + "fanout-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "::"
	svc := notification.New(db, ids, e.Redis, notification.Config{KeyPrefix: prefix, FanoutBatch: *batch,
		FanoutWorkers: *workers, Logger: e.Logger})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { svc.Run(runCtx) })
	defer stop()
	heard, err := newAnnouncements(ctx, e, prefix+"notification::changed")
	if err != nil {
		return err
	}
	defer heard.close()
	handlers := svc.Handlers()
	handle := func(typ event.Type, payload any) error {
		id, err := ids.Next()
		if err != nil {
			return err
		}
		body, err := json.Marshal(payload)
		if err != nil {
			return err
		}
		return handlers[typ](ctx, event.Envelope{EventID: apijson.ID(id), Type: typ, Payload: body})
	}
	// The thread's article, on a board nobody watches.
	if err := handle(event.ArticleCreated, event.Article{ArticleID: apijson.ID(thread), Title: "thread", BoardID: threadBoard,
		WriterID: writer}); err != nil {
		return err
	}

	type result struct {
		latencies []time.Duration
		elapsed   time.Duration // the handler's
		last      time.Duration // to the last announcement
	}
	// post hands one post to its handler and waits until every watcher's inbox is announced.
	post := func(typ event.Type, payload any, watchers []int64) (result, error) {
		heard.expect(watchers)
		start := time.Now()
		if err := handle(typ, payload); err != nil {
			return result{}, err
		}
		elapsed := time.Since(start)
		at, err := heard.wait(ctx, 60*time.Second)
		if err != nil {
			return result{}, err
		}
		r := result{elapsed: elapsed}
		for _, t := range at {
			r.latencies = append(r.latencies, t.Sub(start))
		}
		slices.Sort(r.latencies)
		r.last = r.latencies[len(r.latencies)-1]
		return r, nil
	}
	article := func() (result, error) {
		id, err := ids.Next()
		if err != nil {
			return result{}, err
		}
		return post(event.ArticleCreated, event.Article{ArticleID: apijson.ID(id), Title: "new", BoardID: board, WriterID: writer},
			boardUsers)
	}
	comment := func() (result, error) {
		id, err := ids.Next()
		if err != nil {
			return result{}, err
		}
		return post(event.CommentCreated, event.Comment{CommentID: apijson.ID(id), Content: "c", Path: "00000",
			ArticleID: apijson.ID(thread), WriterID: commenter}, threadUsers)
	}
	// floor inserts n rows into the notification table in the service's batches, one transaction after another.
	floor := func(n int) (time.Duration, error) {
		base := int64(30_000_000)
		key, err := ids.Next()
		if err != nil {
			return 0, err
		}
		start := time.Now()
		for lo := 0; lo < n; lo += *batch {
			hi := min(lo+*batch, n)
			var rows []string
			var values []any
			for u := lo; u < hi; u++ {
				id, err := ids.Next()
				if err != nil {
					return 0, snowflake.Unavailable(err)
				}
				rows = append(rows, "(?, ?, 1, 'watched-article', ?, 1, 'new', 0, '1', 1, '', '', FALSE, ?, ?)")
				now := time.Now().UTC()
				values = append(values, base+int64(u), id, "a:"+strconv.FormatInt(key, 10), now, now)
			}
			if err := db.Transact(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO notification (user_id, notification_id, seq, kind, dedupe_key, article_id,
					article_title, comment_id, actor_ids, actor_count, action, reason, is_read, created_at, updated_at) VALUES `+
					strings.Join(rows, ", "), values...)
				return err
			}); err != nil {
				return 0, err
			}
		}
		elapsed := time.Since(start)
		_, err = db.ExecContext(ctx, "DELETE /*vt+ MULTI_SHARD_AUTOCOMMIT=1 */ FROM notification WHERE user_id >= ?", base)
		return elapsed, err
	}

	fmt.Fprintf(stdout, "fan-out on %s %s: %d inboxes per transaction, %d at once; %d board watchers, %d thread watchers, %d runs each\n",
		db.Dialect, db.Name, *batch, *workers, *boardWatchers, *threadWatchers, *runs)
	fmt.Fprintf(stdout, "%-36s %7s %10s %10s %10s %10s %12s %9s\n", "case", "inboxes", "p50", "p99", "last", "handler", "inboxes/s", "vs floor")
	for _, c := range []struct {
		name     string
		target   string
		post     func() (result, error)
		watchers int
	}{
		{"new article, board watchers", "p99 <= 2s", article, *boardWatchers},
		{"new comment, thread watchers", "p99 <= 1s", comment, *threadWatchers},
	} {
		if _, err := c.post(); err != nil { // untimed: connections, caches, the first rows of each inbox
			return err
		}
		var all []time.Duration
		var elapsed, floorTime time.Duration
		var last time.Duration
		for range *runs {
			f, err := floor(c.watchers)
			if err != nil {
				return err
			}
			r, err := c.post()
			if err != nil {
				return err
			}
			all = append(all, r.latencies...)
			elapsed += r.elapsed
			floorTime += f
			last = max(last, r.last)
		}
		slices.Sort(all)
		n := float64(c.watchers * *runs)
		fmt.Fprintf(stdout, "%-36s %7d %10s %10s %10s %10s %12.0f %8.1f×\n", c.name+" ("+c.target+")", c.watchers,
			roundDuration(percentile(all, 0.5)), roundDuration(percentile(all, 0.99)), roundDuration(last),
			roundDuration(elapsed/time.Duration(*runs)), n/elapsed.Seconds(), elapsed.Seconds()/floorTime.Seconds())
		fmt.Fprintf(stdout, "%-36s %7d %10s %10s %10s %10s %12.0f %8.1f×\n", "  floor: bare multi-row inserts", c.watchers,
			"-", "-", "-", roundDuration(floorTime/time.Duration(*runs)), n/floorTime.Seconds(), 1.0)
	}
	return nil
}

func userRange(first int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = first + int64(i)
	}
	return out
}

// seedWatches has users watch the target, as PUT /v1/watches would have: the inbox, the watch and the index.
func seedWatches(ctx context.Context, db *sqldb.DB, ids *snowflake.Generator, users []int64, targetType string, target int64) error {
	const chunk = 500
	insertIgnore := "INSERT OR IGNORE INTO"
	if db.Dialect == sqldb.MySQL {
		insertIgnore = "INSERT IGNORE INTO"
	}
	now := time.Now().UTC()
	for lo := 0; lo < len(users); lo += chunk {
		part := users[lo:min(lo+chunk, len(users))]
		var inboxes, watches, index []string
		var inboxArgs, watchArgs, indexArgs []any
		for _, u := range part {
			id, err := ids.Next()
			if err != nil {
				return err
			}
			inboxes = append(inboxes, "(?)")
			inboxArgs = append(inboxArgs, u)
			watches = append(watches, "(?, ?, ?, 'watching', ?, ?)")
			watchArgs = append(watchArgs, u, targetType, target, id, now)
			index = append(index, "(?, ?, ?)")
			indexArgs = append(indexArgs, target, targetType, u)
		}
		for _, stmt := range []struct {
			sql  string
			args []any
		}{
			{insertIgnore + " inbox (user_id) VALUES " + strings.Join(inboxes, ", "), inboxArgs},
			{insertIgnore + " watch (user_id, target_type, target_id, level, watch_id, created_at) VALUES " + strings.Join(watches, ", "), watchArgs},
			{insertIgnore + " watcher (target_id, target_type, user_id) VALUES " + strings.Join(index, ", "), indexArgs},
		} {
			if _, err := db.ExecContext(ctx, "/*vt+ MULTI_SHARD_AUTOCOMMIT=1 */ "+stmt.sql, stmt.args...); err != nil {
				return fmt.Errorf("seed the watches: %w", err)
			}
		}
	}
	return nil
}

// announcements records when each expected user's inbox change is announced on the service's Redis channel.
type announcements struct {
	mu    sync.Mutex
	want  map[int64]bool
	at    []time.Time
	done  chan struct{}
	ps    *redis.PubSub
	ended chan struct{}
}

func newAnnouncements(ctx context.Context, e *app.Engines, channel string) (*announcements, error) {
	a := &announcements{ps: e.Redis.Subscribe(ctx, channel), ended: make(chan struct{})}
	// Subscribed before the first post.
	if _, err := a.ps.Receive(ctx); err != nil {
		a.ps.Close()
		return nil, err
	}
	go func() {
		defer close(a.ended)
		for msg := range a.ps.Channel() {
			now := time.Now()
			a.mu.Lock()
			for _, s := range strings.Split(msg.Payload, ",") {
				if u, err := strconv.ParseInt(s, 10, 64); err == nil && a.want[u] {
					delete(a.want, u)
					a.at = append(a.at, now)
				}
			}
			if len(a.want) == 0 && a.done != nil {
				close(a.done)
				a.done = nil
			}
			a.mu.Unlock()
		}
	}()
	return a, nil
}

// expect starts waiting for users' announcements.
func (a *announcements) expect(users []int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.want = make(map[int64]bool, len(users))
	for _, u := range users {
		a.want[u] = true
	}
	a.at = a.at[:0]
	a.done = make(chan struct{})
}

// wait returns when each expected user was announced.
func (a *announcements) wait(ctx context.Context, timeout time.Duration) ([]time.Time, error) {
	a.mu.Lock()
	done := a.done
	a.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(timeout):
			a.mu.Lock()
			defer a.mu.Unlock()
			return nil, fmt.Errorf("%d inboxes not announced within %v", len(a.want), timeout)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.at), nil
}

func (a *announcements) close() {
	_ = a.ps.Close() // closes its channel
	<-a.ended
}
