package httpiotest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"
)

// operational are the paths httpio.Server answers on every port before the service's routes.
var operational = []string{"/healthz", "/metrics", "/openapi.json", "/readyz"}

// CheckOpenAPI checks raw, a service's OpenAPI document (SPEC §2.1, served at GET /openapi.json), against api, the
// ServeMux of the service's routes (its Routes built on a nil service: building one calls no method of it). open
// holds the route patterns of the writes the service takes without an access token ("POST /v1/users"), as
// httpio.Guard's Open; nil for none. It checks that:
//   - the document is valid OpenAPI 3.1 and names no host (every instance serves it);
//   - its operations are exactly api's routes, each routes to the pattern it documents, and it documents the
//     operational paths, which api does not route;
//   - writes ask for a bearer token and answer 401, 403 and 429, except the open ones; open writes ask for none, nor
//     do reads, except those that need a token (a moderators' list, a user's own inbox), which answer 401; every write answers 429 with Retry-After, every 401 carries WWW-Authenticate, and every body is open to
//     unknown fields (SPEC §2 ignores them) and may be too large (413).
func CheckOpenAPI(t *testing.T, raw []byte, api *http.ServeMux, open map[string]string) {
	t.Helper()
	if raw == nil {
		t.Fatal("no OpenAPI document")
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("load the OpenAPI document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the OpenAPI document is not valid: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	for _, s := range doc.Servers {
		if s.URL != "/" {
			t.Errorf("server %q: a document served by every instance names no host; want /", s.URL)
		}
	}
	t.Run("routes", func(t *testing.T) { checkRoutes(t, doc, api) })
	t.Run("security", func(t *testing.T) { checkSecurity(t, doc, open) })
}

// operations returns the document's operations by Go ServeMux pattern ("GET /v1/articles/{articleId}"), with the
// operational paths or without them.
func operations(doc *openapi3.T, withOperational bool) map[string]*openapi3.Operation {
	ops := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		if !withOperational && slices.Contains(operational, path) {
			continue
		}
		for method, op := range item.Operations() {
			ops[method+" "+path] = op
		}
	}
	return ops
}

func checkRoutes(t *testing.T, doc *openapi3.T, api *http.ServeMux) {
	documented := slices.Sorted(func(yield func(string) bool) {
		for p := range operations(doc, false) {
			if !yield(p) {
				return
			}
		}
	})
	registered, err := patterns(api)
	if err != nil {
		t.Fatalf("read the mux's patterns: %v", err)
	}
	if diff := cmp.Diff(registered, documented); diff != "" {
		t.Errorf("documented operations differ from the routes (-routes +documented):\n%s", diff)
	}
	// And each documented operation, asked with a sample request, routes to the pattern it documents.
	for _, p := range documented {
		method, path, _ := strings.Cut(p, " ")
		r := httptest.NewRequest(method, sample(path), nil)
		if _, got := api.Handler(r); got != p {
			t.Errorf("%s %s routes to %q, want %q", method, r.URL.Path, got, p)
		}
	}
	// Operational paths are the server's, never the service's.
	for _, path := range operational {
		if doc.Paths.Value(path) == nil || doc.Paths.Value(path).Get == nil {
			t.Errorf("GET %s is not documented", path)
		}
		if _, got := api.Handler(httptest.NewRequest(http.MethodGet, path, nil)); got != "" {
			t.Errorf("the service routes GET %s (%q), which the server answers before it", path, got)
		}
	}
}

var wildcard = regexp.MustCompile(`\{[^}]+\}`)

// sample fills a path's wildcards with values a route takes.
func sample(path string) string {
	return wildcard.ReplaceAllStringFunc(path, func(w string) string {
		if w == "{date}" {
			return "20260102"
		}
		return "12345"
	})
}

