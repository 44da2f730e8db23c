package httpio

import (
	"bufio"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
)

// compressionServer serves a page, a JSON answer with an ETag, a small answer, a PNG and a stream, as a service
// would, on a real port.
func compressionServer(t *testing.T, release <-chan struct{}) string {
	t.Helper()
	page := "<!doctype html><title>t</title>" + strings.Repeat("<p>a paragraph of the page</p>", 200)
	answer := `{"articles":[` + strings.Repeat(`{"title":"a title","content":"some content"},`, 100) + `{}]}`
	api := http.NewServeMux()
	api.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	})
	api.HandleFunc("GET /v1/answer", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"7"`)
		if r.Header.Get("If-None-Match") == `"7"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		WriteRaw(w, http.StatusOK, []byte(answer))
	})
	api.HandleFunc("GET /v1/small", func(w http.ResponseWriter, r *http.Request) {
		Write(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	api.HandleFunc("GET /media/{key}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(make([]byte, 8<<10))
	})
	api.HandleFunc("GET /v1/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "event: unread\ndata: {\"count\":1}\n\n")
		_ = http.NewResponseController(w).Flush()
		select { // the event must reach the client while the stream is still open
		case <-release:
		case <-r.Context().Done():
		}
	})
	reg := prometheus.NewRegistry()
	s := Server{Service: "test", API: api, Gatherer: reg, Metrics: NewMetrics(reg), Logger: discard,
		Streams: map[string]bool{"/v1/stream": true}}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// fetched is the status and headers of an answer.
type fetched struct {
	status int
	header http.Header
}

// fetch GETs url asking for encoding ("" asks for none), and returns the answer and its body decoded.
func fetch(t *testing.T, url, encoding string, header ...string) (fetched, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	// Compression off: the transport then neither asks for gzip itself nor decodes it, so the test sees the wire.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body io.Reader = resp.Body
	switch resp.Header.Get("Content-Encoding") {
	case "gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		body = zr
	case "zstd":
		zr, err := zstd.NewReader(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer zr.Close()
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return fetched{resp.StatusCode, resp.Header}, string(raw)
}

func TestAnswersAreCompressedWhenAsked(t *testing.T) {
	t.Parallel()
	base := compressionServer(t, nil)
	for _, path := range []string{"/page", "/v1/answer"} {
		plain, want := fetch(t, base+path, "")
		if got := plain.header.Get("Content-Encoding"); got != "" {
			t.Errorf("%s without Accept-Encoding: Content-Encoding %q", path, got)
		}
		for _, tc := range []struct{ accept, want string }{
			{"gzip", "gzip"},
			{"gzip, deflate, br, zstd", "zstd"},
			{"zstd;q=0.5, gzip", "gzip"},
			{"identity", ""},
		} {
			resp, body := fetch(t, base+path, tc.accept)
			if got := resp.header.Get("Content-Encoding"); got != tc.want {
				t.Errorf("%s asking %q: Content-Encoding %q, want %q", path, tc.accept, got, tc.want)
			}
			if !strings.Contains(strings.Join(resp.header.Values("Vary"), ","), "Accept-Encoding") {
				t.Errorf("%s asking %q: Vary %q, want Accept-Encoding", path, tc.accept, resp.header.Values("Vary"))
			}
			if body != want {
				t.Errorf("%s asking %q: the decoded body differs from the plain one (%d bytes, want %d)", path, tc.accept, len(body), len(want))
			}
		}
	}
}

func TestCompressionKeepsVersionsAndSkipsWhatItCannotShrink(t *testing.T) {
	t.Parallel()
	base := compressionServer(t, nil)
	resp, _ := fetch(t, base+"/v1/answer", "gzip")
	if resp.header.Get("Content-Encoding") != "gzip" || resp.header.Get("ETag") != `"7"` {
		t.Errorf("compressed answer: Content-Encoding %q, ETag %q; want gzip and the version as it was",
			resp.header.Get("Content-Encoding"), resp.header.Get("ETag"))
	}
	resp, body := fetch(t, base+"/v1/answer", "gzip", "If-None-Match", `"7"`)
	if resp.status != http.StatusNotModified || body != "" || resp.header.Get("Content-Encoding") != "" {
		t.Errorf("revalidation: %d, %q, Content-Encoding %q; want an empty 304", resp.status, body, resp.header.Get("Content-Encoding"))
	}
	for _, path := range []string{"/v1/small", "/media/abc", "/healthz"} {
		resp, _ := fetch(t, base+path, "gzip, zstd")
		if got := resp.header.Get("Content-Encoding"); got != "" {
			t.Errorf("%s: Content-Encoding %q, want none", path, got)
		}
	}
	resp, body = fetch(t, base+"/metrics", "gzip")
	if !strings.HasPrefix(body, "# HELP") {
		t.Errorf("/metrics asking gzip (Content-Encoding %q) decodes once to %.40q, want the text exposition",
			resp.header.Get("Content-Encoding"), body)
	}
}

func TestStreamsAreNotCompressed(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	base := compressionServer(t, release)
	req, err := http.NewRequest(http.MethodGet, base+"/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "gzip, zstd")
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := resp.Header.Get("Content-Encoding"); got != "" {
		t.Errorf("stream: Content-Encoding %q, want none", got)
	}
	// The stream is still open (release is closed only when the test ends): the event came because it was flushed.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: unread\n" {
		t.Fatalf("first line of the stream: %q, %v", line, err)
	}
}
