package standing

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/compacted/compactedtest"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/polltest"
)

var quiet = slog.New(slog.DiscardHandler)

func ban(user, version int64, banned bool, reason string, until *time.Time) event.Ban {
	b := event.Ban{UserID: apijson.ID(user), Banned: banned, Reason: reason, BanVersion: version}
	if until != nil {
		u := apijson.Time(*until)
		b.Until = &u
	}
	return b
}

// The table applies only newer versions of each user's ban and role, whatever order they come in, and a ban stops
// counting once it has ended.
func TestTable(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	tb := newTable(Config{Now: func() time.Time { return now }})
	if _, _, err := tb.Lookup(1); fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("Lookup before caught up: %v", err)
	}
	if tb.Ready(context.Background()) == nil {
		t.Fatal("ready before caught up")
	}
	tb.setCaughtUp()
	if tb.Ready(context.Background()) != nil {
		t.Fatal("not ready once caught up")
	}

	later := now.Add(time.Hour)
	tb.applyBan(ban(1, 2, true, "spam", &later))
	tb.applyBan(ban(1, 1, false, "", nil)) // older: ignored
	tb.applyBan(ban(1, 2, false, "", nil)) // a duplicate version: ignored
	role, b, err := tb.Lookup(1)
	if err != nil || role != "" || b == nil || b.Reason != "spam" || !b.Until.Equal(later) {
		t.Errorf("Lookup(1) = %q %+v %v", role, b, err)
	}
	tb.applyBan(ban(1, 3, false, "", nil))
	if _, b, _ := tb.Lookup(1); b != nil {
		t.Errorf("unbanned user: %+v", b)
	}

	tb.applyBan(ban(2, 1, true, "abuse", nil)) // for good
	tb.applyRole(2, auth.RoleModerator, 2)
	tb.applyRole(2, auth.RoleUser, 1) // late
	if role, b, _ := tb.Lookup(2); role != auth.RoleModerator || b == nil || b.Until != nil || b.Reason != "abuse" {
		t.Errorf("Lookup(2) = %q %+v", role, b)
	}
	if role, b, err := tb.Lookup(3); role != "" || b != nil || err != nil {
		t.Errorf("unknown user: %q %+v %v", role, b, err)
	}

	// A ban ends at its until.
	now = later
	if _, b, _ := tb.Lookup(1); b != nil {
		t.Errorf("after an unban: %+v", b)
	}
	tb.applyBan(ban(4, 1, true, "flood", &later))
	if _, b, _ := tb.Lookup(4); b != nil {
		t.Errorf("a ban at its end still counts: %+v", b)
	}
	now = later.Add(-time.Millisecond)
	if _, b, _ := tb.Lookup(4); b == nil {
		t.Error("a ban a millisecond before its end does not count")
	}
}

// A user's token epoch only rises, whatever order the records come in; tokens signed below it are void, those at it
// or above are not, and a token without the claim (epoch 0) is void once the user has an epoch. A deletion voids
// every token of the user for good.
func TestSessions(t *testing.T) {
	tb := newTable(Config{})
	token := func(user, epoch int64) auth.Principal {
		return auth.Principal{UserID: user, Role: auth.RoleUser, TokenEpoch: epoch}
	}
	if _, err := tb.Ended(token(1, 0)); fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("Ended before caught up: %v", err)
	}
	tb.setCaughtUp()
	ended := func(p auth.Principal) bool {
		t.Helper()
		e, err := tb.Ended(p)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if ended(token(1, 0)) || ended(token(1, 5)) {
		t.Error("a user of no session event: a token ended")
	}

	tb.applySession(1, 3, false)
	tb.applySession(1, 2, false) // late
	tb.applySession(1, 3, false) // a duplicate
	tb.applySession(1, 1, false) // late
	for epoch, want := range map[int64]bool{0: true, 1: true, 2: true, 3: false, 4: false} {
		if got := ended(token(1, epoch)); got != want {
			t.Errorf("user 1 at epoch 3, a token of epoch %d: ended %v, want %v", epoch, got, want)
		}
	}
	if ended(token(2, 0)) {
		t.Error("another user's token ended")
	}

	// A deletion ends every token, even one minted at or past its epoch; nothing undoes it.
	tb.applySession(1, 4, true)
	tb.applySession(1, 9, false)
	for _, epoch := range []int64{0, 4, 9, 10} {
		if !ended(token(1, epoch)) {
			t.Errorf("a deleted user's token of epoch %d is not ended", epoch)
		}
	}
	tb.applySession(2, 0, true) // a deletion that carries no epoch
	if !ended(token(2, 0)) {
		t.Error("a deleted user's token without an epoch is not ended")
	}
}

