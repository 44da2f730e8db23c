package articleread

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/httpio/httpiotest"
	"board/internal/redisclient"
	"board/internal/redisclient/redisclienttest"
)

var modelOrigins = []string{svcArticle, svcComment, svcLike}

// TestOriginsDownModelCached: with the model and the view count cached, a read needs no origin, so one that is
// down or hanging changes nothing.
func TestOriginsDownModelCached(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		for _, h := range []health{failing, hanging} {
			e := newEnv(t, b)
			e.svc = e.service(e.stableViewCache())
			id := e.uncachedArticle(1)
			e.checkGet(t, id) // caches the model and the view count
			for _, svc := range append(modelOrigins, svcView) {
				e.origin.set(svc, h)
			}
			e.origin.resetCalls()
			e.checkGet(t, id)
			if calls := e.origin.allCalls(); len(calls) != 0 {
				t.Errorf("a cached read called the origins: %v", calls)
			}
		}
	})
}

// TestOriginsDownNothingCached: a model that cannot be rebuilt is an Unavailable fault, ORIGIN_UNAVAILABLE (503),
// whichever origin is down; a hanging one ends at the reader's deadline.
func TestOriginsDownNothingCached(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		for _, svc := range modelOrigins {
			e := newEnv(t, b)
			id := e.uncachedArticle(1)
			e.origin.set(svc, failing)
			_, err := e.svc.Get(context.Background(), id)
			wantFault(t, svc+" down: Get", err, fault.Unavailable, "ORIGIN_UNAVAILABLE")
			api := httpiotest.Handler("article-read", Routes(e.svc, httpiotest.Logger))
			r := httpiotest.Call(api, http.MethodGet, "/v1/articles/"+strconv.FormatInt(id, 10), "")
			httpiotest.WantError(t, r, http.StatusServiceUnavailable, "ORIGIN_UNAVAILABLE")

			e.origin.set(svc, up) // and back: the next read rebuilds
			e.checkGet(t, id)
		}

		e := newEnv(t, b)
		id := e.uncachedArticle(1)
		e.origin.set(svcArticle, hanging)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := e.svc.Get(ctx, id)
		if fault.KindOf(err) != fault.Unavailable && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("article origin hanging: Get = %v, want Unavailable or the deadline", err)
		}
	})
}

// TestListsWithOriginDown: pages the synced list covers are served while the article service is down; the others,
// and every page of an unsynced board, are ORIGIN_UNAVAILABLE.
func TestListsWithOriginDown(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b)
		e.svc = e.service(e.stableViewCache())
		bigBoard(t, e, ListSize+20)
		if err := e.svc.Backfill(ctx, 1); err != nil {
			t.Fatal(err)
		}
		e.checkPage(t, 1, 1, 30, true) // caches the page's models and view counts
		for _, svc := range append(modelOrigins, svcView) {
			e.origin.set(svc, failing)
		}
		e.checkPage(t, 1, 1, 30, true)
		if _, err := e.svc.List(ctx, 1, 34, 30); err == nil { // ranks 990..1019: past the list
			t.Errorf("a page past the list was served with the article service down")
		} else {
			wantFault(t, "List past the list", err, fault.Unavailable, "ORIGIN_UNAVAILABLE")
		}
		_, err := e.svc.List(ctx, 2, 1, 30) // board 2 was never synced
		wantFault(t, "List of an unsynced board", err, fault.Unavailable, "ORIGIN_UNAVAILABLE")
		_, err = e.svc.Scroll(ctx, 2, 30, 0)
		wantFault(t, "Scroll of an unsynced board", err, fault.Unavailable, "ORIGIN_UNAVAILABLE")
		err = e.svc.Backfill(ctx, 2)
		wantFault(t, "Backfill", err, fault.Unavailable, "ORIGIN_UNAVAILABLE")
	})
}

// deadRedis returns clients, of both libraries, of a Redis that is gone.
func deadRedis(t *testing.T) (redis.UniversalClient, rueidis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	addr := mr.Addr()
	reads, _ := readsClient(t, []string{addr}, 0) // it connects at once: while the server is there
	mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	return rdb, reads
}

