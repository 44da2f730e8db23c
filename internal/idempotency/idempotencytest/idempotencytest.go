// Package idempotencytest checks a service's keyed write through its HTTP handler, as every producer's tests do:
// a replay gets the first answer byte for byte and writes nothing, a key sent with another request is refused,
// concurrent requests with one key write once, and an expired key is a fresh one.
package idempotencytest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"board/internal/httpio/httpiotest"
	"board/internal/idempotency"
)

// Request is one write as a client sends it, to a handler that serves it as the user it is made by.
type Request struct {
	Handler            http.Handler
	Method, Path, Body string
}

// Case is a service's keyed write.
type Case struct {
	// Request returns the n-th of distinct writes (n from 0) that all succeed.
	Request func(n int) Request
	// Other returns another write by the same user as Request(n), which also succeeds: Request(n)'s key must not
	// be taken for it.
	Other func(n int) Request
	// Writes counts the rows the writes made.
	Writes func(t testing.TB) int
	// Advance moves the service's clock on.
	Advance func(time.Duration)
	// Status is the status of a write made.
	Status int
}

// Send sends r with key as its Idempotency-Key (none when key is empty).
func Send(r Request, key string) httpiotest.Reply {
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req := httptest.NewRequest(r.Method, r.Path, body)
	if key != "" {
		req.Header.Set(idempotency.Header, key)
	}
	rec := httptest.NewRecorder()
	r.Handler.ServeHTTP(rec, req)
	return httpiotest.Reply{Status: rec.Code, Header: rec.Header(), Body: rec.Body.String()}
}

// concurrent is how many requests with one key race.
const concurrent = 20

// Check runs c through every rule of a keyed write.
func Check(t *testing.T, c Case) {
	t.Helper()
	wantWrites := func(what string, n int) {
		t.Helper()
		if got := c.Writes(t); got != n {
			t.Errorf("%s: %d writes, want %d", what, got, n)
		}
	}
	first := Send(c.Request(0), "key-0")
	httpiotest.WantStatus(t, first, c.Status)
	if first.Header.Get(idempotency.ReplayedHeader) != "" {
		t.Errorf("the first answer says it is replayed")
	}
	again := Send(c.Request(0), "key-0")
	if again.Status != first.Status || again.Body != first.Body || again.Header.Get(idempotency.ReplayedHeader) != "true" {
		t.Errorf("replay: %d %s (%s: %q), want the first answer %d %s replayed", again.Status, again.Body,
			idempotency.ReplayedHeader, again.Header.Get(idempotency.ReplayedHeader), first.Status, first.Body)
	}
	wantWrites("after a replay", 1)

	httpiotest.WantError(t, Send(c.Other(0), "key-0"), http.StatusConflict, "IDEMPOTENCY_KEY_REUSED")
	for _, bad := range []string{"a key", strings.Repeat("k", idempotency.MaxKeyLen+1), "clé"} {
		httpiotest.WantError(t, Send(c.Request(0), bad), http.StatusBadRequest, "INVALID_IDEMPOTENCY_KEY")
	}
	wantWrites("after a key reused and bad keys", 1)

	// Released together, so that they meet in the database, not one after another.
	replies := make([]httpiotest.Reply, concurrent)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range replies {
		wg.Go(func() {
			<-start
			replies[i] = Send(c.Request(1), "key-1")
		})
	}
	close(start)
	wg.Wait()
	made := 0
	for _, r := range replies {
		if r.Status != c.Status || r.Body != replies[0].Body {
			t.Errorf("concurrent: %d %s, want %d %s as every other", r.Status, r.Body, c.Status, replies[0].Body)
		}
		if r.Header.Get(idempotency.ReplayedHeader) == "" {
			made++
		}
	}
	if made != 1 {
		t.Errorf("concurrent: %d answers not replayed, want 1", made)
	}
	wantWrites("after concurrent requests with one key", 2)

	c.Advance(idempotency.TTL)
	late := Send(c.Other(0), "key-0")
	httpiotest.WantStatus(t, late, c.Status)
	if late.Header.Get(idempotency.ReplayedHeader) != "" {
		t.Errorf("an expired key's request was answered from its record")
	}
	wantWrites("after an expired key was sent again", 3)
}
