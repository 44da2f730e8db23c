package httpio

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// ExportTimeout bounds a whole export (GET /v1/exports/...): served as a stream, without the request deadline, an
// export of the largest account still ends.
const ExportTimeout = 2 * time.Minute

// ArrayWriter streams a JSON array to a client one element at a time, so that an export of any size costs one
// page's memory. The status 200 goes out with the first element (or with End): an error before it is still an
// ordinary error answer, an error after it can only cut the response short (Abort).
type ArrayWriter struct {
	w       http.ResponseWriter
	started bool
}

// NewArrayWriter returns a writer of a JSON array to w, and the context of r that bounds the export: its connection
// may take until the same deadline to write it all, past the server's write timeout, which is sized for ordinary
// answers.
func NewArrayWriter(w http.ResponseWriter, r *http.Request, timeout time.Duration) (*ArrayWriter, context.Context, context.CancelFunc) {
	deadline := time.Now().Add(timeout)
	_ = http.NewResponseController(w).SetWriteDeadline(deadline) // not every writer has a connection (tests)
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	return &ArrayWriter{w: w}, ctx, cancel
}

func (a *ArrayWriter) start() {
	if !a.started {
		a.started = true
		a.w.Header().Set("Content-Type", "application/json")
		a.w.WriteHeader(http.StatusOK)
	}
}

// Add writes one element.
func (a *ArrayWriter) Add(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	sep := []byte{','}
	if !a.started {
		a.start()
		sep[0] = '['
	}
	if _, err := a.w.Write(sep); err != nil {
		return err
	}
	_, err = a.w.Write(b)
	return err
}

// Flush sends what is written so far: called after each page, so the client receives as the server reads.
func (a *ArrayWriter) Flush() error {
	if !a.started {
		return nil
	}
	return http.NewResponseController(a.w).Flush()
}

// End closes the array ("[]" when nothing was added).
func (a *ArrayWriter) End() error {
	end := "]"
	if !a.started {
		a.start()
		end = "[]"
	}
	_, err := a.w.Write([]byte(end))
	return err
}

// Abort returns err for an ordinary error answer while nothing is sent; once the array has begun, it ends the
// response without closing it (panic(http.ErrAbortHandler)), so that the client sees a truncated body and never
// mistakes a part for the whole.
func (a *ArrayWriter) Abort(err error) error {
	if a.started {
		panic(http.ErrAbortHandler)
	}
	return err
}
