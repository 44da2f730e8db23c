// Package like is the like service (SPEC §3.3, §3.13): one like per (article, user) and per (comment, user), and a
// like count per article and per comment kept exact under concurrent likes by one of three locking strategies.
//
// Likes and unlikes are for articles and comments that exist: the service keeps its own record of them
// (internal/existence, Comments) and answers 404 ARTICLE_NOT_FOUND or COMMENT_NOT_FOUND for any other. A deleted article's likes and count row are purged afterwards, in
// short batches (Store.Purge), without events: consumers of the like events drop the article on ARTICLE_DELETED already,
// and an event per removed like would flood the topic with millions of them for a popular article.
package like

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"board/internal/apijson"
	"board/internal/backoff"
	"board/internal/fault"
	"board/internal/idempotency"
	"board/internal/snowflake"
)

// Like is one user's like of one article, or of one comment (CommentID not 0) of that article.
type Like struct {
	ID        int64
	ArticleID int64
	CommentID int64
	UserID    int64
	CreatedAt time.Time
}

func (l Like) target() target { return target{l.ArticleID, l.CommentID} }

// values are the like's row, in the order of its tables' columns.
func (l Like) values() []any {
	if l.CommentID != 0 {
		return []any{l.ID, l.ArticleID, l.CommentID, l.UserID, l.CreatedAt}
	}
	return []any{l.ID, l.ArticleID, l.UserID, l.CreatedAt}
}

// Strategy is how a like or unlike changes the article's count row when many change it at once.
type Strategy string

const (
	// PessimisticLock1 adds to the count in one atomic UPDATE, which locks the row while it runs.
	PessimisticLock1 Strategy = "pessimistic-lock-1"
	// PessimisticLock2 reads the count with SELECT ... FOR UPDATE, then writes the new value.
	PessimisticLock2 Strategy = "pessimistic-lock-2"
	// OptimisticLock reads the count and its version without a lock and writes only if the version is unchanged,
	// retrying (bounded, with jittered backoff) when it changed.
	OptimisticLock Strategy = "optimistic-lock"
	// DefaultStrategy is what the unsuffixed paths use unless configured otherwise (SPEC §3.3).
	DefaultStrategy = PessimisticLock1
)

// Strategies lists every strategy, in the order of the SPEC.
var Strategies = []Strategy{PessimisticLock1, PessimisticLock2, OptimisticLock}

// ParseStrategy returns the strategy named s.
func ParseStrategy(s string) (Strategy, error) {
	for _, st := range Strategies {
		if string(st) == s {
			return st, nil
		}
	}
	names := make([]string, len(Strategies))
	for i, st := range Strategies {
		names[i] = string(st)
	}
	return "", fmt.Errorf("unknown like strategy %q (want one of %s)", s, strings.Join(names, ", "))
}

// IDGenerator issues unique ids (a Snowflake generator in production).
type IDGenerator interface {
	Next() (int64, error)
}

// retryPolicy bounds the optimistic strategy's retries. Each retry waits a random time below a ceiling that
// doubles from base up to max: random so that the losers of one race do not meet again in the next, doubling so
// that the waits grow until they match the crowd. The ceiling must reach about twice (clients × commit time): with
// 64 ms, 100 clients liking one article on MariaDB needed up to 126 attempts per like and twice the time. Measured
// with 3000 likes from 100 clients and a 1 s ceiling, a like takes about 4 attempts on average and at most 23 on
// an idle machine, at most 31 with both cores busy elsewhere. 100 attempts leave a wide margin; a hopeless wait
// ends after about 45 s of backoff, or as soon as the client goes away (the request's context).
type retryPolicy struct {
	attempts  int
	base, max time.Duration
	sleep     func(ctx context.Context, d time.Duration) error
}

var defaultRetry = retryPolicy{attempts: 100, base: time.Millisecond, max: time.Second, sleep: backoff.Sleep}

// wait returns how long to wait after the given failed attempt (from 1): uniform in [0, ceiling).
func (p retryPolicy) wait(attempt int) time.Duration { return backoff.Jitter(attempt, p.base, p.max) }

// Stats counts a strategy's work since the service started.
type Stats struct {
	Writes int64 // likes and unlikes committed
	// Transactions is how many transactions committed them: Writes/Transactions likes shared a transaction on
	// average (see Batching).
	Transactions int64
	Conflicts    int64 // optimistic attempts that found the count changed since they read it, and were retried or given up
	// MostAttempts is the most attempts one transaction has taken: how close the optimistic strategy came to its
	// bound.
	MostAttempts int64
}

type counters struct{ writes, transactions, conflicts, mostAttempts atomic.Int64 }

// attempted records that a write took n attempts.
func (c *counters) attempted(n int64) {
	for {
		most := c.mostAttempts.Load()
		if n <= most || c.mostAttempts.CompareAndSwap(most, n) {
			return
		}
	}
}

