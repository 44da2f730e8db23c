package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/notification"
	"board/internal/polltest"
)

func TestReadSSE(t *testing.T) {
	const in = "retry: 3000\n\nevent: unread\ndata: {\"count\":0}\n\n: ping\n\n" +
		"id: 7\r\nevent: notification\r\ndata: {\"commentId\":\"42\"}\r\n\r\n" +
		"event: two-lines\ndata: a\ndata:b\n\nevent: no-data\n\n"
	var got []sseEvent
	if err := readSSE(strings.NewReader(in), func(ev sseEvent) { got = append(got, ev) }); err != nil {
		t.Fatal(err)
	}
	want := []sseEvent{{name: "unread", data: `{"count":0}`}, {id: "7", name: "notification", data: `{"commentId":"42"}`},
		{name: "two-lines", data: "a\nb"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(sseEvent{})); diff != "" {
		t.Errorf("readSSE (-want +got):\n%s", diff)
	}
	if c := notifiedComment(got[1]); c != 42 {
		t.Errorf("notifiedComment = %d, want 42", c)
	}
	if c := notifiedComment(got[0]); c != 0 {
		t.Errorf("notifiedComment of an unread event = %d, want 0", c)
	}
}

func TestParseGauges(t *testing.T) {
	const text = `# TYPE go_goroutines gauge
go_goroutines 20112
go_memstats_heap_inuse_bytes 1.2e+08
http_requests_total{path="/"} 3
go_goroutines{note="labelled"} 1
`
	got, err := parseGauges(strings.NewReader(text), []string{"go_goroutines", "go_memstats_heap_inuse_bytes"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]float64{"go_goroutines": 20112, "go_memstats_heap_inuse_bytes": 1.2e8}; !cmp.Equal(got, want) {
		t.Errorf("parseGauges = %v, want %v", got, want)
	}
	if _, err := parseGauges(strings.NewReader(text), []string{"process_resident_memory_bytes"}); err == nil {
		t.Error("parseGauges did not fail on a missing series")
	}
	if got, want := formatGauge("go_goroutines", 2.25), "2.2"; got != want {
		t.Errorf("formatGauge of a count = %q, want %q", got, want)
	}
	if got, want := formatGauge("go_memstats_heap_inuse_bytes", 3<<20), "3.0 MiB"; got != want {
		t.Errorf("formatGauge of bytes = %q, want %q", got, want)
	}
}

// A stream that the server ends is opened again from its last event id, and counts as open only while it is.
func TestHoldResumes(t *testing.T) {
	var calls atomic.Int32
	lastIDs := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != notification.StreamPath || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		lastIDs <- r.Header.Get("Last-Event-ID")
		w.Header().Set("Content-Type", "text/event-stream")
		if calls.Add(1) == 1 {
			fmt.Fprint(w, "retry: 3000\n\nevent: unread\ndata: {\"count\":1}\n\nid: 5\nevent: notification\ndata: {\"commentId\":\"1\"}\n\n")
			return // ends the stream
		}
		fmt.Fprint(w, "id: 6\nevent: notification\ndata: {\"commentId\":\"2\"}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	b := &notifyBench{streamClient: srv.Client()}
	ctx, cancel := context.WithCancel(context.Background())
	var stats streamStats
	var mu sync.Mutex
	var comments []int64
	opened := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.hold(ctx, srv.URL, benchUser{token: "tok"}, &stats, func(err error) { opened <- err }, func(ev sseEvent, _ time.Time) {
			if c := notifiedComment(ev); c != 0 {
				mu.Lock()
				comments = append(comments, c)
				mu.Unlock()
			}
		})
	}()
	if err := <-opened; err != nil {
		t.Fatalf("the stream did not open: %v", err)
	}
	polltest.Until(t, 10*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(comments) == 2 && stats.open.Load() == 1, fmt.Sprintf("comments %v, open %d", comments, stats.open.Load())
	})
	cancel()
	<-done
	if first, second := <-lastIDs, <-lastIDs; first != "" || second != "5" {
		t.Errorf("Last-Event-ID %q then %q, want none then 5", first, second)
	}
	if n := stats.reconnects.Load(); n != 1 || stats.open.Load() != 0 {
		t.Errorf("%d reconnects, %d open after the end; want 1, 0", n, stats.open.Load())
	}

	// A stream refused at its opening is not retried, and says why.
	refused := make(chan error, 1)
	b.hold(context.Background(), srv.URL, benchUser{token: "other"}, &stats, func(err error) { refused <- err }, nil)
	if err := <-refused; failureClass(err) != "HTTP 401" {
		t.Errorf("opening without a good token: %v, want an HTTP 401", err)
	}
}

// A notification counts once, whether it arrives after its comment's acknowledgement or before it.
func TestDeliveryMatching(t *testing.T) {
	var next atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"commentId":"%d"}`, next.Add(1))
	}))
	defer srv.Close()
	b := &notifyBench{client: srv.Client(), commentURL: srv.URL, notificationURLs: []string{"a", "b"}}
	r := &deliveryRun{notifyBench: b, writers: []benchUser{{id: 1, article: 10}, {id: 2, article: 20}},
		pending: map[int64]sentComment{}, early: map[int64]time.Time{}, delivered: map[int64]bool{}, byInstance: make([][]time.Duration, 2)}
	ctx := context.Background()
	r.send(ctx, 0) // comment 1, on the first writer's article, whose stream is on "a"
	r.notified(1, time.Now())
	r.notified(1, time.Now())
	r.notified(2, time.Now()) // before comment 2's acknowledgement is recorded
	r.send(ctx, 1)
	r.send(ctx, 2) // comment 3, never notified
	if r.acked != 3 || len(r.fromAck) != 2 || len(r.byInstance[0]) != 1 || len(r.byInstance[1]) != 1 || r.dup != 1 ||
		r.beforeAck != 1 || len(r.pending) != 1 || len(r.early) != 0 {
		t.Errorf("acked %d, %d latencies (%d on a, %d on b), %d twice, %d before the ack, pending %v, early %v; "+
			"want 3, 2 (1, 1), 1, 1, comment 3, none", r.acked, len(r.fromAck), len(r.byInstance[0]), len(r.byInstance[1]),
			r.dup, r.beforeAck, r.pending, r.early)
	}
}
