package httpio

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// nullWriter is a ResponseWriter that keeps nothing, so that a benchmark counts the edge's work and not a recorder's.
type nullWriter struct{ header http.Header }

func (w *nullWriter) Header() http.Header         { return w.header }
func (w *nullWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nullWriter) WriteHeader(int)             {}

// BenchmarkHandler measures the edge around a warm read: a GET of a route with a path value whose handler answers
// with bytes it has at hand.
func BenchmarkHandler(b *testing.B) {
	body := []byte(`{"articleId":"1","title":"t","content":"c"}` + "\n")
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/articles/{articleId}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("articleId") == "" {
			b.Fatal("no path value")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})
	api.HandleFunc("GET /v1/articles", func(http.ResponseWriter, *http.Request) {})
	api.HandleFunc("POST /v1/articles", func(http.ResponseWriter, *http.Request) {})
	api.HandleFunc("GET /v1/articles/boards/{boardId}/count", func(http.ResponseWriter, *http.Request) {})
	reg := prometheus.NewRegistry()
	h := Server{Service: "bench", API: api, Gatherer: reg, Metrics: NewMetrics(reg), Logger: discard}.Handler()
	// net/http gives each request a context it cancels when the request is done.
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/articles/123", nil)

	b.Run("serial", func(b *testing.B) {
		w := &nullWriter{header: http.Header{}}
		b.ReportAllocs()
		for b.Loop() {
			clear(w.header)
			h.ServeHTTP(w, r)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := &nullWriter{header: http.Header{}}
			for pb.Next() {
				clear(w.header)
				h.ServeHTTP(w, r)
			}
		})
	})
}
