package hotarticle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // Asia/Seoul and America/New_York on machines without a zoneinfo database

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake"
	"board/internal/snowflake/snowflaketest"
)

// fixture is a Service on one Redis backend, with a clock the test moves. The clock starts at the real time,
// because the keys expire at an absolute instant that a real Redis compares with its own clock.
type fixture struct {
	t     testing.TB
	b     redisclienttest.Backend
	clock *snowflaketest.Clock
	loc   *time.Location
	svc   *Service
}

func newFixture(t testing.TB, b redisclienttest.Backend, loc *time.Location) *fixture {
	t.Helper()
	clock := snowflaketest.NewClock(time.Now().Truncate(time.Millisecond))
	if b.Mini != nil { // so that miniredis turns PEXPIREAT into the TTL the fake clock implies
		b.Mini.SetTime(clock.Now())
	}
	f := &fixture{t: t, b: b, clock: clock, loc: loc}
	f.svc = f.service(b.Prefix)
	return f
}

// service returns another Service on the same Redis and clock, under prefix.
func (f *fixture) service(prefix string) *Service {
	return NewService(f.b.Client, Config{KeyPrefix: prefix, Location: f.loc, Now: f.clock.Now})
}

// apply applies events in order and stops the test at the first error.
func (f *fixture) apply(envs ...event.Envelope) {
	f.t.Helper()
	for _, env := range envs {
		if err := f.svc.Apply(context.Background(), env); err != nil {
			f.t.Fatalf("Apply(%s %s): %v", env.Type, env.Payload, err)
		}
	}
}

// day returns the service's list of the day name.
func (f *fixture) day(name string) []HotArticle {
	f.t.Helper()
	list, err := f.svc.Day(context.Background(), name)
	if err != nil {
		f.t.Fatalf("Day(%s): %v", name, err)
	}
	return list
}

// dayStart is the midnight that starts the day offset days from the clock's day, in the fixture's zone.
func (f *fixture) dayStart(offset int) time.Time {
	y, m, d := f.clock.Now().In(f.loc).Date()
	return time.Date(y, m, d+offset, 0, 0, 0, 0, f.loc)
}

// keys returns every key under the fixture's prefix, without the prefix, sorted.
func (f *fixture) keys() []string {
	f.t.Helper()
	return keysUnder(f.t, f.b.Client, f.b.Prefix)
}

func keysUnder(t testing.TB, rdb redis.UniversalClient, prefix string) []string {
	t.Helper()
	var keys []string
	for _, key := range redisclienttest.Keys(t, rdb, prefix+"*") {
		keys = append(keys, strings.TrimPrefix(key, prefix))
	}
	slices.Sort(keys)
	return keys
}

func dayName(t time.Time, loc *time.Location) string { return t.In(loc).Format("20060102") }

// Event builders. Every envelope goes through event.Encode and event.Decode, as a consumer receives it.

var lastEventID atomic.Int64

func envelope(typ event.Type, payload any) event.Envelope {
	raw, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	value, err := event.Encode(lastEventID.Add(1), typ, raw)
	if err != nil {
		panic(err)
	}
	env, err := event.Decode(value)
	if err != nil {
		panic(err)
	}
	return env
}

// articleEvent is an ARTICLE_* event as the article service publishes it: created at the time in the id.
func articleEvent(typ event.Type, id, version int64, title string) event.Envelope {
	created := snowflake.Timestamp(id)
	return envelope(typ, event.Article{ArticleID: apijson.ID(id), Title: title, Content: "content of " + title,
		BoardID: 1, WriterID: 7, CreatedAt: apijson.Time(created),
		ModifiedAt:        apijson.Time(created.Add(time.Duration(version) * time.Second)),
		BoardArticleCount: 3, ArticleVersion: version, BoardArticleCountVersion: version})
}

func created(id, version int64, title string) event.Envelope {
	return articleEvent(event.ArticleCreated, id, version, title)
}

func updated(id, version int64, title string) event.Envelope {
	return articleEvent(event.ArticleUpdated, id, version, title)
}

func deleted(id, version int64) event.Envelope {
	return articleEvent(event.ArticleDeleted, id, version, "deleted")
}

func likeEvent(typ event.Type, id, count, version int64) event.Envelope {
	return envelope(typ, event.Like{ArticleLikeID: apijson.ID(lastEventID.Load()), ArticleID: apijson.ID(id), UserID: 9,
		CreatedAt: apijson.Time(snowflake.Timestamp(id)), ArticleLikeCount: count, ArticleLikeCountVersion: version})
}

func liked(id, count, version int64) event.Envelope {
	return likeEvent(event.ArticleLiked, id, count, version)
}

func unliked(id, count, version int64) event.Envelope {
	return likeEvent(event.ArticleUnliked, id, count, version)
}

func commentEvent(typ event.Type, id, count, version int64) event.Envelope {
	return envelope(typ, event.Comment{CommentID: apijson.ID(lastEventID.Load()), Content: "c", Path: "00000",
		ArticleID: apijson.ID(id), WriterID: 9, Deleted: typ == event.CommentDeleted,
		CreatedAt: apijson.Time(snowflake.Timestamp(id)), ArticleCommentCount: count, ArticleCommentCountVersion: version})
}

