// Package existencetest serves the tests of services that check article existence: an article service to look
// articles up at, and the article events their consumers apply.
package existencetest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/existence"
	"board/internal/sqldb"
)

// Origin answers the article service's GET /v1/articles/{id} for existence lookups: 200 with ETag "1" for every id,
// except 404 for the ids it was told are missing, and 503 for all while it is down.
type Origin struct {
	URL     string
	mu      sync.Mutex
	missing map[int64]bool
	calls   atomic.Int64
	down    atomic.Bool
}

// NewOrigin starts an Origin for the test.
func NewOrigin(t testing.TB) *Origin {
	o := &Origin{missing: map[int64]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/articles/{id}", func(w http.ResponseWriter, r *http.Request) {
		o.calls.Add(1)
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			http.Error(w, `{"code":"INVALID_ARTICLE_ID","message":"bad id"}`, http.StatusBadRequest)
			return
		}
		if o.down.Load() {
			http.Error(w, `{"code":"DATABASE_UNAVAILABLE","message":"down"}`, http.StatusServiceUnavailable)
			return
		}
		o.mu.Lock()
		gone := o.missing[id]
		o.mu.Unlock()
		if gone {
			http.Error(w, `{"code":"ARTICLE_NOT_FOUND","message":"no such article"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("ETag", `"1"`)
		_ = json.NewEncoder(w).Encode(map[string]any{"articleId": apijson.ID(id)})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	o.URL = srv.URL
	return o
}

// Remove makes the origin answer 404 for id from now on.
func (o *Origin) Remove(id int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.missing[id] = true
}

// SetDown makes the origin answer 503 to everything, or stop doing so.
func (o *Origin) SetDown(down bool) { o.down.Store(down) }

// Calls returns how many requests the origin has had.
func (o *Origin) Calls() int64 { return o.calls.Load() }

// Registry returns a registry over db (migrated with existence.Migrate) that looks articles up at o.
func (o *Origin) Registry(service string, db *sqldb.DB) *existence.Registry {
	return existence.New(db, existence.Config{Service: service, Origin: o.URL})
}

// Created, Updated and Deleted are the article events a registry's handlers apply.
func Created(articleID, version int64) event.Envelope {
	return articleEvent(event.ArticleCreated, articleID, version)
}
func Updated(articleID, version int64) event.Envelope {
	return articleEvent(event.ArticleUpdated, articleID, version)
}
func Deleted(articleID, version int64) event.Envelope {
	return articleEvent(event.ArticleDeleted, articleID, version)
}

var eventIDs atomic.Int64

func articleEvent(t event.Type, articleID, version int64) event.Envelope {
	payload, err := json.Marshal(event.Article{ArticleID: apijson.ID(articleID), ArticleVersion: version})
	if err != nil {
		panic(err)
	}
	return event.Envelope{EventID: apijson.ID(eventIDs.Add(1)), Type: t, Payload: payload}
}

// Apply has reg's handlers apply env, failing the test on an error.
func Apply(t testing.TB, reg *existence.Registry, env event.Envelope) {
	t.Helper()
	if err := reg.Handlers()[env.Type](context.Background(), env); err != nil {
		t.Fatalf("apply %s: %v", env.Type, err)
	}
}
