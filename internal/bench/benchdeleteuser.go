package bench

import (
	"bytes"
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
	"board/internal/article"
	"board/internal/comment"
	"board/internal/event"
	"board/internal/existence"
	"board/internal/kafka"
	"board/internal/like"
	"board/internal/notification"
	"board/internal/snowflake"
	"board/internal/sqldb"
	"board/internal/user"
)

func benchDeleteUser(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("bench delete-user", `Usage: board bench delete-user [flags]

Times a user's departure in the article, comment, like and notification services, and the export of that user,
over scratch databases (article_leave_bench, comment_leave_bench, like_leave_bench, notification_leave_bench and
user_leave_bench on the configured SQL engine; emptied first). One user gets --articles articles, --comments
comments (roots spread over articles of others, 100 an article; one in ten answered by another user, so that it
stays as a deleted comment), --likes likes, half of articles and half of comments (each target liked by one other
user too, so that counts stay above zero), and --notifications notifications with half as many bookmarks, watches
(with their index entries) and remembered likers, all bulk-loaded in the services' own schemas. Then:
  1. export: each service's GET /v1/exports/..., over HTTP with the user's token, each read to its end (their sum
     is the floor); then the user service's GET /v1/users/me/export, which streams them all into one archive from
     those services over HTTP, read to its last byte and checked whole; the target is 10 s;
  2. floor: a bare "DELETE ... WHERE writer_id|user_id = ? LIMIT 500" loop over the same rows, no counts, no
     events;
  3. the rows loaded again, USER_DELETED {content: remove} handed to each service's handler as its consumer would
     hand it, all at once, each timed until it returns; then checked: nothing of the user left but the answered
     comments, marked deleted; every count down by what was removed, one deletion or unlike event per item. The
     target is 60 s per service.`, stderr)
	cfg.EngineFlags(fs)
	articles := fs.Int("articles", 100, "the user's articles")
	comments := fs.Int("comments", 10000, "the user's comments")
	likes := fs.Int("likes", 10000, "the user's likes: half of articles, half of comments")
	notifications := fs.Int("notifications", 2000, "the user's notifications; half as many bookmarks, watches and likers")
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *articles < 1 || *comments < 1 || *likes < 2 || *notifications < 2 {
		return errors.New("--articles and --comments must be at least 1, --likes and --notifications at least 2")
	}
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()
	articleDB, articleOB, ids, err := toolDatabase(ctx, e, "article_leave_bench", article.Migrate)
	if err != nil {
		return err
	}
	commentDB, commentOB, _, err := toolDatabase(ctx, e, "comment_leave_bench", comment.Migrate)
	if err != nil {
		return err
	}
	likeDB, ob, _, err := toolDatabase(ctx, e, "like_leave_bench", like.Migrate)
	if err != nil {
		return err
	}
	inboxDB, _, _, err := toolDatabase(ctx, e, "notification_leave_bench", notification.Migrate)
	if err != nil {
		return err
	}
	userDB, _, _, err := toolDatabase(ctx, e, "user_leave_bench", user.Migrate)
	if err != nil {
		return err
	}
	articleSvc := article.NewService(article.NewStore(articleDB, articleOB), ids, time.Now)
	commentSvc := comment.NewService(comment.NewStore(commentDB, commentOB, existence.New(commentDB, existence.Config{Service: "comment"})), ids, time.Now)
	store := like.NewStore(likeDB, ob, existence.New(likeDB, existence.Config{Service: "like"}), like.NewComments(likeDB, "", time.Now))
	likeSvc := like.NewService(store, ids, time.Now, like.DefaultStrategy)
	inbox := notification.New(inboxDB, ids, e.Redis, notification.Config{KeyPrefix: e.Config.RedisPrefix, Logger: e.Logger})
	b := deleteUserBench{articleDB: articleDB, commentDB: commentDB, likeDB: likeDB, inboxDB: inboxDB, userDB: userDB, ids: ids,
		articles: *articles, comments: *comments, likes: *likes, notifications: *notifications}
	if b.user, err = ids.Next(); err != nil {
		return err
	}
	if err := b.load(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "user %d: %d articles, %d comments (%d answered) on %d articles, %d likes (%d of articles, %d of comments), "+
		"%d notifications, %d bookmarks, %d watches, %d likers; %s\n",
		b.user, b.articles, b.comments, b.answered(), len(b.hosts), b.likes, b.likes/2, b.likes-b.likes/2,
		b.notifications, b.notifications/2, b.notifications/2, b.notifications/2, likeDB.Dialect)

	// 1. The exports.
	key, err := newBenchKey()
	if err != nil {
		return err
	}
	token, err := key.token(b.user)
	if err != nil {
		return err
	}
	bases := map[string]string{}
	for _, s := range []struct {
		name    string
		api     *http.ServeMux
		streams map[string]bool
	}{
		{"article", article.Routes(articleSvc, e.Logger), map[string]bool{article.ExportPath: true}},
		{"comment", comment.Routes(commentSvc, e.Logger), map[string]bool{comment.ExportPath: true}},
		{"like", like.Routes(likeSvc, e.Logger), nil},
		{"notification", notification.Routes(inbox, e.Logger), nil},
	} {
		base, stop, err := serveStreams(s.name, s.api, key.guard(), e, s.streams)
		if err != nil {
			return err
		}
		defer stop()
		bases[s.name] = base
	}
	// The user service reads its parts where they listen, with the caller's token, which they trust as it does.
	users, err := user.NewService(ctx, userDB, ids, user.Config{Exports: func(service string) string { return bases[service] }, Logger: e.Logger})
	if err != nil {
		return err
	}
	userBase, stopUser, err := serveStreams("user", user.Routes(users, e.Logger), key.guard(), e, map[string]bool{user.ExportPath: true})
	if err != nil {
		return err
	}
	defer stopUser()
	fmt.Fprintf(stdout, "%-32s %8s %10s\n", "export", "rows", "elapsed")
	var exportTotal time.Duration
	var exportRows int
	for _, x := range []struct{ service, path string }{{"article", "articles"}, {"comment", "comments"}, {"like", "likes"},
		{"notification", "bookmarks"}, {"notification", "notifications"}, {"notification", "watches"}} {
		start := time.Now()
		n, err := readExport(ctx, bases[x.service]+"/v1/exports/"+x.path, token)
		took := time.Since(start)
		if err != nil {
			return fmt.Errorf("export %s: %w", x.path, err)
		}
		exportTotal += took
		exportRows += n
		fmt.Fprintf(stdout, "%-32s %8d %10s\n", "GET /v1/exports/"+x.path, n, took.Round(time.Millisecond))
	}
	fmt.Fprintf(stdout, "%-32s %8d %10s  (floor: the parts, one after another)\n", "all parts", exportRows, exportTotal.Round(time.Millisecond))
	start := time.Now()
	size, rows, err := readArchive(ctx, userBase+user.ExportPath, token)
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if rows != exportRows {
		return fmt.Errorf("the archive holds %d rows, its parts %d", rows, exportRows)
	}
	fmt.Fprintf(stdout, "%-32s %8d %10s  (target 10s; %.1f MB to the last byte, checked whole)\n", "GET /v1/users/me/export", rows,
		took.Round(time.Millisecond), float64(size)/1e6)

	// 2. The floor.
	fmt.Fprintf(stdout, "%-32s %8s %10s\n", "departure", "rows", "elapsed")
	for _, f := range []struct {
		name, column string
		db           *sqldb.DB
		tables       []string
	}{
		{"floor: article", "writer_id", articleDB, []string{"article"}},
		{"floor: comment", "writer_id", commentDB, []string{"comment"}},
		{"floor: like", "user_id", likeDB, []string{"article_like", "comment_like"}},
		{"floor: notification", "user_id", inboxDB, []string{"like_actor", "bookmark", "watch", "notification", "inbox"}},
	} {
		start := time.Now()
		n, err := bareDelete(ctx, f.db, f.column, b.user, f.tables)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		fmt.Fprintf(stdout, "%-32s %8d %10s\n", f.name, n, time.Since(start).Round(time.Millisecond))
	}

	// 3. The departure, from the rows loaded again.
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
		rows    int
		note    string
		handler kafka.Handler
		took    time.Duration
		err     error
	}{
		{name: "article", rows: b.articles, note: "; counts and events checked", handler: articleSvc.Handlers()[event.UserDeleted]},
		{name: "comment", rows: b.comments, note: "; counts and events checked", handler: commentSvc.Handlers()[event.UserDeleted]},
		{name: "like", rows: b.likes, note: "; counts and events checked", handler: store.LeavingHandlers()[event.UserDeleted]},
		{name: "notification", rows: b.notifications + 4*(b.notifications/2) + 1, handler: inbox.LeavingHandlers()[event.UserDeleted]},
	}
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
	for _, s := range services {
		fmt.Fprintf(stdout, "%-32s %8d %10s  (target 60s%s)\n", "USER_DELETED: "+s.name, s.rows, s.took.Round(time.Millisecond), s.note)
	}
	return nil
}

