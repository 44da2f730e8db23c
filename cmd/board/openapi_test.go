package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// validateAPI runs the tests with every HTTP exchange they make through http.DefaultTransport checked against the
// OpenAPI document of the server that answers it, as that server serves it at GET /openapi.json (SPEC §2.1): the
// documents cannot drift from the code without failing the suite. TestMain calls it in place of m.Run.
//
//   - Every answer is validated: its status must be documented for the operation, and its headers and body must match.
//   - A request is validated too, but reported only when the server took it (2xx): the tests send bad input on
//     purpose, and a server that accepts what its document forbids has drifted. A body without a Content-Type is
//     read as JSON, as the services read every body.
//   - A request for a path or method the document lacks is reported unless the server also found no route (404, 405).
//   - Not checked: HEAD, the operational paths (/healthz, /readyz, /metrics, /openapi.json), and hosts that do not
//     serve /openapi.json (a 404: an httptest fake, a service built without its document).
//
// A document is fetched once per host and kept. A port the kernel hands to another service later is caught when a
// check fails: the document is fetched again and, if it changed, the exchange is checked against the new one.
func validateAPI(m *testing.M) int {
	// The media service serves images: bytes the validator checks as such, against the content types it documents.
	for _, ct := range []string{"image/png", "image/jpeg", "image/gif", "image/webp"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.FileBodyDecoder)
	}
	v := &apiValidator{next: http.DefaultTransport, hosts: map[string]*apiHost{}}
	http.DefaultTransport = v
	code := m.Run()
	http.DefaultTransport = v.next
	if v.report(os.Stderr) && code == 0 {
		code = 1
	}
	return code
}

// apiValidator is the http.RoundTripper validateAPI installs.
type apiValidator struct {
	next http.RoundTripper

	mu         sync.Mutex
	hosts      map[string]*apiHost // by scheme://host
	violations map[apiViolationKey]*apiViolation
	checked    atomic.Int64           // exchanges validated
	docs       map[string]*openapi3.T // every document seen, by title
	exercised  map[string]bool        // "title METHOD path" of each documented operation an exchange reached
}

// apiHost is what one host serves at /openapi.json.
type apiHost struct {
	mu        sync.Mutex // held while fetching
	raw       []byte     // nil: none yet
	doc       *openapi3.T
	router    routers.Router
	none      bool      // the host serves no document (404)
	noneUntil time.Time // when to ask again
}

// apiNoneTTL is how long a host that served no document is believed: its port may later go to a service that does.
const apiNoneTTL = 2 * time.Second

var apiSkipped = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true, "/openapi.json": true}

func (v *apiValidator) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodHead || apiSkipped[req.URL.Path] || (req.URL.Scheme != "http" && req.URL.Scheme != "https") {
		return v.next.RoundTrip(req)
	}
	var reqBody []byte
	bodyKnown := req.Body == nil || req.Body == http.NoBody
	if !bodyKnown && req.GetBody != nil { // a body the transport can replay, so a copy reads the same bytes
		if b, err := req.GetBody(); err == nil {
			reqBody, err = io.ReadAll(b)
			b.Close()
			bodyKnown = err == nil
		}
	}
	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if isStream(resp) {
		// A stream stays open: its status and headers are checked here, its events by the test that reads them.
		v.check(req, reqBody, bodyKnown, resp, nil)
		return resp, nil
	}
	respBody, readErr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if readErr != nil {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(respBody), errReader{readErr}))
		return resp, nil
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	v.check(req, reqBody, bodyKnown, resp, respBody)
	return resp, nil
}

