package notification

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"board/internal/auth"
	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// live is how long a change may take to reach an open stream in these tests (the target is 1 s at p99 under load).
const live = 2 * time.Second

func TestStreamLive(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{Heartbeat: time.Hour}) // no periodic read: every event below is a wake-up
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		st := f.stream(author, "")
		st.opened(0)

		f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		seq, n := st.notification(live)
		if seq != 1 || n.Kind != ArticleComment || n.CommentID != idStr(c(1)) || n.Read {
			t.Fatalf("first notification: id %d, %+v", seq, n)
		}
		st.unread(1)

		// A like group comes again, with the same notificationId and a newer event id, when it grows.
		f.deliver(event.ArticleLiked, likeEvent(a1, 201))
		seq, like := st.notification(live)
		st.unread(2)
		f.deliver(event.ArticleLiked, likeEvent(a1, 202))
		seq2, grown := st.notification(live)
		if seq != 2 || seq2 != 3 || grown.NotificationID != like.NotificationID || grown.ActorCount != 2 ||
			!slices.Equal(grown.ActorIDs, []string{"202", "201"}) {
			t.Fatalf("the like group: %d %+v, then %d %+v", seq, like, seq2, grown)
		}

		// Reading changes the count.
		f.markRead(author, n.NotificationID)
		st.unread(1)
		httpiotest.WantStatus(t, f.call(author, "POST", "/v1/notifications/read-all", ""), http.StatusNoContent)
		st.unread(0)

		// Nothing of anyone else's inbox, nor of what changes nothing.
		f.deliver(event.CommentCreated, commentV2(c(2), a1, other, "0000000000")) // to replier, and to author
		if _, n := st.notification(live); n.CommentID != idStr(c(2)) {
			t.Fatalf("notification %+v, want c(2)'s", n)
		}
		st.unread(1)
		f.deliver(event.ArticleLiked, likeEvent(a1, 202))
		f.deliver(event.CommentCreated, commentV2(c(3), a1, author, "000000000000000")) // to other only
		st.quiet(300 * time.Millisecond)
	})
}

// seqN is a notification with the event id it came with.
type seqN struct {
	Seq int64
	N   wireN
}

// collect reads st's notifications, skipping unread counts, until one with event id until.
func collect(st *sseStream, until int64) []seqN {
	st.t.Helper()
	var out []seqN
	for {
		ev := st.next(5 * time.Second)
		if ev.Name == "unread" {
			continue
		}
		if ev.Name != "notification" {
			st.t.Fatalf("event %+v", ev)
		}
		seq, err := strconv.ParseInt(ev.ID, 10, 64)
		if err != nil {
			st.t.Fatal(err)
		}
		var n wireN
		decode(st.t, ev.Data, &n)
		out = append(out, seqN{seq, n})
		if seq >= until {
			return out
		}
	}
}

// expected returns the notifications changed after sequence number after, as a stream sends them.
func (f *fixture) expected(user, after int64) []seqN {
	f.t.Helper()
	ns, err := f.svc.since(context.Background(), user, after, 10000)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []seqN
	for _, n := range ns {
		var w wireN
		decode(f.t, string(mustMarshal(f.t, toJSON(n))), &w)
		out = append(out, seqN{n.Seq, w})
	}
	return out
}

// TestStreamResumes: a client that reconnects with the last event id it had gets every change after it, in order,
// then the live ones; across connections it sees no event id twice and ends with the inbox as the list shows it.
func TestStreamResumes(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		f.deliver(event.ArticleCreated, articleEvent(a2, author, "Two"))
		step := int64(0)
		change := func() error { // a new comment, or a like that starts or grows a group
			step++
			if step%3 == 0 {
				return f.handle(envelope(t, event.CommentCreated, commentV1(c(step), a1+step%2, replier, 0)))
			}
			return f.handle(envelope(t, event.ArticleLiked, likeEvent(a1+step%2, 200+step)))
		}
		changes := func(n int) {
			for range n {
				if err := change(); err != nil {
					t.Error(err)
					return
				}
			}
		}
		seen := map[string]seqN{} // the client's inbox, by notificationId
		var ids []int64           // every event id it got
		take := func(got []seqN) {
			for _, x := range got {
				seen[x.N.NotificationID] = x
				ids = append(ids, x.Seq)
			}
		}
		seqNow := func() int64 {
			seq, _, err := f.svc.state(context.Background(), author)
			if err != nil {
				t.Fatal(err)
			}
			return seq
		}

		st := f.stream(author, "")
		st.opened(0)
		changes(30)
		got := collect(st, 12) // the client goes away after 12 events, the rest unread
		take(got)
		st.close()
		last := got[len(got)-1].Seq
		changes(30) // changes it misses, some of them growing groups it has seen

		resumed := f.stream(author, strconv.FormatInt(last, 10))
		if ev := resumed.next(5 * time.Second); ev.Name != "retry" {
			t.Fatalf("first event %+v", ev)
		}
		want := f.expected(author, last)
		got = collect(resumed, want[len(want)-1].Seq)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("resumed after %d (-want +got):\n%s", last, diff)
		}
		take(got)
		resumed.unread(f.unread(author))

		// Live again, with changes made by another goroutine while the client reads.
		done := make(chan struct{})
		go func() {
			defer close(done)
			changes(30)
		}()
	live:
		for {
			select {
			case ev, ok := <-resumed.events:
				if !ok {
					t.Fatal("the stream ended")
				}
				if ev.Name == "notification" {
					seq, err := strconv.ParseInt(ev.ID, 10, 64)
					if err != nil {
						t.Fatal(err)
					}
					var n wireN
					decode(t, ev.Data, &n)
					take([]seqN{{seq, n}})
				}
			case <-done:
				if final := seqNow(); ids[len(ids)-1] < final {
					take(collect(resumed, final))
				}
				break live
			}
		}

		if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
			t.Errorf("event ids %v: repeated or out of order", ids)
		}
		var client []wireN
		for _, x := range seen {
			client = append(client, x.N)
		}
		slices.SortFunc(client, func(x, y wireN) int { return int(seen[y.NotificationID].Seq - seen[x.NotificationID].Seq) })
		if diff := cmp.Diff(f.list(author), client); diff != "" {
			t.Errorf("the client's inbox differs from the list (-list +client):\n%s", diff)
		}
	})
}

