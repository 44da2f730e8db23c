package snowflake

import (
	"board/internal/snowflake/snowflaketest"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func mustNext(t *testing.T, g *Generator) int64 {
	t.Helper()
	id, err := g.Next()
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return id
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		node    int64
		wantErr bool
	}{
		{-1, true},
		{0, false},
		{MaxNode, false},
		{MaxNode + 1, true},
	} {
		g, err := New(tc.node, nil)
		if (err != nil) != tc.wantErr {
			t.Errorf("New(%d) error = %v, want error %v", tc.node, err, tc.wantErr)
		}
		if err == nil && g.node != tc.node {
			t.Errorf("New(%d): node %d", tc.node, g.node)
		}
	}
}

func TestNextConcurrentUnique(t *testing.T) {
	t.Parallel()
	const workers, perWorker = 10, 100_000
	g, err := New(42, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			out := make([]int64, 0, perWorker)
			for range perWorker {
				id, err := g.Next()
				if err != nil {
					t.Error(err)
					return
				}
				out = append(out, id)
			}
			ids[w] = out
		})
	}
	wg.Wait()

	all := make([]int64, 0, workers*perWorker)
	for w, out := range ids {
		for i := 1; i < len(out); i++ {
			if out[i] <= out[i-1] {
				t.Fatalf("worker %d: id %d = %d not greater than previous %d", w, i, out[i], out[i-1])
			}
		}
		all = append(all, out...)
	}
	slices.Sort(all)
	if n := len(slices.Compact(all)); n != workers*perWorker {
		t.Fatalf("%d distinct ids, want %d", n, workers*perWorker)
	}
	if nodeOf(all[0]) != 42 || all[0] <= 0 {
		t.Fatalf("id %d: node %d, want positive id with node 42", all[0], nodeOf(all[0]))
	}
}

func TestNextDecodes(t *testing.T) {
	t.Parallel()
	start := Epoch.Add(123*time.Hour + 456789*time.Microsecond)
	g, err := New(7, snowflaketest.NewClock(start).Now)
	if err != nil {
		t.Fatal(err)
	}
	for seq := range int64(3) {
		id := mustNext(t, g)
		if got, want := Timestamp(id), start.Truncate(time.Millisecond); !got.Equal(want) {
			t.Errorf("Timestamp = %v, want %v", got, want)
		}
		if nodeOf(id) != 7 || seqOf(id) != seq {
			t.Errorf("id %d: node %d seq %d, want 7, %d", id, nodeOf(id), seqOf(id), seq)
		}
	}
}

func TestNextClockOutOfRange(t *testing.T) {
	t.Parallel()
	for _, at := range []time.Time{
		Epoch.Add(-time.Microsecond),
		Epoch.Add((maxMillis + 1) * time.Millisecond),
	} {
		g, _ := New(1, func() time.Time { return at })
		if id, err := g.Next(); err == nil {
			t.Errorf("clock %v: got id %d, want error", at, id)
		}
	}
}

func TestClockBackwards(t *testing.T) {
	t.Parallel()
	t0 := Epoch.Add(time.Hour)
	for _, tc := range []struct {
		name string
		back time.Duration
	}{
		{"small skew that persists", 2 * time.Millisecond},
		{"large skew", time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := snowflaketest.NewClock(t0)
			g, _ := New(1, clk.Now)
			first := mustNext(t, g)

			clk.Set(t0.Add(-tc.back))
			if id, err := g.Next(); !errors.Is(err, ErrClockBackwards) {
				t.Fatalf("Next = %d, %v; want ErrClockBackwards", id, err)
			}

			clk.Set(t0)
			second := mustNext(t, g)
			clk.Add(time.Millisecond)
			third := mustNext(t, g)
			if !(first < second && second < third) {
				t.Fatalf("ids not increasing: %d, %d, %d", first, second, third)
			}
		})
	}
}

