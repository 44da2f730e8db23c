package httpio

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestArrayWriter: elements stream as one JSON array; an empty one is []; an error before the first element is
// returned for an ordinary answer, one after it aborts the response.
func TestArrayWriter(t *testing.T) {
	w := httptest.NewRecorder()
	a := NewArrayWriter(w)
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
	if err := NewArrayWriter(w).End(); err != nil || w.Body.String() != "[]" {
		t.Errorf("empty array = %q, %v", w.Body.String(), err)
	}

	boom := errors.New("boom")
	w = httptest.NewRecorder()
	a = NewArrayWriter(w)
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