func TestStreamLastEventID(t *testing.T) {
	f := newFixture(t, sqldbtest.OpenSQLite(t, Migrate), redisclienttest.Mini(t), Config{})
	f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
	for i := int64(1); i <= 5; i++ {
		f.deliver(event.CommentCreated, commentV1(c(i), a1, replier, 0))
	}
	// As a parameter, for a client that cannot set headers; 0 is from the start.
	for _, after := range []int64{0, 3} {
		st := f.openStream(author, StreamPath+"?lastEventId="+strconv.FormatInt(after, 10), nil)
		if ev := st.next(5 * time.Second); ev.Name != "retry" {
			t.Fatalf("first event %+v", ev)
		}
		if diff := cmp.Diff(f.expected(author, after), collect(st, 5)); diff != "" {
			t.Errorf("lastEventId=%d (-want +got):\n%s", after, diff)
		}
		st.unread(5)
		st.close()
	}
	// An id from the future (another inbox's, or one this inbox lost) starts from now.
	st := f.stream(author, "999")
	st.opened(5)
	f.deliver(event.CommentCreated, commentV1(c(6), a1, replier, 0))
	if seq, _ := st.notification(live); seq != 6 {
		t.Errorf("after a future id: event id %d, want 6", seq)
	}
	for _, bad := range []string{"x", "-1", "1.5"} {
		resp, cancel := f.get(author, StreamPath, http.Header{"Last-Event-Id": {bad}})
		r := readReply(t, resp)
		cancel()
		httpiotest.WantError(t, r, http.StatusBadRequest, "INVALID_LAST_EVENT_ID")
	}
}

func TestStreamLimits(t *testing.T) {
	f := newFixture(t, sqldbtest.OpenSQLite(t, Migrate), redisclienttest.Mini(t), Config{MaxStreams: 3, MaxStreamsPerUser: 2})
	first := f.stream(author, "")
	first.opened(0)
	f.stream(author, "").opened(0)
	r := f.streamRefused(author, StreamPath)
	httpiotest.WantError(t, r, http.StatusTooManyRequests, "TOO_MANY_STREAMS")
	if r.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	f.stream(replier, "").opened(0)
	r = f.streamRefused(other, StreamPath)
	if r.Status != http.StatusServiceUnavailable {
		t.Errorf("over the instance's maximum: status %d, want 503; body %s", r.Status, r.Body)
	}
	httpiotest.ErrorCode(t, r)

	// A closed stream frees its place.
	first.close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, cancel := f.get(other, StreamPath, nil)
		if resp.StatusCode == http.StatusOK {
			resp.Body.Close()
			cancel()
			break
		}
		readReply(t, resp)
		cancel()
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream's place is not freed: status %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStreamAcrossInstances: a change handled by one instance reaches a stream that another holds, through Redis.
func TestStreamAcrossInstances(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		one := newFixture(t, db, b, Config{})
		two := newFixture(t, db, b, Config{Heartbeat: time.Hour}) // no periodic read: only the announcement wakes it
		waitSubscribers(t, b.Client, one.svc.channel(), 2)
		one.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		st := two.stream(author, "")
		st.opened(0)
		start := time.Now()
		one.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		seq, n := st.notification(live)
		if seq != 1 || n.CommentID != idStr(c(1)) {
			t.Fatalf("id %d, %+v", seq, n)
		}
		st.unread(1)
		t.Logf("delivered to the other instance in %v", time.Since(start))
		one.markRead(author, n.NotificationID)
		st.unread(0)
	})
}

