// Package blocks is what every instance of every service knows of who blocks whom (SPEC §3.13): a per-process table
// fed by a reader (internal/compacted) of the block topic, which the user service writes USER_BLOCKED and
// USER_UNBLOCKED to. The notification service asks it before it tells a user of someone's act, and pages leave out
// what the viewer's blocked users wrote, with no call to the user service.
//
// The topic is compacted per pair (blocker, blocked), so a start reads one record per pair ever blocked, and the
// table holds one entry per such pair: a user blocks at most 1000 others (user.MaxBlocks). A record is applied only
// when its BlockVersion is newer than the pair's in the table, so duplicates and late records never undo a newer
// block or unblock.
package blocks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/compacted"
	"board/internal/event"
	"board/internal/fault"
)

// Config configures a Table's reader; zero values take the defaults noted.
type Config struct {
	Brokers      []string
	TopicPrefix  string        // e.g. "board-"
	FetchMaxWait time.Duration // see compacted.Config (150 ms)
	Logger       *slog.Logger  // slog.Default()
	Opts         []kgo.Opt     // extra client options, applied last
}

// Table holds every block in force. Its zero value is not usable; make one with New.
type Table struct {
	cfg    Config
	reader *compacted.Reader

	mu       sync.RWMutex
	versions map[pair]int64               // of every pair ever blocked, unblocked ones too: what a record must beat
	blocked  map[int64]map[int64]struct{} // blocker -> the users they block now
	caught   atomic.Bool
	ready    chan struct{} // closed once caught up
}

type pair struct{ user, other int64 }

// errLoading is Ready's answer while the table is not caught up.
var errLoading = fault.Unavailablef(nil, "BLOCKS_UNAVAILABLE", "this server is still reading blocks; try again shortly")

// New returns a table and its reader; Run reads into it.
func New(cfg Config) (*Table, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	t := newTable(cfg)
	r, err := compacted.New(compacted.Config{Brokers: cfg.Brokers, FetchMaxWait: cfg.FetchMaxWait, Logger: cfg.Logger, Opts: cfg.Opts,
		Topics: []string{event.UserBlocked.Topic(cfg.TopicPrefix)}})
	if err != nil {
		return nil, fmt.Errorf("blocks: %w", err)
	}
	t.reader = r
	return t, nil
}

func newTable(cfg Config) *Table {
	return &Table{cfg: cfg, versions: map[pair]int64{}, blocked: map[int64]map[int64]struct{}{}, ready: make(chan struct{})}
}

// Run reads the block topic into the table until ctx ends.
func (t *Table) Run(ctx context.Context) { t.reader.Run(ctx, t.apply, t.caughtUp) }

// Blocks reports whether user blocks other. Until the table is caught up (Ready), it answers from the blocks read
// so far.
func (t *Table) Blocks(user, other int64) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.blocked[user][other]
	return ok
}

// BlockedBy returns the users user blocks, in id order (nil for none): what a page leaves out for its viewer.
func (t *Table) BlockedBy(user int64) []int64 {
	t.mu.RLock()
	ids := make([]int64, 0, len(t.blocked[user]))
	for id := range t.blocked[user] {
		ids = append(ids, id)
	}
	t.mu.RUnlock()
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	return ids
}

// Ready is the table's readiness check: nil once it is caught up.
func (t *Table) Ready(context.Context) error {
	if !t.caught.Load() {
		return errLoading
	}
	return nil
}

// CaughtUp is closed once the table has read the topic up to where it ended when Run started.
func (t *Table) CaughtUp() <-chan struct{} { return t.ready }

func (t *Table) caughtUp(took time.Duration) {
	t.mu.RLock()
	n := len(t.versions)
	t.mu.RUnlock()
	t.cfg.Logger.Info("blocks: read the blocks", "pairs", n, "took", took.Round(time.Millisecond))
	if t.caught.CompareAndSwap(false, true) {
		close(t.ready)
	}
}

// apply applies one event of the block topic.
func (t *Table) apply(env event.Envelope) error {
	if env.Type != event.UserBlocked && env.Type != event.UserUnblocked {
		return nil
	}
	b, err := event.Payload[event.Block](env)
	if err != nil {
		return err
	}
	if b.UserID <= 0 || b.BlockedUserID <= 0 || b.BlockVersion <= 0 {
		return errors.New("no userId, blockedUserId or blockVersion")
	}
	t.applyBlock(b)
	return nil
}

// applyBlock applies a USER_BLOCKED or USER_UNBLOCKED payload when it is newer than what the table holds of the
// pair.
func (t *Table) applyBlock(b event.Block) {
	p := pair{int64(b.UserID), int64(b.BlockedUserID)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if b.BlockVersion <= t.versions[p] {
		return
	}
	t.versions[p] = b.BlockVersion
	if b.Blocked {
		if t.blocked[p.user] == nil {
			t.blocked[p.user] = map[int64]struct{}{}
		}
		t.blocked[p.user][p.other] = struct{}{}
		return
	}
	delete(t.blocked[p.user], p.other)
	if len(t.blocked[p.user]) == 0 {
		delete(t.blocked, p.user)
	}
}
