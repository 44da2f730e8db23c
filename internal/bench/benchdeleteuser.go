package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/event"
	"board/internal/existence"
	"board/internal/kafka"
	"board/internal/like"
	"board/internal/notification"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

func benchDeleteUser(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("bench delete-user", `Usage: board bench delete-user [flags]

Times a user's departure in the like and notification services, over scratch databases (like_leave_bench and
notification_leave_bench on the configured SQL engine; emptied first). One user gets --likes likes, half of
articles and half of comments (each target liked by one other user too, so that counts stay above zero), and
--notifications notifications with half as many bookmarks, watches (with their index entries) and remembered likers,
all bulk-loaded. Then:
  1. export: the user's GET /v1/exports/likes, /bookmarks, /notifications and /watches, over HTTP with the user's
     token, each read to its end; the target is all of them within 10 s;
  2. floor: a bare "DELETE ... WHERE user_id = ? LIMIT 500" loop over the same rows, no counts, no events;
  3. the rows loaded again, USER_DELETED {content: remove} handed to each service's handler as its consumer would
     hand it, both at once, each timed until it returns; then checked: nothing of the user left, every target's
     count one less with its version one more, one unlike event per like. The target is 60 s per service.`, stderr)
	cfg.EngineFlags(fs)
	likes := fs.Int("likes", 10000, "the user's likes: half of articles, half of comments")
	notifications := fs.Int("notifications", 2000, "the user's notifications; half as many bookmarks, watches and likers")
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *likes < 2 || *notifications < 2 {
		return errors.New("--likes and --notifications must be at least 2")
	}
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()
	likeDB, ob, ids, err := toolDatabase(ctx, e, "like_leave_bench", like.Migrate)
	if err != nil {
		return err
	}
	inboxDB, _, _, err := toolDatabase(ctx, e, "notification_leave_bench", notification.Migrate)
	if err != nil {
		return err
	}
	store := like.NewStore(likeDB, ob, existence.New(likeDB, existence.Config{Service: "like"}), like.NewComments(likeDB, "", time.Now))
	likeSvc := like.NewService(store, ids, time.Now, like.DefaultStrategy)
	inbox := notification.New(inboxDB, ids, e.Redis, notification.Config{KeyPrefix: e.Config.RedisPrefix, Logger: e.Logger})
	b := deleteUserBench{likeDB: likeDB, inboxDB: inboxDB, ids: ids, likes: *likes, notifications: *notifications}
	if b.user, err = ids.Next(); err != nil {
		return err
	}
	if err := b.load(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "user %d: %d likes (%d of articles, %d of comments), %d notifications, %d bookmarks, %d watches, %d likers; %s %s\n",
		b.user, b.likes, b.likes/2, b.likes-b.likes/2, b.notifications, b.notifications/2, b.notifications/2, b.notifications/2,
		likeDB.Dialect, likeDB.Name)

	// 1. The exports.
	key, err := newBenchKey()
	if err != nil {
		return err
	}
	token, err := key.token(b.user)
	if err != nil {
		return err
	}
	likeBase, stopLike, err := serveLoopback("like", like.Routes(likeSvc, e.Logger), key.guard(), e)
	if err != nil {
		return err
	}
	defer stopLike()
	inboxBase, stopInbox, err := serveLoopback("notification", notification.Routes(inbox, e.Logger), key.guard(), e)
	if err != nil {
		return err
	}
	defer stopInbox()
	fmt.Fprintf(stdout, "%-28s %8s %10s\n", "export", "rows", "elapsed")
	var exportTotal time.Duration
	for _, x := range []struct{ base, path string }{{likeBase, "likes"}, {inboxBase, "bookmarks"}, {inboxBase, "notifications"}, {inboxBase, "watches"}} {
		start := time.Now()
		n, err := readExport(ctx, x.base+"/v1/exports/"+x.path, token)
		took := time.Since(start)
		if err != nil {
			return fmt.Errorf("export %s: %w", x.path, err)
		}
		exportTotal += took
		fmt.Fprintf(stdout, "%-28s %8d %10s\n", "GET /v1/exports/"+x.path, n, took.Round(time.Millisecond))
	}
	fmt.Fprintf(stdout, "%-28s %8s %10s  (target 10s)\n", "all exports, one after another", "", exportTotal.Round(time.Millisecond))

	// 2. The floor.
	fmt.Fprintf(stdout, "%-28s %8s %10s\n", "departure", "rows", "elapsed")
	for _, f := range []struct {
		name   string
		db     *sqldb.DB
		tables []string
	}{
		{"floor: like", likeDB, []string{"article_like", "comment_like"}},
		{"floor: notification", inboxDB, []string{"like_actor", "bookmark", "watch", "notification", "inbox"}},
	} {
		start := time.Now()
		n, err := bareDelete(ctx, f.db, b.user, f.tables)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		fmt.Fprintf(stdout, "%-28s %8d %10s\n", f.name, n, time.Since(start).Round(time.Millisecond))
	}

	// 3. The departure, from the rows loaded again.
	if err := b.empty(ctx); err != nil {
		return err
	}
	if err := b.load(ctx); err != nil {
		return err
	}
	payload, err := json.Marshal(event.UserDeletion{UserID: apijson.ID(b.user), Content: event.DeleteRemove, TokenEpoch: 1, At: apijson.Time(time.Now())})
	if err != nil {
		return err
	}
	env := event.Envelope{EventID: apijson.ID(b.user), Type: event.UserDeleted, Payload: payload}
	var wg sync.WaitGroup
	services := []struct {
		name    string
		handler kafka.Handler
		took    time.Duration
		err     error
	}{{name: "like", handler: store.LeavingHandlers()[event.UserDeleted]}, {name: "notification", handler: inbox.LeavingHandlers()[event.UserDeleted]}}
	for i := range services {
		wg.Go(func() {
			s := &services[i]
			start := time.Now()
			s.err = s.handler(ctx, env)
			s.took = time.Since(start)
		})
	}
	wg.Wait()
	for _, s := range services {
		if s.err != nil {
			return fmt.Errorf("%s: %w", s.name, s.err)
		}
	}
	if err := b.checkGone(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%-28s %8d %10s  (target 60s; counts and events checked)\n", "USER_DELETED: like", b.likes,
		services[0].took.Round(time.Millisecond))
	fmt.Fprintf(stdout, "%-28s %8d %10s  (target 60s)\n", "USER_DELETED: notification", b.notifications+4*(b.notifications/2)+1,
		services[1].took.Round(time.Millisecond))
	return nil
}