func TestClockBackwardsSmallSkewRecovers(t *testing.T) {
	t.Parallel()
	t0 := Epoch.Add(time.Hour)
	// The clock reads t0, then 3 ms behind, then (after Next sleeps) t0 again.
	readings := []time.Time{t0, t0.Add(-3 * time.Millisecond), t0}
	var mu sync.Mutex
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		r := readings[0]
		if len(readings) > 1 {
			readings = readings[1:]
		}
		return r
	}
	g, _ := New(1, now)
	first := mustNext(t, g)
	start := time.Now()
	second := mustNext(t, g)
	if second <= first {
		t.Fatalf("second id %d <= first %d", second, first)
	}
	if d := time.Since(start); d < 3*time.Millisecond {
		t.Fatalf("Next returned after %v, want it to sleep off the 3 ms skew", d)
	}
}

func TestSequenceOverflow(t *testing.T) {
	t.Parallel()
	t0 := Epoch.Add(time.Hour)
	clk := snowflaketest.NewClock(t0)
	g, _ := New(3, clk.Now)
	var last int64
	for i := range MaxSeq + 1 {
		id := mustNext(t, g)
		if id <= last || seqOf(id) != int64(i) || !Timestamp(id).Equal(t0) {
			t.Fatalf("id %d: %d (seq %d, time %v) after %d", i, id, seqOf(id), Timestamp(id), last)
		}
		last = id
	}

	var advanced atomic.Bool
	go func() {
		time.Sleep(20 * time.Millisecond)
		advanced.Store(true)
		clk.Add(time.Millisecond)
	}()
	id := mustNext(t, g)
	if !advanced.Load() {
		t.Fatal("Next returned before the clock advanced")
	}
	if id <= last || seqOf(id) != 0 || !Timestamp(id).Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("id after overflow %d (seq %d, time %v), want seq 0 in the next ms", id, seqOf(id), Timestamp(id))
	}
}

func TestComposeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		at        time.Time
		node, seq int64
	}{
		{"zero", Epoch, 0, 0},
		{"typical", time.Date(2025, 6, 7, 8, 9, 10, 11_000_000, time.UTC), 513, 77},
		{"max", Epoch.Add(maxMillis * time.Millisecond), MaxNode, MaxSeq},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := Compose(tc.at, tc.node, tc.seq)
			if id < 0 {
				t.Fatalf("id %d is negative", id)
			}
			if !Timestamp(id).Equal(tc.at) || nodeOf(id) != tc.node || seqOf(id) != tc.seq {
				t.Fatalf("decoded (%v, %d, %d), want (%v, %d, %d)",
					Timestamp(id), nodeOf(id), seqOf(id), tc.at, tc.node, tc.seq)
			}
		})
	}
}

func TestBitLayout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		ms        int64
		node, seq int64
		want      uint64
	}{
		{"seq in bits 0..11", 0, 0, MaxSeq, 0x0000_0000_0000_0fff},
		{"node in bits 12..21", 0, MaxNode, 0, 0x0000_0000_003f_f000},
		{"time in bits 22..62", maxMillis, 0, 0, 0x7fff_ffff_ffc0_0000},
		{"all set, sign bit clear", maxMillis, MaxNode, MaxSeq, 0x7fff_ffff_ffff_ffff},
		{"out-of-range parts are masked", 1, MaxNode + 2, MaxSeq + 3, 0x0000_0000_0040_1002},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compose(Epoch.Add(time.Duration(tc.ms)*time.Millisecond), tc.node, tc.seq)
			if uint64(got) != tc.want {
				t.Fatalf("Compose = %#016x, want %#016x", uint64(got), tc.want)
			}
		})
	}
}

func TestExtendUntil(t *testing.T) {
	t.Parallel()
	t0 := Epoch.Add(time.Hour)
	clk := snowflaketest.NewClock(t0)
	g, _ := New(1, clk.Now)
	for _, tc := range []struct {
		name     string
		deadline time.Time
		wantErr  error
	}{
		{"past", t0.Add(-time.Second), ErrLeaseExpired},
		{"now", t0, ErrLeaseExpired},
		{"future", t0.Add(time.Millisecond), nil},
		{"moved back", t0.Add(-time.Millisecond), ErrLeaseExpired},
		{"cleared", time.Time{}, nil},
	} {
		g.ExtendUntil(tc.deadline)
		if _, err := g.Next(); !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: Next error = %v, want %v", tc.name, err, tc.wantErr)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	g, _ := New(1, nil)
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextParallel(b *testing.B) {
	g, _ := New(1, nil)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Next(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