func commented(id, count, version int64) event.Envelope {
	return commentEvent(event.CommentCreated, id, count, version)
}

func uncommented(id, count, version int64) event.Envelope {
	return commentEvent(event.CommentDeleted, id, count, version)
}

func viewed(id, count int64) event.Envelope {
	return envelope(event.ArticleViewed, event.View{ArticleID: apijson.ID(id), ArticleViewCount: count})
}

// moderated is an ARTICLE_MODERATED that leaves article id hidden as hidden ("" for visible) at version.
func moderated(id, version int64, hidden event.Hidden) event.Envelope {
	action := event.ActionRestore
	if hidden != event.Visible {
		action = event.ActionRemove
	}
	return envelope(event.ArticleModerated, event.ArticleModeration{ArticleID: apijson.ID(id), BoardID: 1, WriterID: 7,
		Hidden: hidden, RemovedReason: "reason " + string(hidden), Action: action, ModeratorID: 3,
		ModeratedAt: apijson.Time(snowflake.Timestamp(id).Add(time.Minute)), ModerationVersion: version})
}

// hot is the entry an article with these latest values has in a day's list.
func hot(id int64, title string, likes, comments, views int64) HotArticle {
	return HotArticle{ArticleID: id, Title: title, CreatedAt: snowflake.Timestamp(id), Score: Score(likes, comments, views),
		LikeCount: likes, CommentCount: comments, ViewCount: views}
}

func TestScore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ likes, comments, views, want int64 }{
		{0, 0, 0, 0}, {1, 0, 0, 3}, {0, 1, 0, 2}, {0, 0, 1, 1}, {2, 3, 4, 16},
	} {
		if got := Score(tc.likes, tc.comments, tc.views); got != tc.want {
			t.Errorf("Score(%d, %d, %d) = %d, want %d", tc.likes, tc.comments, tc.views, got, tc.want)
		}
	}
}

