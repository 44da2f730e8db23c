package articleread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake"
)

// history makes ops random changes on the truth over boards: creates, updates, deletes, likes and unlikes,
// comments created and deleted, views. It returns the ids of the articles it created.
func history(rng *rand.Rand, tr *truth, boards []int64, ops int) []int64 {
	var created, live []int64
	for range ops {
		if len(live) < 3 || rng.IntN(100) < 12 {
			id := tr.create(boards[rng.IntN(len(boards))])
			created, live = append(created, id), append(live, id)
			continue
		}
		i := rng.IntN(len(live))
		id := live[i]
		tr.mu.Lock()
		likes, comments := counter(tr.likes, id).Value, counter(tr.comments, id).Value
		tr.mu.Unlock()
		switch r := rng.IntN(100); {
		case r < 15:
			tr.update(id)
		case r < 22:
			tr.delete(id)
			live = append(live[:i], live[i+1:]...)
		case r < 47:
			tr.like(id, 1)
		case r < 57 && likes > 0:
			tr.like(id, -1)
		case r < 82:
			tr.comment(id, 1)
		case r < 92 && comments > 0:
			tr.comment(id, -1)
		default:
			tr.setViews(id, rng.Int64N(1000))
		}
	}
	return created
}

// applyConcurrently applies envs from several goroutines at once.
func (e *env) applyConcurrently(t *testing.T, envs []event.Envelope, workers int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(envs))
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(envs); i += workers {
				if err := e.svc.Apply(context.Background(), envs[i]); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Apply: %v", err)
	}
}

// TestModelFromShuffledEvents: whatever the order and however often each event arrives, every article reads as the
// origin holds it, and a deleted one is not found.
func TestModelFromShuffledEvents(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		for seed := range uint64(3) {
			// Each seed's keys apart: on a real Redis the truth's ids come from the clock, and a seed's may repeat
			// the previous one's.
			seedB := b
			seedB.Prefix += fmt.Sprintf("seed%d:", seed)
			e := newEnv(t, seedB)
			rng := rand.New(rand.NewPCG(seed, 42))
			ids := history(rng, e.truth, []int64{1, 2}, 400)
			envs := shuffled(rng, e.truth.eventsSince(0))
			if seed == 2 {
				e.applyConcurrently(t, envs, 8) // the script must be atomic per article
			} else {
				e.apply(t, envs)
			}
			for _, id := range ids {
				e.checkGet(t, id)
			}
			e.checkGet(t, e.truth.create(3)+1) // an id no one wrote: the origin's 404
		}
	})
}

// TestModelEventsNeedNoOrigin: a model complete from events is read without any origin call but the view count.
func TestModelEventsNeedNoOrigin(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		id := e.truth.create(1)
		e.truth.like(id, 1)
		e.truth.comment(id, 1)
		e.truth.comment(id, 1)
		e.truth.update(id)
		e.applyNew(t, 0)
		e.checkGet(t, id)
		if got := e.origin.allCalls(); len(got) != 1 || got[epViewCount] != 1 {
			t.Errorf("origin calls = %v, want only one view count", got)
		}
	})
}

// TestNewArticleNeedsNoOrigin: an ARTICLE_CREATED committed since the epoch stands for counts of zero until count
// events arrive, so the first read of a new article calls no origin but the view count's; one from before the
// epoch does not (its counts may have been lost), and the read asks the comment and like services.
func TestNewArticleNeedsNoOrigin(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		id := e.truth.create(1)
		e.applyNew(t, 0)
		e.checkGet(t, id)
		if got := e.origin.allCalls(); len(got) != 1 || got[epViewCount] != 1 {
			t.Errorf("origin calls = %v, want only one view count", got)
		}

		e.flush(t) // a new epoch: the next create was committed before it
		old := e.truth.create(1)
		e.applyNew(t, len(e.truth.eventsSince(0))-1)
		e.origin.resetCalls()
		e.checkGet(t, old)
		if got := e.origin.allCalls(); got[epCommentCount] != 1 || got[epLikeCount] != 1 {
			t.Errorf("origin calls = %v, want the counts of an article from before the epoch read from their origins", got)
		}
	})
}

