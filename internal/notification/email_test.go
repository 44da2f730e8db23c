package notification

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/sqldb"
)

const publicURL = "https://board.example"

// statements counts the calls of the SQLite function test_count_statement.
var statements atomic.Int64

func init() {
	sqlite.MustRegisterDeterministicScalarFunction("test_count_statement", 0, func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) {
		return statements.Add(1), nil
	})
}

// clock is the tests' injected clock.
type clock struct{ now atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.now.Store(t.UnixNano())
	return c
}

func (c *clock) Now() time.Time               { return time.Unix(0, c.now.Load()).UTC() }
func (c *clock) advance(d time.Duration)      { c.now.Add(int64(d)) }
func addressOf(user int64) string             { return fmt.Sprintf("u%d@example.org", user) }
func emailConfig(c *clock, cfg Config) Config { cfg.PublicURL, cfg.Now = publicURL, c.Now; return cfg }

// setEmail PUTs user's e-mail preference, as a client that sends every field.
func (f *fixture) setEmail(user int64, mode string) {
	f.t.Helper()
	httpiotest.WantStatus(f.t, f.call(user, "PUT", "/v1/notification-preferences",
		`{"reply":true,"commentReply":true,"like":true,"moderation":true,"autoWatch":false,"email":"`+mode+`"}`), http.StatusOK)
}

// verified delivers USER_EMAIL_VERIFIED of user's address at version.
func (f *fixture) verified(user int64, email string, version int64) {
	f.t.Helper()
	f.deliver(event.UserEmailVerified, event.EmailVerified{UserID: apijson.ID(user), Email: email, EmailVersion: version, At: apijson.Time(t0)})
}

// sentMail is a MAIL_REQUESTED row of the outbox.
type sentMail struct {
	key int64 // the row's key: its shard
	event.Mail
}

// mails returns the MAIL_REQUESTED rows of the service's outbox, oldest first.
func (f *fixture) mails() []sentMail {
	f.t.Helper()
	rows, err := f.svc.db.QueryContext(context.Background(), "SELECT record_key, payload FROM outbox WHERE event_type = ? ORDER BY outbox_id", string(event.MailRequested))
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []sentMail
	for rows.Next() {
		var m sentMail
		var payload string
		if err := rows.Scan(&m.key, &payload); err != nil {
			f.t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(payload), &m.Mail); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// mailsTo returns the mails to user.
func (f *fixture) mailsTo(user int64) []sentMail {
	var out []sentMail
	for _, m := range f.mails() {
		if int64(m.UserID) == user {
			out = append(out, m)
		}
	}
	return out
}

// tokenOf is the unsubscribe token of a mail.
func tokenOf(t testing.TB, m sentMail) string {
	t.Helper()
	token, ok := strings.CutPrefix(m.Unsubscribe, publicURL+"/unsubscribe/")
	if !ok || !strings.Contains(m.Text, "unsubscribe: "+m.Unsubscribe) {
		t.Fatalf("mail without its unsubscribe link: %+v", m)
	}
	return token
}

// TestImmediateMail: a notification of a user who wants mail at once, and has a verified address, is mailed in the
// transaction that writes it, once however often its event comes; nobody else is mailed.
func TestImmediateMail(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		const noAddress, off, muting, blocking = 201, 202, 203, 204
		f := newFixture(t, db, b, emailConfig(newClock(t0), Config{Blocks: blocker{{blocking, replier}: true}}))
		f.noAutoWatch(author, replier)
		for _, u := range []int64{author, noAddress, muting, blocking} {
			f.setEmail(u, EmailImmediate)
		}
		for _, u := range []int64{author, off, muting, blocking} {
			f.verified(u, addressOf(u), 1)
		}
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		for _, u := range []int64{noAddress, off, muting, blocking} {
			f.watch(u, "article/"+idStr(a1), "watching")
		}
		f.watch(muting, "article/"+idStr(a1), "muted")
		if got := f.mails(); len(got) != 0 {
			t.Fatalf("the author's own article: %+v", got)
		}

		env := f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		for range 2 { // delivered again: the inbox's dedupe key covers the mail too
			if err := f.handle(env); err != nil {
				t.Fatal(err)
			}
		}
		got := f.mails()
		if len(got) != 1 {
			t.Fatalf("mails %+v, want one, to the author", got)
		}
		m := got[0]
		if int64(m.UserID) != author || m.key != author || m.To != addressOf(author) || m.Kind != event.MailNotification ||
			m.Subject != `New comment on your article "One"` || !strings.Contains(m.Text, publicURL+"/articles/"+idStr(a1)+"#c-"+idStr(c(1))) {
			t.Errorf("mail %+v", m)
		}
		tokenOf(t, m)
		for _, u := range []int64{noAddress, off, blocking, muting} {
			if u != blocking && u != muting && len(f.kinds(u)) != 1 {
				t.Errorf("user %d was not told: the test proves nothing of them", u)
			}
		}

		// A like group is mailed when it starts, not for each like that joins it; a moderator's act is mailed too.
		f.deliver(event.ArticleLiked, likeEvent(a1, replier))
		f.deliver(event.ArticleLiked, likeEvent(a1, other))
		f.deliver(event.ArticleModerated, event.ArticleModeration{ArticleID: a1, BoardID: 1, WriterID: author,
			Action: event.ActionLock, Reason: "off topic", ModeratorID: mod, ModeratedAt: apijson.Time(t0)})
		var subjects []string
		for _, m := range f.mailsTo(author) {
			subjects = append(subjects, m.Subject)
		}
		want := []string{`New comment on your article "One"`, `Your article "One" was liked`,
			`A moderator's action (lock) on your article "One": off topic`}
		if !slices.Equal(subjects, want) {
			t.Errorf("subjects %q, want %q", subjects, want)
		}
	})
}