// TestCases applies hand-written event histories step by step and checks the day's list after each step.
func TestCases(t *testing.T) {
	t.Parallel()
	type step struct {
		events []event.Envelope
		want   []HotArticle
	}
	// a[1..12] are articles of yesterday, a larger index a newer article.
	noon := func(f *fixture) time.Time { return f.dayStart(-1).Add(12 * time.Hour) }
	ids := func(f *fixture) []int64 {
		a := make([]int64, 13)
		for i := range a {
			a[i] = snowflake.Compose(noon(f).Add(time.Duration(i)*time.Millisecond), 1, 0)
		}
		return a
	}
	// createTen creates a[1..10] with score 6 each (two likes), so a[10] leads and a[1] is tenth.
	createTen := func(a []int64) []event.Envelope {
		var evs []event.Envelope
		for i := 1; i <= 10; i++ {
			evs = append(evs, created(a[i], 1, fmt.Sprint("a", i)), liked(a[i], 2, 1))
		}
		return evs
	}
	tenWith := func(a []int64, edit func(list []HotArticle) []HotArticle) []HotArticle {
		var list []HotArticle
		for i := 10; i >= 1; i-- {
			list = append(list, hot(a[i], fmt.Sprint("a", i), 2, 0, 0))
		}
		if edit != nil {
			list = edit(list)
		}
		return list
	}
	for _, tc := range []struct {
		name  string
		steps func(a []int64) []step
	}{
		{"counts before ARTICLE_CREATED wait for it and rank when it arrives", func(a []int64) []step {
			return []step{
				{[]event.Envelope{liked(a[1], 3, 4), commented(a[1], 2, 2), viewed(a[1], 5), created(a[2], 1, "two"),
					viewed(a[2], 30)}, []HotArticle{hot(a[2], "two", 0, 0, 30)}},
				{[]event.Envelope{created(a[1], 1, "one")}, []HotArticle{hot(a[2], "two", 0, 0, 30), hot(a[1], "one", 3, 2, 5)}},
				{[]event.Envelope{liked(a[1], 8, 5)}, []HotArticle{hot(a[1], "one", 8, 2, 5), hot(a[2], "two", 0, 0, 30)}},
			}
		}},
		{"ARTICLE_UPDATED before ARTICLE_CREATED: the newest title wins, CREATED is old news", func(a []int64) []step {
			return []step{
				{[]event.Envelope{liked(a[1], 1, 1), updated(a[1], 3, "v3")}, []HotArticle{hot(a[1], "v3", 1, 0, 0)}},
				{[]event.Envelope{updated(a[1], 2, "v2"), created(a[1], 1, "v1")}, []HotArticle{hot(a[1], "v3", 1, 0, 0)}},
				{[]event.Envelope{updated(a[1], 4, "v4")}, []HotArticle{hot(a[1], "v4", 1, 0, 0)}},
			}
		}},
		{"ARTICLE_CREATED after ARTICLE_DELETED does not revive", func(a []int64) []step {
			return []step{
				{[]event.Envelope{deleted(a[1], 2), created(a[1], 1, "one"), liked(a[1], 5, 5)}, []HotArticle{}},
				{[]event.Envelope{updated(a[1], 3, "later")}, []HotArticle{}},
			}
		}},
		{"a late like, comment, view or update after the delete does not revive", func(a []int64) []step {
			return []step{
				{[]event.Envelope{created(a[1], 1, "one"), liked(a[1], 1, 1), created(a[2], 1, "two")},
					[]HotArticle{hot(a[1], "one", 1, 0, 0), hot(a[2], "two", 0, 0, 0)}},
				{[]event.Envelope{deleted(a[1], 2)}, []HotArticle{hot(a[2], "two", 0, 0, 0)}},
				{[]event.Envelope{liked(a[1], 9, 2), commented(a[1], 9, 1), viewed(a[1], 90), updated(a[1], 3, "back"),
					deleted(a[1], 4), created(a[1], 5, "again")}, []HotArticle{hot(a[2], "two", 0, 0, 0)}},
			}
		}},
		{"a duplicate or older version never lowers a count", func(a []int64) []step {
			return []step{
				{[]event.Envelope{created(a[1], 1, "one"), liked(a[1], 5, 3), commented(a[1], 4, 6), viewed(a[1], 10)},
					[]HotArticle{hot(a[1], "one", 5, 4, 10)}},
				{[]event.Envelope{liked(a[1], 5, 3), liked(a[1], 4, 2), liked(a[1], 0, 1), unliked(a[1], 2, 3),
					commented(a[1], 4, 6), uncommented(a[1], 3, 5), commented(a[1], 1, 6),
					viewed(a[1], 10), viewed(a[1], 9), viewed(a[1], 0)},
					[]HotArticle{hot(a[1], "one", 5, 4, 10)}},
			}
		}},
		{"an unlike or a deleted comment with a newer version lowers the score", func(a []int64) []step {
			return []step{
				{[]event.Envelope{created(a[1], 1, "one"), liked(a[1], 5, 3), commented(a[1], 4, 6),
					created(a[2], 1, "two"), viewed(a[2], 20)},
					[]HotArticle{hot(a[1], "one", 5, 4, 0), hot(a[2], "two", 0, 0, 20)}},
				{[]event.Envelope{unliked(a[1], 3, 4), uncommented(a[1], 2, 7)},
					[]HotArticle{hot(a[2], "two", 0, 0, 20), hot(a[1], "one", 3, 2, 0)}},
				{[]event.Envelope{unliked(a[1], 0, 5), uncommented(a[1], 0, 8)},
					[]HotArticle{hot(a[2], "two", 0, 0, 20), hot(a[1], "one", 0, 0, 0)}},
			}
		}},
		{"a hidden article leaves the list, keeps counting, and comes back with its counts when restored",
			func(a []int64) []step {
				return []step{
					{[]event.Envelope{created(a[1], 1, "one"), liked(a[1], 2, 1), created(a[2], 1, "two"), viewed(a[2], 1)},
						[]HotArticle{hot(a[1], "one", 2, 0, 0), hot(a[2], "two", 0, 0, 1)}},
					{[]event.Envelope{moderated(a[1], 1, event.Pending)}, []HotArticle{hot(a[2], "two", 0, 0, 1)}},
					{[]event.Envelope{liked(a[1], 3, 2), commented(a[1], 1, 1), updated(a[1], 2, "one v2")},
						[]HotArticle{hot(a[2], "two", 0, 0, 1)}},
					{[]event.Envelope{moderated(a[1], 2, event.Visible)},
						[]HotArticle{hot(a[1], "one v2", 3, 1, 0), hot(a[2], "two", 0, 0, 1)}},
					{[]event.Envelope{moderated(a[1], 1, event.Pending)}, // old news
						[]HotArticle{hot(a[1], "one v2", 3, 1, 0), hot(a[2], "two", 0, 0, 1)}},
					{[]event.Envelope{moderated(a[1], 3, event.Removed), moderated(a[1], 2, event.Visible)},
						[]HotArticle{hot(a[2], "two", 0, 0, 1)}},
				}
			}},
		{"moderation out of order: the newest version wins, before or after ARTICLE_CREATED", func(a []int64) []step {
			return []step{
				{[]event.Envelope{moderated(a[1], 2, event.Visible), moderated(a[1], 1, event.Removed),
					created(a[1], 1, "one"), moderated(a[2], 1, event.Pending), liked(a[2], 4, 1), created(a[2], 1, "two")},
					[]HotArticle{hot(a[1], "one", 0, 0, 0)}},
				{[]event.Envelope{moderated(a[2], 3, event.Visible), moderated(a[2], 2, event.Removed)},
					[]HotArticle{hot(a[2], "two", 4, 0, 0), hot(a[1], "one", 0, 0, 0)}},
				{[]event.Envelope{deleted(a[2], 2), moderated(a[2], 4, event.Visible)}, []HotArticle{hot(a[1], "one", 0, 0, 0)}},
			}
		}},
		{"equal scores: the newer article first", func(a []int64) []step {
			return []step{
				{[]event.Envelope{created(a[2], 1, "two"), created(a[12], 1, "twelve"), created(a[1], 1, "one"),
					viewed(a[3], 1), created(a[3], 1, "three")},
					[]HotArticle{hot(a[3], "three", 0, 0, 1), hot(a[12], "twelve", 0, 0, 0), hot(a[2], "two", 0, 0, 0),
						hot(a[1], "one", 0, 0, 0)}},
			}
		}},
		{"an unlike drops the tenth out of the list and the eleventh climbs back in", func(a []int64) []step {
			return []step{
				{append(createTen(a), created(a[11], 1, "a11"), viewed(a[11], 5)), tenWith(a, nil)},
				{[]event.Envelope{unliked(a[1], 1, 2)}, tenWith(a, func(l []HotArticle) []HotArticle {
					return append(l[:9], hot(a[11], "a11", 0, 0, 5))
				})},
				{[]event.Envelope{liked(a[1], 2, 3)}, tenWith(a, nil)},
			}
		}},
		{"an eleventh article climbs into the list after having been below it", func(a []int64) []step {
			return []step{
				{append(createTen(a), created(a[11], 1, "a11"), viewed(a[11], 1)), tenWith(a, nil)},
				{[]event.Envelope{liked(a[11], 2, 1)}, tenWith(a, func(l []HotArticle) []HotArticle {
					return append([]HotArticle{hot(a[11], "a11", 2, 0, 1)}, l[:9]...)
				})},
			}
		}},
		{"an article pushed out of the list comes back when the one that pushed it falls, with no event of its own",
			func(a []int64) []step {
				return []step{
					{createTen(a), tenWith(a, nil)},
					{[]event.Envelope{created(a[11], 1, "a11"), liked(a[11], 9, 1)}, tenWith(a, func(l []HotArticle) []HotArticle {
						return append([]HotArticle{hot(a[11], "a11", 9, 0, 0)}, l[:9]...)
					})},
					{[]event.Envelope{unliked(a[11], 0, 2)}, tenWith(a, nil)},
					{[]event.Envelope{liked(a[11], 9, 3), deleted(a[11], 2)}, tenWith(a, nil)},
					{[]event.Envelope{created(a[12], 1, "a12"), viewed(a[12], 7), deleted(a[12], 2)}, tenWith(a, nil)},
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
				f := newFixture(t, b, time.UTC)
				a := ids(f)
				day := dayName(noon(f), f.loc)
				for i, s := range tc.steps(a) {
					f.apply(s.events...)
					if diff := cmp.Diff(s.want, f.day(day)); diff != "" {
						t.Fatalf("after step %d, Day(%s) (-want +got):\n%s", i+1, day, diff)
					}
				}
			})
		})
	}
}

