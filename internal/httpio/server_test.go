package httpio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"board/internal/fault"
)

// logBuffer collects what a text logger writes from the server's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func captureLogs() (*slog.Logger, *logBuffer) {
	logs := &logBuffer{}
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), logs
}

func TestClassifyInContext(t *testing.T) {
	t.Parallel()
	live := context.Background()
	gone, cancel := context.WithCancel(live)
	cancel()
	late, cancelLate := context.WithDeadline(live, time.Unix(0, 0))
	defer cancelLate()
	plain := errors.New("driver: unexpected packet")
	redisDown := fault.Unavailablef(context.Canceled, "REDIS_UNAVAILABLE", "the cache is down")
	for _, tc := range []struct {
		name       string
		ctx        context.Context
		err        error
		wantStatus int
		wantCode   string
	}{
		{"plain error", live, plain, http.StatusInternalServerError, "INTERNAL"},
		{"plain error after the deadline", late, plain, http.StatusServiceUnavailable, "TIMEOUT"},
		{"deadline error after the deadline", late, fmt.Errorf("query: %w", context.DeadlineExceeded), http.StatusServiceUnavailable, "TIMEOUT"},
		{"a dependency's own timeout", live, fmt.Errorf("query: %w", context.DeadlineExceeded), http.StatusServiceUnavailable, "UNAVAILABLE"},
		{"client fault after the deadline", late, fault.Invalidf("BAD_THING", "bad"), http.StatusBadRequest, "BAD_THING"},
		{"dependency fault after the deadline", late, redisDown, http.StatusServiceUnavailable, "REDIS_UNAVAILABLE"},
		{"plain error, client gone", gone, fmt.Errorf("query: %w", context.Canceled), statusClientClosedRequest, "CLIENT_CLOSED_REQUEST"},
		{"dependency fault, client gone", gone, redisDown, statusClientClosedRequest, "CLIENT_CLOSED_REQUEST"},
		{"client fault, client gone", gone, fault.NotFoundf("NO_THING", "no"), http.StatusNotFound, "NO_THING"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := classify(tc.ctx, tc.err)
			if diff := cmp.Diff([]any{tc.wantStatus, tc.wantCode}, []any{status, body.Code}); diff != "" {
				t.Errorf("status, code (-want +got):\n%s", diff)
			}
		})
	}
}

// A handler that waits on its context is stopped by the request deadline and answered 503 over the real server
// (whose write timeout leaves room for it).
func TestRequestDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	api := http.NewServeMux()
	api.HandleFunc("GET /wait", Handle(discard, func(w http.ResponseWriter, r *http.Request) error {
		ctx, cancel := context.WithCancel(r.Context()) // as a dependency's client derives one
		defer cancel()
		<-ctx.Done()
		return fmt.Errorf("query: %w", ctx.Err())
	}))
	api.HandleFunc("GET /deadline", func(w http.ResponseWriter, r *http.Request) {
		deadline, ok := r.Context().Deadline()
		Write(w, http.StatusOK, map[string]bool{"set": ok, "withinTimeout": time.Until(deadline) <= timeout})
	})
	srv := testServer(t, func(s *Server) { s.API, s.RequestTimeout = api, timeout })

	a := do(t, srv, http.MethodGet, "/wait", "")
	if a.status != http.StatusServiceUnavailable || decodeErr(t, a).Code != "TIMEOUT" {
		t.Errorf("handler past its deadline: %d %s, want 503 TIMEOUT", a.status, a.body)
	}
	if a := do(t, srv, http.MethodGet, "/deadline", ""); strings.TrimSpace(a.body) != `{"set":true,"withinTimeout":true}` {
		t.Errorf("request context deadline: %s", a.body)
	}
}