// TestMailInTheInboxTransaction: a mail that cannot be written takes the inbox write back with it, and the event's
// redelivery then writes both.
func TestMailInTheInboxTransaction(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, emailConfig(newClock(t0), Config{}))
		f.noAutoWatch(author, replier)
		f.setEmail(author, EmailImmediate)
		f.verified(author, addressOf(author), 1)
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		ctx := context.Background()
		if _, err := db.ExecContext(ctx, "ALTER TABLE outbox RENAME TO outbox_away"); err != nil {
			t.Fatal(err)
		}
		env := envelope(t, event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		if err := f.handle(env); err == nil {
			t.Fatal("the comment was handled without its mail")
		}
		if got := f.kinds(author); len(got) != 0 {
			t.Fatalf("the inbox has %v without its mail", got)
		}
		if _, err := db.ExecContext(ctx, "ALTER TABLE outbox_away RENAME TO outbox"); err != nil {
			t.Fatal(err)
		}
		if err := f.handle(env); err != nil {
			t.Fatal(err)
		}
		if got, mails := f.kinds(author), f.mails(); len(got) != 1 || len(mails) != 1 {
			t.Fatalf("after the redelivery: inbox %v, mails %+v", got, mails)
		}
	})
}

// TestFanoutMail: 1,000 watchers of a board, half of them mailed at once, in batches of 500 inboxes: exactly 500
// mails, each to its user, keyed by the user (its shard), and none more when the event comes again.
func TestFanoutMail(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, emailConfig(newClock(t0), Config{}))
		const watchers = 1000
		ctx := context.Background()
		// Inboxes, watches and addresses written straight to the tables: a thousand PUTs would only slow the test.
		var inboxes, watches, watcherRows, addresses []any
		for i := range int64(watchers) {
			u := 5000 + i
			mode := EmailOff
			if i%2 == 0 {
				mode = EmailImmediate
			}
			inboxes = append(inboxes, u, mode)
			watches = append(watches, u, TargetBoard, LevelWatching, u, t0)
			watcherRows = append(watcherRows, TargetBoard, u)
			addresses = append(addresses, u, addressOf(u))
		}
		for _, q := range []struct {
			sql, row string
			args     []any
		}{
			{"INSERT INTO inbox (user_id, email_mode) VALUES ", "(?, ?)", inboxes},
			{"INSERT INTO watch (user_id, target_type, target_id, level, watch_id, created_at) VALUES ", "(?, ?, 9, ?, ?, ?)", watches},
			{"INSERT INTO watcher (target_id, target_type, user_id) VALUES ", "(9, ?, ?)", watcherRows},
			{"INSERT INTO email_address (user_id, email, email_version) VALUES ", "(?, ?, 1)", addresses},
		} {
			if _, err := db.ExecContext(ctx, q.sql+strings.TrimSuffix(strings.Repeat(q.row+", ", watchers), ", "), q.args...); err != nil {
				t.Fatal(err)
			}
		}
		f.noAutoWatch(author)
		if db.Dialect == sqldb.SQLite {
			// Each statement that reads the addresses counts once (a deterministic function of no argument is
			// evaluated once per statement).
			for _, q := range []string{"ALTER TABLE email_address RENAME TO email_address_rows",
				"CREATE VIEW email_address AS SELECT * FROM email_address_rows WHERE test_count_statement() > 0"} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
		}
		statements.Store(0)
		env := f.deliver(event.ArticleCreated, articleOn(a1, author, 9, ""))
		if err := f.handle(env); err != nil {
			t.Fatal(err)
		}
		if n := statements.Load(); db.Dialect == sqldb.SQLite && n != watchers/DefaultFanoutBatch {
			t.Errorf("the addresses were read by %d statements, want one per batch of %d inboxes: %d", n, DefaultFanoutBatch, watchers/DefaultFanoutBatch)
		}
		mails := f.mails()
		if len(mails) != watchers/2 {
			t.Fatalf("%d mails, want %d", len(mails), watchers/2)
		}
		seen := map[int64]bool{}
		for _, m := range mails {
			u := int64(m.UserID)
			if (u-5000)%2 != 0 || seen[u] || m.key != u || m.To != addressOf(u) || m.Subject != `New article on a board you watch: "T"` {
				t.Fatalf("mail %+v", m)
			}
			seen[u] = true
		}
	})
}