// TestRedisDown: without Redis nothing is served and no event applied: REDIS_UNAVAILABLE (503), which the consumer
// retries.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b)
		id := e.uncachedArticle(1)
		e.applyNew(t, 0)
		e.checkGet(t, id)
		e.b.Client, e.reads = deadRedis(t) // the same for every backend: nothing answers
		e.svc = e.service(e.viewCache())
		_, err := e.svc.Get(ctx, id)
		wantFault(t, "Get", err, fault.Unavailable, "REDIS_UNAVAILABLE")
		_, err = e.svc.List(ctx, 1, 1, 30)
		wantFault(t, "List", err, fault.Unavailable, "REDIS_UNAVAILABLE")
		_, err = e.svc.Scroll(ctx, 1, 30, id)
		wantFault(t, "Scroll", err, fault.Unavailable, "REDIS_UNAVAILABLE")
		for _, env := range e.truth.eventsSince(0) {
			err := e.svc.Apply(ctx, env)
			wantFault(t, "Apply "+string(env.Type), err, fault.Unavailable, "REDIS_UNAVAILABLE")
			if errors.Is(err, event.ErrMalformed) {
				t.Errorf("Apply %s with Redis down is ErrMalformed: the consumer would dead-letter it", env.Type)
			}
		}

		api := httpiotest.Handler("article-read", Routes(e.svc, httpiotest.Logger))
		for _, target := range []string{"/v1/articles/" + strconv.FormatInt(id, 10), "/v1/articles?boardId=1",
			"/v1/articles/infinite-scroll?boardId=1"} {
			r := httpiotest.Call(api, http.MethodGet, target, "")
			httpiotest.WantError(t, r, http.StatusServiceUnavailable, "REDIS_UNAVAILABLE")
		}
	})
}

// TestUnknownArticle: an article the origin does not have is ARTICLE_NOT_FOUND (404), and nothing stays cached for
// it that a later read would serve.
func TestUnknownArticle(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		id := e.truth.create(1) + 1 // never created
		_, err := e.svc.Get(context.Background(), id)
		wantFault(t, "Get of an unknown article", err, fault.NotFound, "ARTICLE_NOT_FOUND")
		api := httpiotest.Handler("article-read", Routes(e.svc, httpiotest.Logger))
		r := httpiotest.Call(api, http.MethodGet, "/v1/articles/"+strconv.FormatInt(id, 10), "")
		httpiotest.WantError(t, r, http.StatusNotFound, "ARTICLE_NOT_FOUND")
		// The origin's 404 is remembered as a tombstone: the next read does not ask again, and no late event can
		// make a model of it.
		if got, _ := b.Client.HGetAll(context.Background(), e.svc.modelKey(id)).Result(); len(got) != 1 || got["deleted"] == "" {
			t.Errorf("after a read of an unknown article its model holds %v, want only a tombstone", got)
		}
		e.origin.resetCalls()
		_, err = e.svc.Get(context.Background(), id)
		wantFault(t, "Get of an unknown article, again", err, fault.NotFound, "ARTICLE_NOT_FOUND")
		if calls := e.origin.allCalls(); len(calls) != 0 {
			t.Errorf("the second read of an unknown article called the origins: %v", calls)
		}
	})
}

// freezingProxy forwards TCP connections to a server until frozen is closed; from then on it keeps them open and
// forwards nothing: a server that hangs.
type freezingProxy struct {
	addr   string
	frozen chan struct{}
}

func newFreezingProxy(t *testing.T, target string) *freezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{addr: ln.Addr().String(), frozen: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			t.Cleanup(func() { client.Close(); server.Close() })
			go p.pipe(server, client)
			go p.pipe(client, server)
		}
	}()
	return p
}

// pipe copies from src to dst until the proxy freezes; what it reads after that goes nowhere.
func (p *freezingProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		select {
		case <-p.frozen:
			continue
		default:
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// TestRedisHangs: with a Redis that takes requests and never answers, reads end at their deadline with
// REDIS_UNAVAILABLE (503), through the reads client (rueidis) as through go-redis, not hang.
func TestRedisHangs(t *testing.T) {
	t.Parallel()
	b := redisclienttest.Mini(t)
	e := newEnv(t, b)
	id := e.uncachedArticle(1)
	e.applyNew(t, 0)
	proxy := newFreezingProxy(t, b.Addrs[0])
	rdb, err := redisclient.Connect(context.Background(), []string{proxy.addr}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	e.b.Client = rdb
	e.reads, _ = readsClient(t, []string{proxy.addr}, 0)
	e.svc = e.service(loadViews{})
	e.checkGet(t, id)
	close(proxy.frozen)
	for _, read := range []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"Get", func(ctx context.Context) error { _, err := e.svc.Get(ctx, id); return err }},
		{"List", func(ctx context.Context) error { _, err := e.svc.List(ctx, 1, 1, 30); return err }},
		{"Scroll", func(ctx context.Context) error { _, err := e.svc.Scroll(ctx, 1, 30, 0); return err }},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := read.do(ctx)
		cancel()
		wantFault(t, read.name+" of a hung Redis", err, fault.Unavailable, "REDIS_UNAVAILABLE")
	}
}