// TestHandlers checks that the consumer hands every event type to the service (SPEC §3.5: all four topics, and the
// moderation topic's ARTICLE_MODERATED).
func TestHandlers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, redisclienttest.Mini(t), time.UTC)
	handlers := f.svc.Handlers()
	id := snowflake.Compose(f.dayStart(0), 1, 0)
	events := []event.Envelope{created(id, 1, "t"), updated(id, 2, "u"), commented(id, 2, 1), uncommented(id, 1, 2),
		liked(id, 2, 1), unliked(id, 1, 2), viewed(id, 5), moderated(id, 1, event.Visible), deleted(id, 3)}
	if len(handlers) != len(events) {
		t.Errorf("%d handlers, want %d", len(handlers), len(events))
	}
	for _, env := range events {
		handle, ok := handlers[env.Type]
		if !ok {
			t.Errorf("no handler for %s", env.Type)
			continue
		}
		if err := handle(context.Background(), env); err != nil {
			t.Errorf("handler for %s: %v", env.Type, err)
		}
		if env.Type == event.ArticleViewed {
			if diff := cmp.Diff([]HotArticle{hot(id, "u", 1, 1, 5)}, f.day(dayName(f.dayStart(0), time.UTC))); diff != "" {
				t.Errorf("Day after the handlers (-want +got):\n%s", diff)
			}
		}
	}
}

