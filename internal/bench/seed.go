package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"board/internal/app"
	"board/internal/article"
	"board/internal/comment"
	"board/internal/existence"
	"board/internal/progress"
	"board/internal/snowflake"
)

// seedSpan is how much id time each board's seeded articles, or each article's seeded comments, may use: 2^20 ms
// holds 4 billion ids.
const seedSpan = 1 << 20 * time.Millisecond

// maxSeedOwner bounds --board and --article so that their id time stays inside the 41-bit range.
var maxSeedOwner = int64((time.Duration(1<<41)*time.Millisecond - 24*time.Hour) / seedSpan)

// maxSeedRows is how many rows fit in half an owner's span (each comment version gets one half): beyond it, ids
// would run into the next owner's.
const maxSeedRows = int64(seedSpan/2/time.Millisecond) * (snowflake.MaxSeq + 1)

// Seed is `board seed [articles|comments] [flags]`: a resumable bulk load of generated rows, for experiments.
func Seed(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "comments" {
		return seedComments(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "articles" {
		args = args[1:]
	}
	return seedArticles(ctx, args, getenv, stdout, stderr)
}

// seedFlags registers the flags every bulk load shares.
type seedFlags struct{ workers, batch *int }

func newSeedFlags(fs *flag.FlagSet) seedFlags {
	return seedFlags{workers: fs.Int("workers", 4, "parallel writers"),
		batch: fs.Int("batch", 2000, "rows per multi-row insert (one transaction)")}
}

func (f seedFlags) check() error {
	if *f.workers < 1 || *f.batch < 1 || *f.batch > 4000 {
		return errors.New("need --workers >= 1 and 1 <= --batch <= 4000")
	}
	return nil
}

// articleSeeder is what seeding needs of the article store: whether a chunk is already there, and writing one.
type articleSeeder interface {
	Exists(ctx context.Context, id int64) (bool, error)
	SeedChunk(ctx context.Context, boardID int64, chunk []article.SeedArticle) error
}

// commentSeeder is what seeding needs of the comment store: whether a chunk is already there, and writing one.
type commentSeeder interface {
	Exists(ctx context.Context, id int64) (bool, error)
	SeedChunk(ctx context.Context, articleID int64, chunk []comment.Comment) error
}

func seedArticles(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("seed", `Usage: board seed [articles] [flags]
       board seed comments [flags]

Bulk-loads generated articles into one board, for experiments (the default is the course's: 12,000,000 in board 1);
'board seed comments --help' tells about comments. Ids are deterministic Snowflake ids on the node id reserved for
seeding (1023), timed from 2024-01-02 plus a span per board, so seeded articles sort before real ones. Each chunk is
one transaction, so an interrupted seed is resumed by running the same command again: chunks already written are
skipped.`, stderr)
	cfg.EngineFlags(fs)
	board := fs.Int64("board", 1, "board to fill")
	total := fs.Int64("articles", 12_000_000, "number of articles")
	sf := newSeedFlags(fs)
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *board < 1 || *board >= maxSeedOwner || *total < 1 || *total > maxSeedRows {
		return fmt.Errorf("need 1 <= --board < %d and 1 <= --articles <= %d", maxSeedOwner, maxSeedRows)
	}
	if err := sf.check(); err != nil {
		return err
	}
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()
	// Seeded articles bypass the outbox (see SeedChunk); the store still needs one.
	db, ob, _, err := toolDatabase(ctx, e, "article", article.Migrate)
	if err != nil {
		return err
	}
	var store articleSeeder = article.NewStore(db, ob)

	start := seedStart(*board, 0)
	fmt.Fprintf(stdout, "seeding %d articles into board %d on %s %s: %d workers, %d per insert\n",
		*total, *board, db.Dialect, db.Name, *sf.workers, *sf.batch)
	return bulkLoad(ctx, stdout, stderr, "articles", *total, sf, func(ctx context.Context, first, n int64) (bool, error) {
		rows := make([]article.SeedArticle, n)
		for i := range rows {
			rows[i].ID, rows[i].CreatedAt = seedID(start, first+int64(i))
		}
		if exists, err := store.Exists(ctx, rows[0].ID); err != nil || exists {
			return exists, err
		}
		return false, store.SeedChunk(ctx, *board, rows)
	})
}

func seedComments(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("seed comments", `Usage: board seed comments [flags]

Bulk-loads generated comments on one article, for experiments (the default: 12,000,000 of each version on article
1). v1 comments come in pairs, a root and one reply, as in the course; v2 comments come in threads of five, a root
and a chain of replies down to depth 5, so every depth is represented. Ids are deterministic Snowflake ids on the
node id reserved for seeding (1023), timed from 2024-01-02 plus a span per article; an interrupted seed is resumed
by running the same command again.`, stderr)
	cfg.EngineFlags(fs)
	articleID := fs.Int64("article", 1, "article to fill")
	total := fs.Int64("comments", 12_000_000, "number of comments of each version")
	versions := fs.String("versions", "v1,v2", "which versions to seed: v1, v2 or both")
	sf := newSeedFlags(fs)
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	which := app.SplitList(*versions)
	if *articleID < 1 || *articleID >= maxSeedOwner || *total < 1 || *total > maxSeedRows || len(which) == 0 ||
		slices.ContainsFunc(which, func(v string) bool { return v != "v1" && v != "v2" }) {
		return fmt.Errorf("need 1 <= --article < %d, 1 <= --comments <= %d, --versions from v1,v2", maxSeedOwner, maxSeedRows)
	}
	if err := sf.check(); err != nil {
		return err
	}
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()
	db, ob, _, err := toolDatabase(ctx, e, "comment", comment.Migrate)
	if err != nil {
		return err
	}
	// The seed writes rows directly and never asks whether the article exists.
	var store commentSeeder = comment.NewStore(db, ob, existence.New(db, existence.Config{Service: "comment"}))
	for _, v := range which {
		part := 0
		if v == "v2" {
			part = 1
		}
		start := seedStart(*articleID, part)
		fmt.Fprintf(stdout, "seeding %d %s comments on article %d on %s %s: %d workers, %d per insert\n",
			*total, v, *articleID, db.Dialect, db.Name, *sf.workers, *sf.batch)
		err := bulkLoad(ctx, stdout, stderr, v+" comments", *total, sf, func(ctx context.Context, first, n int64) (bool, error) {
			rows := make([]comment.Comment, n)
			for i := range rows {
				idx := first + int64(i)
				rows[i].ID, rows[i].CreatedAt = seedID(start, idx)
				if v == "v1" {
					rows[i].ParentID = rows[i].ID // a root, then its reply
					if idx%2 == 1 {
						rows[i].ParentID, _ = seedID(start, idx-1)
					}
				} else {
					rows[i].Path = seedPath(idx)
				}
			}
			if exists, err := store.Exists(ctx, rows[0].ID); err != nil || exists {
				return exists, err
			}
			return false, store.SeedChunk(ctx, *articleID, rows)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// seedStart is where the id time of an owner's (board's or article's) seeded rows starts; part splits the span
// in two, so both comment versions of one article get ids of their own.
func seedStart(owner int64, part int) time.Time {
	return snowflake.Epoch.Add(24*time.Hour + time.Duration(owner)*seedSpan + time.Duration(part)*seedSpan/2)
}

// seedID is the idx-th seeded id from start, 4096 ids per millisecond of id time, and its time.
func seedID(start time.Time, idx int64) (int64, time.Time) {
	at := start.Add(time.Duration(idx/(snowflake.MaxSeq+1)) * time.Millisecond)
	return snowflake.Compose(at, snowflake.MaxNode, idx%(snowflake.MaxSeq+1)), at
}

// seedPath is the path of the idx-th seeded v2 comment: threads of MaxDepth, a root and a chain of replies.
func seedPath(idx int64) string {
	return comment.Segment(idx/comment.MaxDepth) + strings.Repeat(comment.Segment(0), int(idx%comment.MaxDepth))
}

// bulkLoad writes total rows in chunks of --batch from --workers goroutines, with a progress bar. load writes the
// chunk of n rows starting at index first, or reports that it is already there. It prints what it did.
func bulkLoad(ctx context.Context, stdout, stderr io.Writer, what string, total int64, sf seedFlags,
	load func(ctx context.Context, first, n int64) (skipped bool, err error)) error {
	batch := int64(*sf.batch)
	chunks := (total + batch - 1) / batch
	bar := progress.Start(stderr, what, total)
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
	for range *sf.workers {
		g.Go(func() error {
			for c := range next {
				n := min(batch, total-c*batch)
				already, err := load(gctx, c*batch, n)
				if err != nil {
					return err
				}
				if already {
					skipped.Add(n)
				}
				bar.Add(n)
			}
			return nil
		})
	}
	err := g.Wait()
	elapsed := bar.Finish()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("seed interrupted; run the same command again to resume")
		}
		return err
	}
	written := total - skipped.Load()
	fmt.Fprintf(stdout, "seeded %d %s (%d already there) in %s: %.0f %s/s\n", written, what, skipped.Load(),
		elapsed.Round(time.Millisecond), float64(written)/elapsed.Seconds(), what)
	return nil
}