// TestEmailVersion: only a newer emailVersion replaces the address, whichever order the records come in.
func TestEmailVersion(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, emailConfig(newClock(t0), Config{}))
		f.noAutoWatch(author, replier)
		f.setEmail(author, EmailImmediate)
		f.verified(author, "new@example.org", 2)
		f.verified(author, "old@example.org", 1)
		f.verified(author, "older@example.org", 2) // the same version again changes nothing either
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		f.verified(author, " Newest@Example.org ", 3)
		f.deliver(event.CommentCreated, commentV2(c(2), a1, replier, "00001"))
		var to []string
		for _, m := range f.mails() {
			to = append(to, m.To)
		}
		if want := []string{"new@example.org", "newest@example.org"}; !slices.Equal(to, want) {
			t.Errorf("mailed %v, want %v", to, want)
		}
	})
}

// TestEmailPreference: email is off by default, takes off, immediate and daily only, and a client that does not
// send it (one older than it) leaves it as it is.
func TestEmailPreference(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, emailConfig(newClock(t0), Config{}))
		email := func() string {
			var p Preferences
			decode(t, f.call(author, "GET", "/v1/notification-preferences", "").Body, &p)
			return p.Email
		}
		if got := email(); got != EmailOff {
			t.Errorf("default email %q", got)
		}
		f.setEmail(author, EmailDaily)
		httpiotest.WantStatus(t, f.call(author, "PUT", "/v1/notification-preferences", `{"reply":true,"commentReply":true,"like":false,"moderation":true}`), http.StatusOK)
		if got := email(); got != EmailDaily {
			t.Errorf("email %q after a PUT without it, want daily", got)
		}
		for _, bad := range []string{`"weekly"`, `""`, `true`} {
			r := f.call(author, "PUT", "/v1/notification-preferences", `{"reply":true,"commentReply":true,"like":true,"moderation":true,"email":`+bad+`}`)
			if r.Status != http.StatusBadRequest {
				t.Errorf("email %s: %d %s", bad, r.Status, r.Body)
			}
		}
		httpiotest.WantError(t, f.call(author, "PUT", "/v1/notification-preferences", `{"reply":true,"commentReply":true,"like":true,"moderation":true,"email":"weekly"}`),
			http.StatusBadRequest, "INVALID_EMAIL_PREFERENCE")
	})
}

