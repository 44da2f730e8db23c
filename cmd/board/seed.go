package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"board/internal/article"
	"board/internal/snowflake"
)

// seedBoardSpan is how much id time each board's seeded articles may use: 2^20 ms holds 4 billion ids.
const seedBoardSpan = 1 << 20 * time.Millisecond

func seedCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cfg config
	fs := newFlagSet("seed", `Usage: board seed [flags]

Bulk-loads generated articles into one board, for experiments (the default is the course's: 12,000,000 in board 1).
Ids are deterministic Snowflake ids on the node id reserved for seeding (1023), timed from 2024-01-02 plus a span
per board, so seeded articles sort before real ones. Each chunk is one transaction, so an interrupted seed is
resumed by running the same command again: chunks already written are skipped.`, stderr)
	cfg.engineFlags(fs)
	board := fs.Int64("board", 1, "board to fill")
	total := fs.Int64("articles", 12_000_000, "number of articles")
	workers := fs.Int("workers", 4, "parallel writers")
	batch := fs.Int("batch", 2000, "articles per multi-row insert (one transaction)")
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	maxBoard := int64((time.Duration(1<<41)*time.Millisecond - 24*time.Hour) / seedBoardSpan)
	if *board < 1 || *board >= maxBoard || *total < 1 || *workers < 1 || *batch < 1 || *batch > 4000 {
		return fmt.Errorf("need 1 <= --board < %d, --articles >= 1, --workers >= 1, 1 <= --batch <= 4000", maxBoard)
	}
	e, err := newEngines(&cfg, stderr)
	if err != nil {
		return err
	}
	defer e.close()
	db, err := e.openSQL(ctx, "article")
	if err != nil {
		return err
	}
	if err := article.Migrate(ctx, db); err != nil {
		return err
	}
	// Seeded articles bypass the outbox (see SeedChunk); the store still needs one.
	ob, _, err := toolOutbox(&cfg, db)
	if err != nil {
		return err
	}
	store := article.NewStore(db, ob)

	start := snowflake.Epoch.Add(24*time.Hour + time.Duration(*board)*seedBoardSpan)
	chunks := (*total + int64(*batch) - 1) / int64(*batch)
	fmt.Fprintf(stdout, "seeding %d articles into board %d on %s %s: %d workers, %d per insert\n",
		*total, *board, db.Dialect, db.Name, *workers, *batch)
	bar := startProgress(stderr, "articles", *total)
	var skipped atomic.Int64
	next := make(chan int64)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(next)
		for c := int64(0); c < chunks; c++ {
			select {
			case next <- c:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range *workers {
		g.Go(func() error {
			for c := range next {
				rows := seedChunk(start, c*int64(*batch), min(int64(*batch), *total-c*int64(*batch)))
				exists, err := store.Exists(gctx, rows[0].ID)
				if err != nil {
					return err
				}
				if exists {
					skipped.Add(int64(len(rows)))
				} else if err := store.SeedChunk(gctx, *board, rows); err != nil {
					return err
				}
				bar.add(int64(len(rows)))
			}
			return nil
		})
	}
	err = g.Wait()
	elapsed := bar.finish()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("seed interrupted; run the same command again to resume")
		}
		return err
	}
	written := *total - skipped.Load()
	fmt.Fprintf(stdout, "seeded %d articles (%d already there) in %s: %.0f articles/s\n",
		written, skipped.Load(), elapsed.Round(time.Millisecond), float64(written)/elapsed.Seconds())
	return nil
}

// seedChunk makes n seeded articles starting at index first: 4096 ids per millisecond of id time.
func seedChunk(start time.Time, first, n int64) []article.SeedArticle {
	out := make([]article.SeedArticle, n)
	for i := range out {
		idx := first + int64(i)
		at := start.Add(time.Duration(idx/(snowflake.MaxSeq+1)) * time.Millisecond)
		out[i] = article.SeedArticle{ID: snowflake.Compose(at, snowflake.MaxNode, idx%(snowflake.MaxSeq+1)), CreatedAt: at}
	}
	return out
}