// deleteUserBench is the user whose departure is timed, and the rows loaded for them.
type deleteUserBench struct {
	likeDB, inboxDB      *sqldb.DB
	ids                  *snowflake.Generator
	user                 int64
	likes, notifications int
	// targets are the articles and comments the user liked: each also liked by another user, count 2, version 2.
	articles, comments []int64
}

// likeTables and inboxTables are the scratch databases' tables, emptied before each load.
var (
	likeTables  = []string{"outbox", "article_like", "article_like_count", "article_existence", "comment_like", "comment_like_count", "comment_existence"}
	inboxTables = []string{"inbox", "notification", "like_actor", "bookmark", "watch", "watcher"}
)

func (b *deleteUserBench) empty(ctx context.Context) error {
	for _, x := range []struct {
		db     *sqldb.DB
		tables []string
	}{{b.likeDB, likeTables}, {b.inboxDB, inboxTables}} {
		for _, table := range x.tables {
			if _, err := x.db.ExecContext(ctx, "DELETE FROM "+table); err != nil {
				return fmt.Errorf("empty %s: %w", table, err)
			}
		}
	}
	return nil
}

// load empties the scratch databases and bulk-loads the user's rows, as the services' own writes would have left them.
func (b *deleteUserBench) load(ctx context.Context) error {
	if err := b.empty(ctx); err != nil {
		return err
	}
	next := func() int64 {
		id, err := b.ids.Next()
		if err != nil {
			panic(err) // the generator fails only when the clock runs backwards for long
		}
		return id
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	other := b.user + 1
	var exist, alikes, acounts, cexist, clikes, ccounts [][]any
	b.articles, b.comments = nil, nil
	host := next() // the article whose comments are liked
	exist = append(exist, []any{host, false, 1})
	for i := range b.likes {
		if i < b.likes/2 {
			a := next()
			b.articles = append(b.articles, a)
			exist = append(exist, []any{a, false, 1})
			alikes = append(alikes, []any{next(), a, other, now}, []any{next(), a, b.user, now})
			acounts = append(acounts, []any{a, 2, 2})
			continue
		}
		c := next()
		b.comments = append(b.comments, c)
		cexist = append(cexist, []any{c, host, false})
		clikes = append(clikes, []any{next(), host, c, other, now}, []any{next(), host, c, b.user, now})
		ccounts = append(ccounts, []any{c, host, 2, 2})
	}
	var ns, likers, bookmarks, watches, watchers [][]any
	for i := range b.notifications {
		id := next()
		ns = append(ns, []any{b.user, id, i + 1, "article-comment", id, i%3 == 0, now, now})
		if i < b.notifications/2 {
			likers = append(likers, []any{b.user, id, other})
			bookmarks = append(bookmarks, []any{b.user, next(), "article", id, id, now})
			watches = append(watches, []any{b.user, "article", id, "watching", next(), now})
			watchers = append(watchers, []any{id, "article", b.user})
		}
	}
	unread := (b.notifications + 2) / 3
	for _, l := range []struct {
		db          *sqldb.DB
		table, cols string
		rows        [][]any
	}{
		{b.likeDB, "article_existence", "article_id, deleted, article_version", exist},
		{b.likeDB, "article_like", "article_like_id, article_id, user_id, created_at", alikes},
		{b.likeDB, "article_like_count", "article_id, like_count, version", acounts},
		{b.likeDB, "comment_existence", "comment_id, article_id, deleted", cexist},
		{b.likeDB, "comment_like", "comment_like_id, article_id, comment_id, user_id, created_at", clikes},
		{b.likeDB, "comment_like_count", "comment_id, article_id, like_count, version", ccounts},
		{b.inboxDB, "inbox", "user_id, seq, unread", [][]any{{b.user, b.notifications, unread}}},
		{b.inboxDB, "notification", "user_id, notification_id, seq, kind, article_id, is_read, created_at, updated_at", ns},
		{b.inboxDB, "like_actor", "user_id, article_id, actor_id", likers},
		{b.inboxDB, "bookmark", "user_id, bookmark_id, target_type, target_id, article_id, created_at", bookmarks},
		{b.inboxDB, "watch", "user_id, target_type, target_id, level, watch_id, created_at", watches},
		{b.inboxDB, "watcher", "target_id, target_type, user_id", watchers},
	} {
		if err := insertRows(ctx, l.db, l.table, l.cols, l.rows); err != nil {
			return fmt.Errorf("load %s: %w", l.table, err)
		}
	}
	return nil
}

// insertRows inserts rows into table, 500 a statement.
func insertRows(ctx context.Context, db *sqldb.DB, table, cols string, rows [][]any) error {
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), 500)]
		rows = rows[len(chunk):]
		row := "(?" + strings.Repeat(", ?", len(chunk[0])-1) + ")"
		args := make([]any, 0, len(chunk)*len(chunk[0]))
		for _, r := range chunk {
			args = append(args, r...)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO "+table+" ("+cols+") VALUES "+strings.Repeat(", "+row, len(chunk))[2:], args...); err != nil {
			return err
		}
	}
	return nil
}