// Service holds the like rules over a Store. Who may like, and whether the ids are ones an article and a user can
// have, are the HTTP layer's checks (Routes), made before anything is read: a Service writes what it is given.
//
// Concurrent likes and unlikes of one article, or of one comment, with one strategy share transactions (Batching,
// docs/likes.md): each request waits for the transaction that carries it to commit, and is answered with its own
// outcome, or with a 503 when its context ends first.
type Service struct {
	store           *Store
	ids             IDGenerator
	now             func() time.Time
	defaultStrategy Strategy
	retry           retryPolicy
	stats           map[Strategy]*counters // one entry per strategy, made once: safe for concurrent use
	batches         *batcher               // nil when every request has a transaction of its own
	keys            *idempotency.Store     // the Idempotency-Keys of likes
}

// NewService returns the like service; requests that name no strategy use defaultStrategy (DefaultStrategy when
// empty), and share transactions as DefaultBatching says (see WithBatching). now is injected so tests control time.
// An unknown strategy is a wiring bug (ParseStrategy checks configuration) and panics.
func NewService(store *Store, ids IDGenerator, now func() time.Time, defaultStrategy Strategy) *Service {
	if defaultStrategy == "" {
		defaultStrategy = DefaultStrategy
	}
	if _, err := ParseStrategy(string(defaultStrategy)); err != nil {
		panic(err)
	}
	stats := map[Strategy]*counters{}
	for _, st := range Strategies {
		stats[st] = &counters{}
	}
	s := &Service{store: store, ids: ids, now: now, defaultStrategy: defaultStrategy, retry: defaultRetry, stats: stats,
		keys: idempotency.New(store.db, now)}
	return s.WithBatching(DefaultBatching)
}

// WithBatching has s share transactions as b says, and returns s; it must come before s serves anything.
func (s *Service) WithBatching(b Batching) *Service {
	s.batches = nil
	if b.Max > 1 {
		s.batches = newBatcher(b, s.runBatch)
	}
	return s
}

// Stats returns what strategy has done so far.
func (s *Service) Stats(strategy Strategy) Stats {
	c, ok := s.stats[strategy]
	if !ok {
		return Stats{}
	}
	return Stats{Writes: c.writes.Load(), Transactions: c.transactions.Load(), Conflicts: c.conflicts.Load(),
		MostAttempts: c.mostAttempts.Load()}
}

// Like records that userID likes articleID, with strategy ("" for the default). A second like by the same user is
// a conflict; a like of an article that does not exist is NotFound (ARTICLE_NOT_FOUND).
func (s *Service) Like(ctx context.Context, strategy Strategy, articleID, userID int64) (Like, error) {
	return s.like(ctx, strategy, target{article: articleID}, userID, nil)
}

// LikeComment records that userID likes commentID, as Like does for an article: a like of a comment that does not
// exist, or is deleted, is NotFound (COMMENT_NOT_FOUND). Liking one's own comment is allowed, as one's own article.
func (s *Service) LikeComment(ctx context.Context, strategy Strategy, commentID, userID int64) (Like, error) {
	t, err := s.commentTarget(ctx, commentID)
	if err != nil {
		return Like{}, err
	}
	return s.like(ctx, strategy, t, userID, nil)
}

// commentTarget is the target of a comment's likes: the comment and its article (CommentNotFound if unknown).
func (s *Service) commentTarget(ctx context.Context, commentID int64) (target, error) {
	if commentID <= 0 {
		return target{}, CommentNotFound(commentID) // no comment has it: nothing to look up
	}
	articleID, err := s.store.comments.article(ctx, commentID)
	return target{article: articleID, comment: commentID}, err
}

// like is Like recording its answer for key (nil for none) in the transaction that makes it, which may be shared
// with other likes of the target (see Store.apply).
func (s *Service) like(ctx context.Context, strategy Strategy, t target, userID int64, key *idempotency.Write) (Like, error) {
	id, err := s.ids.Next()
	if err != nil {
		return Like{}, snowflake.Unavailable(err)
	}
	l := Like{ID: id, ArticleID: t.article, CommentID: t.comment, UserID: userID, CreatedAt: apijson.Millis(s.now())}
	err = s.store.articles.Write(ctx, t.article, func() error { return s.submit(ctx, strategy, change{like: l, key: key}) })
	if err != nil {
		return Like{}, err
	}
	return l, nil
}

// Unlike removes userID's like of articleID, with strategy ("" for the default). On an article that does not exist
// (a deleted one included) it is NotFound (ARTICLE_NOT_FOUND), not LIKE_NOT_FOUND.
func (s *Service) Unlike(ctx context.Context, strategy Strategy, articleID, userID int64) error {
	return s.unlike(ctx, strategy, target{article: articleID}, userID)
}

// UnlikeComment removes userID's like of commentID, as Unlike does for an article: on a comment that does not exist
// or is deleted it is COMMENT_NOT_FOUND.
func (s *Service) UnlikeComment(ctx context.Context, strategy Strategy, commentID, userID int64) error {
	t, err := s.commentTarget(ctx, commentID)
	if err != nil {
		return err
	}
	return s.unlike(ctx, strategy, t, userID)
}

