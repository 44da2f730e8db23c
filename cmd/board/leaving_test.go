package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/event"
	"board/internal/polltest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// A like service killed with SIGKILL while it removes a departing user's likes leaves nothing half done: each of the
// user's likes is either there with its target's count untouched, or gone with the count one less and its version
// one more (the unlike event's, written in the same transaction). Started again, it is handed USER_DELETED again (its
// offset was not committed) and removes what is left; in the end every like is gone and the like topic tells of
// each removal with the count and version it left.
func TestUserDeletionSurvivesKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	dir := t.TempDir()
	args := append([]string{"user", "like", "--user-addr", "127.0.0.1:0", "--like-addr", "127.0.0.1:0",
		"--relay-poll-interval", "200ms", "--relay-min-age", "200ms"}, testFlags(t, dir)...)
	p := startProcess(t, args...)
	ctx := context.Background()
	var db *sqldb.DB
	var err error
	if os.Getenv(sqldbtest.MySQLDSNEnv) != "" {
		db, err = sqldb.OpenMySQL(ctx, sqldbtest.DSN(t, flagValue(args, "--mysql-db-prefix")+"article_like"), 4)
	} else {
		db, err = sqldb.OpenSQLite(filepath.Join(dir, "sqlite", "article_like.db"))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	// The leaver (7) and another user (8) like 2,000 articles and 2,000 comments of article 9,999: counts 2, version 2.
	const leaver, other, host, perKind = 7, 8, 9999, 2000
	var rows []string
	var exist, likes, counts, cexist, clikes, ccounts []string
	exist = append(exist, fmt.Sprintf("(%d, FALSE, 1)", host))
	id := 1
	for i := 1; i <= perKind; i++ {
		exist = append(exist, fmt.Sprintf("(%d, FALSE, 1)", i))
		likes = append(likes, fmt.Sprintf("(%d, %d, %d, '2026-01-02 03:04:05')", id, i, leaver), fmt.Sprintf("(%d, %d, %d, '2026-01-02 03:04:05')", id+1, i, other))
		counts = append(counts, fmt.Sprintf("(%d, 2, 2)", i))
		c := 100000 + i
		cexist = append(cexist, fmt.Sprintf("(%d, %d, FALSE)", c, host))
		clikes = append(clikes, fmt.Sprintf("(%d, %d, %d, %d, '2026-01-02 03:04:05')", id+2, host, c, leaver),
			fmt.Sprintf("(%d, %d, %d, %d, '2026-01-02 03:04:05')", id+3, host, c, other))
		ccounts = append(ccounts, fmt.Sprintf("(%d, %d, 2, 2)", c, host))
		id += 4
	}
	for _, load := range []struct {
		table string
		rows  []string
	}{
		{"article_existence (article_id, deleted, article_version)", exist},
		{"article_like (article_like_id, article_id, user_id, created_at)", likes},
		{"article_like_count (article_id, like_count, version)", counts},
		{"comment_existence (comment_id, article_id, deleted)", cexist},
		{"comment_like (comment_like_id, article_id, comment_id, user_id, created_at)", clikes},
		{"comment_like_count (comment_id, article_id, like_count, version)", ccounts},
	} {
		for rows = load.rows; len(rows) > 0; rows = rows[min(len(rows), 500):] {
			if _, err := db.ExecContext(ctx, "INSERT /*vt+ MULTI_SHARD_AUTOCOMMIT=1 */ INTO "+load.table+" VALUES "+strings.Join(rows[:min(len(rows), 500)], ", ")); err != nil {
				t.Fatal(err)
			}
		}
	}
	left := func() int64 {
		var a, c int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM article_like WHERE user_id = ?", leaver).Scan(&a); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM comment_like WHERE user_id = ?", leaver).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return a + c
	}
	// Nothing half done: a target the leaver still likes counts 2 at version 2, one they no longer like 1 at 3. Read
	// whole and compared here, in plain queries that vtgate takes across shards.
	ids := func(q string, args ...any) map[int64]bool {
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out[id] = true
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	whole := func(when string) {
		for _, kind := range []struct{ target, likes, counts string }{
			{"article_id", "article_like", "article_like_count"}, {"comment_id", "comment_like", "comment_like_count"},
		} {
			liked := ids("SELECT "+kind.target+" FROM "+kind.likes+" WHERE user_id = ?", leaver)
			rows, err := db.QueryContext(ctx, "SELECT "+kind.target+", like_count, version FROM "+kind.counts)
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for rows.Next() {
				var id, count, version int64
				if err := rows.Scan(&id, &count, &version); err != nil {
					t.Fatal(err)
				}
				if liked[id] && (count != 2 || version != 2) || !liked[id] && (count != 1 || version != 3) {
					bad++
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			rows.Close()
			if bad != 0 {
				t.Errorf("%s: %d %s targets half done", when, bad, kind.likes)
			}
		}
	}

	// USER_DELETED, as the user service's relay publishes it.
	topicPrefix := app.Default().TopicPrefix
	payload, err := json.Marshal(event.UserDeletion{UserID: leaver, Content: event.DeleteRemove, TokenEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	value, err := event.Encode(1, event.UserDeleted, payload)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.logs.kafkaAddrs()...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = cl.ProduceSync(pctx, &kgo.Record{Topic: event.UserDeleted.Topic(topicPrefix), Key: []byte(strconv.Itoa(leaver)), Value: value}).FirstErr()
	cancel()
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}

	// Killed once a batch or more is done, and before the last.
	total := int64(2 * perKind)
	deadline := time.Now().Add(2 * time.Minute)
	var at int64
	for at = left(); at == total; at = left() {
		if time.Now().After(deadline) {
			t.Fatalf("no like removed in 2 minutes\n%s", p.logs)
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait()
	waitGone(t, p.redisPid)
	killedAt := left()
	t.Logf("killed with %d of %d likes left (%d when seen moving)", killedAt, total, at)
	if killedAt == 0 {
		t.Skip("the handler finished before the kill: nothing to resume") // a machine far faster than this test expects
	}
	whole("after the kill")

	p = startProcess(t, args...)
	for deadline = time.Now().Add(2 * time.Minute); left() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d likes still left 2 minutes after the restart\n%s", left(), p.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	whole("at the end")

	// The like topic tells of every removal, with the count and version it left (at least once: a kill may have
	// come between a publish and the deletion of its outbox row).
	unliked := map[string]bool{}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(p.logs.kafkaAddrs()...), kgo.ConsumeTopics(topicPrefix+"like"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for deadline = time.Now().Add(time.Minute); int64(len(unliked)) < total && time.Now().Before(deadline); {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fetches := consumer.PollFetches(fctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			env, err := event.Decode(r.Value)
			if err != nil {
				t.Errorf("record %s: %v", r.Value, err)
				return
			}
			var p struct {
				ArticleID, CommentID                             apijson.ID
				UserID                                           apijson.ID
				ArticleLikeCount, CommentLikeCount               int64
				ArticleLikeCountVersion, CommentLikeCountVersion int64
			}
			if err := json.Unmarshal(env.Payload, &p); err != nil {
				t.Errorf("payload %s: %v", env.Payload, err)
				return
			}
			switch {
			case env.Type == event.ArticleUnliked && p.ArticleLikeCount == 1 && p.ArticleLikeCountVersion == 3:
				unliked[fmt.Sprint("a", p.ArticleID)] = true
			case env.Type == event.CommentUnliked && p.CommentLikeCount == 1 && p.CommentLikeCountVersion == 3:
				unliked[fmt.Sprint("c", p.CommentID)] = true
			case env.Type == event.ArticleUnliked || env.Type == event.CommentUnliked:
				t.Errorf("%s %s: not the count and version the removal left", env.Type, env.Payload)
			}
		})
	}
	if int64(len(unliked)) != total {
		t.Errorf("the like topic tells of %d removals, want %d", len(unliked), total)
	}
}

// The leaving suite (issue 41 item 5, SPEC §3.14, docs/identity.md "Leaving"): a user's export, through every
// service's part, and the deletion of their account with content=remove, which the article and comment services act
// on from USER_DELETED, and which holds the username for --username-grace.

// usernameGrace is short, so that the suite sees a name held and then freed.
const usernameGrace = 4 * time.Second

func TestLeaving(t *testing.T) {
	t.Parallel()
	p := startProgram(t, append(testFlags(t, t.TempDir()), "--username-grace", usernameGrace.String()))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the board's log:\n%s", p.logs)
		}
	})
	leaver := newFollower(t, p, "lv_leaver")
	stayer := newFollower(t, p, "lv_stayer")
	theirs := stayer.article(t, p, 51, "a stayer's", "stays")
	mine := []string{leaver.article(t, p, 51, "first", "one"), leaver.article(t, p, 52, "second", "two")}
	onTheirs := leaver.comment(t, p, theirs, "the leaver's comment", "")
	onMine := leaver.comment(t, p, mine[0], "on my own", "")
	for _, a := range []authAnswer{
		leaver.send(t, "POST", p.urls["like"]+"/v1/article-likes/articles/"+theirs+"/users/"+leaver.idStr, nil),
		leaver.send(t, "PUT", p.urls["notification"]+"/v1/bookmarks/article/"+theirs, nil),
	} {
		if a.status/100 != 2 {
			t.Fatalf("a like or bookmark: %d %s", a.status, a.body)
		}
	}

	// The parts of the services this branch has: each the user's own rows, newest first.
	var articles []struct{ ArticleID, BoardID, Title, Content, CreatedAt, ModifiedAt string }
	leaver.must(t, http.StatusOK, "GET", p.urls["article"]+"/v1/exports/articles", nil, &articles)
	if len(articles) != 2 || articles[0].ArticleID != mine[1] || articles[1].ArticleID != mine[0] || articles[0].Title != "second" {
		t.Errorf("exported articles = %+v, want %v newest first", articles, mine)
	}
	var comments []struct{ CommentID, ArticleID, Path, Content string }
	leaver.must(t, http.StatusOK, "GET", p.urls["comment"]+"/v1/exports/comments", nil, &comments)
	if len(comments) != 2 || comments[0].CommentID != onMine.CommentID || comments[1].CommentID != onTheirs.CommentID {
		t.Errorf("exported comments = %+v, want %s and %s", comments, onMine.CommentID, onTheirs.CommentID)
	}

	// The archive: every part, each from its service.
	{
		var archive map[string]json.RawMessage
		leaver.must(t, http.StatusOK, "GET", p.urls["user"]+"/v1/users/me/export", nil, &archive)
		var profile struct{ UserID, Username string }
		if err := json.Unmarshal(archive["profile"], &profile); err != nil || profile.UserID != leaver.idStr || profile.Username != leaver.name {
			t.Errorf("profile = %s", archive["profile"])
		}
		counts := map[string]int{"articles": 2, "comments": 2, "likes": 1, "bookmarks": 1}
		for _, part := range []string{"articles", "comments", "likes", "bookmarks", "notifications", "watches", "blocks"} {
			var rows []map[string]any
			if err := json.Unmarshal(archive[part], &rows); err != nil {
				t.Errorf("%s = %s: %v", part, archive[part], err)
			} else if want, ok := counts[part]; ok && len(rows) != want {
				t.Errorf("%s = %s, want %d rows", part, archive[part], want)
			}
		}
	}

	// Leaving, with what they wrote.
	wantError(t, "a deletion with the wrong password", leaver.send(t, "DELETE", p.urls["user"]+"/v1/users/me",
		map[string]any{"password": "not it", "content": "remove"}), http.StatusUnauthorized, "BAD_CREDENTIALS")
	deleted := time.Now()
	leaver.must(t, http.StatusAccepted, "DELETE", p.urls["user"]+"/v1/users/me",
		map[string]any{"password": leaver.name + "-password", "content": "remove"}, nil)
	// The name is held: a sign-up for it within the grace is refused (checked only while the grace surely lasts).
	a := sendAs(t, "", "POST", p.urls["user"]+"/v1/users", map[string]any{"username": leaver.name, "password": "another-password"})
	if time.Since(deleted) < usernameGrace {
		wantError(t, "a sign-up for a deleted user's name within the grace", a, http.StatusConflict, "USERNAME_TAKEN")
	}

	isDeletion := func(env event.Envelope) bool {
		d, err := event.Payload[event.UserDeletion](env)
		return err == nil && env.Type == event.UserDeleted && int64(d.UserID) == leaver.id && d.Content == event.DeleteRemove
	}
	rec := findRecord(t, p, "board-session", isDeletion)
	handledBy(t, p, "article", rec)
	handledBy(t, p, "comment", rec)
	for _, id := range mine {
		wantError(t, "a deleted user's article", sendAs(t, "", "GET", p.urls["article"]+"/v1/articles/"+id, nil),
			http.StatusNotFound, "ARTICLE_NOT_FOUND")
	}
	wantError(t, "a deleted user's comment", sendAs(t, "", "GET", p.urls["comment"]+"/v2/comments/"+onTheirs.CommentID, nil),
		http.StatusNotFound, "COMMENT_NOT_FOUND")
	if a := sendAs(t, "", "GET", p.urls["article"]+"/v1/articles/"+theirs, nil); a.status != http.StatusOK {
		t.Errorf("another's article after the deletion: %d %s", a.status, a.body)
	}
	var u struct {
		UserID, Username string
		Deleted          bool
	}
	stayer.must(t, http.StatusOK, "GET", p.urls["user"]+"/v1/users/"+leaver.idStr, nil, &u)
	if u.Username != "[deleted]" || !u.Deleted {
		t.Errorf("a deleted user reads as %+v", u)
	}
	if a := sendAs(t, "", "POST", p.urls["user"]+"/v1/tokens", map[string]any{"username": leaver.name, "password": leaver.name + "-password"}); a.status != http.StatusUnauthorized {
		t.Errorf("sign-in of a deleted user: %d %s, want 401", a.status, a.body)
	}
	// The user's token is refused everywhere once each process has read USER_DELETED (internal/standing).
	polltest.Until(t, 30*time.Second, func() (bool, string) {
		a := leaver.send(t, "GET", p.urls["article"]+"/v1/exports/articles", nil)
		return a.status == http.StatusUnauthorized, fmt.Sprintf("a deleted user's token: %d %s", a.status, a.body)
	})
	wantError(t, "a write with a deleted user's token", leaver.send(t, "POST", p.urls["article"]+"/v1/articles",
		map[string]any{"title": "t", "content": "c", "boardId": 51}), http.StatusUnauthorized, "UNAUTHENTICATED")

	// After the grace the name is free for someone new.
	time.Sleep(time.Until(deleted.Add(usernameGrace + 100*time.Millisecond)))
	if a.status != http.StatusCreated {
		a = sendAs(t, "", "POST", p.urls["user"]+"/v1/users", map[string]any{"username": leaver.name, "password": "another-password"})
	}
	var fresh struct{ UserID string }
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &fresh) != nil || fresh.UserID == leaver.idStr {
		t.Errorf("a sign-up for the name after the grace: %d %s", a.status, a.body)
	}
}
