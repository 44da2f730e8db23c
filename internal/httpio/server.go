package httpio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the per-route request counters and latency histograms shared by every service port.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics registers the HTTP metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "board_http_requests_total",
			Help: "HTTP requests answered, by service, route pattern and status code.",
		}, []string{"service", "route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "board_http_request_duration_seconds",
			Help:    "HTTP request latency, by service and route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"service", "route"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// Check is one readiness probe: a dependency the service needs.
type Check struct {
	Name string
	Ping func(ctx context.Context) error
}

// Server describes what one service port serves besides its API.
type Server struct {
	Service  string
	API      *http.ServeMux // the service's routes
	Checks   []Check        // what /readyz pings
	Gatherer prometheus.Gatherer
	Metrics  *Metrics
	Logger   *slog.Logger
}

// Handler returns the port's handler: /healthz, /readyz, /metrics and the instrumented API.
func (s Server) Handler() http.Handler {
	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		Write(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	root.HandleFunc("GET /readyz", s.ready)
	root.Handle("GET /metrics", promhttp.HandlerFor(s.Gatherer, promhttp.HandlerOpts{}))
	root.Handle("/", s.instrument(s.API))
	return root
}

func (s Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	status := map[string]string{}
	code := http.StatusOK
	for _, c := range s.Checks {
		if err := c.Ping(ctx); err != nil {
			status[c.Name] = err.Error()
			code = http.StatusServiceUnavailable
			continue
		}
		status[c.Name] = "ok"
	}
	Write(w, code, status)
}

type ctxKey struct{}

// RequestID returns the id of the request being served, for logs.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// instrument adds a request id, panic recovery, JSON answers for unknown routes, and per-route metrics.
func (s Server) instrument(api *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if id == "" {
			id = newRequestID()
		}
		w.Header().Set("X-Request-Id", id)
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, id))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}

		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.Logger.ErrorContext(r.Context(), "handler panicked", "service", s.Service, "request_id", id,
					"method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p))
				if !sw.wrote {
					Write(sw, http.StatusInternalServerError, errorBody{"INTERNAL", "internal error"})
				}
			}
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			s.Metrics.requests.WithLabelValues(s.Service, route, strconv.Itoa(sw.status)).Inc()
			s.Metrics.latency.WithLabelValues(s.Service, route).Observe(time.Since(start).Seconds())
		}()

		if _, pattern := api.Handler(r); pattern == "" {
			noRoute(sw, r, api)
			return
		}
		api.ServeHTTP(sw, r)
	})
}

// noRoute answers a request no route matches with the mux's own status (404, 405 or a redirect) but a JSON body.
func noRoute(w http.ResponseWriter, r *http.Request, api *http.ServeMux) {
	probe := &headerOnly{header: http.Header{}}
	api.ServeHTTP(probe, r)
	for _, h := range []string{"Allow", "Location"} {
		if v := probe.header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	switch probe.status {
	case http.StatusMethodNotAllowed:
		Write(w, probe.status, errorBody{"METHOD_NOT_ALLOWED", r.Method + " is not allowed on " + r.URL.Path})
	case http.StatusNotFound:
		Write(w, probe.status, errorBody{"NOT_FOUND", "no route for " + r.Method + " " + r.URL.Path})
	default:
		w.WriteHeader(probe.status)
	}
}

type headerOnly struct {
	header http.Header
	status int
}

func (h *headerOnly) Header() http.Header         { return h.header }
func (h *headerOnly) Write(b []byte) (int, error) { return len(b), nil }
func (h *headerOnly) WriteHeader(status int)      { h.status = status }

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

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