// TestUnsubscribe: a mail's link turns the user's e-mail off, without a token, again without harm; a token that is
// not a mail's is refused, and one of a user's mails does nothing to another user's.
func TestUnsubscribe(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, emailConfig(newClock(t0), Config{}))
		f.noAutoWatch(author, replier, other)
		for _, u := range []int64{author, other} {
			f.setEmail(u, EmailImmediate)
			f.verified(u, addressOf(u), 1)
		}
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		mails := f.mailsTo(author)
		if len(mails) != 1 {
			t.Fatalf("mails %+v", mails)
		}
		token := tokenOf(t, mails[0])
		user, secret, _ := strings.Cut(token, ".")

		httpiotest.WantError(t, f.call(0, "POST", "/v1/email-unsubscribe/"+idStr(other)+"."+secret, ""), http.StatusNotFound, "UNSUBSCRIBE_TOKEN_NOT_FOUND")
		httpiotest.WantError(t, f.call(0, "POST", "/v1/email-unsubscribe/"+user+"."+strings.Repeat("A", 43), ""), http.StatusNotFound, "UNSUBSCRIBE_TOKEN_NOT_FOUND")
		for _, bad := range []string{"nonsense", user + ".", "x." + secret, user + "." + secret[:20], user + "." + secret + "AA"} {
			httpiotest.WantError(t, f.call(0, "POST", "/v1/email-unsubscribe/"+bad, ""), http.StatusBadRequest, "INVALID_TOKEN")
		}
		for range 2 {
			httpiotest.WantStatus(t, f.call(0, "POST", "/v1/email-unsubscribe/"+token, ""), http.StatusNoContent)
		}
		var p Preferences
		decode(t, f.call(author, "GET", "/v1/notification-preferences", "").Body, &p)
		if p.Email != EmailOff || !p.Reply {
			t.Errorf("preferences after the unsubscribe: %+v", p)
		}
		f.deliver(event.CommentCreated, commentV2(c(2), a1, other, "00001"))
		if got := f.mailsTo(author); len(got) != 1 {
			t.Errorf("mailed after the unsubscribe: %+v", got)
		}
		decode(t, f.call(other, "GET", "/v1/notification-preferences", "").Body, &p)
		if p.Email != EmailImmediate {
			t.Errorf("another user's email %q after the unsubscribe", p.Email)
		}
	})
}

// TestDigest: a user on the daily digest gets one mail a day, of the unread notifications that came since the last
// one, twenty listed and the rest counted; nothing when there is nothing new or all of it was read.
func TestDigest(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		clk := newClock(t0.Add(time.Hour))
		f := newFixture(t, db, b, emailConfig(clk, Config{}))
		f.noAutoWatch(author, replier)
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		f.deliver(event.CommentCreated, commentV2(c(500), a1, replier, "00500")) // before the digests: not news to them
		f.setEmail(author, EmailDaily)
		f.setEmail(replier, EmailDaily) // no address
		f.verified(author, addressOf(author), 1)
		for i := range int64(25) {
			f.deliver(event.CommentCreated, commentV2(c(i), a1, replier, fmt.Sprintf("%05d", i)))
		}
		if len(f.mails()) != 0 {
			t.Fatal("a daily user was mailed at once")
		}
		digests := func() int {
			t.Helper()
			n, err := f.svc.sendDigests(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := digests(); n != 1 {
			t.Fatalf("%d digests, want 1", n)
		}
		m := f.mails()[0]
		if m.Kind != event.MailDigest || m.To != addressOf(author) || m.Subject != "25 new notifications" ||
			strings.Count(m.Text, "- New comment on your article \"One\"") != 20 || !strings.Contains(m.Text, "and 5 more: "+publicURL+"/notifications") {
			t.Errorf("digest %+v", m)
		}
		tokenOf(t, m)
		f.deliver(event.CommentCreated, commentV2(c(100), a1, replier, "00100"))
		clk.advance(23 * time.Hour)
		if n := digests(); n != 0 {
			t.Fatalf("%d digests within the day", n)
		}
		clk.advance(time.Hour)
		if n := digests(); n != 1 {
			t.Fatalf("%d digests a day on, want 1", n)
		}
		if m := f.mails()[1]; m.Subject != "1 new notification" || !strings.Contains(m.Text, "#c-"+idStr(c(100))) {
			t.Errorf("second digest %+v", m)
		}
		// Something new, but read before the digest is due: nothing to send.
		f.deliver(event.CommentCreated, commentV2(c(101), a1, replier, "00101"))
		httpiotest.WantStatus(t, f.call(author, "POST", "/v1/notifications/read-all", ""), http.StatusNoContent)
		clk.advance(25 * time.Hour)
		if n := digests(); n != 0 {
			t.Fatalf("%d digests of read notifications", n)
		}
		var pending int
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM email_address WHERE digest_pending = TRUE").Scan(&pending); err != nil || pending != 0 {
			t.Errorf("%d users left pending (%v)", pending, err)
		}
	})
}