// isStream reports whether resp is a stream of Server-Sent Events, whose body ends only when its server ends it.
func isStream(resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// check validates one exchange against the host's document, and once more against a fresh copy of it when that
// fails and the copy differs.
func (v *apiValidator) check(req *http.Request, reqBody []byte, bodyKnown bool, resp *http.Response, respBody []byte) {
	base := req.URL.Scheme + "://" + req.URL.Host
	h := v.host(base)
	if h == nil {
		return
	}
	route, problems := validateExchange(h, req, reqBody, bodyKnown, resp, respBody)
	if len(problems) > 0 {
		fresh, confirmed := v.refetch(base, h)
		if !confirmed {
			// The host is gone, or serves no document now: the document kept for its port may be another server's,
			// which an earlier test ran there. Its exchange cannot be judged.
			return
		}
		if fresh != nil {
			h = fresh
			route, problems = validateExchange(h, req, reqBody, bodyKnown, resp, respBody)
		}
	}
	v.checked.Add(1)
	v.mu.Lock()
	if v.docs == nil {
		v.docs, v.exercised = map[string]*openapi3.T{}, map[string]bool{}
	}
	v.docs[h.doc.Info.Title] = h.doc
	if route != nil {
		v.exercised[h.doc.Info.Title+" "+route.Method+" "+route.Path] = true
	}
	v.mu.Unlock()
	for _, p := range problems {
		v.record(req, resp.StatusCode, p)
	}
}

// host returns the document base serves, or nil when it serves none or cannot be asked now.
func (v *apiValidator) host(base string) *apiHost {
	v.mu.Lock()
	h, ok := v.hosts[base]
	if !ok {
		h = &apiHost{}
		v.hosts[base] = h
	}
	v.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.raw != nil:
		return h.snapshot()
	case h.none && time.Now().Before(h.noneUntil):
		return nil
	}
	if !v.fetch(base, h) {
		return nil
	}
	return h.snapshot()
}

// refetch fetches base's document again. It returns the copy when it differs from old's, and whether the host
// answered with a document at all (false: old's cannot be confirmed).
func (v *apiValidator) refetch(base string, old *apiHost) (*apiHost, bool) {
	v.mu.Lock()
	h := v.hosts[base]
	v.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.raw != nil && !bytes.Equal(h.raw, old.raw) { // another exchange fetched it already
		return h.snapshot(), true
	}
	if !v.fetch(base, h) {
		return nil, false
	}
	if bytes.Equal(h.raw, old.raw) {
		return nil, true
	}
	return h.snapshot(), true
}

func (h *apiHost) snapshot() *apiHost { return &apiHost{raw: h.raw, doc: h.doc, router: h.router} }

// fetch asks base for its document and keeps the answer in h (h.mu held): a document, or that there is none. It
// reports whether h now has a document. A host that cannot be asked now (not listening yet, gone) is left as it was.
func (v *apiValidator) fetch(base string, h *apiHost) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/openapi.json", nil)
	if err != nil {
		return false
	}
	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return false
	case resp.StatusCode == http.StatusNotFound:
		h.raw, h.doc, h.router, h.none, h.noneUntil = nil, nil, nil, true, time.Now().Add(apiNoneTTL)
		return false
	case resp.StatusCode != http.StatusOK:
		return false
	}
	doc, router, err := loadAPI(raw)
	if err != nil {
		// A server that serves a broken document has drifted as surely as one that answers off it.
		v.recordDoc(base, err)
		h.none, h.noneUntil = true, time.Now().Add(apiNoneTTL)
		return false
	}
	h.raw, h.doc, h.router, h.none = raw, doc, router, false
	return true
}

// loadAPI loads and validates a document and builds its router. Routes match on the path alone: the document names
// no host, and the tests' servers listen on any port.
func loadAPI(raw []byte) (*openapi3.T, routers.Router, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("load: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, nil, fmt.Errorf("validate: %w", err)
	}
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("router: %w", err)
	}
	return doc, router, nil
}

