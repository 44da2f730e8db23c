package httpio

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestArrayWriter: elements stream as one JSON array; an empty one is []; an error before the first element is
// returned for an ordinary answer, one after it aborts the response.
func TestArrayWriter(t *testing.T) {
	w := httptest.NewRecorder()
	a := newArray(w)
	for _, v := range []any{1, map[string]string{"a": "b"}} {
		if err := a.Add(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := a.End(); err != nil {
		t.Fatal(err)
	}
	if got := w.Body.String(); got != `[1,{"a":"b"}]` || w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("array = %d %q %q", w.Code, w.Header().Get("Content-Type"), got)
	}

	w = httptest.NewRecorder()
	if err := newArray(w).End(); err != nil || w.Body.String() != "[]" {
		t.Errorf("empty array = %q, %v", w.Body.String(), err)
	}

	boom := errors.New("boom")
	w = httptest.NewRecorder()
	a = newArray(w)
	if err := a.Abort(boom); !errors.Is(err, boom) || w.Body.Len() != 0 {
		t.Errorf("abort before the first element = %v, body %q; want the error back and nothing sent", err, w.Body.String())
	}
	if err := a.Add(1); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p := recover(); p != http.ErrAbortHandler { //nolint:errorlint // a panic value, which net/http knows by ==
			t.Errorf("abort after the first element panicked with %v, want http.ErrAbortHandler", p)
		}
	}()
	_ = a.Abort(boom)
	t.Error("abort after the first element returned")
}

func newArray(w http.ResponseWriter) *ArrayWriter {
	a, _, _ := NewArrayWriter(w, httptest.NewRequest("GET", "/v1/exports/things", nil), time.Minute)
	return a
}

// An export served as a stream outlives the server's write timeout (4 request deadlines): its writer sets its own.
func TestArrayWriterOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	const elements = 20
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/exports/things", func(w http.ResponseWriter, r *http.Request) {
		out, ctx, cancel := NewArrayWriter(w, r, time.Minute)
		defer cancel()
		for i := range elements {
			if err := out.Add(i); err != nil || out.Flush() != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(25 * time.Millisecond): // 500 ms in all: 2.5 write timeouts
			}
		}
		_ = out.End()
	})
	reg := prometheus.NewRegistry()
	s := Server{Service: "test", API: api, Gatherer: reg, Metrics: NewMetrics(reg), Logger: discard,
		RequestTimeout: 50 * time.Millisecond, Streams: map[string]bool{"/v1/exports/things": true}}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = s.HTTPServer()
	srv.Start()
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/v1/exports/things")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []int
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || len(got) != elements {
		t.Errorf("export = %v, %v; want all %d elements", got, err, elements)
	}
}
