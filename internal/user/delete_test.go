package user

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/httpio/httpiotest"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// deletionEvents returns the outbox's USER_DELETED payloads, oldest first, checking each is keyed by its user.
func deletionEvents(t *testing.T, db *sqldb.DB) []event.UserDeletion {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT record_key, payload FROM outbox WHERE event_type = ? ORDER BY outbox_id",
		string(event.UserDeleted))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []event.UserDeletion
	for rows.Next() {
		var key int64
		var payload string
		if err := rows.Scan(&key, &payload); err != nil {
			t.Fatal(err)
		}
		d := decode[event.UserDeletion](t, []byte(payload))
		if key != int64(d.UserID) || time.Time(d.At).IsZero() {
			t.Errorf("USER_DELETED keyed %d: %s", key, payload)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeleteAccount checks DELETE /v1/users/me: bad input is 400, a wrong password 401; the deletion writes
// USER_DELETED with a bumped epoch and ends the user's blocks (USER_UNBLOCKED each); the account then reads as a
// deleted user, cannot sign in and is no mention's; its name stays taken for the grace and is free after it.
func TestDeleteAccount(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		clock := snowflaketest.NewClock(t0)
		svc := newTestService(t, db, clock, nil)
		ids := signUps(t, svc, "leaver", "friend", "foe")
		leaver, friend, foe := ids[0], ids[1], ids[2]
		for _, other := range []int64{friend, foe} {
			if _, err := svc.Block(ctx, leaver, other); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := svc.Block(ctx, foe, leaver); err != nil { // blocks of the leaver are others': they stay
			t.Fatal(err)
		}
		h := httpiotest.Handler("user", Routes(svc, httpiotest.Logger))
		me := httpiotest.As(h, leaver)

		for body, code := range map[string]string{
			`{"password":"correct horse","content":"shred"}`: "INVALID_CONTENT",
			`{"password":"correct horse"}`:                   "INVALID_CONTENT",
			`[1]`:                                            "INVALID_JSON",
		} {
			httpiotest.WantError(t, httpiotest.Call(me, "DELETE", "/v1/users/me", body), http.StatusBadRequest, code)
		}
		httpiotest.WantError(t, httpiotest.Call(me, "DELETE", "/v1/users/me", `{"password":"wrong horse","content":"remove"}`),
			http.StatusUnauthorized, "BAD_CREDENTIALS")
		httpiotest.WantError(t, httpiotest.Call(h, "DELETE", "/v1/users/me", `{"password":"correct horse","content":"remove"}`),
			http.StatusUnauthorized, "UNAUTHENTICATED")
		if got := deletionEvents(t, db); len(got) != 0 {
			t.Fatalf("USER_DELETED before any deletion: %+v", got)
		}

		// An identity at a provider, which the deletion unlinks: signing in with it later makes a new account.
		if _, err := db.ExecContext(ctx, "INSERT INTO user_identity (identity_hash, provider, subject, user_id, email, linked_at) VALUES (?, ?, ?, ?, ?, ?)",
			[]byte("0123456789abcdef0123456789abcdef"), "zit", "sub-1", leaver, "leaver@example.org", t0); err != nil {
			t.Fatal(err)
		}
		r := httpiotest.Call(me, "DELETE", "/v1/users/me", `{"password":"correct horse","content":"remove"}`)
		httpiotest.WantStatus(t, r, http.StatusAccepted)
		var identities int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM user_identity WHERE user_id = ?", leaver).Scan(&identities); err != nil || identities != 0 {
			t.Errorf("identities after the deletion: %d, %v; want none", identities, err)
		}
		// The account topic's last record of the user is a blank address, which compaction keeps in place of theirs.
		var blank string
		if err := db.QueryRowContext(ctx, "SELECT payload FROM outbox WHERE event_type = ? AND record_key = ?",
			string(event.UserEmailVerified), leaver).Scan(&blank); err != nil {
			t.Fatalf("no USER_EMAIL_VERIFIED at the deletion: %v", err)
		}
		if e := decode[event.EmailVerified](t, []byte(blank)); e.Email != "" || e.EmailVersion != 1 {
			t.Errorf("USER_EMAIL_VERIFIED at the deletion: %+v, want a blank address at version 1", e)
		}
		got := deletionEvents(t, db)
		if len(got) != 1 || int64(got[0].UserID) != leaver || got[0].Content != event.DeleteRemove || got[0].TokenEpoch != 1 {
			t.Fatalf("USER_DELETED = %+v, want one of user %d, remove, epoch 1", got, leaver)
		}
		if bs, err := svc.Blocks(ctx, leaver); err != nil || len(bs) != 0 {
			t.Errorf("the leaver's blocks after the deletion: %v, %v; want none", bs, err)
		}
		if bs, err := svc.Blocks(ctx, foe); err != nil || len(bs) != 1 || bs[0].Username != DeletedName {
			t.Errorf("a block of the leaver by another: %v, %v; want it kept, naming a deleted user", bs, err)
		}
		wantEvents := []string{
			"USER_BLOCKED " + pair(leaver, friend) + " v1", "USER_BLOCKED " + pair(leaver, foe) + " v1",
			"USER_BLOCKED " + pair(foe, leaver) + " v1",
			"USER_UNBLOCKED " + pair(leaver, friend) + " v2", "USER_UNBLOCKED " + pair(leaver, foe) + " v2",
		}
		if got := blockEvents(t, db); !equalUnordered(got[3:], wantEvents[3:]) || len(got) != len(wantEvents) {
			t.Errorf("block events = %v, want %v", got, wantEvents)
		}

		// Deleted: it reads as such, cannot sign in, and is nobody's mention.
		_, err := svc.SignIn(ctx, "leaver", "correct horse")
		if fe, ok := fault.As(err); !ok || fe.Code != "BAD_CREDENTIALS" {
			t.Errorf("sign-in of a deleted user: %v, want BAD_CREDENTIALS", err)
		}
		id := strconv.FormatInt(leaver, 10)
		r = httpiotest.Call(h, "GET", "/v1/users/"+id, "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if u := httpiotest.DecodeJSON(t, r.Body).(map[string]any); u["username"] != DeletedName || u["deleted"] != true || u["userId"] != id {
			t.Errorf("GET a deleted user = %v", u)
		}
		r = httpiotest.Call(h, "GET", "/v1/users?ids="+id+","+strconv.FormatInt(friend, 10), "")
		if us := httpiotest.DecodeJSON(t, r.Body).([]any); len(us) != 2 || us[0].(map[string]any)["username"] != DeletedName ||
			us[1].(map[string]any)["username"] != "friend" || us[1].(map[string]any)["deleted"] != nil {
			t.Errorf("GET ?ids= with a deleted user = %v", us)
		}
		for _, q := range []string{"usernames=leaver", "prefix=leav"} {
			if r := httpiotest.Call(h, "GET", "/v1/users?"+q, ""); strings.TrimSpace(r.Body) != "[]" {
				t.Errorf("GET ?%s = %s, want no user", q, r.Body)
			}
		}

		// Again: nothing more happens.
		httpiotest.WantStatus(t, httpiotest.Call(me, "DELETE", "/v1/users/me", `{"content":"keep"}`), http.StatusAccepted)
		if got := deletionEvents(t, db); len(got) != 1 {
			t.Errorf("a second deletion wrote USER_DELETED again: %+v", got)
		}

		// The name is taken through the grace, free after it; the old account still reads as deleted.
		clock.Add(DefaultUsernameGrace - time.Second)
		if _, err := svc.SignUp(ctx, "Leaver", "another horse"); fault.KindOf(err) != fault.Conflict {
			t.Errorf("sign-up of a deleted user's name within the grace: %v, want USERNAME_TAKEN", err)
		}
		clock.Add(time.Second)
		u, err := svc.SignUp(ctx, "Leaver", "another horse")
		if err != nil || u.ID == leaver || u.Username != "leaver" {
			t.Fatalf("sign-up after the grace = %+v, %v", u, err)
		}
		if old, err := svc.Get(ctx, leaver); err != nil || !old.Deleted || toJSON(old).Username != DeletedName {
			t.Errorf("the deleted account after its name went: %+v, %v", old, err)
		}
		if _, err := svc.SignIn(ctx, "leaver", "another horse"); err != nil {
			t.Errorf("sign-in of the name's new owner: %v", err)
		}
	})
}

func pair(a, b int64) string { return strconv.FormatInt(a, 10) + ">" + strconv.FormatInt(b, 10) }

func equalUnordered(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}
