package polltest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the failure instead of ending the test.
type recorder struct {
	testing.TB
	failure string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failure = fmt.Sprintf(format, args...) }

func TestUntilReturnsOnceDone(t *testing.T) {
	calls := 0
	r := &recorder{}
	Until(r, 10*time.Second, func() (bool, string) {
		calls++
		return calls == 3, fmt.Sprintf("call %d", calls)
	})
	if r.failure != "" || calls != 3 {
		t.Errorf("failure %q after %d calls; want none after 3", r.failure, calls)
	}
}

func TestUntilFailsWithTheLastState(t *testing.T) {
	calls := 0
	r := &recorder{}
	start := time.Now()
	Until(r, 30*time.Millisecond, func() (bool, string) {
		calls++
		return false, fmt.Sprintf("call %d", calls)
	})
	if elapsed := time.Since(start); elapsed < 30*time.Millisecond {
		t.Errorf("gave up after %v, before the timeout", elapsed)
	}
	if want := fmt.Sprintf("call %d", calls); !strings.HasSuffix(r.failure, want) || calls < 2 {
		t.Errorf("failure %q after %d calls; want one ending in the last state, %q", r.failure, calls, want)
	}
}
