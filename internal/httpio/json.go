// Package httpio is the HTTP edge shared by every service: JSON in and out, the one table from error kinds to
// status codes, query and path parameter parsing, and the per-port server (health, readiness, metrics).
package httpio

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"board/internal/fault"
)

// MaxBodyBytes is the largest request body accepted (SPEC §2).
const MaxBodyBytes = 64 << 10

// Decode reads one JSON object from the request body into v. Unknown fields are ignored.
func Decode(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &tooLarge):
			return &fault.Error{Kind: fault.TooLarge, Code: "BODY_TOO_LARGE", Message: "request body is over 64 KiB"}
		case errors.Is(err, io.EOF):
			return fault.Invalidf("INVALID_JSON", "request body is empty; a JSON object is required")
		case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
			return fault.Invalidf("INVALID_JSON", "request body is not valid JSON")
		case errors.As(err, &typ) && typ.Field != "":
			return fault.Invalidf("INVALID_JSON", "field %q has the wrong type", typ.Field)
		default:
			return fault.Invalidf("INVALID_JSON", "request body is not a valid JSON object: %v", err)
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &fault.Error{Kind: fault.TooLarge, Code: "BODY_TOO_LARGE", Message: "request body is over 64 KiB"}
		}
		return fault.Invalidf("INVALID_JSON", "request body has data after the JSON object")
	}
	return nil
}

// Write sends v as JSON with the given status.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing useful to do
}

// errorBody is the JSON shape of every error answer.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error answers with the status err maps to. Internal errors (a 500 is a bug) are logged once, with the request;
// their details never reach the client.
func Error(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	status, body := classify(err)
	if status >= 500 {
		logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	Write(w, status, body)
}

// classify is the one table from errors to HTTP answers.
func classify(err error) (int, errorBody) {
	if fe, ok := fault.As(err); ok {
		status := map[fault.Kind]int{
			fault.Invalid:     http.StatusBadRequest,
			fault.NotFound:    http.StatusNotFound,
			fault.Conflict:    http.StatusConflict,
			fault.TooLarge:    http.StatusRequestEntityTooLarge,
			fault.Unavailable: http.StatusServiceUnavailable,
		}[fe.Kind]
		if status != 0 {
			return status, errorBody{fe.Code, fe.Message}
		}
	}
	if fault.IsDependencyDown(err) {
		return http.StatusServiceUnavailable, errorBody{"UNAVAILABLE", "a dependency is unavailable; try again later"}
	}
	return http.StatusInternalServerError, errorBody{"INTERNAL", "internal error"}
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