// waitSubscribers waits until channel has n subscribers.
func waitSubscribers(t *testing.T, rdb redis.UniversalClient, channel string, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		subs, err := rdb.PubSubNumSub(context.Background(), channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		if subs[channel] >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d subscribers, want %d", channel, subs[channel], n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStreamStalledSubscription: an instance whose subscription hears nothing (its Redis connection hangs) still
// delivers every change to its streams, at the latest at the next periodic read.
func TestStreamStalledSubscription(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		one := newFixture(t, db, b, Config{})
		proxy := sqldbtest.NewFreezingProxy(t, b.Addrs[0])
		rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
		t.Cleanup(func() { rdb.Close() })
		t.Cleanup(proxy.Close)
		const heartbeat = 50 * time.Millisecond
		two := newFixture(t, db, redisclienttest.Backend{Client: rdb, Prefix: b.Prefix}, Config{Heartbeat: heartbeat})
		waitSubscribers(t, b.Client, one.svc.channel(), 2)
		proxy.Freeze()

		one.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		st := two.stream(author, "")
		st.opened(0)
		start := time.Now()
		one.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		if _, n := st.notification(streamCheckEvery*heartbeat + live); n.CommentID != idStr(c(1)) {
			t.Fatalf("%+v", n)
		}
		t.Logf("delivered without the announcement in %v", time.Since(start))
	})
}

func TestStreamLifetime(t *testing.T) {
	f := newFixture(t, sqldbtest.OpenSQLite(t, Migrate), redisclienttest.Mini(t), Config{StreamLifetime: 300 * time.Millisecond})
	start := time.Now()
	st := f.stream(author, "")
	st.opened(0)
	select {
	case ev, ok := <-st.events:
		if ok {
			t.Fatalf("event %+v, want the end", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream outlived its lifetime")
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("the stream ended after %v, before its lifetime", d)
	}
}

// endedSessions ends every session once end is closed.
type endedSessions struct{ end chan struct{} }

func (e endedSessions) Ended(auth.Principal) (bool, error) {
	select {
	case <-e.end:
		return true, nil
	default:
		return false, nil
	}
}

func (e endedSessions) Deleted(int64) bool { return false }

// TestStreamEndsWithItsSession: a stream opened before its user's password changed ends at its next heartbeat, not
// at its lifetime.
func TestStreamEndsWithItsSession(t *testing.T) {
	sessions := endedSessions{end: make(chan struct{})}
	f := newFixture(t, sqldbtest.OpenSQLite(t, Migrate), redisclienttest.Mini(t),
		Config{Heartbeat: 20 * time.Millisecond, StreamLifetime: time.Hour, Sessions: sessions})
	st := f.stream(author, "")
	st.opened(0)
	close(sessions.end)
	select {
	case ev, ok := <-st.events:
		if ok {
			t.Fatalf("event %+v, want the end", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream outlived its session")
	}
}

// A client that had no notification yet still has an event id, the one the stream opened at: reconnecting with it
// (as EventSource does), it gets what came while it was away.
func TestStreamResumesBeforeAnyNotification(t *testing.T) {
	f := newFixture(t, sqldbtest.OpenSQLite(t, Migrate), redisclienttest.Mini(t), Config{})
	f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
	st := f.stream(author, "")
	first := st.next(5 * time.Second)
	st.close()
	f.deliver(event.CommentCreated, commentV1(c(1), a1, replier, 0))
	again := f.stream(author, first.ID)
	if ev := again.next(5 * time.Second); ev.Name != "retry" {
		t.Fatalf("first event %+v", ev)
	}
	if _, n := again.notification(5 * time.Second); n.CommentID != idStr(c(1)) {
		t.Errorf("resumed with %+v, want the comment made while away", n)
	}
}

// TestStreamAcrossInstancesFanout: a fan-out announces its inboxes many to a message; another instance wakes each
// of their streams.
func TestStreamAcrossInstancesFanout(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		one := newFixture(t, db, b, Config{FanoutBatch: 50})
		two := newFixture(t, db, b, Config{Heartbeat: time.Hour}) // no periodic read: only the announcement wakes it
		waitSubscribers(t, b.Client, one.svc.channel(), 2)
		var streams []*sseStream
		for u := int64(7000); u < 7120; u++ {
			one.watch(u, "board/3", "watching")
			if u%40 == 39 { // the last of each batch, and one in the middle of the second
				st := two.stream(u, "")
				st.opened(0)
				streams = append(streams, st)
			}
		}
		one.deliver(event.ArticleCreated, articleOn(a1, author, 3, ""))
		for _, st := range streams {
			if _, n := st.notification(live); n.Kind != WatchedArticle || n.ArticleID != idStr(a1) {
				t.Errorf("%+v", n)
			}
		}
	})
}
