package httpio

import (
	"math"
	"net/http"
	"strconv"

	"board/internal/apijson"
	"board/internal/fault"
)

// PathID parses the {name} path segment as an id.
func PathID(r *http.Request, name string) (int64, error) {
	v, err := apijson.Parse(r.PathValue(name))
	if err != nil {
		return 0, fault.Invalidf("INVALID_"+codeName(name), "path parameter %s: %v", name, err)
	}
	return v, nil
}

// QueryID parses a required id query parameter.
func QueryID(r *http.Request, name string) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, fault.Invalidf("MISSING_"+codeName(name), "query parameter %s is required", name)
	}
	v, err := apijson.Parse(s)
	if err != nil {
		return 0, fault.Invalidf("INVALID_"+codeName(name), "query parameter %s: %v", name, err)
	}
	return v, nil
}

// OptionalQueryID parses an optional id query parameter; it is 0 when absent.
func OptionalQueryID(r *http.Request, name string) (int64, error) {
	if r.URL.Query().Get(name) == "" {
		return 0, nil
	}
	return QueryID(r, name)
}

// QueryInt parses an optional integer query parameter that must lie in [lo, hi]; def is used when it is absent.
func QueryInt(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, fault.Invalidf("INVALID_"+codeName(name), "query parameter %s must be an integer from %d to %d", name, lo, hi)
	}
	return v, nil
}

// Field is a request body field and whether the request carried it.
type Field struct {
	Name    string
	Present bool
}

// Has names a body field and says whether the request carried it.
func Has(name string, present bool) Field { return Field{Name: name, Present: present} }

// Required reports the first field a request body is missing.
func Required(fields ...Field) error {
	for _, f := range fields {
		if !f.Present {
			return fault.Invalidf("MISSING_FIELD", "field %q is required", f.Name)
		}
	}
	return nil
}

// codeName turns a parameter name like "pageSize" into "PAGE_SIZE" for error codes.
func codeName(name string) string {
	out := make([]byte, 0, len(name)+4)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' {
			out = append(out, '_', c)
			continue
		}
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		out = append(out, c)
	}
	return string(out)
}

// Paging limits every list endpoint shares (SPEC §2).
const (
	DefaultPageSize = 30
	MaxPageSize     = 100
	// maxPage refuses, as input errors, pages past ~10^9: their offsets no engine scans in reasonable time.
	maxPage = math.MaxInt32
)

// PageQuery reads the page (default 1) and pageSize (default DefaultPageSize) of an offset list request.
func PageQuery(r *http.Request) (page, pageSize int64, err error) {
	if page, err = QueryInt(r, "page", 1, 1, maxPage); err != nil {
		return 0, 0, err
	}
	pageSize, err = PageSizeQuery(r)
	return page, pageSize, err
}

// PageSizeQuery reads the pageSize (default DefaultPageSize) of a list or infinite-scroll request.
func PageSizeQuery(r *http.Request) (int64, error) {
	return QueryInt(r, "pageSize", DefaultPageSize, 1, MaxPageSize)
}