// TestDayBoundaries checks that an article's day is the calendar day of its id in the configured zone: the last
// and the first millisecond of a day in Seoul are the same UTC day but two Seoul days.
func TestDayBoundaries(t *testing.T) {
	t.Parallel()
	seoul, err := time.LoadLocation("Asia/Seoul")
	if err != nil {
		t.Fatal(err)
	}
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		f := newFixture(t, b, seoul)
		midnight := f.dayStart(0)
		last := snowflake.Compose(midnight.Add(-time.Millisecond), 1, 0) // 23:59:59.999 yesterday
		first := snowflake.Compose(midnight, 1, 0)                       // 00:00:00.000 today
		yesterday, today := dayName(midnight.Add(-time.Millisecond), seoul), dayName(midnight, seoul)
		utcLast, utcFirst := dayName(snowflake.Timestamp(last), time.UTC), dayName(snowflake.Timestamp(first), time.UTC)
		if utcLast != utcFirst {
			t.Fatalf("test setup: the two instants are the UTC days %s and %s, want one day", utcLast, utcFirst)
		}
		f.apply(created(last, 1, "last"), viewed(last, 1), created(first, 1, "first"))

		if diff := cmp.Diff([]HotArticle{hot(last, "last", 0, 0, 1)}, f.day(yesterday)); diff != "" {
			t.Errorf("Day(%s) (-want +got):\n%s", yesterday, diff)
		}
		if diff := cmp.Diff([]HotArticle{hot(first, "first", 0, 0, 0)}, f.day(today)); diff != "" {
			t.Errorf("Day(%s) (-want +got):\n%s", today, diff)
		}
		wantKeys := []string{
			"hot-article::{" + yesterday + "}::article::" + fmt.Sprint(last), "hot-article::{" + yesterday + "}::list",
			"hot-article::{" + today + "}::article::" + fmt.Sprint(first), "hot-article::{" + today + "}::list",
		}
		slices.Sort(wantKeys)
		if diff := cmp.Diff(wantKeys, f.keys()); diff != "" {
			t.Errorf("keys (-want +got):\n%s", diff)
		}

		// The same events counted in UTC put both articles on one day, the newer first.
		utc := NewService(b.Client, Config{KeyPrefix: b.Prefix + "utc:", Location: time.UTC, Now: f.clock.Now})
		for _, env := range []event.Envelope{created(last, 1, "last"), viewed(last, 1), created(first, 1, "first")} {
			if err := utc.Apply(context.Background(), env); err != nil {
				t.Fatal(err)
			}
		}
		utcDay := dayName(midnight, time.UTC)
		got, err := utc.Day(context.Background(), utcDay)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]HotArticle{hot(last, "last", 0, 0, 1), hot(first, "first", 0, 0, 0)}, got); diff != "" {
			t.Errorf("UTC Day(%s) (-want +got):\n%s", utcDay, diff)
		}
	})
}

// TestDayWithoutMidnight checks a day on which the clocks jump from 23:59:59 to 01:00 (Chile starts summer time
// so): its articles are that day's, and the day can be asked for. time.Date normalises the missing 00:00 of such
// a day to 23:00 of the day before.
func TestDayWithoutMidnight(t *testing.T) {
	t.Parallel()
	santiago, err := time.LoadLocation("America/Santiago")
	if err != nil {
		t.Fatal(err)
	}
	// The next such day from now, so that the keys' expiry lies in the future for a real Redis too.
	var noon time.Time
	for d := time.Now().In(santiago); d.Before(time.Now().AddDate(2, 0, 0)); d = d.AddDate(0, 0, 1) {
		y, m, day := d.Date()
		if time.Date(y, m, day, 0, 0, 0, 0, santiago).Day() != day {
			noon = time.Date(y, m, day, 12, 0, 0, 0, santiago)
			break
		}
	}
	if noon.IsZero() {
		t.Skip("no day without a midnight in America/Santiago in the next two years")
	}
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		f := newFixture(t, b, santiago)
		f.clock.Set(noon.Add(time.Hour))
		if b.Mini != nil {
			b.Mini.SetTime(f.clock.Now())
		}
		id := snowflake.Compose(noon, 1, 0)
		day, dayBefore := noon.Format("20060102"), noon.AddDate(0, 0, -1).Format("20060102")
		f.apply(created(id, 1, "summer time"))

		// The day before ends at the jump, 01:00 of the day; it is kept at least the retention after that.
		y, m, d := noon.Date()
		jump := time.Date(y, m, d, 1, 0, 0, 0, santiago)
		before := snowflake.Compose(noon.AddDate(0, 0, -1), 1, 0)
		if err := f.service(b.Prefix+"before:").Apply(context.Background(), created(before, 1, "winter time")); err != nil {
			t.Fatal(err)
		}
		beforeList := b.Prefix + "before:hot-article::{" + dayBefore + "}::list"
		got, err := b.Client.PExpireTime(context.Background(), beforeList).Result()
		if err != nil || got.Milliseconds() < jump.Add(DefaultRetention).UnixMilli() {
			t.Errorf("PEXPIRETIME %s = %v, %v; want at least %v, the day's end plus the retention", beforeList,
				time.UnixMilli(got.Milliseconds()).In(santiago), err, jump.Add(DefaultRetention))
		}

		list, err := f.svc.Day(context.Background(), day)
		if diff := cmp.Diff([]HotArticle{hot(id, "summer time", 0, 0, 0)}, list); err != nil || diff != "" {
			t.Errorf("Day(%s) = %v (-want +got):\n%s", day, err, diff)
		}
		if diff := cmp.Diff([]HotArticle{}, f.day(dayBefore)); diff != "" {
			t.Errorf("Day(%s), the day before (-want +got):\n%s", dayBefore, diff)
		}
		for _, key := range f.keys() {
			if !strings.HasPrefix(key, "before:") && !strings.Contains(key, "{"+day+"}") {
				t.Errorf("key %s is not under the article's day %s", key, day)
			}
		}
	})
}

