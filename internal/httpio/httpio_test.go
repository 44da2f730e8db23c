package httpio

import (
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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"board/internal/apijson"
	"board/internal/fault"
)

var discard = slog.New(slog.DiscardHandler)

type decodeTarget struct {
	Name *string     `json:"name"`
	N    *int        `json:"n"`
	ID   *apijson.ID `json:"id"`
}

func TestDecode(t *testing.T) {
	t.Parallel()
	name, n, id := "a", 2, apijson.ID(3)
	big := `{"name":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	for _, tc := range []struct {
		name     string
		body     string
		want     decodeTarget
		wantKind fault.Kind
		wantCode string
	}{
		{name: "object", body: `{"name":"a","n":2,"id":"3"}`, want: decodeTarget{Name: &name, N: &n, ID: &id}},
		{name: "id as number", body: `{"id":3}`, want: decodeTarget{ID: &id}},
		{name: "unknown fields ignored", body: `{"name":"a","extra":{"deep":[1,2]},"more":null}`, want: decodeTarget{Name: &name}},
		{name: "trailing whitespace", body: "{\"name\":\"a\"}\n\t ", want: decodeTarget{Name: &name}},
		{name: "leading whitespace", body: "\n {\"name\":\"a\"}", want: decodeTarget{Name: &name}},
		{name: "empty object", body: `{}`},
		{name: "null", body: `null`},
		{name: "empty body", body: ``, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "whitespace body", body: "  \n", wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "malformed", body: `{"name":`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "bad syntax", body: `{name:"a"}`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "trailing garbage", body: `{"name":"a"}x`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "second object", body: `{"name":"a"} {}`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "trailing comma", body: `{"name":"a"},`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "wrong type string", body: `{"name":5}`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "wrong type int", body: `{"n":"5"}`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "float for int", body: `{"n":1.5}`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "bad id", body: `{"id":"x"}`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "signed id", body: `{"id":"+1"}`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "zero-padded id", body: `{"id":"007"}`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "negative id", body: `{"id":-3}`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "array", body: `[]`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "array of numbers", body: `[1,2]`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "string", body: `"a"`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "number", body: `1`, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "bool", body: ` true `, wantKind: fault.Invalid, wantCode: "INVALID_JSON"},
		{name: "too large", body: big, wantKind: fault.TooLarge, wantCode: "BODY_TOO_LARGE"},
		{name: "too large trailing", body: `{}` + strings.Repeat(" ", MaxBodyBytes), wantKind: fault.TooLarge, wantCode: "BODY_TOO_LARGE"},
		{name: "exactly at limit", body: `{"name":"` + strings.Repeat("x", MaxBodyBytes-11) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
			var got decodeTarget
			err := Decode(httptest.NewRecorder(), r, &got)
			if tc.wantKind == 0 {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if tc.name == "exactly at limit" {
					if len(tc.body) != MaxBodyBytes || got.Name == nil {
						t.Fatalf("body of %d bytes not decoded", len(tc.body))
					}
					return
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			fe, ok := fault.As(err)
			if !ok {
				t.Fatalf("Decode error = %v, want a fault", err)
			}
			if diff := cmp.Diff([]any{tc.wantKind, tc.wantCode}, []any{fe.Kind, fe.Code}); diff != "" {
				t.Errorf("kind, code (-want +got):\n%s", diff)
			}
			if fe.Message == "" {
				t.Error("empty message")
			}
		})
	}
}

// Decode's messages say what is wrong in the client's terms: the field at fault, never Go types.
func TestDecodeMessages(t *testing.T) {
	t.Parallel()
	type inner struct {
		ID apijson.ID `json:"id"`
	}
	var target struct {
		N     *int        `json:"n"`
		ID    *apijson.ID `json:"id"`
		Inner inner       `json:"inner"`
	}
	notObject := "request body must be a JSON object"
	for body, want := range map[string]string{
		`[1,2]`:                notObject,
		`"x"`:                  notObject,
		`5`:                    notObject,
		`false`:                notObject,
		`{"id":"abc"}`:         `field "id": "abc" is not a valid id: ` + apijson.IDSyntax,
		`{"id":"+1"}`:          `field "id": "+1" is not a valid id: ` + apijson.IDSyntax,
		`{"id":1.5}`:           `field "id": 1.5 is not a valid id: ` + apijson.IDSyntax,
		`{"inner":{"id":-1}}`:  `field "inner.id": -1 is not a valid id: ` + apijson.IDSyntax,
		`{"n":"5"}`:            `field "n" has the wrong type`,
		`{"inner":{"id":[1]}}`: `field "inner.id": [1] is not a valid id: ` + apijson.IDSyntax,
		`{"inner":[1]}`:        `field "inner" has the wrong type`,
	} {
		err := Decode(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)), &target)
		fe, ok := fault.As(err)
		if !ok {
			t.Fatalf("%s: error %v is not a fault", body, err)
		}
		if diff := cmp.Diff([]string{"INVALID_JSON", want}, []string{fe.Code, fe.Message}); diff != "" {
			t.Errorf("%s: code, message (-want +got):\n%s", body, diff)
		}
	}
}

