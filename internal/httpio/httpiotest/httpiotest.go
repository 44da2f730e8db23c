// Package httpiotest drives a service's HTTP API in tests as board serve exposes it, and checks answers against
// the conventions every service shares (SPEC §2): JSON bodies, {code, message} errors, empty 204s.
package httpiotest

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"board/internal/auth"
	"board/internal/httpio"
)

// Logger discards what the services under test log.
var Logger = slog.New(slog.DiscardHandler)

// TimeFormat is how every time is written: RFC 3339 in UTC with milliseconds.
var TimeFormat = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// Handler serves a service's API behind the same edge as board serve (health, metrics, error answers), with
// metrics of its own.
func Handler(service string, api *http.ServeMux) http.Handler {
	return httpio.Server{Service: service, API: api, Gatherer: prometheus.NewRegistry(),
		Metrics: httpio.NewMetrics(prometheus.NewRegistry()), Logger: Logger}.Handler()
}

// Reply is an answer as a client sees it.
type Reply struct {
	Status int
	Header http.Header
	Body   string
}

// Call sends one request to h; an empty body sends none.
func Call(h http.Handler, method, target, body string) Reply {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, r))
	return Reply{Status: rec.Code, Header: rec.Header(), Body: rec.Body.String()}
}

// DecodeJSON decodes a whole body into a generic value, keeping numbers exact; anything but one JSON value fails.
func DecodeJSON(t testing.TB, body string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("body %q is not JSON: %v", body, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("body %q has more than one JSON value", body)
	}
	return v
}

// WantStatus stops the test unless r has status; a 204 must have no body, anything else a JSON one.
func WantStatus(t testing.TB, r Reply, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d; body %s", r.Status, status, r.Body)
	}
	if status == http.StatusNoContent {
		if r.Body != "" {
			t.Errorf("204 with body %q", r.Body)
		}
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
}

// ErrorCode checks that r is a JSON error body of exactly {code, message}, both set, and returns its code.
func ErrorCode(t testing.TB, r Reply) string {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("status %d: Content-Type = %q, want application/json", r.Status, ct)
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	dec := json.NewDecoder(strings.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("status %d: error body %q is not {code, message}: %v", r.Status, r.Body, err)
	}
	if e.Code == "" || e.Message == "" {
		t.Errorf("status %d: error body %q has an empty code or message", r.Status, r.Body)
	}
	return e.Code
}

// WantError checks that r is an error answer with status and code.
func WantError(t testing.TB, r Reply, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status = %d, want %d; body %s", r.Status, status, r.Body)
	}
	if got := ErrorCode(t, r); got != code {
		t.Errorf("code = %q, want %q", got, code)
	}
}

// As serves every request to h as user, as httpio.Guard does once it has verified the user's access token.
func As(h http.Handler, user int64) http.Handler {
	return asPrincipal(h, auth.Principal{UserID: user, Role: auth.RoleUser})
}

// AsModerator serves every request to h as user with the moderator role.
func AsModerator(h http.Handler, user int64) http.Handler {
	return asPrincipal(h, auth.Principal{UserID: user, Role: auth.RoleModerator})
}

func asPrincipal(h http.Handler, p auth.Principal) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.NewContext(r.Context(), p)))
	})
}