// A client that hangs up while its request waits is not logged as a server error.
func TestClientGoneIsNotLoggedAsAnError(t *testing.T) {
	t.Parallel()
	logger, logs := captureLogs()
	entered, done := make(chan struct{}), make(chan struct{})
	api := http.NewServeMux()
	wait := Handle(logger, func(w http.ResponseWriter, r *http.Request) error {
		close(entered)
		<-r.Context().Done()
		return fmt.Errorf("query: %w", r.Context().Err())
	})
	api.HandleFunc("GET /wait", func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		wait(w, r)
	})
	srv := testServer(t, func(s *Server) { s.API, s.Logger = api, logger })

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/wait", nil)
	if err != nil {
		t.Fatal(err)
	}
	clientErr := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			err = resp.Body.Close()
		}
		clientErr <- err
	}()
	<-entered
	cancel()
	<-done
	if err := <-clientErr; !errors.Is(err, context.Canceled) {
		t.Errorf("client: %v, want context.Canceled", err)
	}
	if got := logs.String(); !strings.Contains(got, "client went away") || strings.Contains(got, "level=ERROR") {
		t.Errorf("logs:\n%s\nwant a debug line and no error", got)
	}
}

// Every check gets its own budget: hung ones (whether or not they heed their context) do not make the others fail.
// The answer says only ok or unavailable; the reasons go to the log.
func TestReadyzChecksIndependently(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	logger, logs := captureLogs()
	checks := []Check{
		{"kafka", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
		{"redis", func(context.Context) error { <-release; return nil }}, // ignores its context
		{"sql", func(ctx context.Context) error { return ctx.Err() }},
		{"mysql", func(context.Context) error {
			return errors.New("dial tcp 10.9.8.7:3306: connect: connection refused")
		}},
	}
	srv := testServer(t, func(s *Server) { s.Checks, s.ReadyTimeout, s.Logger = checks, 50*time.Millisecond, logger })

	a := do(t, srv, http.MethodGet, "/readyz", "")
	if a.status != http.StatusServiceUnavailable {
		t.Errorf("status = %d, want 503", a.status)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(a.body), &got); err != nil {
		t.Fatalf("body %q: %v", a.body, err)
	}
	want := map[string]string{"kafka": "unavailable", "redis": "unavailable", "sql": "ok", "mysql": "unavailable"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, line := range []string{
		`check=kafka err="context deadline exceeded"`,
		`check=redis err="context deadline exceeded"`,
		`check=mysql err="dial tcp 10.9.8.7:3306: connect: connection refused"`,
	} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("logs lack %s:\n%s", line, logs)
		}
	}
}

func TestProbesAllowOnlyGetAndHead(t *testing.T) {
	t.Parallel()
	srv := testServer(t, nil)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			a := do(t, srv, method, path, "")
			if a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q; want 405, GET, HEAD", method, path, a.status, a.header.Get("Allow"))
			}
			if code := decodeErr(t, a).Code; code != "METHOD_NOT_ALLOWED" {
				t.Errorf("%s %s: code %q", method, path, code)
			}
		}
		if a := do(t, srv, http.MethodHead, path, ""); a.status != http.StatusOK {
			t.Errorf("HEAD %s: %d", path, a.status)
		}
	}
}

// Paths are served as sent: an unclean one gets a JSON 404, not the redirect (with an HTML body) ServeMux gives.
// The client here follows redirects, so a redirect would show up as a 200.
func TestUncleanPathsAreNotFound(t *testing.T) {
	t.Parallel()
	srv := testServer(t, nil)
	for _, path := range []string{"//v1/items/1", "/v1//items/1", "/v1/items/../items/1", "/v1/./items/1",
		"/v1/items/1/.", "//healthz", "/x/../healthz"} {
		a := do(t, srv, http.MethodGet, path, "")
		if a.status != http.StatusNotFound || a.header.Get("Location") != "" {
			t.Errorf("GET %s: %d, Location %q; want 404 and no redirect", path, a.status, a.header.Get("Location"))
		}
		if code := decodeErr(t, a).Code; code != "NOT_FOUND" {
			t.Errorf("GET %s: code %q", path, code)
		}
	}
	if a := do(t, srv, http.MethodGet, "/v1/items/1", ""); a.status != http.StatusOK {
		t.Errorf("clean path: %d", a.status)
	}
}

