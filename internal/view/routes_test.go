package view

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"board/internal/existence/existencetest"
	"board/internal/httpio/httpiotest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/sqldb/sqldbtest"
)

// wantBody checks a 200 JSON answer whose body is exactly want.
func wantBody(t *testing.T, r httpiotest.Reply, want string) {
	t.Helper()
	httpiotest.WantStatus(t, r, http.StatusOK)
	if got := strings.TrimSuffix(r.Body, "\n"); got != want {
		t.Errorf("body = %s, want %s", got, want)
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		h := handler(e.service(Config{}))
		views := fmt.Sprintf("/v1/article-views/articles/%d", article)
		wantBody(t, httpiotest.Call(h, "GET", views+"/count", ""), "0")
		wantBody(t, httpiotest.Call(httpiotest.As(h, 9223372036854775807), "POST", views+"/users/9223372036854775807", ""), "1")
		wantBody(t, httpiotest.Call(httpiotest.As(h, 9223372036854775807), "POST", views+"/users/9223372036854775807", ""), "1")
		wantBody(t, httpiotest.Call(httpiotest.As(h, 1), "POST", views+"/users/1", ""), "2")
		wantBody(t, httpiotest.Call(h, "GET", views+"/count", ""), "2")

		// The keys are named after the article and the user, under the prefix, and share the article's hash tag;
		// the article is marked in one shard of the unsaved index.
		svc := e.service(Config{})
		keys := redisclienttest.Keys(t, e.redis.Client, e.prefix+"*")
		tag := fmt.Sprintf("%sview::article::{%d}::", e.prefix, article)
		want := []string{tag + "user::1::lock", tag + "user::9223372036854775807::lock", tag + "view_count",
			svc.unsavedKey(article)}
		slices.Sort(keys)
		if diff := cmp.Diff(want, keys); diff != "" {
			t.Errorf("Redis keys (-want +got):\n%s", diff)
		}
	})
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	b := redisclienttest.Mini(t)
	origin := existencetest.NewOrigin(t)
	h := handler(NewService(testStore(sqldbtest.OpenSQLite(t, Migrate), origin), b.Client, Config{KeyPrefix: b.Prefix}))
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"POST", "/v1/article-views/articles/x/users/1", 400, "INVALID_ARTICLE_ID"},
		{"POST", "/v1/article-views/articles/-1/users/1", 400, "INVALID_ARTICLE_ID"},
		{"POST", "/v1/article-views/articles/1.5/users/1", 400, "INVALID_ARTICLE_ID"},
		{"POST", "/v1/article-views/articles/9223372036854775808/users/1", 400, "INVALID_ARTICLE_ID"},
		{"POST", "/v1/article-views/articles/1/users/abc", 400, "INVALID_USER_ID"},
		{"POST", "/v1/article-views/articles/1/users/-7", 400, "INVALID_USER_ID"},
		{"POST", "/v1/article-views/articles/1/users/%20", 400, "INVALID_USER_ID"},
		{"GET", "/v1/article-views/articles/abc/count", 400, "INVALID_ARTICLE_ID"},
		{"GET", "/v1/article-views/articles/99999999999999999999/count", 400, "INVALID_ARTICLE_ID"},
		{"GET", "/v1/article-views/articles/1/users/1", 405, "METHOD_NOT_ALLOWED"},
		{"POST", "/v1/article-views/articles/1/count", 405, "METHOD_NOT_ALLOWED"},
		{"DELETE", "/v1/article-views/articles/1/users/1", 405, "METHOD_NOT_ALLOWED"},
		{"POST", "/v1/article-views/articles/1/users/", 404, "NOT_FOUND"},
		{"GET", "/v1/article-views/articles/1", 404, "NOT_FOUND"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			httpiotest.WantError(t, httpiotest.Call(h, tc.method, tc.path, ""), tc.status, tc.code)
		})
	}
	if n := len(b.Mini.Keys()); n != 0 {
		t.Errorf("bad requests wrote %d keys", n)
	}
	if n := origin.Calls(); n != 0 {
		t.Errorf("bad requests made %d article lookups", n)
	}
}

// TestRedisDown checks that the API answers 503 with a clear code when Redis cannot serve, and does not hang when
// Redis accepts connections but never answers: the client's timeouts end the request.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, Migrate)
	origin := existencetest.NewOrigin(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() { // accepts connections and never answers
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() })
		}
	}()
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"stopped", func(t *testing.T) redis.UniversalClient {
			b := redisclienttest.Mini(t)
			rdb := quickClient(t, b.Mini.Addr())
			if err := rdb.Ping(context.Background()).Err(); err != nil { // leaves a pooled connection behind
				t.Fatal(err)
			}
			b.Mini.Close()
			return rdb
		}},
		{"not answering", func(t *testing.T) redis.UniversalClient { return quickClient(t, silent.Addr().String()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := handler(NewService(testStore(db, origin), tc.client(t), Config{KeyPrefix: "test:"}))
			httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, 2), "POST", "/v1/article-views/articles/1/users/2", ""), 503, "REDIS_UNAVAILABLE")
			httpiotest.WantError(t, httpiotest.Call(h, "GET", "/v1/article-views/articles/1/count", ""), 503, "REDIS_UNAVAILABLE")
		})
	}
}

// quickClient is a client that gives up fast, as the defaults retry a dead server for seconds.
func quickClient(t *testing.T, addr string) redis.UniversalClient {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 100 * time.Millisecond, DialerRetries: 1,
		ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}