// TestLifetime checks the keys' absolute expiry (the day's end in the zone plus the retention), that an update
// does not move it, and that events for a day past retention or for an id from the future write nothing.
func TestLifetime(t *testing.T) {
	t.Parallel()
	seoul, err := time.LoadLocation("Asia/Seoul")
	if err != nil {
		t.Fatal(err)
	}
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		ctx := context.Background()
		f := newFixture(t, b, seoul)
		miniNow := f.clock.Now() // the time miniredis counts TTLs from
		start := f.dayStart(-1)
		day := dayName(start, seoul)
		expireAt := f.dayStart(0).Add(DefaultRetention)
		live := snowflake.Compose(start.Add(time.Hour), 1, 0)
		waiting := snowflake.Compose(start.Add(2*time.Hour), 1, 0) // counts, never created
		gone := snowflake.Compose(start.Add(3*time.Hour), 1, 0)    // deleted: a tombstone
		list := b.Prefix + "hot-article::{" + day + "}::list"
		articleKey := func(id int64) string { return b.Prefix + "hot-article::{" + day + "}::article::" + fmt.Sprint(id) }

		f.apply(created(live, 1, "live"), liked(live, 1, 1), liked(waiting, 2, 1), created(gone, 1, "gone"), deleted(gone, 2))
		f.clock.Add(time.Hour) // a later update sets the same instant again
		f.apply(viewed(live, 3), viewed(waiting, 1))
		for _, key := range []string{list, articleKey(live), articleKey(waiting), articleKey(gone)} {
			got, err := b.Client.PExpireTime(ctx, key).Result()
			if err != nil {
				t.Fatalf("PEXPIRETIME %s: %v", key, err)
			}
			if want := time.Duration(expireAt.UnixMilli()) * time.Millisecond; got != want {
				t.Errorf("PEXPIRETIME %s = %v, want %v", key, time.UnixMilli(got.Milliseconds()).In(seoul), expireAt)
			}
		}

		if b.Mini != nil { // let the day's keys expire without waiting a week
			b.Mini.FastForward(expireAt.Sub(miniNow) - time.Millisecond)
			if n := len(f.keys()); n != 4 {
				t.Errorf("a millisecond before the expiry: %d keys, want 4: %v", n, f.keys())
			}
			b.Mini.FastForward(time.Millisecond)
			if keys := f.keys(); len(keys) != 0 {
				t.Errorf("at the expiry: keys %v are left", keys)
			}
		}

		// Past retention an event for the day writes nothing: its list is gone (or about to go).
		f.clock.Set(expireAt.Add(-time.Millisecond))
		late := snowflake.Compose(start.Add(4*time.Hour), 1, 0)
		f.apply(created(late, 1, "just in time"))
		if exists, _ := b.Client.Exists(ctx, articleKey(late)).Result(); exists != 1 {
			t.Errorf("an event a millisecond before the expiry wrote no %s", articleKey(late))
		}
		if err := b.Client.Del(ctx, articleKey(late), list).Err(); err != nil {
			t.Fatal(err)
		}
		before := f.keys()
		f.clock.Set(expireAt)
		f.apply(created(late, 1, "late"), liked(late, 1, 1), commented(late, 1, 1), viewed(late, 1), deleted(late, 2),
			created(live, 1, "live"), liked(live, 2, 2))
		if diff := cmp.Diff(before, f.keys()); diff != "" {
			t.Errorf("events for a day past retention changed the keys (-before +after):\n%s", diff)
		}

		// An id further in the future than clocks disagree is not a real article: refused as invalid, so the
		// consumer dead-letters the event.
		f.clock.Set(time.Now().Truncate(time.Millisecond))
		now := f.clock.Now()
		future := snowflake.Compose(now.Add(time.Hour+time.Millisecond), 1, 0)
		soon := snowflake.Compose(now.Add(time.Hour), 1, 0)
		before = f.keys()
		for _, env := range []event.Envelope{created(future, 1, "future"), liked(future, 1, 1), viewed(future, 1)} {
			if err := f.svc.Apply(ctx, env); fault.KindOf(err) != fault.Invalid {
				t.Errorf("Apply(%s of an id from the future) = %v, want an Invalid error", env.Type, err)
			}
		}
		if diff := cmp.Diff(before, f.keys()); diff != "" {
			t.Errorf("events for an id an hour and a millisecond ahead changed the keys (-before +after):\n%s", diff)
		}
		f.apply(created(soon, 1, "soon"))
		soonDay := dayName(now.Add(time.Hour), seoul)
		if diff := cmp.Diff([]HotArticle{hot(soon, "soon", 0, 0, 0)}, f.day(soonDay)); diff != "" {
			t.Errorf("an id an hour ahead: Day(%s) (-want +got):\n%s", soonDay, diff)
		}
	})
}

// TestRetention checks that Config.Retention sets the expiry.
func TestRetention(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		f := newFixture(t, b, time.UTC)
		f.svc = NewService(b.Client, Config{KeyPrefix: b.Prefix, Location: time.UTC, Now: f.clock.Now, Retention: 2 * time.Hour})
		id := snowflake.Compose(f.dayStart(0), 1, 0)
		f.apply(created(id, 1, "t"))
		key := b.Prefix + "hot-article::{" + dayName(f.dayStart(0), time.UTC) + "}::list"
		got, err := b.Client.PExpireTime(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := f.dayStart(1).Add(2 * time.Hour); got.Milliseconds() != want.UnixMilli() {
			t.Errorf("PEXPIRETIME = %v, want %v", time.UnixMilli(got.Milliseconds()).UTC(), want)
		}
	})
}