// dial opens a raw connection to srv, with a deadline far beyond what the test needs so that a server that does not
// do its part fails the test instead of hanging it.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// A body trickled a byte at a time is cut off by the read timeout instead of holding the connection for as long
// as the client likes.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	srv := testServer(t, func(s *Server) { s.RequestTimeout = 250 * time.Millisecond })
	conn := dial(t, srv.Listener.Addr().String())
	const bodySize = 10000 // 100 s at the trickle's pace
	if _, err := fmt.Fprintf(conn, "POST /v1/echo HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n{\"a\":\"", bodySize); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	trickled := make(chan struct{})
	t.Cleanup(func() {
		_ = conn.Close() // ends the trickle
		<-trickled
	})
	go func() {
		defer close(trickled)
		for sent.Store(6); sent.Load() < bodySize; sent.Add(1) {
			if _, err := conn.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the server still waited for the body after a minute")
	}
	if sent := sent.Load(); sent >= bodySize {
		t.Fatalf("the whole body (%d bytes) was accepted", sent)
	}
	if err != nil {
		t.Logf("connection closed without an answer: %v", err) // the write timeout passed first on a busy machine
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{resp.StatusCode, resp.Header, string(b)}
	if a.status != http.StatusBadRequest || decodeErr(t, a).Code != "BODY_UNREADABLE" {
		t.Errorf("answer to a cut-off body: %d %s, want 400 BODY_UNREADABLE", a.status, a.body)
	}
}

func TestIdleConnectionIsClosed(t *testing.T) {
	srv := testServer(t, func(s *Server) { s.RequestTimeout = 50 * time.Millisecond })
	conn := dial(t, srv.Listener.Addr().String())
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("status %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("idle connection: read error %v, want io.EOF (closed by the server)", err)
	}
}

// sendWhole writes a request with body over a new connection, all of it, before it reads the answer, as Python's
// http.client does. closes is whether the answer closes the connection.
func sendWhole(t *testing.T, addr, method, path string, body []byte) (a answer, closes bool) {
	t.Helper()
	conn := dial(t, addr)
	if _, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		method, path, len(body)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(body); err != nil {
		t.Fatalf("%s %s: writing the body: %v", method, path, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer's body: %v", method, path, err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}, resp.Close
}

// A client that writes its whole oversized body before it reads still reads the 413, and the connection closes:
// the server drains the body instead of resetting the connection under the answer. So do other error answers
// given before the body was read.
func TestErrorAnswersReachClientsThatSendTheWholeBodyFirst(t *testing.T) {
	t.Parallel()
	srv := testServer(t, nil)
	addr := srv.Listener.Addr().String()
	const size = 10 << 20
	body := append([]byte(`{"a":"`), bytes.Repeat([]byte("x"), size-6)...)
	for try := range 30 {
		a, closes := sendWhole(t, addr, http.MethodPost, "/v1/echo", body)
		if a.status != http.StatusRequestEntityTooLarge || decodeErr(t, a).Code != "BODY_TOO_LARGE" || !closes {
			t.Fatalf("try %d: %d %s (Connection: close %v), want a 413 BODY_TOO_LARGE that closes", try, a.status, a.body, closes)
		}
	}
	notJSON := bytes.Repeat([]byte("x"), size)
	for try := range 10 {
		if a, _ := sendWhole(t, addr, http.MethodPost, "/v1/echo", notJSON); a.status != http.StatusBadRequest {
			t.Fatalf("try %d: not JSON: %d %s, want 400", try, a.status, a.body)
		}
		if a, _ := sendWhole(t, addr, http.MethodPost, "/v1/nowhere", body); a.status != http.StatusNotFound {
			t.Fatalf("try %d: unknown route: %d %s, want 404", try, a.status, a.body)
		}
	}
}

// Concurrent first requests of a route resolve its handles once, and every one of them gets those.
func TestCowMapCreatesOncePerKey(t *testing.T) {
	t.Parallel()
	var m cowMap[int, *int]
	var created atomic.Int64
	got := make([][]*int, 8)
	var wg sync.WaitGroup
	for g := range got {
		wg.Go(func() {
			for k := range 50 {
				got[g] = append(got[g], m.get(k, func() *int { created.Add(1); return new(k) }))
			}
		})
	}
	wg.Wait()
	if n := created.Load(); n != 50 {
		t.Errorf("created %d values for 50 keys", n)
	}
	for g := range got {
		for k, v := range got[g] {
			if v != got[0][k] || *v != k {
				t.Fatalf("goroutine %d, key %d: got %p (%d), want %p", g, k, v, *v, got[0][k])
			}
		}
	}
}

// Generated request ids are 16 hex digits, unique however many requests arrive at once, and the ones handlers see.
func TestGeneratedRequestIDsAreUnique(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := Server{Service: "test", API: testAPI(discard), Gatherer: reg, Metrics: NewMetrics(reg), Logger: discard}.Handler()
	ids := make([][]string, 8)
	var wg sync.WaitGroup
	for g := range ids {
		wg.Go(func() {
			for range 500 {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/items/1", nil))
				var body struct{ RequestID string }
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
					t.Error(err)
					return
				}
				if id := rec.Header().Get("X-Request-Id"); id != body.RequestID {
					t.Errorf("X-Request-Id %q, RequestID(ctx) %q", id, body.RequestID)
				}
				ids[g] = append(ids[g], body.RequestID)
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, id := range slices.Concat(ids...) {
		if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Errorf("request id %q, want 16 hex digits", id)
		}
		if seen[id] {
			t.Errorf("request id %q repeated", id)
		}
		seen[id] = true
	}
}

// A stream outlives the request deadline and the write timeout, is counted but not timed in the metrics, and ends
// when the server shuts down, which then does not wait for it.
func TestStreams(t *testing.T) {
	t.Parallel()
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/stream", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Time{}); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := io.WriteString(w, "tick\n"); err != nil || rc.Flush() != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	reg := prometheus.NewRegistry()
	s := Server{Service: "test", API: api, Gatherer: reg, Metrics: NewMetrics(reg), Logger: discard,
		RequestTimeout: 50 * time.Millisecond, Streams: map[string]bool{"/v1/stream": true}}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = s.HTTPServer()
	srv.Start()
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/v1/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	deadline := time.Now().Add(400 * time.Millisecond) // 8 request deadlines, 2 write timeouts
	for time.Now().Before(deadline) {
		if !lines.Scan() {
			t.Fatalf("the stream ended after %v: %v", time.Until(deadline), lines.Err())
		}
	}
	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shutdown <- srv.Config.Shutdown(ctx)
	}()
	for lines.Scan() {
	}
	if err := <-shutdown; err != nil {
		t.Errorf("shutdown waited for the stream: %v", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "board_http_requests_total":
			if len(f.GetMetric()) != 1 || f.GetMetric()[0].GetCounter().GetValue() != 1 {
				t.Errorf("requests counted: %v, want the stream once", f.GetMetric())
			}
		case "board_http_request_duration_seconds":
			for _, m := range f.GetMetric() {
				if n := m.GetHistogram().GetSampleCount(); n != 0 {
					t.Errorf("a stream was timed: %d samples", n)
				}
			}
		}
	}
}

// A handler's copy from a file reaches the connection's ReadFrom through the port's writers (where net/http sends an
// *os.File with sendfile), and the answer is counted as any other; a path of Server.Files is never compressed.
func TestWritersPassReadFromOn(t *testing.T) {
	t.Parallel()
	f, err := os.CreateTemp(t.TempDir(), "blob")
	if err != nil {
		t.Fatal(err)
	}
	content := strings.Repeat("the bytes of a file ", 100) // of a size and type the compressor would take
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /file", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if _, ok := w.(io.ReaderFrom); !ok {
			http.Error(w, "no ReadFrom", http.StatusInternalServerError)
			return
		}
		_, _ = f.Seek(0, io.SeekStart)
		_, _ = io.Copy(w, f)
	})
	srv := testServer(t, func(s *Server) { s.API, s.Files = api, []string{"/file"} })
	// Asked for compression too: a file path does not go through the compressor, whose writer would hide the
	// connection's ReadFrom.
	for _, encoding := range []string{"identity", "gzip, zstd"} {
		a := do(t, srv, http.MethodGet, "/file", "", "Accept-Encoding", encoding)
		if a.status != http.StatusOK || a.body != content || a.header.Get("Content-Encoding") != "" {
			t.Fatalf("Accept-Encoding %s: %d %q %v", encoding, a.status, a.body, a.header)
		}
	}
}