// bareDelete deletes the user's rows of tables 500 at a time, each statement on its own: what removing them costs
// with nothing else done. It returns how many rows it deleted.
func bareDelete(ctx context.Context, db *sqldb.DB, user int64, tables []string) (int64, error) {
	var total int64
	for _, table := range tables {
		query := "DELETE FROM " + table + " WHERE user_id = ? LIMIT 500"
		if db.Dialect != sqldb.MySQL { // SQLite has no DELETE ... LIMIT unless built with it
			query = "DELETE FROM " + table + " WHERE rowid IN (SELECT rowid FROM " + table + " WHERE user_id = ? LIMIT 500)"
		}
		for {
			res, err := db.ExecContext(ctx, query, user)
			if err != nil {
				return total, err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return total, err
			}
			total += n
			if n == 0 {
				break
			}
		}
	}
	return total, nil
}

// checkGone checks that nothing of the user is left, that every target the user liked counts one like (the other
// user's) at version 3, and that one unlike event per like was written.
func (b *deleteUserBench) checkGone(ctx context.Context) error {
	u := []any{b.user}
	for _, c := range []struct {
		db    *sqldb.DB
		query string
		args  []any
		want  int64
	}{
		{b.likeDB, "SELECT COUNT(*) FROM article_like WHERE user_id = ?", u, 0},
		{b.likeDB, "SELECT COUNT(*) FROM comment_like WHERE user_id = ?", u, 0},
		{b.likeDB, "SELECT COUNT(*) FROM article_like_count WHERE like_count <> 1 OR version <> 3", nil, 0},
		{b.likeDB, "SELECT COUNT(*) FROM comment_like_count WHERE like_count <> 1 OR version <> 3", nil, 0},
		{b.likeDB, "SELECT COUNT(*) FROM outbox WHERE event_type IN ('ARTICLE_UNLIKED', 'COMMENT_UNLIKED')", nil, int64(b.likes)},
		{b.inboxDB, "SELECT COUNT(*) FROM inbox WHERE user_id = ?", u, 0},
		{b.inboxDB, "SELECT COUNT(*) FROM notification WHERE user_id = ?", u, 0},
		{b.inboxDB, "SELECT COUNT(*) FROM like_actor WHERE user_id = ?", u, 0},
		{b.inboxDB, "SELECT COUNT(*) FROM bookmark WHERE user_id = ?", u, 0},
		{b.inboxDB, "SELECT COUNT(*) FROM watch WHERE user_id = ?", u, 0},
		{b.inboxDB, "SELECT COUNT(*) FROM watcher WHERE user_id = ?", u, 0},
	} {
		var n int64
		if err := c.db.QueryRowContext(ctx, c.query, c.args...).Scan(&n); err != nil {
			return err
		}
		if n != c.want {
			return fmt.Errorf("after the departure, %q: %d, want %d", c.query, n, c.want)
		}
	}
	return nil
}

// readExport GETs an export with token and counts the elements of its array, reading it to its end.
func readExport(ctx context.Context, url, token string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return 0, fmt.Errorf("%s: %s", resp.Status, body)
	}
	dec := json.NewDecoder(resp.Body)
	if _, err := dec.Token(); err != nil { // [
		return 0, err
	}
	n := 0
	for dec.More() {
		var row json.RawMessage
		if err := dec.Decode(&row); err != nil {
			return n, err
		}
		n++
	}
	_, err = dec.Token() // ]
	return n, err
}
