package apidoc_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"

	"board/internal/apidoc"
	"board/internal/article"
	"board/internal/articleread"
	"board/internal/comment"
	"board/internal/hotarticle"
	"board/internal/like"
	"board/internal/user"
	"board/internal/view"
)

// routes returns each service's ServeMux. Building one calls no method of its service, so nil services do.
func routes() map[string]*http.ServeMux {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	return map[string]*http.ServeMux{
		"article":      article.Routes(nil, logger),
		"comment":      comment.Routes(nil, logger),
		"like":         like.Routes(nil, logger),
		"view":         view.Routes(nil, logger),
		"hot-article":  hotarticle.Routes(nil, logger),
		"article-read": articleread.Routes(nil, logger),
		"user":         user.Routes(nil, logger),
	}
}

// openWrites are the writes taken without a token: user.OpenRoutes.
var openWrites = map[string]bool{}

func init() {
	for pattern := range user.OpenRoutes {
		openWrites["user "+pattern] = true
	}
}

// operational are the paths httpio.Server serves on every port besides the service's routes.
var operational = []string{"/healthz", "/metrics", "/openapi.json", "/readyz"}

var services = []string{"article", "article-read", "comment", "hot-article", "like", "user", "view"}

func load(t *testing.T, service string) *openapi3.T {
	t.Helper()
	raw := apidoc.For(service)
	if raw == nil {
		t.Fatalf("For(%q) = nil", service)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		t.Fatalf("load the %s document: %v", service, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the %s document is not valid: %v", service, err)
	}
	return doc
}

func TestServices(t *testing.T) {
	if diff := cmp.Diff(services, apidoc.Services()); diff != "" {
		t.Errorf("Services() (-want +got):\n%s", diff)
	}
	for _, name := range []string{"", "nope", "../apidoc", "article.json", "article/"} {
		if b := apidoc.For(name); b != nil {
			t.Errorf("For(%q) = %d bytes, want nil", name, len(b))
		}
	}
}

func TestDocumentsAreValid(t *testing.T) {
	for _, service := range services {
		t.Run(service, func(t *testing.T) {
			doc := load(t, service)
			if doc.OpenAPI != "3.1.0" {
				t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
			}
			for _, s := range doc.Servers {
				if s.URL != "/" {
					t.Errorf("server %q: a document served by every instance names no host; want /", s.URL)
				}
			}
		})
	}
}

// operations returns the document's operations as Go ServeMux patterns ("GET /v1/articles/{articleId}"), less the
// operational paths.
func operations(doc *openapi3.T) map[string]*openapi3.Operation {
	ops := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		if slices.Contains(operational, path) {
			continue
		}
		for method, op := range item.Operations() {
			ops[method+" "+path] = op
		}
	}
	return ops
}

func TestDocumentsMatchRoutes(t *testing.T) {
	muxes := routes()
	for _, service := range services {
		t.Run(service, func(t *testing.T) {
			doc := load(t, service)
			documented := slices.Sorted(func(yield func(string) bool) {
				for p := range operations(doc) {
					if !yield(p) {
						return
					}
				}
			})
			mux, ok := muxes[service]
			if !ok {
				t.Fatalf("no routes for %s", service)
			}
			registered, err := patterns(mux)
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
				if _, got := mux.Handler(r); got != p {
					t.Errorf("%s %s routes to %q, want %q", method, r.URL.Path, got, p)
				}
			}
			// Operational paths are the server's, never the service's.
			for _, path := range operational {
				if doc.Paths.Value(path) == nil || doc.Paths.Value(path).Get == nil {
					t.Errorf("GET %s is not documented", path)
				}
				if _, got := mux.Handler(httptest.NewRequest(http.MethodGet, path, nil)); got != "" {
					t.Errorf("the service routes GET %s (%q), which the server answers before it", path, got)
				}
			}
		})
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
// segments). A Go release that renames those fields fails this test with the reason, not silently.
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

type noIndex struct{}

func (noIndex) Error() string {
	return "net/http.ServeMux has no index.segments / index.multis of *pattern with a str field any more: update patterns()"
}

var errNoIndex error = noIndex{}

func isWrite(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

func TestSecurity(t *testing.T) {
	for _, service := range services {
		t.Run(service, func(t *testing.T) {
			doc := load(t, service)
			for p, op := range operationsWithOperational(doc) {
				method, _, _ := strings.Cut(p, " ")
				var sec []string
				if op.Security != nil {
					for _, req := range *op.Security {
						for name := range req {
							sec = append(sec, name)
						}
					}
				}
				switch {
				case !isWrite(method) || openWrites[service+" "+p]:
					if op.Security == nil || len(sec) > 0 {
						t.Errorf("%s: security %v, want [] (no token)", p, sec)
					}
				default:
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
			secured := false
			for p := range operationsWithOperational(doc) {
				method, _, _ := strings.Cut(p, " ")
				secured = secured || isWrite(method) && !openWrites[service+" "+p]
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
		})
	}
}

func operationsWithOperational(doc *openapi3.T) map[string]*openapi3.Operation {
	ops := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops[method+" "+path] = op
		}
	}
	return ops
}