// TestModelFlushedMidway: Redis loses everything while events are being applied; reads rebuild from the origins
// with their versions, so late (older) events do not overwrite what was rebuilt, and later changes apply on top.
func TestModelFlushedMidway(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		for seed := range uint64(2) {
			e := newEnv(t, b)
			rng := rand.New(rand.NewPCG(seed, 7))
			ids := history(rng, e.truth, []int64{1, 2}, 300)
			first := shuffled(rng, e.truth.eventsSince(0))
			half := len(first) / 2
			e.apply(t, first[:half])
			e.flush(t)
			for _, id := range ids[:len(ids)/2] { // some reads rebuild before the rest arrives
				e.checkGet(t, id)
			}
			mark := e.truth.eventCount()
			ids = append(ids, history(rng, e.truth, []int64{1, 2}, 200)...)
			rest := append(first[half:], shuffled(rng, e.truth.eventsSince(mark))...)
			rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
			e.apply(t, rest)
			for _, id := range ids {
				e.checkGet(t, id)
			}
		}
	})
}

// TestModelRebuiltBeatsStaleEvents: after a flush, a model rebuilt from the origins carries the origins' versions:
// every older event delivered again afterwards is ignored, and newer ones apply.
func TestModelRebuiltBeatsStaleEvents(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		rng := rand.New(rand.NewPCG(11, 11))
		var ids []int64
		for range 20 {
			id := e.truth.create(1)
			ids = append(ids, id)
			for range 1 + rng.IntN(3) {
				e.truth.update(id)
				e.truth.like(id, 1)
				e.truth.comment(id, 1)
			}
			e.truth.like(id, -1)
		}
		old := e.truth.eventsSince(0)
		e.apply(t, old)
		e.flush(t)
		for _, id := range ids {
			e.checkGet(t, id)
		}
		e.apply(t, shuffled(rng, old))
		for _, id := range ids {
			e.checkGet(t, id)
		}
		mark := e.truth.eventCount()
		for _, id := range ids {
			e.truth.update(id)
			e.truth.comment(id, -1)
			e.truth.like(id, 1)
		}
		e.apply(t, shuffled(rng, e.truth.eventsSince(mark)))
		for _, id := range ids {
			e.checkGet(t, id)
		}
	})
}

// TestDeletedArticleStaysDeletedAfterFlush: an article's ARTICLE_DELETED was applied, then Redis lost everything
// (flush, failover to an empty replica, eviction of the tombstone), then its ARTICLE_CREATED is delivered again
// (at least once). The article must stay not found.
func TestDeletedArticleStaysDeletedAfterFlush(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		id := e.truth.create(1)
		e.truth.delete(id)
		envs := e.truth.eventsSince(0)
		e.apply(t, envs)
		e.checkGet(t, id)
		e.flush(t)
		e.apply(t, envs[:1]) // the create, redelivered
		e.checkGet(t, id)
	})
}

// pexpireTime is when Redis drops key.
func pexpireTime(t *testing.T, b redisclienttest.Backend, key string) time.Time {
	t.Helper()
	ms, err := b.Client.PExpireTime(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("PEXPIRETIME %s: %v", key, err)
	}
	if ms < 0 {
		t.Fatalf("PEXPIRETIME %s = %v: no key or no expiry", key, ms)
	}
	return time.UnixMilli(int64(ms / time.Millisecond))
}

func exists(t *testing.T, b redisclienttest.Backend, key string) bool {
	t.Helper()
	n, err := b.Client.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("EXISTS %s: %v", key, err)
	}
	return n == 1
}

