package httpio

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one readiness probe: a dependency the service needs.
type Check struct {
	Name string
	Ping func(ctx context.Context) error
}

// Defaults for the Server's zero timeouts.
const (
	DefaultRequestTimeout = 5 * time.Second
	DefaultReadyTimeout   = time.Second
)

// Server describes what one service port serves besides its API.
type Server struct {
	Service        string
	API            *http.ServeMux // the service's routes
	Guard          *Guard         // what writes need (a token, a rate limit); nil lets every write through
	OpenAPI        []byte         // the service's OpenAPI document, served at /openapi.json when not nil
	Checks         []Check        // what /readyz pings
	Gatherer       prometheus.Gatherer
	Metrics        *Metrics
	Logger         *slog.Logger
	RequestTimeout time.Duration // the deadline of each API request's work; 0 means DefaultRequestTimeout
	ReadyTimeout   time.Duration // each readiness check's own budget; 0 means DefaultReadyTimeout
	// Streams are the exact paths whose answers stay open (Server-Sent Events): served without the request deadline;
	// their handlers bound their own writes and end with their client or their token.
	Streams map[string]bool
	// Files are path prefixes whose answers are stored files already compressed (images): never passed through the
	// compressor, whose writer would hide the connection's ReadFrom (sendfile) from their copy.
	Files []string
}

func (s Server) requestTimeout() time.Duration {
	if s.RequestTimeout > 0 {
		return s.RequestTimeout
	}
	return DefaultRequestTimeout
}

func (s Server) readyTimeout() time.Duration {
	if s.ReadyTimeout > 0 {
		return s.ReadyTimeout
	}
	return DefaultReadyTimeout
}

// HTTPServer returns an http.Server for the port whose timeouts all follow from the request deadline d:
//   - ReadHeaderTimeout d: headers are small; a client slower than that is broken or hostile (slowloris).
//   - ReadTimeout 3d: the headers (at most d) and the body, which the handler reads within its own deadline d, with d
//     to spare. It must not pass while the handler is still within its deadline: net/http then cancels the
//     request's context, which would read as a client that went away. A body trickled slower is cut off here.
//   - WriteTimeout 4d, counted from the end of the headers: it outlasts both the handler's deadline, so that its 503
//     still goes out, and the read timeout, so that the answer to a cut-off body does too.
//   - IdleTimeout 12d (a minute by default): a keep-alive connection costs a goroutine and a socket while idle.
func (s Server) HTTPServer() *http.Server {
	d := s.requestTimeout()
	// Streams never go idle: Shutdown would wait for them to its end. It ends them first.
	closing, endStreams := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           s.handler(closing),
		ReadHeaderTimeout: d,
		ReadTimeout:       3 * d,
		WriteTimeout:      4 * d,
		IdleTimeout:       12 * d,
		ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(endStreams)
	return srv
}

func (s Server) isFile(path string) bool {
	return slices.ContainsFunc(s.Files, func(prefix string) bool { return strings.HasPrefix(path, prefix) })
}

// Handler returns the port's handler: /healthz, /readyz, /metrics, /openapi.json and the instrumented API. It routes on the path
// as sent: a ServeMux at the root would answer a path it cleans (//v1/x, /v1/../x) with an HTML redirect. Answers
// are compressed when the client asks (compress), except the streams, whose events must leave as they come, and
// /metrics, which Prometheus's handler compresses itself.
func (s Server) Handler() http.Handler { return s.handler(context.Background()) }