// patterns lists the patterns registered with mux. ServeMux does not say; its routing index does, read here by
// reflection (net/http's routingIndex.segments: every pattern without a trailing multi wildcard, under each of its
// segments). A Go release that renames those fields fails the check with the reason, not silently.
func patterns(mux *http.ServeMux) ([]string, error) {
	index := reflect.ValueOf(mux).Elem().FieldByName("index")
	segments := index.FieldByName("segments")
	multis := index.FieldByName("multis")
	if !segments.IsValid() || segments.Kind() != reflect.Map || !multis.IsValid() {
		return nil, errNoIndex
	}
	seen := map[string]bool{}
	add := func(pats reflect.Value) error {
		for i := range pats.Len() {
			str := pats.Index(i).Elem().FieldByName("str")
			if !str.IsValid() || str.Kind() != reflect.String {
				return errNoIndex
			}
			seen[str.String()] = true
		}
		return nil
	}
	for it := segments.MapRange(); it.Next(); {
		if err := add(it.Value()); err != nil {
			return nil, err
		}
	}
	if err := add(multis); err != nil {
		return nil, err
	}
	return slices.Sorted(func(yield func(string) bool) {
		for p := range seen {
			if !yield(p) {
				return
			}
		}
	}), nil
}

var errNoIndex = errors.New("net/http.ServeMux has no index.segments / index.multis of *pattern with a str field any more: update httpiotest.patterns")

func isWrite(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

func checkSecurity(t *testing.T, doc *openapi3.T, open map[string]string) {
	secured := false
	for p, op := range operations(doc, true) {
		method, _, _ := strings.Cut(p, " ")
		_, isOpen := open[p]
		var sec []string
		if op.Security != nil {
			for _, req := range *op.Security {
				for name := range req {
					sec = append(sec, name)
				}
			}
		}
		switch {
		case !isWrite(method) && slices.Equal(sec, []string{"bearerAuth"}):
			// A read that needs a token (a moderators' list, a user's own inbox): the Guard verifies a token a read
			// carries. Only some refuse one (403): a ban refuses writes, never reads.
			secured = true
			if op.Responses.Status(401) == nil {
				t.Errorf("%s: a read that needs a token, without a 401 answer", p)
			}
		case !isWrite(method) || isOpen:
			if op.Security == nil || len(sec) > 0 {
				t.Errorf("%s: security %v, want [] (no token) or, for a read that needs one, bearerAuth", p, sec)
			}
		default:
			secured = true
			if !slices.Equal(sec, []string{"bearerAuth"}) {
				t.Errorf("%s: security %v, want bearerAuth", p, sec)
			}
			for _, status := range []int{401, 403, 429} {
				if op.Responses.Status(status) == nil {
					t.Errorf("%s: no %d answer", p, status)
				}
			}
		}
		if isWrite(method) {
			if r := op.Responses.Status(429); r == nil {
				t.Errorf("%s: a write without a 429 answer", p)
			} else if h := r.Value.Headers["Retry-After"]; h == nil || !h.Value.Required {
				t.Errorf("%s: 429 without a required Retry-After header", p)
			}
		}
		if r := op.Responses.Status(401); r != nil {
			if h := r.Value.Headers["WWW-Authenticate"]; h == nil || !h.Value.Required {
				t.Errorf("%s: 401 without a required WWW-Authenticate header", p)
			}
		}
		if op.RequestBody != nil {
			for mt, c := range op.RequestBody.Value.Content {
				if ap := c.Schema.Value.AdditionalProperties; ap.Has != nil && !*ap.Has {
					t.Errorf("%s: %s body refuses unknown fields, which SPEC §2 says are ignored", p, mt)
				}
			}
			if op.Responses.Status(413) == nil {
				t.Errorf("%s: a body without a 413 answer", p)
			}
		}
	}
	schemes := doc.Components.SecuritySchemes
	if !secured {
		if len(schemes) != 0 {
			t.Errorf("a service without secured operations defines %d security schemes", len(schemes))
		}
		return
	}
	s := schemes["bearerAuth"]
	if len(schemes) != 1 || s == nil || s.Value.Type != "http" || s.Value.Scheme != "bearer" || s.Value.BearerFormat != "JWT" {
		t.Errorf("security schemes %v, want only bearerAuth, an http bearer JWT scheme", schemes)
	}
}
