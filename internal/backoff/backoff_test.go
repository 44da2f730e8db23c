package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestJitterStaysBelowTheDoublingCeiling(t *testing.T) {
	t.Parallel()
	base, limit := 4*time.Millisecond, 128*time.Millisecond
	for attempt := 1; attempt <= 40; attempt++ {
		ceiling := limit
		if attempt <= 6 {
			ceiling = base << (attempt - 1)
		}
		var longest time.Duration
		for range 200 {
			d := Jitter(attempt, base, limit)
			if d < 0 || d >= ceiling {
				t.Fatalf("attempt %d: waited %v, want [0, %v)", attempt, d, ceiling)
			}
			longest = max(longest, d)
		}
		if longest < ceiling/2 {
			t.Errorf("attempt %d: 200 waits all below %v, half the ceiling %v: not spread", attempt, longest, ceiling)
		}
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{time.Hour, 0} {
		if err := Sleep(ctx, d); !errors.Is(err, context.Canceled) {
			t.Errorf("Sleep(%v) under a cancelled context: %v, want context.Canceled", d, err)
		}
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep: %v", err)
	}
}