// handler is Handler with the streams ended when closing is done.
func (s Server) handler(closing context.Context) http.Handler {
	api := s.instrument(s.API, closing)
	compressed := compress(api)
	operational := map[string]http.Handler{
		"/healthz": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			Write(w, http.StatusOK, map[string]string{"status": "ok"})
		}),
		"/readyz":  http.HandlerFunc(s.ready),
		"/metrics": promhttp.HandlerFor(s.Gatherer, promhttp.HandlerOpts{}),
	}
	if s.OpenAPI != nil {
		operational["/openapi.json"] = compress(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(s.OpenAPI)))
			_, _ = w.Write(s.OpenAPI)
		}))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := operational[r.URL.Path]
		switch {
		case !ok && (s.Streams[r.URL.Path] || s.isFile(r.URL.Path)):
			api.ServeHTTP(w, r)
		case !ok:
			compressed.ServeHTTP(w, r)
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			w.Header().Set("Allow", "GET, HEAD")
			Write(w, http.StatusMethodNotAllowed, errorBody{"METHOD_NOT_ALLOWED", r.Method + " is not allowed on " + r.URL.Path})
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// ready pings every dependency at once, each within its own budget, so that one hung dependency does not make the
// others look down. Clients learn only ok or unavailable; the reasons, which may hold addresses, go to the log.
func (s Server) ready(w http.ResponseWriter, r *http.Request) {
	errs := make([]error, len(s.Checks))
	var wg sync.WaitGroup
	for i, c := range s.Checks {
		wg.Go(func() { errs[i] = ping(r.Context(), c, s.readyTimeout()) })
	}
	wg.Wait()
	status := map[string]string{}
	code := http.StatusOK
	for i, c := range s.Checks {
		if errs[i] != nil {
			s.Logger.WarnContext(r.Context(), "readiness check failed", "service", s.Service, "check", c.Name, "err", errs[i])
			status[c.Name] = "unavailable"
			code = http.StatusServiceUnavailable
			continue
		}
		status[c.Name] = "ok"
	}
	Write(w, code, status)
}

// ping runs one check within budget, and gives up on it at the end of the budget even if it ignores its context.
func ping(ctx context.Context, c Check, budget time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	done := make(chan error, 1) // a check that overruns finishes into it unread
	go func() { done <- c.Ping(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

type ctxKey struct{}

// RequestID returns the id of the request being served, for logs.
func RequestID(ctx context.Context) string {
	if x, ok := ctx.Value(ctxKey{}).(*exchange); ok {
		return x.id
	}
	return ""
}

// exchange is the edge's state for one API request, in one allocation: the request's context, which carries its
// deadline and its id, and the writers its answer goes through.
type exchange struct {
	context.Context // the request's, with its deadline
	id              string
	idHeader        [1]string // the X-Request-Id header's value, without a slice allocated for it
	sw              statusWriter
	mw              muxWriter
}

// Value makes the exchange the value of ctxKey, for RequestID.
func (x *exchange) Value(key any) any {
	if key == (ctxKey{}) {
		return x
	}
	return x.Context.Value(key)
}

// instrument adds a request id, the request deadline, panic recovery, JSON answers for unknown routes, and
// per-route metrics.
func (s Server) instrument(api *http.ServeMux, closing context.Context) http.Handler {
	routes := &routeTable{metrics: s.Metrics, service: s.Service}
	timeout := s.requestTimeout()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := &exchange{id: r.Header.Get("X-Request-Id"), sw: statusWriter{ResponseWriter: w, status: http.StatusOK}}
		if x.id == "" {
			x.id = newRequestID()
		}
		x.idHeader[0] = x.id
		w.Header()["X-Request-Id"] = x.idHeader[:] // the key is canonical: what Set would do, but for the slice
		var cancel context.CancelFunc
		if s.Streams[r.URL.Path] {
			x.Context, cancel = context.WithCancel(r.Context())
			defer context.AfterFunc(closing, cancel)()
		} else {
			x.Context, cancel = context.WithTimeout(r.Context(), timeout)
		}
		defer cancel()
		r = r.WithContext(x)
		s.serve(x, r, api, routes)
		if x.sw.status >= 400 && r.ContentLength != 0 {
			discardBody(w, r) // once the answer is out and measured
		}
	})
}

// serve routes r, recovering from a panic, and counts the answer in the metrics.
func (s Server) serve(x *exchange, r *http.Request, api *http.ServeMux, routes *routeTable) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler { //nolint:errorlint // a panic value, not a returned error: net/http knows it by ==
				panic(p)
			}
			s.Logger.ErrorContext(r.Context(), "handler panicked", "service", s.Service, "request_id", RequestID(r.Context()),
				"method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p))
			if !x.sw.wrote {
				Write(&x.sw, http.StatusInternalServerError, errorBody{"INTERNAL", "internal error"})
			}
		}
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		// A stream's duration is how long its client stayed, not how fast it was served: it is counted, not timed.
		routes.route(route).count(x.sw.status, time.Since(start), !s.Streams[r.URL.Path])
	}()

	// Paths are not cleaned: a resource has one address, and the mux would answer the alias with a redirect.
	if p := r.URL.EscapedPath(); p != cleanPath(p) {
		notFound(&x.sw, r)
		return
	}
	// The guard must know a write's route before its handler runs, which takes a match of its own. A write no route
	// matches goes on to be answered as such, not asked for a token.
	if s.guards(r) {
		if _, pattern := api.Handler(r); pattern != "" {
			var err error
			if r, err = s.admit(r, pattern); err != nil {
				Error(&x.sw, r, s.Logger, err)
				return
			}
		}
	}
	x.mw = muxWriter{answer: &x.sw, r: r}
	api.ServeHTTP(&x.mw, r)
	if r.Pattern == "" {
		noRoute(&x.sw, r, &x.mw.unrouted)
	}
}

