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
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 5*time.Second, func() (bool, string) {
		_, b, _ := empty.Lookup(50)
		return b != nil, "the running table does not see the bans"
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
	}

	// A ban published now reaches a running table.
	until := time.Now().Add(time.Hour)
	if err := producer.ProduceSync(ctx, compactedtest.Record(t, 3001, event.UserBanned, 99, ban(99, 1, true, "flood", &until))).FirstErr(); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 5*time.Second, func() (bool, string) {
		_, b, _ := late.Lookup(99)
		return b != nil && b.Reason == "flood", "the new ban did not reach the table"
	})
}