// A body that cannot be read (the client stopped, or the read timed out) is the client's doing, not a 500, and the
// answer does not echo the connection's error, which names addresses.
func TestDecodeUnreadableBody(t *testing.T) {
	t.Parallel()
	readErr := errors.New("read tcp 10.1.2.3:9000: i/o timeout")
	body := io.MultiReader(strings.NewReader(`{"name":"a`), iotest.ErrReader(readErr))
	var got decodeTarget
	err := Decode(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", body), &got)
	fe, ok := fault.As(err)
	if !ok || fe.Kind != fault.Invalid || fe.Code != "BODY_UNREADABLE" || !errors.Is(err, readErr) {
		t.Fatalf("Decode = %v, want Invalid BODY_UNREADABLE wrapping the read error", err)
	}
	if strings.Contains(fe.Message, "10.1.2.3") {
		t.Errorf("message %q shows the read error", fe.Message)
	}
}

func TestQueryInt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query   string
		want    int64
		wantErr bool
	}{
		{"", 30, false},
		{"size=", 30, false},
		{"size=1", 1, false},
		{"size=100", 100, false},
		{"size=50", 50, false},
		{"size=0", 0, true},
		{"size=101", 0, true},
		{"size=-1", 0, true},
		{"size=x", 0, true},
		{"size=1.5", 0, true},
		{"size=1e2", 0, true},
		{"size=%20", 0, true},
		{"size=99999999999999999999", 0, true},
		{"size=-9223372036854775808", 0, true},
		{"other=7", 30, false},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/?"+tc.query, nil)
			got, err := QueryInt(r, "size", 30, 1, 100)
			if (err != nil) != tc.wantErr {
				t.Fatalf("QueryInt(%q) error = %v, want error: %v", tc.query, err, tc.wantErr)
			}
			if err != nil {
				if fe, ok := fault.As(err); !ok || fe.Kind != fault.Invalid || fe.Code != "INVALID_SIZE" {
					t.Errorf("error = %#v, want Invalid INVALID_SIZE", err)
				}
				return
			}
			if got != tc.want {
				t.Errorf("QueryInt(%q) = %d, want %d", tc.query, got, tc.want)
			}
		})
	}
}

