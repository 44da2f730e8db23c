// Package polltest waits, in tests, for what happens in the background: an event consumed, a cache refreshed, a
// key fetched, a server caught up. It is the one poll loop the tests share, so that each wait says only what it
// waits for and what it saw last.
package polltest

import (
	"testing"
	"time"
)

// maxPause is the longest Until sleeps between two checks.
const maxPause = 50 * time.Millisecond

// Until calls check until it reports done, and fails the test (t.Fatalf) if it has not within timeout, with state:
// what check saw the last time, e.g. "GET /v1/x: 404 {...}". It checks once more when the timeout is up, and
// sleeps between checks 1 ms at first, doubling up to 50 ms, so that a condition met at once is seen at once and a
// slow one is not hammered. check runs on the caller's goroutine: it may call t.Fatal for an error that retrying
// cannot fix.
func Until(t testing.TB, timeout time.Duration, check func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		done, state := check()
		if done {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("still not done after %v: %s", timeout, state)
			return
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, maxPause)
	}
}