// deleteUserBench is the user whose departure is timed, and the rows loaded for them.
type deleteUserBench struct {
	articleDB, commentDB, likeDB, inboxDB, userDB *sqldb.DB
	ids                                           *snowflake.Generator
	user                                          int64
	articles, comments, likes, notifications      int
	// hosts are the articles of others the user's comments are on.
	hosts []int64
}

// answered is how many of the user's comments another user answered: one in ten.
func (b *deleteUserBench) answered() int { return (b.comments + 9) / 10 }

// The scratch databases' tables, emptied before each load.
var (
	articleTables = []string{"outbox", "article", "board_article_count"}
	commentTables = []string{"outbox", "comment", "article_comment_count", "article_existence"}
	likeTables    = []string{"outbox", "article_like", "article_like_count", "article_existence", "comment_like", "comment_like_count", "comment_existence"}
	inboxTables   = []string{"inbox", "notification", "like_actor", "bookmark", "watch", "watcher"}
	userTables    = []string{"users"}
)

func (b *deleteUserBench) empty(ctx context.Context) error {
	for _, x := range []struct {
		db     *sqldb.DB
		tables []string
	}{{b.articleDB, articleTables}, {b.commentDB, commentTables}, {b.likeDB, likeTables}, {b.inboxDB, inboxTables}, {b.userDB, userTables}} {
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
	const board = 1
	var articles [][]any
	for i := range b.articles {
		articles = append(articles, []any{next(), fmt.Sprintf("article %d", i), "the text of an article of the leaving user", board, b.user, now, now})
	}
	// The user's comments: roots, 100 an article of another user's; one in ten answered by the other user.
	var hostRows, commentRows, counts [][]any
	b.hosts = nil
	perHost := map[int64]int{}
	for i := range b.comments {
		if i%100 == 0 {
			h := next()
			b.hosts = append(b.hosts, h)
			hostRows = append(hostRows, []any{h, false, 1})
		}
		h := b.hosts[len(b.hosts)-1]
		c := next()
		commentRows = append(commentRows, []any{c, fmt.Sprintf("comment %d of the leaving user", i), h, c, b.user, now})
		perHost[h]++
		if i%10 == 0 {
			commentRows = append(commentRows, []any{next(), "an answer", h, c, other, now})
			perHost[h]++
		}
	}
	for _, h := range b.hosts {
		counts = append(counts, []any{h, perHost[h], perHost[h]})
	}
	var exist, alikes, acounts, cexist, clikes, ccounts [][]any
	host := next() // the article whose comments are liked
	exist = append(exist, []any{host, false, 1})
	for i := range b.likes {
		if i < b.likes/2 {
			a := next()
			exist = append(exist, []any{a, false, 1})
			alikes = append(alikes, []any{next(), a, other, now}, []any{next(), a, b.user, now})
			acounts = append(acounts, []any{a, 2, 2})
			continue
		}
		c := next()
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
		{b.userDB, "users", "user_id, username, password_hash, role, created_at", [][]any{{b.user, fmt.Sprintf("leaver%d", b.user%1e9), "", "user", now}}},
		{b.articleDB, "article", "article_id, title, content, board_id, writer_id, created_at, modified_at", articles},
		{b.articleDB, "board_article_count", "board_id, article_count, version", [][]any{{board, b.articles, b.articles}}},
		{b.commentDB, "article_existence", "article_id, deleted, article_version", hostRows},
		{b.commentDB, "comment", "comment_id, content, article_id, parent_comment_id, writer_id, created_at", commentRows},
		{b.commentDB, "article_comment_count", "article_id, comment_count, version", counts},
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

// bareDelete deletes the user's rows of tables (column = user) 500 at a time, each statement on its own: what
// removing them costs with nothing else done. It returns how many rows it deleted.
func bareDelete(ctx context.Context, db *sqldb.DB, column string, user int64, tables []string) (int64, error) {
	var total int64
	for _, table := range tables {
		query := "DELETE FROM " + table + " WHERE " + column + " = ? LIMIT 500"
		if db.Dialect != sqldb.MySQL { // SQLite has no DELETE ... LIMIT unless built with it
			query = "DELETE FROM " + table + " WHERE rowid IN (SELECT rowid FROM " + table + " WHERE " + column + " = ? LIMIT 500)"
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

// checkGone checks that nothing of the user is left but their answered comments, marked deleted; that the board
// counts no article and the comments' articles count the answers and the answered; that every target the user liked
// counts one like (the other user's) at version 3; and that one deletion or unlike event per item was written.
func (b *deleteUserBench) checkGone(ctx context.Context) error {
	u := []any{b.user}
	for _, c := range []struct {
		db    *sqldb.DB
		query string
		args  []any
		want  int64
	}{
		{b.articleDB, "SELECT COUNT(*) FROM article WHERE writer_id = ?", u, 0},
		{b.articleDB, "SELECT COALESCE(SUM(article_count), 0) FROM board_article_count", nil, 0},
		{b.articleDB, "SELECT COUNT(*) FROM outbox WHERE event_type = 'ARTICLE_DELETED'", nil, int64(b.articles)},
		{b.commentDB, "SELECT COUNT(*) FROM comment WHERE writer_id = ? AND deleted = FALSE", u, 0},
		{b.commentDB, "SELECT COUNT(*) FROM comment WHERE writer_id = ?", u, int64(b.answered())},
		{b.commentDB, "SELECT COALESCE(SUM(comment_count), 0) FROM article_comment_count", nil, int64(2 * b.answered())},
		{b.commentDB, "SELECT COUNT(*) FROM outbox WHERE event_type = 'COMMENT_DELETED'", nil, int64(b.comments)},
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

// readArchive GETs the user service's export with token and reads it to its last byte, then checks that it is one
// whole JSON object with every part; it returns its size and how many rows its parts hold.
func readArchive(ctx context.Context, url, token string) (size int64, rows int, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return 0, 0, fmt.Errorf("%s: %s", resp.Status, body)
	}
	var body bytes.Buffer
	if size, err = io.Copy(&body, resp.Body); err != nil {
		return size, 0, err
	}
	var archive map[string]json.RawMessage
	if err := json.Unmarshal(body.Bytes(), &archive); err != nil {
		return size, 0, fmt.Errorf("the archive is not whole: %w", err)
	}
	for _, part := range []string{"articles", "comments", "likes", "bookmarks", "notifications", "watches"} {
		var elems []json.RawMessage
		if err := json.Unmarshal(archive[part], &elems); err != nil {
			return size, 0, fmt.Errorf("the archive's %s: %w", part, err)
		}
		rows += len(elems)
	}
	return size, rows, nil
}