func TestQueryIDs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query       string
		want        int64
		wantCode    string // QueryID's error code, "" for none
		optional    int64
		optionalErr bool
	}{
		{query: "boardId=7", want: 7, optional: 7},
		{query: "boardId=0", want: 0, optional: 0},
		{query: "", wantCode: "MISSING_BOARD_ID", optional: 0},
		{query: "boardId=", wantCode: "MISSING_BOARD_ID", optional: 0},
		{query: "boardId=abc", wantCode: "INVALID_BOARD_ID", optionalErr: true},
		{query: "boardId=-1", wantCode: "INVALID_BOARD_ID", optionalErr: true},
		{query: "boardId=9223372036854775808", wantCode: "INVALID_BOARD_ID", optionalErr: true},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/?"+tc.query, nil)
			got, err := QueryID(r, "boardId")
			if tc.wantCode != "" {
				if fe, ok := fault.As(err); !ok || fe.Kind != fault.Invalid || fe.Code != tc.wantCode {
					t.Errorf("QueryID error = %v, want Invalid %s", err, tc.wantCode)
				}
			} else if err != nil || got != tc.want {
				t.Errorf("QueryID = %d, %v; want %d", got, err, tc.want)
			}
			opt, err := OptionalQueryID(r, "boardId")
			if (err != nil) != tc.optionalErr {
				t.Fatalf("OptionalQueryID error = %v, want error: %v", err, tc.optionalErr)
			}
			if err == nil && opt != tc.optional {
				t.Errorf("OptionalQueryID = %d, want %d", opt, tc.optional)
			}
		})
	}
}

func TestPathID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path    string
		want    int64
		wantErr bool
	}{
		{"/items/1", 1, false},
		{"/items/9223372036854775807", 9223372036854775807, false},
		{"/items/9223372036854775808", 0, true},
		{"/items/-1", 0, true},
		{"/items/abc", 0, true},
		{"/items/1.0", 0, true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			var got int64
			var err error
			mux := http.NewServeMux()
			mux.HandleFunc("GET /items/{itemId}", func(w http.ResponseWriter, r *http.Request) { got, err = PathID(r, "itemId") })
			mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, tc.path, nil))
			if (err != nil) != tc.wantErr {
				t.Fatalf("PathID error = %v, want error: %v", err, tc.wantErr)
			}
			if err != nil {
				if fe, ok := fault.As(err); !ok || fe.Code != "INVALID_ITEM_ID" {
					t.Errorf("error = %v, want INVALID_ITEM_ID", err)
				}
			} else if got != tc.want {
				t.Errorf("PathID = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRequired(t *testing.T) {
	t.Parallel()
	if err := Required(Has("a", true), Has("b", true)); err != nil {
		t.Errorf("all present: %v", err)
	}
	err := Required(Has("a", true), Has("b", false), Has("c", false))
	fe, ok := fault.As(err)
	if !ok || fe.Kind != fault.Invalid || fe.Code != "MISSING_FIELD" || !strings.Contains(fe.Message, `"b"`) {
		t.Errorf("Required = %v, want MISSING_FIELD naming b", err)
	}
}

func TestCodeName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"pageSize": "PAGE_SIZE", "boardId": "BOARD_ID", "page": "PAGE",
		"lastArticleId": "LAST_ARTICLE_ID", "x1": "X1"} {
		if got := codeName(in); got != want {
			t.Errorf("codeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// testServer serves a Server, as HTTPServer configures it, on a loopback port. configure (if not nil) may change the
// Server; an API it leaves unset is testAPI, with the Server's logger.
func testServer(t *testing.T, configure func(*Server)) *httptest.Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	s := Server{Service: "test", Gatherer: reg, Metrics: NewMetrics(reg), Logger: discard}
	if configure != nil {
		configure(&s)
	}
	if s.API == nil {
		s.API = testAPI(s.Logger)
	}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = s.HTTPServer()
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// testAPI has routes that exercise the edge: errors of each shape, a panic and a JSON echo.
func testAPI(logger *slog.Logger) *http.ServeMux {
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/items/{itemId}", func(w http.ResponseWriter, r *http.Request) {
		id, err := PathID(r, "itemId")
		if err != nil {
			Error(w, r, logger, err)
			return
		}
		Write(w, http.StatusOK, map[string]any{"itemId": apijson.ID(id), "requestId": RequestID(r.Context())})
	})
	api.HandleFunc("DELETE /v1/items/{itemId}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	api.HandleFunc("GET /v1/panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	api.HandleFunc("GET /v1/unencodable", func(w http.ResponseWriter, r *http.Request) {
		Write(w, http.StatusOK, map[string]any{"c": make(chan int)})
	})
	api.HandleFunc("GET /v1/panic-after-write", func(w http.ResponseWriter, r *http.Request) {
		Write(w, http.StatusOK, []int{})
		panic("late boom")
	})
	errs := map[string]error{
		"net-op":        &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)},
		"econnrefused":  fmt.Errorf("query: %w", syscall.ECONNREFUSED),
		"econnreset":    fmt.Errorf("read: %w", syscall.ECONNRESET),
		"deadline":      fmt.Errorf("ping: %w", context.DeadlineExceeded),
		"unavailable":   fault.Unavailablef(errors.New("redis down"), "CACHE_UNAVAILABLE", "the cache is down"),
		"invalid":       fault.Invalidf("BAD_THING", "bad thing"),
		"notfound":      fault.NotFoundf("NO_THING", "no thing"),
		"conflict":      fault.Conflictf("DUP_THING", "dup thing"),
		"toolarge":      &fault.Error{Kind: fault.TooLarge, Code: "BODY_TOO_LARGE", Message: "big"},
		"wrapped-fault": fmt.Errorf("context: %w", fault.NotFoundf("NO_THING", "no thing")),
		"plain":         errors.New("secret internal detail"),
		"unknown-kind":  &fault.Error{Kind: 99, Code: "WEIRD", Message: "weird"},
	}
	api.HandleFunc("GET /v1/errors/{name}", func(w http.ResponseWriter, r *http.Request) {
		Error(w, r, logger, errs[r.PathValue("name")])
	})
	api.HandleFunc("POST /v1/echo", func(w http.ResponseWriter, r *http.Request) {
		var in map[string]any
		if err := Decode(w, r, &in); err != nil {
			Error(w, r, logger, err)
			return
		}
		Write(w, http.StatusOK, in)
	})
	return api
}

