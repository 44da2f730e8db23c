package like

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Batching is how a Service coalesces the concurrent likes and unlikes of one article into shared transactions
// (docs/likes.md).
type Batching struct {
	// Max is the most likes and unlikes one transaction carries; 1 gives each its own transaction, as before batching.
	Max int
	// Linger is how long a like may wait for others to share its transaction while its article has none running,
	// unless Max of them come first. With none, a transaction starts at once, and carries what arrived while the
	// previous one of its article ran.
	Linger time.Duration
}

// DefaultBatching takes what arrives while a transaction runs, up to 100 (docs/likes.md has the measurements).
var DefaultBatching = Batching{Max: 100}

// batchKey is what the likes of one batch share: one target (one count row, one shard) and one strategy.
type batchKey struct {
	target   target
	strategy Strategy
}

// op is one request's like or unlike on its way through a batch.
type op struct {
	ctx    context.Context
	change change
	queued time.Time
	done   chan error // one answer, buffered: a batch never waits for a request that stopped waiting
}

// batcher queues ops per key and runs each key's batches one after another, each as soon as the previous one ends
// (after Linger, for the first): the transactions of one article would queue on its count row anyway, so while one
// runs the next gathers everything that arrives meanwhile. That is group commit: the busier the article, the larger
// its batches, and a lone like waits for nothing.
type batcher struct {
	Batching
	run    func(batchKey, []*op)
	mu     sync.Mutex
	queues map[batchKey]*queue // a key has a queue while its drain goroutine runs
}

type queue struct {
	ops  []*op
	full chan struct{} // closed by submit when ops reach Max while drain lingers; nil otherwise
}

func newBatcher(b Batching, run func(batchKey, []*op)) *batcher {
	return &batcher{Batching: b, run: run, queues: map[batchKey]*queue{}}
}

// submit queues o for the next batch of key.
func (b *batcher) submit(key batchKey, o *op) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q, draining := b.queues[key]
	if !draining {
		q = &queue{}
		b.queues[key] = q
	}
	q.ops = append(q.ops, o)
	switch {
	case !draining:
		go b.drain(key, q)
	case q.full != nil && len(q.ops) >= b.Max:
		close(q.full)
		q.full = nil
	}
}

// drain runs the batches of key until its queue is empty.
func (b *batcher) drain(key batchKey, q *queue) {
	for {
		b.linger(q)
		b.mu.Lock()
		n := min(len(q.ops), b.Max)
		if n == 0 {
			delete(b.queues, key)
			b.mu.Unlock()
			return
		}
		batch := q.ops[:n]
		q.ops = slices.Clone(q.ops[n:])
		b.mu.Unlock()
		b.run(key, batch)
	}
}

// linger waits until q's oldest op has waited Linger, or q holds Max ops.
func (b *batcher) linger(q *queue) {
	b.mu.Lock()
	if b.Linger <= 0 || len(q.ops) == 0 || len(q.ops) >= b.Max {
		b.mu.Unlock()
		return
	}
	wait := time.Until(q.ops[0].queued.Add(b.Linger))
	full := make(chan struct{})
	q.full = full
	b.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-full:
	case <-timer.C:
		b.mu.Lock()
		q.full = nil
		b.mu.Unlock()
	}
}

// batchContext is the context of a batch's transaction. Its deadline is the latest of its requests' (none if one
// has none), so that Transact retries conflicts while any of them can still be answered, and a hung database ends
// it when the last of them stops waiting; it ends as well as soon as every request has stopped waiting (a client
// gone). A batch of one runs in its request's own context.
func batchContext(ops []*op) (context.Context, context.CancelFunc) {
	if len(ops) == 1 {
		return ops[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ops[0].ctx))
	var latest time.Time
	for _, o := range ops {
		d, ok := o.ctx.Deadline()
		if !ok {
			latest = time.Time{}
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	stopDeadline := func() {}
	if !latest.IsZero() {
		ctx, stopDeadline = context.WithDeadline(ctx, latest)
	}
	var waiting atomic.Int64
	waiting.Store(int64(len(ops)))
	stops := make([]func() bool, len(ops))
	for i, o := range ops {
		stops[i] = context.AfterFunc(o.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		stopDeadline()
		cancel()
	}
}