func startTable(t *testing.T, brokers []string) *Table {
	t.Helper()
	tb, err := New(Config{Brokers: brokers, TopicPrefix: compactedtest.Prefix, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	compactedtest.Run(t, tb.Run, tb.CaughtUp())
	return tb
}

// A table started after the events reads them from the start, and is caught up only once it has; one that runs
// learns of a ban as it is published. Undecodable records are skipped.
func TestReader(t *testing.T) {
	brokers, producer := compactedtest.Broker(t)
	const prefix = compactedtest.Prefix
	ctx := context.Background()

	// An empty pair of topics: caught up at once.
	empty := startTable(t, brokers)

	var recs []*kgo.Record
	for u := int64(1); u <= 50; u++ {
		recs = append(recs, compactedtest.Record(t, 1000+u, event.UserBanned, u, ban(u, 1, true, "spam", nil)))
	}
	recs = append(recs,
		compactedtest.Record(t, 2001, event.UserUnbanned, 7, ban(7, 2, false, "", nil)),
		compactedtest.Record(t, 2002, event.UserRoleChanged, 60, event.Role{UserID: 60, Role: "moderator", RoleVersion: 1}),
		&kgo.Record{Topic: prefix + "ban", Key: []byte("61"), Value: []byte("not json")},
		compactedtest.Record(t, 2003, event.UserRoleChanged, 60, event.Role{UserID: 60, Role: "admin", RoleVersion: 2}),
	)
	recs = append(recs,
		compactedtest.Record(t, 2004, event.UserPasswordChanged, 70, event.Session{UserID: 70, TokenEpoch: 2, Reason: event.SessionPasswordChanged}),
		compactedtest.Record(t, 2005, event.UserPasswordChanged, 70, event.Session{UserID: 70, TokenEpoch: 1, Reason: event.SessionPasswordReset}),
		compactedtest.Record(t, 2006, event.UserPasswordChanged, 71, event.Session{UserID: 71, Reason: event.SessionsEnded}), // no epoch: skipped
		compactedtest.Record(t, 2007, event.UserDeleted, 72, event.UserDeletion{UserID: 72, Content: event.DeleteKeep, TokenEpoch: 1}),
	)
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 5*time.Second, func() (bool, string) {
		_, b, _ := empty.Lookup(50)
		ended, _ := empty.Ended(auth.Principal{UserID: 72, TokenEpoch: 1})
		return b != nil && ended, "the running table does not see the bans and the deletion"
	})

	late := startTable(t, brokers)
	for _, tb := range []*Table{empty, late} {
		for u := int64(1); u <= 50; u++ {
			_, b, err := tb.Lookup(u)
			if (b == nil) != (u == 7) || err != nil {
				t.Fatalf("user %d: ban %+v, %v", u, b, err)
			}
		}
		if role, _, _ := tb.Lookup(60); role != auth.RoleModerator {
			t.Errorf("user 60's role %q (an unknown role must be skipped)", role)
		}
		for _, c := range []struct {
			p     auth.Principal
			ended bool
		}{{auth.Principal{UserID: 70, TokenEpoch: 1}, true}, {auth.Principal{UserID: 70, TokenEpoch: 2}, false},
			{auth.Principal{UserID: 71}, false}, {auth.Principal{UserID: 72, TokenEpoch: 1}, true}} {
			if ended, err := tb.Ended(c.p); ended != c.ended || err != nil {
				t.Errorf("Ended(%+v) = %v, %v; want %v", c.p, ended, err, c.ended)
			}
		}
	}

	// A ban and an epoch published now reach a running table.
	until := time.Now().Add(time.Hour)
	if err := producer.ProduceSync(ctx, compactedtest.Record(t, 3001, event.UserBanned, 99, ban(99, 1, true, "flood", &until))).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, compactedtest.Record(t, 3002, event.UserPasswordChanged, 70,
		event.Session{UserID: 70, TokenEpoch: 3, Reason: event.SessionsEnded})).FirstErr(); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 5*time.Second, func() (bool, string) {
		_, b, _ := late.Lookup(99)
		ended, _ := late.Ended(auth.Principal{UserID: 70, TokenEpoch: 2})
		return b != nil && b.Reason == "flood" && ended, "the new ban or epoch did not reach the table"
	})
}