// TestModelTTL: a model lives until a day after its article's creation, whatever events update it; once gone, late
// events do not bring it back; a model rebuilt for an article older than a day is kept a day from the rebuild.
func TestModelTTL(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		id := e.truth.create(1) // an hour old
		e.truth.like(id, 1)
		e.truth.comment(id, 1)
		mark := e.applyNew(t, 0)
		key := e.svc.modelKey(id)
		want := snowflake.Timestamp(id).Add(ModelTTL)
		if got := pexpireTime(t, b, key); !got.Equal(want) {
			t.Fatalf("expiry after creation = %v, want the id's time + 1 day = %v", got, want)
		}
		e.clock.add(time.Minute)
		e.truth.update(id)
		e.truth.like(id, 1)
		e.truth.comment(id, -1)
		mark = e.applyNew(t, mark)
		e.checkGet(t, id)
		if got := pexpireTime(t, b, key); !got.Equal(want) {
			t.Errorf("expiry after updates = %v, want it unchanged at %v", got, want)
		}

		if e.clock.add(want.Sub(e.clock.Now()) + time.Millisecond) {
			if exists(t, b, key) {
				t.Fatalf("model still there a day after the article's creation")
			}
			e.truth.like(id, 1)
			mark = e.applyNew(t, mark)
			if exists(t, b, key) {
				t.Errorf("a late like brought back the model of an article older than a day")
			}
			before := e.clock.Now()
			e.checkGet(t, id) // rebuilt from the origins
			if got, want := pexpireTime(t, b, key), before.Add(ModelTTL); !got.Equal(want) {
				t.Errorf("expiry of the rebuilt model = %v, want a day from now = %v", got, want)
			}
		}

		// An article created three days ago: never modelled from events, rebuilt on a read.
		old := e.truth.createAt(2, e.clock.Now().Add(-72*time.Hour))
		e.truth.like(old, 1)
		mark = e.applyNew(t, mark)
		oldKey := e.svc.modelKey(old)
		if exists(t, b, oldKey) {
			t.Errorf("events of an article older than a day made a model")
		}
		before := e.clock.Now()
		e.checkGet(t, old)
		after := e.clock.Now()
		got := pexpireTime(t, b, oldKey)
		if got.Before(before.Add(ModelTTL).Truncate(time.Millisecond)) || got.After(after.Add(ModelTTL)) {
			t.Errorf("expiry of a rebuilt old article = %v, want a day from the read (%v .. %v)", got,
				before.Add(ModelTTL), after.Add(ModelTTL))
		}
		e.clock.add(time.Hour)
		e.truth.like(old, 1)
		e.applyNew(t, mark)
		e.checkGet(t, old) // the like applies on the rebuilt model
		// A real Redis's clock runs a little ahead of the now the event carried (TestModelTTLClockSkew).
		if later := pexpireTime(t, b, oldKey); later.Before(got.Add(-50 * time.Millisecond)) {
			t.Errorf("a like moved the rebuilt model's expiry earlier: %v, was %v", later, got)
		}
	})
}

// TestModelTTLClockSkew: the expiry of a model does not depend on how the service's clock and Redis's clock agree.
// Events neither move an expiry earlier (service clock behind Redis's) nor push it later at every event (ahead).
func TestModelTTLClockSkew(t *testing.T) {
	t.Parallel()
	const skew = 2 * time.Second
	const slack = 20 * time.Millisecond // a real Redis answers a few milliseconds after the service read its clock
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		for _, offset := range []time.Duration{-skew, skew} {
			e := newEnv(t, b)
			e.svc = e.serviceWithClock(loadViews{}, func() time.Time { return e.clock.Now().Add(offset) })

			// Built from events: kept until a day after the article's creation, however many events follow.
			id := e.truth.create(1)
			e.truth.like(id, 1)
			e.truth.comment(id, 1)
			mark := e.applyNew(t, 0)
			key := e.svc.modelKey(id)
			want := snowflake.Timestamp(id).Add(ModelTTL)
			for range 3 {
				e.truth.like(id, 1)
			}
			mark = e.applyNew(t, mark)
			if got := pexpireTime(t, b, key); got.Before(want) || got.After(want.Add(slack)) {
				t.Errorf("service clock %v off: expiry after 3 likes = %v, want the id's time + 1 day = %v", offset, got, want)
			}

			// Rebuilt, for an article older than a day: events do not shorten it.
			old := e.truth.createAt(2, e.clock.Now().Add(-72*time.Hour))
			mark = e.applyNew(t, mark)
			e.checkGet(t, e.truth.create(2)) // warm the connections, so no request is slower than the others
			e.checkGet(t, old)
			oldKey := e.svc.modelKey(old)
			rebuilt := pexpireTime(t, b, oldKey)
			for range 3 {
				e.truth.like(old, 1)
			}
			e.applyNew(t, mark)
			if got := pexpireTime(t, b, oldKey); got.Before(rebuilt.Add(-slack)) || got.After(rebuilt.Add(slack)) {
				t.Errorf("service clock %v off: expiry of a rebuilt model after 3 likes = %v, want it kept at %v", offset, got, rebuilt)
			}
		}
	})
}

