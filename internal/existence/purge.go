package existence

import (
	"context"
	"fmt"
	"sync"
	"time"

	"board/internal/sqldb"
)

// Purge removes one bounded batch of a deleted article's rows from the service, in one short transaction, and
// reports whether nothing of the article is left (its counts included). A purge cut off anywhere must be able to
// start again from what is left.
type Purge func(ctx context.Context, articleID int64) (done bool, err error)

// purgeQueueBatch is how many queued articles one read of the queue takes.
const purgeQueueBatch = 100

// PurgeStats is what the purges of a registry have done since it was made.
type PurgeStats struct {
	Articles, Batches int64
	// LongestBatch is the longest one batch took, waits included: an upper bound of how long a batch held its locks.
	LongestBatch time.Duration
}

type purgeStats struct {
	mu sync.Mutex
	PurgeStats
}

func (s *purgeStats) batch(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Batches++
	s.LongestBatch = max(s.LongestBatch, d)
}

func (s *purgeStats) article() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Articles++
}

// PurgeStats returns what the registry's purges have done so far.
func (r *Registry) PurgeStats() PurgeStats {
	r.stats.mu.Lock()
	defer r.stats.mu.Unlock()
	return r.stats.PurgeStats
}

// RunPurges runs the queued purges with purge until ctx ends: at once when this instance queues one, and every
// PurgeEvery for those other instances queued or a crash left. Several instances may purge one article at once;
// each batch is its own transaction, so they only take turns.
func (r *Registry) RunPurges(ctx context.Context, purge Purge) {
	ticker := time.NewTicker(r.cfg.PurgeEvery)
	defer ticker.Stop()
	for {
		if err := r.PurgeQueued(ctx, purge); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("purge of a deleted article failed; it resumes at the next round", "service", r.cfg.Service,
				"retry_in", r.cfg.PurgeEvery, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-ticker.C:
		}
	}
}

// PurgeQueued runs every queued purge to its end, oldest first, and returns at the first error.
func (r *Registry) PurgeQueued(ctx context.Context, purge Purge) error {
	for {
		ids, err := r.queued(ctx)
		if err != nil || len(ids) == 0 {
			return err
		}
		for _, id := range ids {
			if err := r.purgeArticle(ctx, purge, id); err != nil {
				return fmt.Errorf("purge article %d: %w", id, err)
			}
		}
	}
}

func (r *Registry) queued(ctx context.Context) ([]int64, error) {
	return sqldb.IDs(r.db.QueryContext(ctx, "SELECT article_id FROM article_purge ORDER BY queued_at, article_id LIMIT ?",
		purgeQueueBatch))
}

// purgeArticle runs purge on one article until nothing is left, then takes it off the queue.
func (r *Registry) purgeArticle(ctx context.Context, purge Purge, id int64) error {
	start := time.Now()
	var batches int
	var longest time.Duration
	for done := false; !done; {
		batchStart := time.Now()
		var err error
		if done, err = purge(ctx, id); err != nil {
			return err
		}
		took := time.Since(batchStart)
		batches++
		longest = max(longest, took)
		r.stats.batch(took)
		if r.cfg.PurgeBatchSeconds != nil {
			r.cfg.PurgeBatchSeconds.Observe(took.Seconds())
		}
	}
	if _, err := r.db.ExecContext(ctx, "DELETE FROM article_purge WHERE article_id = ?", id); err != nil {
		return err
	}
	r.stats.article()
	r.cfg.Logger.Info("purged a deleted article", "service", r.cfg.Service, "article_id", id, "batches", batches,
		"elapsed", time.Since(start).Round(time.Millisecond), "longest_batch", longest.Round(time.Microsecond))
	return nil
}