func (s *Service) unlike(ctx context.Context, strategy Strategy, t target, userID int64) error {
	c := change{like: Like{ArticleID: t.article, CommentID: t.comment, UserID: userID}, unlike: true}
	return s.store.articles.Write(ctx, t.article, func() error { return s.submit(ctx, strategy, c) })
}

// submit has c made with strategy ("" for the default), in a batch of its target, and returns its outcome once the
// batch's transaction has committed; or a 503 as soon as ctx ends, the change then made or not.
func (s *Service) submit(ctx context.Context, strategy Strategy, c change) error {
	if strategy == "" {
		strategy = s.defaultStrategy
	}
	if _, ok := s.stats[strategy]; !ok {
		return fmt.Errorf("unknown like strategy %q", strategy)
	}
	o := &op{ctx: ctx, change: c, queued: time.Now(), done: make(chan error, 1)}
	key := batchKey{c.like.target(), strategy}
	if s.batches == nil {
		s.runBatch(key, []*op{o})
	} else {
		s.batches.submit(key, o)
	}
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		select {
		case err := <-o.done: // answered as ctx ended: that answer is the true one
			return err
		default:
			return unconfirmed(ctx)
		}
	}
}

func unconfirmed(ctx context.Context) error {
	return fault.Unavailablef(context.Cause(ctx), "DATABASE_UNAVAILABLE",
		"the like or unlike was not confirmed in time, and may or may not have been made; try again")
}

// runBatch makes ops, the likes and unlikes of one key, in one transaction (retried while the optimistic strategy
// loses races), and answers each. A request that stopped waiting before an attempt is left out of it.
func (s *Service) runBatch(key batchKey, ops []*op) {
	ctx, cancel := batchContext(ops)
	defer cancel()
	if err := s.runBatchOnce(ctx, key, ops); len(ops) > 1 && idempotency.IsClaimed(err) {
		// A keyed like of the batch lost its key to another request, which fails the whole transaction: each on its
		// own, only that one fails (and is answered from the other's record, see idempotency.Store.Serve).
		for _, o := range ops {
			s.runBatch(key, []*op{o})
		}
	}
}

// runBatchOnce is runBatch's one transaction. It answers each op, unless the transaction failed on a key another
// request claimed: it then answers none and returns that error, for runBatch to try each op on its own.
func (s *Service) runBatchOnce(ctx context.Context, key batchKey, ops []*op) error {
	var live []*op
	var outcomes []error
	err := s.write(ctx, key.strategy, func(st Strategy) (int, error) {
		live, outcomes = live[:0], nil
		for _, o := range ops {
			if o.ctx.Err() == nil {
				live = append(live, o)
			}
		}
		if len(live) == 0 {
			return 0, nil
		}
		changes := make([]change, len(live))
		for i, o := range live {
			changes[i] = o.change
		}
		var err error
		if outcomes, err = s.store.apply(ctx, st, key.target, changes); err != nil {
			return 0, err
		}
		writes := 0
		for _, e := range outcomes {
			if e == nil {
				writes++
			}
		}
		return writes, nil
	})
	if len(ops) > 1 && idempotency.IsClaimed(err) {
		return err
	}
	i := 0
	for _, o := range ops {
		switch {
		case i < len(live) && live[i] == o && err != nil:
			o.done <- err
		case i < len(live) && live[i] == o:
			o.done <- outcomes[i]
		default:
			o.done <- unconfirmed(o.ctx) // left out: its request has been answered so already
			continue
		}
		i++
	}
	return err
}

// write runs attempt, one transaction with strategy that reports how many changes it made, retrying while the
// optimistic strategy loses races, up to the bound. Nothing is written by an attempt that lost, so a client told
// to try again has lost no like.
func (s *Service) write(ctx context.Context, strategy Strategy, attempt func(Strategy) (int, error)) error {
	c := s.stats[strategy]
	for n := 1; ; n++ {
		writes, err := attempt(strategy)
		c.attempted(int64(n))
		if !errors.Is(err, errVersionConflict) {
			if err == nil && writes > 0 {
				c.writes.Add(int64(writes))
				c.transactions.Add(1)
			}
			return err
		}
		c.conflicts.Add(1)
		if n == s.retry.attempts {
			return fault.Unavailablef(err, "LIKE_CONTENDED",
				"the like count changed under %d attempts in a row; try again", n)
		}
		if err := s.retry.sleep(ctx, s.retry.wait(n)); err != nil {
			return fault.Unavailablef(err, "LIKE_CONTENDED", "stopped retrying after %d attempts: %v", n, err)
		}
	}
}

// Get returns userID's like of articleID.
func (s *Service) Get(ctx context.Context, articleID, userID int64) (Like, error) {
	return s.store.Get(ctx, articleID, userID)
}

// count returns the number of likes of an article.
func (s *Service) count(ctx context.Context, articleID int64) (int64, error) {
	count, _, err := s.store.Count(ctx, articleID)
	return count, err
}

// VersionedCount returns the number of likes of an article and the version of that count, the
// articleLikeCountVersion its like events carry (0 for an article never liked).
func (s *Service) VersionedCount(ctx context.Context, articleID int64) (count, version int64, err error) {
	return s.store.Count(ctx, articleID)
}