// validateExchange returns the documented route of an exchange (nil if none) and what is wrong with it according to
// h's document.
func validateExchange(h *apiHost, req *http.Request, reqBody []byte, bodyKnown bool, resp *http.Response,
	respBody []byte) (*routers.Route, []string) {
	ctx := context.Background()
	in := req.Clone(ctx)
	in.Body = io.NopCloser(bytes.NewReader(reqBody))
	if len(reqBody) > 0 && in.Header.Get("Content-Type") == "" {
		in.Header.Set("Content-Type", "application/json")
	}
	route, params, err := h.router.FindRoute(in)
	if err != nil {
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			return nil, nil
		}
		return nil, []string{fmt.Sprintf("route: %v, but the server answered %d", err, resp.StatusCode)}
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		SkipSettingDefaults:   true,
		IncludeResponseStatus: true,
		ExcludeRequestBody:    !bodyKnown,
		ExcludeResponseBody:   isStream(resp),
		MultiError:            true,
	}
	reqIn := &openapi3filter.RequestValidationInput{Request: in, PathParams: params, Route: route, Options: opts}
	var problems []string
	if err := openapi3filter.ValidateRequest(ctx, reqIn); err != nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		problems = append(problems, "request (taken with "+resp.Status+"): "+err.Error())
	}
	respIn := &openapi3filter.ResponseValidationInput{RequestValidationInput: reqIn, Status: resp.StatusCode,
		Header: resp.Header, Options: opts}
	respIn.SetBodyBytes(respBody)
	if err := openapi3filter.ValidateResponse(ctx, respIn); err != nil {
		problems = append(problems, "response: "+err.Error())
	}
	return route, problems
}

// apiViolationKey groups the same violation of many exchanges: the same route, status and reason (a validator's
// message less the schema and value it quotes).
type apiViolationKey struct {
	method, route, reason string
	status                int
}

type apiViolation struct {
	example string // the first exchange's URL
	problem string // its whole message
	count   int
}

// maxProblemLen cuts long validator messages, which quote the schema and the value.
const maxProblemLen = 2000

func (v *apiValidator) record(req *http.Request, status int, problem string) {
	if len(problem) > maxProblemLen {
		problem = problem[:maxProblemLen] + "…"
	}
	reason, _, _ := strings.Cut(problem, "\n")
	key := apiViolationKey{method: req.Method, route: apiRoute(req.URL.Path), reason: reason, status: status}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.violations == nil {
		v.violations = map[apiViolationKey]*apiViolation{}
	}
	if x := v.violations[key]; x != nil {
		x.count++
		return
	}
	v.violations[key] = &apiViolation{example: req.URL.String(), problem: problem, count: 1}
}

func (v *apiValidator) recordDoc(base string, err error) {
	req, _ := http.NewRequest(http.MethodGet, base+"/openapi.json", nil)
	v.record(req, http.StatusOK, "the served document is unusable: "+err.Error())
}

// apiRoute writes a path with its numeric segments as {id}, so that violations group by route.
func apiRoute(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if s != "" && strings.Trim(s, "0123456789") == "" {
			segs[i] = "{id}"
		}
	}
	return strings.Join(segs, "/")
}

// report writes the violations to w and says whether there were any.
func (v *apiValidator) report(w io.Writer) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	documented := 0
	for _, h := range v.hosts {
		if h.raw != nil {
			documented++
		}
	}
	fmt.Fprintf(w, "openapi: %d exchanges with %d documented hosts checked against their documents; %d distinct violations\n",
		v.checked.Load(), documented, len(v.violations))
	for _, title := range slices.Sorted(maps.Keys(v.docs)) {
		var missed []string
		total := 0
		for path, item := range v.docs[title].Paths.Map() {
			for method := range item.Operations() {
				if apiSkipped[path] {
					continue
				}
				total++
				if !v.exercised[title+" "+method+" "+path] {
					missed = append(missed, method+" "+path)
				}
			}
		}
		slices.Sort(missed)
		fmt.Fprintf(w, "openapi: %s: %d of %d operations exercised", title, total-len(missed), total)
		if len(missed) > 0 {
			fmt.Fprintf(w, "; not: %s", strings.Join(missed, ", "))
		}
		fmt.Fprintln(w)
	}
	keys := slices.SortedFunc(func(yield func(apiViolationKey) bool) {
		for k := range v.violations {
			if !yield(k) {
				return
			}
		}
	}, func(a, b apiViolationKey) int {
		return cmp.Or(cmp.Compare(a.route, b.route), cmp.Compare(a.method, b.method), cmp.Compare(a.status, b.status),
			cmp.Compare(a.reason, b.reason))
	})
	for _, k := range keys {
		x := v.violations[k]
		fmt.Fprintf(w, "openapi: VIOLATION %s %s -> %d (%d times; e.g. %s)\n    %s\n", k.method, k.route, k.status,
			x.count, x.example, strings.ReplaceAll(x.problem, "\n", "\n    "))
	}
	return len(v.violations) > 0
}