// What is left of the body of a request answered with an error (a 413 above all) is read and thrown away, up to
// these bounds: closing a connection with unread data makes the kernel reset it, and a client that sends its whole
// body before it reads (Python's http.client, for one) then loses the answer. Past them the client wastes our time.
const (
	maxDiscardBytes = 16 << 20
	discardTimeout  = time.Second
)

func discardBody(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if rc.Flush() != nil || rc.SetReadDeadline(time.Now().Add(discardTimeout)) != nil {
		return // the client is gone, or this connection cannot bound the wait
	}
	// It ends at a bound or at the end of the body; what remains, if anything, makes net/http close the connection.
	_, _ = io.CopyN(io.Discard, r.Body, maxDiscardBytes)
}

// cleanPath is the form ServeMux redirects a path to: rooted, without empty, . or .. segments, keeping a final slash.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	clean := path.Clean(p)
	if p[len(p)-1] == '/' && clean != "/" {
		clean += "/"
	}
	return clean
}

// noRoute answers a request no route matches with the status the mux gave it (404 or 405) but a JSON body.
func noRoute(w http.ResponseWriter, r *http.Request, mux *headerOnly) {
	if mux.status != http.StatusMethodNotAllowed {
		notFound(w, r)
		return
	}
	w.Header().Set("Allow", mux.header.Get("Allow"))
	Write(w, mux.status, errorBody{"METHOD_NOT_ALLOWED", r.Method + " is not allowed on " + r.URL.Path})
}

func notFound(w http.ResponseWriter, r *http.Request) {
	Write(w, http.StatusNotFound, errorBody{"NOT_FOUND", "no route for " + r.Method + " " + r.URL.Path})
}

type headerOnly struct {
	header http.Header
	status int
}

func (h *headerOnly) Header() http.Header         { return h.header }
func (h *headerOnly) Write(b []byte) (int, error) { return len(b), nil }
func (h *headerOnly) WriteHeader(status int)      { h.status = status }

// muxWriter is what the mux answers to. The answer of a route's handler goes out (the mux sets r.Pattern before it
// runs the handler); the mux's own answer to a request no route matches, a text 404 or 405, is kept in unrouted for
// noRoute to give in JSON instead. So the mux matches the request once.
type muxWriter struct {
	answer   *statusWriter
	r        *http.Request
	unrouted headerOnly
}

func (m *muxWriter) to() http.ResponseWriter {
	if m.r.Pattern != "" {
		return m.answer
	}
	if m.unrouted.header == nil {
		m.unrouted.header = http.Header{}
	}
	return &m.unrouted
}

func (m *muxWriter) Header() http.Header         { return m.to().Header() }
func (m *muxWriter) Write(b []byte) (int, error) { return m.to().Write(b) }
func (m *muxWriter) WriteHeader(status int)      { m.to().WriteHeader(status) }

// Unwrap lets http.ResponseController reach the connection (to flush a stream, and set its deadlines).
func (m *muxWriter) Unwrap() http.ResponseWriter { return m.to() }

// ReadFrom lets a handler's copy from a file (http.ServeContent of a stored image) reach the connection's, which
// sends the file with sendfile rather than through user-space buffers.
func (m *muxWriter) ReadFrom(r io.Reader) (int64, error) { return readFrom(m.to(), r) }

func readFrom(w http.ResponseWriter, r io.Reader) (int64, error) {
	if rf, ok := w.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(w, r)
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	w.wrote = true
	return readFrom(w.ResponseWriter, r)
}

// Ids of requests that come without one are a count from a random start, scrambled so that they do not show how
// many requests a process serves: unique within a process, and across processes unless their random starts fall
// within as many requests of each other (for two that serve a billion each, a chance in ten billion). They cost no
// system call.
var (
	requestIDStart = rand.Uint64() // math/rand/v2's generator is seeded from the OS in each process
	requestIDCount atomic.Uint64
)

// newRequestID returns 16 hex digits.
func newRequestID() string {
	var raw [8]byte
	binary.BigEndian.PutUint64(raw[:], scramble(requestIDStart+requestIDCount.Add(1)))
	var id [16]byte
	hex.Encode(id[:], raw[:])
	return string(id[:])
}

// scramble is splitmix64's finalizer, a bijection: distinct counts stay distinct.
func scramble(x uint64) uint64 {
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
