// Package fault is the error vocabulary shared by every service: a small set of kinds that callers map to an
// HTTP status (httpio) or to a retry decision (the event consumer), each with a stable machine-readable code.
package fault

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// Kind says what went wrong from the caller's point of view.
type Kind int

const (
	Invalid              Kind = iota + 1 // the input is malformed or breaks a rule
	NotFound                             // the resource does not exist
	Conflict                             // the request clashes with the current state (e.g. a duplicate)
	TooLarge                             // the request body is over the limit
	Unavailable                          // a dependency is down; the caller may retry later
	Unauthenticated                      // the request carries no valid access token
	Forbidden                            // the acting user may not do this
	RateLimited                          // the caller is over a rate limit; RetryAfter says when to come back
	UnsupportedMediaType                 // the request body is of a kind the route does not take
)

// Error is an error a client can act on. Code is stable and machine-readable (e.g. "INVALID_TITLE");
// Message is for humans.
type Error struct {
	Kind    Kind
	Code    string
	Message string
	Err     error // the cause, if any; never shown to clients
	// RetryAfter is how long a RateLimited caller should wait before trying again.
	RetryAfter time.Duration
	// Details are members of the error's JSON body besides code and message (a ban's reason and end).
	Details map[string]any
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Invalidf reports bad input.
func Invalidf(code, format string, args ...any) *Error {
	return &Error{Kind: Invalid, Code: code, Message: fmt.Sprintf(format, args...)}
}

// NotFoundf reports a missing resource.
func NotFoundf(code, format string, args ...any) *Error {
	return &Error{Kind: NotFound, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Conflictf reports a request that clashes with the current state.
func Conflictf(code, format string, args ...any) *Error {
	return &Error{Kind: Conflict, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unavailablef reports a dependency that is down, keeping the cause for the logs.
func Unavailablef(cause error, code, format string, args ...any) *Error {
	return &Error{Kind: Unavailable, Code: code, Message: fmt.Sprintf(format, args...), Err: cause}
}

// Unauthenticatedf reports a request without a valid access token.
func Unauthenticatedf(code, format string, args ...any) *Error {
	return &Error{Kind: Unauthenticated, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Forbiddenf reports an acting user who may not do what they ask.
func Forbiddenf(format string, args ...any) *Error {
	return &Error{Kind: Forbidden, Code: "FORBIDDEN", Message: fmt.Sprintf(format, args...)}
}

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var fe *Error
	ok := errors.As(err, &fe)
	return fe, ok
}

// KindOf returns the kind of err, or 0 when err carries none (an internal error).
func KindOf(err error) Kind {
	if fe, ok := As(err); ok {
		return fe.Kind
	}
	return 0
}

// IsDependencyDown reports whether err says a database, cache or broker could not be reached, which is answered
// with 503 rather than 500. Drivers wrap such errors differently; these are the shapes they share.
func IsDependencyDown(err error) bool {
	if err == nil {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, context.DeadlineExceeded)
}