// TestMalformed checks that events that can never be applied are rejected at once as invalid (so the consumer
// dead-letters them instead of retrying) and write nothing.
func TestMalformed(t *testing.T) {
	t.Parallel()
	b := redisclienttest.Mini(t)
	f := newFixture(t, b, time.UTC)
	id := fmt.Sprint(snowflake.Compose(f.dayStart(0), 1, 0))
	createdAt := `"` + f.dayStart(0).Format(apijson.TimeLayout) + `"`
	for _, tc := range []struct {
		typ     event.Type
		payload string
	}{
		{event.ArticleCreated, `{"title":"t","createdAt":` + createdAt + `,"articleVersion":1}`},
		{event.ArticleCreated, `{"articleId":"0","title":"t","createdAt":` + createdAt + `,"articleVersion":1}`},
		{event.ArticleCreated, `{"articleId":` + id + `,"title":"t","createdAt":` + createdAt + `}`},
		{event.ArticleCreated, `{"articleId":"` + id + `","title":"t","articleVersion":1}`},
		{event.ArticleUpdated, `{"articleId":"` + id + `","title":"t","createdAt":` + createdAt + `,"articleVersion":0}`},
		{event.ArticleCreated, `{"articleId":"` + id + `","title":7,"createdAt":` + createdAt + `,"articleVersion":1}`},
		{event.ArticleCreated, `{"articleId":"` + id + `","title":"t","createdAt":"yesterday","articleVersion":1}`},
		{event.ArticleCreated, `{"articleId":"` + id + `","title":"t","createdAt":` + createdAt + `,"articleVersion":"1"}`},
		{event.ArticleDeleted, `{"articleId":"` + id + `"}`},
		{event.ArticleDeleted, `{"articleId":"-5","articleVersion":2}`},
		{event.ArticleDeleted, `{"articleId":true,"articleVersion":2}`},
		{event.ArticleLiked, `{"articleLikeCount":1,"articleLikeCountVersion":1}`},
		{event.ArticleLiked, `{"articleId":"` + id + `","articleLikeCount":1}`},
		{event.ArticleUnliked, `{"articleId":"` + id + `","articleLikeCount":1,"articleLikeCountVersion":-1}`},
		{event.ArticleLiked, `{"articleId":"` + id + `","articleLikeCount":"1","articleLikeCountVersion":1}`},
		{event.ArticleLiked, `{"articleId":"x","articleLikeCount":1,"articleLikeCountVersion":1}`},
		{event.CommentCreated, `{"articleId":0,"articleCommentCount":1,"articleCommentCountVersion":1}`},
		{event.CommentDeleted, `{"articleId":"` + id + `","articleCommentCount":1}`},
		{event.CommentCreated, `{"articleId":"` + id + `","articleCommentCount":1.5,"articleCommentCountVersion":1}`},
		{event.ArticleViewed, `{"articleViewCount":3}`},
		{event.ArticleViewed, `{"articleId":"` + id + `","articleViewCount":"3"}`},
		{event.ArticleViewed, `{"articleId":"99999999999999999999","articleViewCount":3}`},
		{event.ArticleViewed, `[1,2]`},
		{event.ArticleViewed, `null`},
		{event.ArticleViewed, `{"articleId":` + id + `,"articleViewCount":3`},
		{event.ArticleModerated, `{"articleId":"` + id + `","hidden":"removed"}`},
		{event.ArticleModerated, `{"hidden":"removed","moderationVersion":2}`},
		{event.ArticleModerated, `{"articleId":"` + id + `","hidden":5,"moderationVersion":2}`},
		{event.CommentModerated, `{"articleId":"` + id + `","commentId":"5","hidden":"removed","moderationVersion":2}`},
		{event.Type("ARTICLE_PINNED"), `{"articleId":"` + id + `"}`},
	} {
		env := event.Envelope{EventID: 1, Type: tc.typ, Payload: json.RawMessage(tc.payload)}
		err := f.svc.Apply(context.Background(), env)
		if fault.KindOf(err) != fault.Invalid && !errors.Is(err, event.ErrMalformed) {
			t.Errorf("Apply(%s %s) = %v, want an Invalid fault or event.ErrMalformed", tc.typ, tc.payload, err)
		}
	}
	if keys := f.keys(); len(keys) != 0 {
		t.Errorf("malformed events wrote %v", keys)
	}
	// The same shapes made whole are applied: the table above fails for the reason it names, not another.
	f.apply(envelope(event.ArticleViewed, json.RawMessage(`{"articleId":"`+id+`","articleViewCount":3}`)))
	if keys := f.keys(); len(keys) != 1 {
		t.Errorf("a good view event wrote %v, want one key", keys)
	}
}

