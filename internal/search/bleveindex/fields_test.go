package bleveindex

import (
	"math"
	"slices"
	"testing"
)

// Creation times sort as their terms do, before 1970 too, and days floor.
func TestCreatedTermsAndDaysKeepTimeOrder(t *testing.T) {
	times := []int64{math.MinInt64, -62135596800000, -msPerDay - 1, -msPerDay, -1, 0, 1, msPerDay - 1, msPerDay, 1735689600000, math.MaxInt64}
	var terms []string
	for _, ms := range times {
		terms = append(terms, createdTerm(ms))
	}
	if !slices.IsSorted(terms) {
		t.Errorf("terms out of order: %v", terms)
	}
	for ms, want := range map[int64]int64{-msPerDay - 1: -2, -msPerDay: -1, -1: -1, 0: 0, msPerDay - 1: 0, msPerDay: 1} {
		if got := day(ms); got != want {
			t.Errorf("day(%d) = %d, want %d", ms, got, want)
		}
	}
}