// TestApplyRejectsBadEvents: events that can never apply are Invalid or ErrMalformed (the consumer dead-letters
// them at once) and write nothing.
func TestApplyRejectsBadEvents(t *testing.T) {
	t.Parallel()
	payload := func(v any) json.RawMessage {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	full := event.Article{ArticleID: 1, BoardID: 1, ArticleVersion: 1, BoardArticleCountVersion: 1}
	tests := []struct {
		name      string
		env       event.Envelope
		malformed bool // else Invalid
	}{
		{"payload not an object", event.Envelope{EventID: 1, Type: event.ArticleCreated, Payload: json.RawMessage(`[1]`)}, true},
		{"id not a number", event.Envelope{EventID: 1, Type: event.ArticleUpdated, Payload: json.RawMessage(`{"articleId":"x"}`)}, true},
		{"count not a number", event.Envelope{EventID: 1, Type: event.ArticleLiked, Payload: json.RawMessage(`{"articleId":"1","articleLikeCount":"many"}`)}, true},
		{"comment payload broken", event.Envelope{EventID: 1, Type: event.CommentCreated, Payload: json.RawMessage(`{"articleId":`)}, true},
		{"article without versions", event.Envelope{EventID: 1, Type: event.ArticleCreated,
			Payload: payload(event.Article{ArticleID: 5, BoardID: 1})}, false},
		{"article without board", event.Envelope{EventID: 1, Type: event.ArticleDeleted,
			Payload: payload(event.Article{ArticleID: 5, ArticleVersion: 2, BoardArticleCountVersion: 2})}, false},
		{"article without id", event.Envelope{EventID: 1, Type: event.ArticleUpdated,
			Payload: payload(func() event.Article { a := full; a.ArticleID = 0; return a }())}, false},
		{"comment without count version", event.Envelope{EventID: 1, Type: event.CommentCreated,
			Payload: payload(event.Comment{ArticleID: 5, ArticleCommentCount: 1})}, false},
		{"comment without article", event.Envelope{EventID: 1, Type: event.CommentDeleted,
			Payload: payload(event.Comment{ArticleCommentCount: 1, ArticleCommentCountVersion: 3})}, false},
		{"like without count version", event.Envelope{EventID: 1, Type: event.ArticleLiked,
			Payload: payload(event.Like{ArticleID: 5, ArticleLikeCount: 1})}, false},
		{"like without article", event.Envelope{EventID: 1, Type: event.ArticleUnliked,
			Payload: payload(event.Like{ArticleLikeCount: 1, ArticleLikeCountVersion: 1})}, false},
		{"a type article-read has no use for", event.Envelope{EventID: 1, Type: event.ArticleViewed,
			Payload: payload(event.View{ArticleID: 5, ArticleViewCount: 100})}, false},
		{"an unknown type", event.Envelope{EventID: 1, Type: "ARTICLE_PINNED", Payload: payload(full)}, false},
		{"moderation without version", event.Envelope{EventID: 1, Type: event.ArticleModerated,
			Payload: payload(event.ArticleModeration{ArticleID: 5, BoardID: 1, Hidden: event.Removed})}, false},
		{"moderation without board", event.Envelope{EventID: 1, Type: event.ArticleModerated,
			Payload: payload(event.ArticleModeration{ArticleID: 5, ModerationVersion: 2})}, false},
		{"moderation hiding for no known reason", event.Envelope{EventID: 1, Type: event.ArticleModerated,
			Payload: payload(event.ArticleModeration{ArticleID: 5, BoardID: 1, Hidden: "gone", ModerationVersion: 2})}, false},
		{"a comment's moderation", event.Envelope{EventID: 1, Type: event.CommentModerated,
			Payload: payload(event.CommentModeration{CommentID: 6, ArticleID: 5, ModerationVersion: 2})}, false},
	}
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		for _, tt := range tests {
			err := e.svc.Apply(context.Background(), tt.env)
			switch {
			case tt.malformed && !errors.Is(err, event.ErrMalformed):
				t.Errorf("%s: Apply = %v, want ErrMalformed", tt.name, err)
			case !tt.malformed && fault.KindOf(err) != fault.Invalid:
				t.Errorf("%s: Apply = %v, want a fault of kind Invalid", tt.name, err)
			}
		}
		keys := redisclienttest.Keys(t, b.Client, b.Prefix+"*")
		if len(keys) != 1 || keys[0] != b.Prefix+"article-read::epoch" {
			t.Errorf("bad events wrote keys %v; want only the epoch the test set", keys)
		}
	})
}