type answer struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, srv *httptest.Server, method, path, body string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

type errJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func decodeErr(t *testing.T, a answer) errJSON {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if cl := a.header.Get("Content-Length"); cl != strconv.Itoa(len(a.body)) {
		t.Errorf("Content-Length = %q for a body of %d bytes", cl, len(a.body))
	}
	var e errJSON
	dec := json.NewDecoder(strings.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error body %q is not {code, message}: %v", a.body, err)
	}
	if e.Code == "" || e.Message == "" {
		t.Errorf("error body %q has an empty code or message", a.body)
	}
	return e
}

// WriteRaw sends the caller's bytes as they are, with the headers of Write's answers.
func TestWriteRaw(t *testing.T) {
	t.Parallel()
	body := []byte(`{"articleId":"1"}` + "\n")
	raw, encoded := httptest.NewRecorder(), httptest.NewRecorder()
	WriteRaw(raw, http.StatusCreated, body)
	Write(encoded, http.StatusCreated, map[string]string{"articleId": "1"})
	for _, rec := range []*httptest.ResponseRecorder{raw, encoded} {
		got := []string{strconv.Itoa(rec.Code), rec.Header().Get("Content-Type"), rec.Header().Get("Content-Length"), rec.Body.String()}
		if diff := cmp.Diff([]string{"201", "application/json", strconv.Itoa(len(body)), string(body)}, got); diff != "" {
			t.Errorf("status, Content-Type, Content-Length, body (-want +got):\n%s", diff)
		}
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	srv := testServer(t, nil)
	a := do(t, srv, http.MethodGet, "/healthz", "")
	if a.status != http.StatusOK {
		t.Fatalf("status = %d, want 200", a.status)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(a.body), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"status": "ok"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("connection refused") }
	for _, tc := range []struct {
		name       string
		checks     []Check
		wantStatus int
		want       map[string]string
	}{
		{"no checks", nil, http.StatusOK, map[string]string{}},
		{"all pass", []Check{{"sql", ok}, {"redis", ok}}, http.StatusOK, map[string]string{"sql": "ok", "redis": "ok"}},
		{"one fails", []Check{{"sql", ok}, {"redis", down}}, http.StatusServiceUnavailable,
			map[string]string{"sql": "ok", "redis": "unavailable"}},
		{"all fail", []Check{{"sql", down}, {"kafka", down}}, http.StatusServiceUnavailable,
			map[string]string{"sql": "unavailable", "kafka": "unavailable"}},
		{"check sees a deadline", []Check{{"sql", func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				return errors.New("no deadline")
			}
			return nil
		}}}, http.StatusOK, map[string]string{"sql": "ok"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testServer(t, func(s *Server) { s.Checks = tc.checks })
			a := do(t, srv, http.MethodGet, "/readyz", "")
			if a.status != tc.wantStatus {
				t.Errorf("status = %d, want %d", a.status, tc.wantStatus)
			}
			var got map[string]string
			if err := json.Unmarshal([]byte(a.body), &got); err != nil {
				t.Fatalf("body %q: %v", a.body, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	srv := testServer(t, nil)
	do(t, srv, http.MethodGet, "/v1/items/5", "")
	do(t, srv, http.MethodGet, "/v1/items/6", "")
	do(t, srv, http.MethodGet, "/v1/items/x", "")
	do(t, srv, http.MethodGet, "/nowhere", "")
	do(t, srv, http.MethodGet, "//v1/items/5", "")
	do(t, srv, http.MethodPost, "/v1/items/5", "")
	a := do(t, srv, http.MethodGet, "/metrics", "")
	if a.status != http.StatusOK {
		t.Fatalf("status = %d", a.status)
	}
	for _, want := range []string{
		`board_http_requests_total{code="200",route="GET /v1/items/{itemId}",service="test"} 2`,
		`board_http_requests_total{code="400",route="GET /v1/items/{itemId}",service="test"} 1`,
		`board_http_requests_total{code="404",route="unmatched",service="test"} 2`,
		`board_http_requests_total{code="405",route="unmatched",service="test"} 1`,
		`board_http_request_duration_seconds_count{route="GET /v1/items/{itemId}",service="test"} 3`,
		`board_http_request_duration_seconds_count{route="unmatched",service="test"} 3`,
	} {
		if !strings.Contains(a.body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(a.body, `/v1/items/5"`) {
		t.Error("/metrics labels a route with a raw path (unbounded label values)")
	}
}

func TestPanicRecovery(t *testing.T) {
	t.Parallel()
	srv := testServer(t, nil)
	for _, path := range []string{"/v1/panic", "/v1/panic", "/v1/unencodable"} {
		a := do(t, srv, http.MethodGet, path, "")
		if a.status != http.StatusInternalServerError {
			t.Fatalf("status = %d, want 500", a.status)
		}
		if diff := cmp.Diff(errJSON{"INTERNAL", "internal error"}, decodeErr(t, a)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
	// A panic after the answer started leaves that answer alone.
	if a := do(t, srv, http.MethodGet, "/v1/panic-after-write", ""); a.status != http.StatusOK || strings.TrimSpace(a.body) != "[]" {
		t.Errorf("panic after write: %d %q", a.status, a.body)
	}
	// The server keeps serving.
	if a := do(t, srv, http.MethodGet, "/v1/items/1", ""); a.status != http.StatusOK {
		t.Errorf("after panics: status = %d, want 200", a.status)
	}
	a := do(t, srv, http.MethodGet, "/metrics", "")
	if want := `board_http_requests_total{code="500",route="GET /v1/panic",service="test"} 2`; !strings.Contains(a.body, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	srv := testServer(t, nil)
	a := do(t, srv, http.MethodGet, "/v1/items/1", "", "X-Request-Id", "abc-123")
	if got := a.header.Get("X-Request-Id"); got != "abc-123" {
		t.Errorf("echoed X-Request-Id = %q, want abc-123", got)
	}
	var body struct{ RequestID string }
	if err := json.Unmarshal([]byte(a.body), &body); err != nil {
		t.Fatal(err)
	}
	if body.RequestID != "abc-123" {
		t.Errorf("RequestID(ctx) = %q, want abc-123", body.RequestID)
	}

	seen := map[string]bool{}
	for _, path := range []string{"/v1/items/1", "/v1/items/2", "/nowhere", "/v1/panic"} {
		id := do(t, srv, http.MethodGet, path, "").header.Get("X-Request-Id")
		if len(id) != 16 {
			t.Errorf("%s: generated X-Request-Id = %q, want 16 hex digits", path, id)
		}
		if seen[id] {
			t.Errorf("%s: X-Request-Id %q repeated", path, id)
		}
		seen[id] = true
	}
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		wantStatus int
		want       errJSON
	}{
		{"net-op", http.StatusServiceUnavailable, errJSON{"UNAVAILABLE", "a dependency is unavailable; try again later"}},
		{"econnrefused", http.StatusServiceUnavailable, errJSON{"UNAVAILABLE", "a dependency is unavailable; try again later"}},
		{"econnreset", http.StatusServiceUnavailable, errJSON{"UNAVAILABLE", "a dependency is unavailable; try again later"}},
		{"deadline", http.StatusServiceUnavailable, errJSON{"UNAVAILABLE", "a dependency is unavailable; try again later"}},
		{"unavailable", http.StatusServiceUnavailable, errJSON{"CACHE_UNAVAILABLE", "the cache is down"}},
		{"invalid", http.StatusBadRequest, errJSON{"BAD_THING", "bad thing"}},
		{"notfound", http.StatusNotFound, errJSON{"NO_THING", "no thing"}},
		{"wrapped-fault", http.StatusNotFound, errJSON{"NO_THING", "no thing"}},
		{"conflict", http.StatusConflict, errJSON{"DUP_THING", "dup thing"}},
		{"toolarge", http.StatusRequestEntityTooLarge, errJSON{"BODY_TOO_LARGE", "big"}},
		{"plain", http.StatusInternalServerError, errJSON{"INTERNAL", "internal error"}},
		{"unknown-kind", http.StatusInternalServerError, errJSON{"INTERNAL", "internal error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testServer(t, nil)
			a := do(t, srv, http.MethodGet, "/v1/errors/"+tc.name, "")
			if a.status != tc.wantStatus {
				t.Errorf("status = %d, want %d", a.status, tc.wantStatus)
			}
			if diff := cmp.Diff(tc.want, decodeErr(t, a)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	t.Parallel()
	srv := testServer(t, nil)
	for _, tc := range []struct {
		method, path string
		wantStatus   int
		wantCode     string
		wantAllow    string
	}{
		{http.MethodGet, "/nowhere", http.StatusNotFound, "NOT_FOUND", ""},
		{http.MethodGet, "/v1/items", http.StatusNotFound, "NOT_FOUND", ""},
		{http.MethodPost, "/v1/items/1", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "DELETE, GET, HEAD"},
		{http.MethodPut, "/v1/echo", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "POST"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			a := do(t, srv, tc.method, tc.path, "")
			if a.status != tc.wantStatus {
				t.Errorf("status = %d, want %d", a.status, tc.wantStatus)
			}
			if got := decodeErr(t, a).Code; got != tc.wantCode {
				t.Errorf("code = %q, want %q", got, tc.wantCode)
			}
			if got := a.header.Get("Allow"); got != tc.wantAllow {
				t.Errorf("Allow = %q, want %q", got, tc.wantAllow)
			}
		})
	}
}

func TestBodyLimitOverHTTP(t *testing.T) {
	t.Parallel()
	srv := testServer(t, nil)
	a := do(t, srv, http.MethodPost, "/v1/echo", `{"a":"`+strings.Repeat("x", MaxBodyBytes)+`"}`)
	if a.status != http.StatusRequestEntityTooLarge || decodeErr(t, a).Code != "BODY_TOO_LARGE" {
		t.Errorf("oversized body: %d %s", a.status, a.body)
	}
	a = do(t, srv, http.MethodPost, "/v1/echo", `{"a":"b","x":1}`)
	if a.status != http.StatusOK {
		t.Errorf("small body: %d %s", a.status, a.body)
	}
}