// TestDigestRace: two instances that look for digests at the same time send each user's once.
func TestDigestRace(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		clk := newClock(t0.Add(time.Hour))
		one := newFixture(t, db, b, emailConfig(clk, Config{}))
		two := newFixture(t, db, b, emailConfig(clk, Config{}))
		const users = 150 // more than a batch
		ctx := context.Background()
		for i := range int64(users) {
			u := 7000 + i
			for _, q := range []string{"INSERT INTO inbox (user_id, email_mode) VALUES (?, 'daily')",
				"INSERT INTO email_address (user_id, email, email_version) VALUES (?, 'x@example.org', 1)"} {
				if _, err := db.ExecContext(ctx, q, u); err != nil {
					t.Fatal(err)
				}
			}
		}
		rs := newRecipients(author)
		rs.add(Mention, userRange(7000, users)...)
		if err := one.svc.deliver(ctx, post{key: articleKey(a1), n: Notification{ArticleID: a1, ArticleTitle: "T",
			ActorIDs: []int64{author}, CreatedAt: t0, UpdatedAt: t0}}, rs.list()); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var sent atomic.Int64
		for range 3 {
			for _, f := range []*fixture{one, two} {
				wg.Go(func() {
					n, err := f.svc.sendDigests(ctx)
					if err != nil {
						t.Error(err)
					}
					sent.Add(int64(n))
				})
			}
		}
		wg.Wait()
		if got := len(one.mails()); got != users || sent.Load() != users {
			t.Errorf("%d digests written (%d said), want %d", got, sent.Load(), users)
		}
	})
}

func userRange(from int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

// TestRunDigests: the worker looks at once when it starts, and then every DigestEvery.
func TestRunDigests(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		clk := newClock(t0.Add(time.Hour))
		f := newFixture(t, db, b, emailConfig(clk, Config{DigestEvery: 20 * time.Millisecond}))
		f.noAutoWatch(author, replier)
		f.setEmail(author, EmailDaily)
		f.verified(author, addressOf(author), 1)
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.svc.RunDigests(ctx)
		}()
		defer func() {
			cancel()
			<-done
		}()
		wantMails := func(n int) {
			t.Helper()
			for deadline := time.Now().Add(10 * time.Second); len(f.mails()) != n; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d mails, want %d", len(f.mails()), n)
				}
			}
		}
		wantMails(1)
		f.deliver(event.CommentCreated, commentV2(c(2), a1, replier, "00001"))
		clk.advance(digestPeriod)
		wantMails(2)
	})
}

// TestMailSubjectIsOneLine: a title cannot add lines (headers) to a mail.
func TestMailSubjectIsOneLine(t *testing.T) {
	t.Parallel()
	got := subjectOf(Notification{Kind: Mention, ArticleTitle: "Hi\r\nBcc: everyone@example.org"})
	if want := `You were mentioned in "Hi  Bcc: everyone@example.org"`; got != want {
		t.Errorf("subject %q, want %q", got, want)
	}
}

// TestDigestsDueByIndex: the worker's read of the digests due walks idx_digest_due over the pending users only, so
// that users with nothing to send cost it nothing.
func TestDigestsDueByIndex(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		ctx := context.Background()
		// Many users with nothing to send, a few pending, enough that MariaDB's planner weighs its choices.
		var rows []string
		var args []any
		for i := range int64(2000) {
			rows = append(rows, "(?, 'x@example.org', ?)")
			args = append(args, 9000+i, i%100 == 0)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO email_address (user_id, email, digest_pending) VALUES "+strings.Join(rows, ", "), args...); err != nil {
			t.Fatal(err)
		}
		if db.Dialect == sqldb.MySQL {
			if _, err := db.ExecContext(ctx, "ANALYZE TABLE email_address"); err != nil {
				t.Fatal(err)
			}
		}
		explain := "EXPLAIN "
		if db.Dialect == sqldb.SQLite {
			explain = "EXPLAIN QUERY PLAN "
		}
		res, err := db.QueryContext(ctx, explain+dueQuery, t0, digestBatch)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Close()
		columns, err := res.Columns()
		if err != nil {
			t.Fatal(err)
		}
		var plan []map[string]string
		for res.Next() {
			values := make([]sql.NullString, len(columns))
			dest := make([]any, len(values))
			for i := range values {
				dest[i] = &values[i]
			}
			if err := res.Scan(dest...); err != nil {
				t.Fatal(err)
			}
			row := map[string]string{}
			for i, c := range columns {
				row[c] = values[i].String
			}
			plan = append(plan, row)
		}
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		switch {
		case len(plan) != 1:
			t.Errorf("plan %v, want one step", plan)
		case db.Dialect == sqldb.SQLite && !strings.Contains(plan[0]["detail"], "idx_digest_due (digest_pending=? AND last_digest_at<?)"):
			t.Errorf("plan %v, want a search of idx_digest_due", plan)
		case db.Dialect == sqldb.MySQL && (plan[0]["key"] != "idx_digest_due" || plan[0]["type"] != "range" || strings.Contains(plan[0]["Extra"], "filesort")):
			t.Errorf("plan %v, want a range of idx_digest_due, in its order", plan)
		}
	})
}