// TestHandlers: the consumer hands article-read the article, comment, like and article moderation events, and
// nothing else.
func TestHandlers(t *testing.T) {
	t.Parallel()
	svc := NewService(nil, loadViews{}, Config{})
	got := svc.Handlers()
	for _, typ := range []event.Type{event.ArticleCreated, event.ArticleUpdated, event.ArticleDeleted,
		event.CommentCreated, event.CommentDeleted, event.ArticleLiked, event.ArticleUnliked, event.ArticleModerated} {
		if got[typ] == nil {
			t.Errorf("no handler for %s", typ)
		}
	}
	if len(got) != 8 {
		t.Errorf("%d handlers, want 8", len(got))
	}
	if got, want := NewService(nil, loadViews{}, Config{KeyPrefix: "p:"}).KeyPattern(), "p:article-read::*"; got != want {
		t.Errorf("KeyPattern = %q, want %q", got, want)
	}
}

// TestModelsFromBeforeMarkdownAreFetchedAgain checks that a model stored before articles had contentHtml does not
// count as one: a read fetches the article again rather than answer it without its HTML.
func TestModelsFromBeforeMarkdownAreFetchedAgain(t *testing.T) {
	before := `{"articleId":"7","title":"t","content":"c","boardId":"2","writerId":"3","createdAt":"2026-01-02T03:04:05.006Z","modifiedAt":"2026-01-02T03:04:05.006Z"}`
	if isArticleJSON(before) {
		t.Errorf("isArticleJSON(%s) = true, want false", before)
	}
	now, err := encodeArticle(Article{ArticleID: 7, Title: "t", Content: "c", ContentHTML: "<p>c</p>\n", BoardID: 2, WriterID: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !isArticleJSON(string(now)) {
		t.Errorf("isArticleJSON(%s) = false, want true", now)
	}
}

// TestEventsFromBeforeMarkdown: an article event written before articles had contentHtml and contentText (plain
// text content) gives the model the content escaped in one paragraph, as the article service answers such an
// article, never an empty HTML.
func TestEventsFromBeforeMarkdown(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		id := e.truth.create(1)
		e.applyNew(t, 0)
		want, _ := e.truth.want(id)
		created := decoded(t, want)
		old := e.truth.emit(event.ArticleUpdated, event.Article{ArticleID: created.ArticleID, Title: "old", Content: "a <b>\n**c**",
			BoardID: created.BoardID, WriterID: created.WriterID, CreatedAt: created.CreatedAt, ModifiedAt: created.ModifiedAt,
			BoardArticleCount: 1, ArticleVersion: 2, BoardArticleCountVersion: 1})
		e.apply(t, []event.Envelope{old})
		got, err := e.svc.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if a := decoded(t, got); a.ContentHTML != "<p>a &lt;b&gt;\n**c**</p>" || a.ContentText != "a <b>\n**c**" {
			t.Errorf("contentHtml %q, contentText %q; want the content escaped in a paragraph, and the content", a.ContentHTML, a.ContentText)
		}
	})
}
