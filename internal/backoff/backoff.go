// Package backoff is how board waits before trying again after a conflict: full jitter (a random wait below a
// ceiling that doubles with each attempt, up to a cap), so that writers who collided spread out instead of
// colliding again in step.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jitter returns how long to wait after the given failed attempt (from 1): uniform in [0, ceiling), the ceiling
// being base doubled attempt-1 times, at most max.
func Jitter(attempt int, base, max time.Duration) time.Duration {
	ceiling := max
	if attempt < 32 && base<<(attempt-1) < max {
		ceiling = base << (attempt - 1)
	}
	return rand.N(ceiling)
}

// Sleep waits for d or until ctx ends, whichever comes first, and returns ctx's error in the second case.
func Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil { // an ended context wins even over a wait already over
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
