// Package httpio is the HTTP edge shared by every service: JSON in and out, the one table from error kinds to
// status codes, query and path parameter parsing, and the per-port server (health, readiness, metrics).
package httpio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"strconv"

	"board/internal/apijson"
	"board/internal/fault"
)

// MaxBodyBytes is the largest request body accepted (SPEC §2).
const MaxBodyBytes = 64 << 10

// Decode reads one JSON object from the request body into v. Unknown fields are ignored; null reads as an empty
// object, so that the caller reports the first field it requires.
func Decode(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := readJSON(w, r)
	if err != nil {
		return err
	}
	if raw[0] != '{' && string(raw) != "null" {
		return fault.Invalidf("INVALID_JSON", "request body must be a JSON object")
	}
	return fieldError(json.Unmarshal(raw, v))
}

// readJSON reads the body as exactly one JSON value of at most MaxBodyBytes.
func readJSON(w http.ResponseWriter, r *http.Request) (json.RawMessage, error) {
	var raw json.RawMessage
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	err := dec.Decode(&raw)
	if err == nil {
		if _, err = dec.Token(); err == nil {
			return nil, fault.Invalidf("INVALID_JSON", "request body has data after the JSON object")
		}
		if errors.Is(err, io.EOF) {
			return raw, nil
		}
	}
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &tooLarge):
		return nil, &fault.Error{Kind: fault.TooLarge, Code: "BODY_TOO_LARGE", Message: "request body is over 64 KiB"}
	case errors.Is(err, io.EOF):
		return nil, fault.Invalidf("INVALID_JSON", "request body is empty; a JSON object is required")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fault.Invalidf("INVALID_JSON", "request body is not valid JSON")
	default:
		// The client stopped sending, or sent too slowly for the server's read timeout: not the server's fault.
		return nil, &fault.Error{Kind: fault.Invalid, Code: "BODY_UNREADABLE",
			Message: "request body could not be read in full", Err: err}
	}
}

// fieldError words an error from unmarshaling a JSON object for the client, naming the field at fault and never Go
// types.
func fieldError(err error) error {
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &typ) || typ.Field == "":
		return fault.Invalidf("INVALID_JSON", "request body has a value of the wrong type")
	case typ.Type == reflect.TypeFor[apijson.ID]():
		return fault.Invalidf("INVALID_JSON", "field %q: %s is not a valid id: %s", typ.Field, typ.Value, apijson.IDSyntax)
	default:
		return fault.Invalidf("INVALID_JSON", "field %q has the wrong type", typ.Field)
	}
}

// Write sends v as JSON with the given status. The answer carries its length, so that it is complete once it is
// flushed (error answers are, before the rest of the request body is drained).
func Write(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Errorf("httpio.Write: %w", err)) // v is the server's own value: a bug, answered as one
	}
	WriteRaw(w, status, append(body, '\n'))
}

// WriteRaw sends body, JSON the caller encoded, with the given status and the headers Write gives its answers, and
// no copy: for handlers that encode without reflection. Write's answers end with a newline; so should body.
func WriteRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client went away; nothing useful to do
}

// errorBody is the JSON shape of every error answer.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error answers with the status err maps to. Internal errors (a 500 is a bug) and dependency failures are logged
// once, with the request; their details never reach the client.
func Error(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	status, body := classify(r.Context(), err)
	switch fe, _ := fault.As(err); status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="board"`)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(fe.RetryAfter.Seconds())), 10))
	}
	switch {
	case status == statusClientClosedRequest:
		logger.DebugContext(r.Context(), "client went away", "method", r.Method, "path", r.URL.Path, "err", err)
	case status >= 500:
		logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	if fe, _ := fault.As(err); fe != nil && len(fe.Details) > 0 && status < 500 {
		Write(w, status, body.with(fe.Details))
		return
	}
	Write(w, status, body)
}

// with returns the body with an error's details beside its code and message.
func (b errorBody) with(details map[string]any) map[string]any {
	out := make(map[string]any, len(details)+2)
	for k, v := range details {
		out[k] = v
	}
	out["code"], out["message"] = b.Code, b.Message
	return out
}

// statusClientClosedRequest (nginx's) answers a request whose client went away: no one reads it, it is no fault of
// the server's, and it keeps such requests apart in the metrics.
const statusClientClosedRequest = 499

var faultStatus = map[fault.Kind]int{
	fault.Invalid:              http.StatusBadRequest,
	fault.NotFound:             http.StatusNotFound,
	fault.Conflict:             http.StatusConflict,
	fault.TooLarge:             http.StatusRequestEntityTooLarge,
	fault.Unavailable:          http.StatusServiceUnavailable,
	fault.Unauthenticated:      http.StatusUnauthorized,
	fault.Forbidden:            http.StatusForbidden,
	fault.RateLimited:          http.StatusTooManyRequests,
	fault.UnsupportedMediaType: http.StatusUnsupportedMediaType,
}

// classify is the one table from errors to HTTP answers. A fault the client can act on keeps its answer; any other
// failure is read in the light of the request's context first: a client that went away, or a request past its
// deadline (a driver's error after the deadline is the deadline's doing).
func classify(ctx context.Context, err error) (int, errorBody) {
	var status int
	fe, ok := fault.As(err)
	if ok {
		status = faultStatus[fe.Kind]
	}
	switch {
	case status != 0 && status < 500:
		return status, errorBody{fe.Code, fe.Message}
	case errors.Is(ctx.Err(), context.Canceled):
		return statusClientClosedRequest, errorBody{"CLIENT_CLOSED_REQUEST", "the client closed the request"}
	case status != 0:
		return status, errorBody{fe.Code, fe.Message}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return http.StatusServiceUnavailable, errorBody{"TIMEOUT", "the request did not finish in time; try again later"}
	case fault.IsDependencyDown(err):
		return http.StatusServiceUnavailable, errorBody{"UNAVAILABLE", "a dependency is unavailable; try again later"}
	default:
		return http.StatusInternalServerError, errorBody{"INTERNAL", "internal error"}
	}
}

// HandlerFunc is a handler that returns its error instead of answering it.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handle adapts fn to net/http, answering any error it returns through Error.
func Handle(logger *slog.Logger, fn HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			Error(w, r, logger, err)
		}
	}
}