// quickClient is a client that gives up fast, as the defaults retry a dead server for seconds.
func quickClient(t testing.TB, addr string) redis.UniversalClient {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 100 * time.Millisecond, DialerRetries: 1,
		ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// downClients are Redis clients that cannot be served: a stopped server, and one that accepts connections and
// never answers (the client's timeouts end each call).
func downClients(t *testing.T) map[string]func(t *testing.T) redis.UniversalClient {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	return map[string]func(t *testing.T) redis.UniversalClient{
		"stopped": func(t *testing.T) redis.UniversalClient {
			b := redisclienttest.Mini(t)
			rdb := quickClient(t, b.Mini.Addr())
			if err := rdb.Ping(context.Background()).Err(); err != nil { // leaves a pooled connection behind
				t.Fatal(err)
			}
			b.Mini.Close()
			return rdb
		},
		"not answering": func(t *testing.T) redis.UniversalClient { return quickClient(t, silent.Addr().String()) },
	}
}

// TestRedisDown checks that Apply and Day report a Redis that cannot serve as Unavailable, so the consumer waits
// and retries instead of dead-lettering, and the API answers 503.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	for name, client := range downClients(t) {
		t.Run(name, func(t *testing.T) {
			now := time.Now()
			svc := NewService(client(t), Config{KeyPrefix: "test:", Location: time.UTC, Now: func() time.Time { return now }})
			id := snowflake.Compose(now.Add(-time.Minute), 1, 0)
			for _, env := range []event.Envelope{created(id, 1, "t"), liked(id, 1, 1), viewed(id, 1)} {
				err := svc.Apply(context.Background(), env)
				if fault.KindOf(err) != fault.Unavailable {
					t.Errorf("Apply(%s) = %v, want an Unavailable fault", env.Type, err)
				}
			}
			_, err := svc.Day(context.Background(), dayName(now, time.UTC))
			if fe, ok := fault.As(err); !ok || fe.Kind != fault.Unavailable || fe.Code != "REDIS_UNAVAILABLE" {
				t.Errorf("Day = %v, want an Unavailable fault with code REDIS_UNAVAILABLE", err)
			}
		})
	}
}

// dump is the whole Redis state under a prefix: each key's hash or sorted set, for comparing two runs.
func dump(t testing.TB, rdb redis.UniversalClient, prefix string) map[string]any {
	t.Helper()
	ctx := context.Background()
	state := map[string]any{}
	for _, key := range keysUnder(t, rdb, prefix) {
		typ, err := rdb.Type(ctx, prefix+key).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch typ {
		case "hash":
			state[key], err = rdb.HGetAll(ctx, prefix+key).Result()
		case "zset":
			state[key], err = rdb.ZRangeWithScores(ctx, prefix+key, 0, -1).Result()
		default:
			t.Fatalf("key %s is a %s", key, typ)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return state
}

// TestConcurrentConsumers applies one set of events from two goroutines at once, as two consumers do while a
// rebalance hands partitions over, and checks that the state is the one a single consumer leaves.
func TestConcurrentConsumers(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		f := newFixture(t, b, time.UTC)
		seed := rand.Uint64()
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, seed))
		h := randomHistory(rng, f)
		events := h.events(rng)

		single := f.service(b.Prefix + "single:")
		for _, env := range events {
			if err := single.Apply(context.Background(), env); err != nil {
				t.Fatal(err)
			}
		}
		both := f.service(b.Prefix + "both:")
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(events))
		for range 2 {
			order := slices.Clone(events)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			wg.Go(func() {
				for _, env := range order {
					if err := both.Apply(context.Background(), env); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		want, got := dump(t, b.Client, b.Prefix+"single:"), dump(t, b.Client, b.Prefix+"both:")
		if len(want) == 0 {
			t.Fatal("test setup: the events wrote nothing")
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("state after two concurrent consumers (-one consumer +two):\n%s", diff)
		}
		f.svc = both
		for _, d := range h.days {
			if diff := cmp.Diff(h.top(d), f.day(d)); diff != "" {
				t.Errorf("Day(%s) (-want +got):\n%s", d, diff)
			}
		}
	})
}

// BenchmarkApply measures one like event, the commonest event, on an article of today.
func BenchmarkApply(b *testing.B) {
	backends := map[string]func(testing.TB) redisclienttest.Backend{"miniredis": redisclienttest.Mini}
	if os.Getenv(redisclienttest.AddrEnv) != "" {
		backends["redis"] = redisclienttest.Real
	}
	if os.Getenv(redisclienttest.ClusterAddrsEnv) != "" {
		backends["cluster"] = redisclienttest.Cluster
	}
	for name, backend := range backends {
		b.Run(name, func(b *testing.B) {
			f := newFixture(b, backend(b), time.UTC)
			id := snowflake.Compose(f.clock.Now().Add(-time.Second), 1, 0)
			f.apply(created(id, 1, "bench"))
			events := make([]event.Envelope, b.N)
			for i := range events {
				events[i] = liked(id, int64(i+1), int64(i+1))
			}
			b.ResetTimer()
			for i := range b.N {
				if err := f.svc.Apply(context.Background(), events[i]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
