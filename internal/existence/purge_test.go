package existence_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"board/internal/existence"
	"board/internal/existence/existencetest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

var errPurge = errors.New("purge batch failed")

// purger is a Purge over articles that each take a given number of batches. It records the articles of its calls
// in order, fails the calls the test says, and reports each call on called when that is set.
type purger struct {
	mu      sync.Mutex
	batches map[int64]int // batches each article still takes
	calls   []int64
	failAt  map[int]bool // calls (counted from 1) that fail
	batch   time.Duration
	called  chan int64
}

func (p *purger) purge(_ context.Context, articleID int64) (done bool, err error) {
	p.mu.Lock()
	p.calls = append(p.calls, articleID)
	failed := p.failAt[len(p.calls)]
	if !failed {
		p.batches[articleID]--
	}
	done = p.batches[articleID] <= 0
	p.mu.Unlock()
	time.Sleep(p.batch)
	if p.called != nil {
		p.called <- articleID
	}
	if failed {
		return false, errPurge
	}
	return done, nil
}

func (p *purger) callsSoFar() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// observer is a PurgeBatchSeconds that keeps its samples.
type observer struct {
	mu      sync.Mutex
	samples []float64
}

func (o *observer) Observe(v float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.samples = append(o.samples, v)
}

func TestPurgeQueuedRunsEachPurgeToItsEndOldestFirst(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		now := newClock()
		reg := newRegistry(db, existencetest.NewOrigin(t).URL, existence.Config{Now: now.Now})
		// Queued a millisecond apart, in another order than their ids'.
		for _, id := range []int64{30, 10, 20} {
			existencetest.Apply(t, reg, existencetest.Deleted(id, 1))
			now.Add(time.Millisecond)
		}
		p := &purger{batches: map[int64]int{30: 2, 10: 1, 20: 3}}
		if err := reg.PurgeQueued(context.Background(), p.purge); err != nil {
			t.Fatal(err)
		}
		if want := []int64{30, 30, 10, 20, 20, 20}; !slices.Equal(p.calls, want) {
			t.Errorf("purge calls %v, want %v", p.calls, want)
		}
		if ids := queuedPurges(t, db); len(ids) != 0 {
			t.Errorf("still queued: %v", ids)
		}
		if err := reg.PurgeQueued(context.Background(), p.purge); err != nil || len(p.calls) != 6 {
			t.Errorf("with nothing queued: %v, %d calls in all; want no new call", err, len(p.calls))
		}
	})
}

func TestAFailedPurgeStaysQueuedAndResumes(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		now := newClock()
		reg := newRegistry(db, existencetest.NewOrigin(t).URL, existence.Config{Now: now.Now})
		existencetest.Apply(t, reg, existencetest.Deleted(1, 1))
		now.Add(time.Second)
		existencetest.Apply(t, reg, existencetest.Deleted(2, 1))
		p := &purger{batches: map[int64]int{1: 3, 2: 1}, failAt: map[int]bool{2: true}}

		if err := reg.PurgeQueued(ctx, p.purge); !errors.Is(err, errPurge) {
			t.Fatalf("PurgeQueued: %v, want the purge's error", err)
		}
		if want := []int64{1, 1}; !slices.Equal(p.calls, want) {
			t.Errorf("purge calls %v, want %v: it stops at the error", p.calls, want)
		}
		if ids, want := queuedPurges(t, db), []int64{1, 2}; !slices.Equal(ids, want) {
			t.Errorf("queued %v, want %v", ids, want)
		}

		if err := reg.PurgeQueued(ctx, p.purge); err != nil {
			t.Fatal(err)
		}
		if want := []int64{1, 1, 1, 1, 2}; !slices.Equal(p.calls, want) {
			t.Errorf("purge calls %v, want %v", p.calls, want)
		}
		if ids := queuedPurges(t, db); len(ids) != 0 {
			t.Errorf("still queued: %v", ids)
		}
	})
}

func TestRunPurgesIsWokenByADelete(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		origin := existencetest.NewOrigin(t)
		// Only a wake-up can start a round after the first: the next tick is an hour away.
		reg := newRegistry(db, origin.URL, existence.Config{PurgeEvery: time.Hour})
		// Queued by another instance, whose delete does not wake this one; its first batch fails, which ends the first
		// round without another look at the queue.
		existencetest.Apply(t, newRegistry(db, origin.URL, existence.Config{}), existencetest.Deleted(1, 1))
		p := &purger{batches: map[int64]int{1: 1, 2: 1}, failAt: map[int]bool{1: true}, called: make(chan int64, 10)}

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stopped := make(chan struct{})
		go func() {
			reg.RunPurges(ctx, p.purge)
			close(stopped)
		}()
		awaitPurgeOf := func(id int64) {
			t.Helper()
			deadline := time.After(ceiling)
			for {
				select {
				case got := <-p.called:
					if got == id {
						return
					}
				case <-deadline:
					t.Fatalf("article %d not purged after %v; purge calls %v", id, ceiling, p.callsSoFar())
				}
			}
		}
		awaitPurgeOf(1)

		existencetest.Apply(t, reg, existencetest.Deleted(2, 1))
		awaitPurgeOf(2)
		if want := []int64{1, 1, 2}; !slices.Equal(p.callsSoFar(), want) {
			t.Errorf("purge calls %v, want %v", p.callsSoFar(), want)
		}

		// The queue entry goes after the last batch.
		for deadline := time.Now().Add(ceiling); len(queuedPurges(t, db)) != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("still queued after %v: %v", ceiling, queuedPurges(t, db))
			}
		}

		cancel()
		if err := within(t, "RunPurges after its context ended", func() error { <-stopped; return nil }); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPurgeStats(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		var batchSeconds observer
		reg := newRegistry(db, existencetest.NewOrigin(t).URL, existence.Config{PurgeBatchSeconds: &batchSeconds})
		if stats := reg.PurgeStats(); stats != (existence.PurgeStats{}) {
			t.Errorf("before any purge: %+v", stats)
		}
		const batch = 20 * time.Millisecond
		existencetest.Apply(t, reg, existencetest.Deleted(1, 1))
		existencetest.Apply(t, reg, existencetest.Deleted(2, 1))
		if err := reg.PurgeQueued(ctx, (&purger{batches: map[int64]int{1: 2, 2: 1}, batch: batch}).purge); err != nil {
			t.Fatal(err)
		}
		existencetest.Apply(t, reg, existencetest.Deleted(3, 1))
		if err := reg.PurgeQueued(ctx, (&purger{batches: map[int64]int{3: 2}}).purge); err != nil {
			t.Fatal(err)
		}

		stats := reg.PurgeStats()
		t.Logf("%+v", stats)
		if stats.Articles != 3 || stats.Batches != 5 || stats.LongestBatch < batch {
			t.Errorf("stats %+v, want 3 articles in 5 batches, the longest at least %v", stats, batch)
		}
		if len(batchSeconds.samples) != 5 || slices.Max(batchSeconds.samples) != stats.LongestBatch.Seconds() {
			t.Errorf("observed %v, want a sample per batch, the longest %v", batchSeconds.samples, stats.LongestBatch.Seconds())
		}
	})
}
