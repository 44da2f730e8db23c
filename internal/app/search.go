package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"board/internal/event"
	"board/internal/httpio"
	"board/internal/kafka"
	"board/internal/search"
	"board/internal/search/bleveindex"
	"board/internal/search/sqlindex"
)

// The search service's wiring (SPEC §3.10).

// searchWatch is how often the service looks for a rebuilt index made current by `board search reindex`, and how
// often it then looks at how far the rebuilt index's consumer has caught up.
const searchWatch = time.Second

// SearchEngine returns the search engine the configuration names. With bleve, each instance keeps its own indexes
// in a slot of --data-dir/search: slot is the slot to use (`board search reindex` names one), or -1 for the first
// that no other running instance holds, which this process then holds until its engines close. Instances that share
// a data directory (on SQLite, say) so each get a full index of their own, and a restarted instance finds its slot
// again (the lowest free one).
func SearchEngine(ctx context.Context, e *Engines, slot int) (search.Engine, error) {
	switch e.Config.SearchEngine {
	case "bleve":
		root := filepath.Join(e.Config.DataDir, "search")
		if slot >= 0 {
			return bleveindex.New(filepath.Join(root, strconv.Itoa(slot))), nil
		}
		dir, release, err := holdSearchSlot(root)
		if err != nil {
			return nil, err
		}
		e.closers = append(e.closers, release)
		return bleveindex.New(dir), nil
	case "sql":
		db, err := e.OpenSQL(ctx, "search")
		if err != nil {
			return nil, err
		}
		if db.Vitess() {
			// Each index is a table of its own, made at run time, and a search would scatter to every shard and rank
			// on each shard's statistics (docs/search.md).
			return nil, errors.New("--search-engine sql does not run behind Vitess; use --search-engine bleve")
		}
		if e.Config.Migrate {
			if err := sqlindex.Migrate(ctx, db); err != nil {
				return nil, err
			}
		}
		return sqlindex.New(db), nil
	default:
		return nil, fmt.Errorf("--search-engine %q: want bleve or sql", e.Config.SearchEngine)
	}
}

// maxSearchSlots bounds the bleve search instances that share one data directory.
const maxSearchSlots = 64

// holdSearchSlot locks the first slot directory under root that no other process holds, and returns it with the
// function that lets it go. The lock is the operating system's (flock): a process that dies lets it go.
func holdSearchSlot(root string) (dir string, release func() error, err error) {
	for slot := range maxSearchSlots {
		dir := filepath.Join(root, strconv.Itoa(slot))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
		f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return "", nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		return dir, f.Close, nil
	}
	return "", nil, fmt.Errorf("all %d search slots of %s are held by running instances", maxSearchSlots, root)
}

// NewSearchIndexName names a new index: unique, so that its consumer group is its own, and beginning with its
// creation time to the nanosecond, so that names sort as the indexes were made (dropOlderIndexes), also two made in
// the same second.
func NewSearchIndexName(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	now = now.UTC()
	return fmt.Sprintf("%st%09d_%s", now.Format("20060102t150405"), now.Nanosecond(), hex.EncodeToString(b[:]))
}

// SearchGroup is the consumer group of the named index.
func SearchGroup(topicPrefix, name string) string { return topicPrefix + "search-" + name }

// dropOlderIndexes drops the indexes older than current (names begin with their creation time): the one a switch
// left, and those a service that was down during a rebuild, or killed before its drop, or a rebuild killed midway
// left behind. A rebuild in progress is newer than current, and is left alone.
func dropOlderIndexes(ctx context.Context, e *Engines, engine search.Engine, current string) {
	names, err := engine.List(ctx)
	if err != nil {
		e.Logger.Warn("search: cannot list the indexes to drop the old ones", "err", err)
		return
	}
	for _, name := range names {
		if name >= current {
			continue
		}
		if err := engine.Drop(ctx, name); err != nil {
			e.Logger.Warn("search: dropping an old index", "index", name, "err", err)
			continue
		}
		e.Logger.Info("search: dropped an old index", "index", name)
	}
}

// buildSearch opens the current index (a new, empty one the first time, which then follows the topics from their
// oldest records) and keeps it following the topics among the workers, switching to a rebuilt one when it becomes
// current.
func buildSearch(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	engine, err := SearchEngine(ctx, e, -1)
	if err != nil {
		return nil, nil, err
	}
	name, err := engine.Current(ctx)
	if err != nil {
		return nil, nil, err
	}
	if name == "" {
		name = NewSearchIndexName(time.Now())
		if err := engine.SetCurrent(ctx, name); err != nil {
			return nil, nil, err
		}
	}
	dropOlderIndexes(ctx, e, engine, name)
	ix, err := engine.Open(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	svc := search.NewService(ix, search.Options{Timeout: e.Config.SearchTimeout, CacheTTL: e.Config.SearchCacheTTL,
		CacheBytes: int64(e.Config.SearchCacheMB) << 20})
	f := &searchFollower{e: e, r: r, engine: engine, svc: svc}
	following, err := f.follow(ctx, name, ix)
	if err != nil {
		_ = ix.Close()
		return nil, nil, err
	}
	r.workers.run(ctx, func(ctx context.Context) { f.run(ctx, following) })
	return search.Routes(svc, e.Logger), []httpio.Check{{Name: "kafka", Ping: e.Producer.Ping}}, nil
}

// searchFollower keeps the service's current index following the topics.
type searchFollower struct {
	e      *Engines
	r      deps
	engine search.Engine
	svc    *search.Service
}

// following is an index and the consumer that keeps it up to date.
type following struct {
	name string
	ix   search.Indexer
	// ends are the topics' end offsets when the consumer started: once its group has committed them, the index has
	// caught up with what happened before it began to follow.
	ends map[string]map[int32]int64
	stop context.CancelFunc
	done chan struct{}
}

// SearchTopics are the topics a search index follows. A rebuild reads the moderation topic again from its start
// (SearchReplayedTopics), and the others from where they end when it begins.
func SearchTopics(topicPrefix string) []string {
	var topics []string
	for t := range search.NewUpdater(nil).Handlers() {
		if topic := t.Topic(topicPrefix); !slices.Contains(topics, topic) {
			topics = append(topics, topic)
		}
	}
	slices.Sort(topics)
	return topics
}

// SearchReplayedTopics are the topics a rebuild's consumer reads from their start: the moderation topic, whose state
// the snapshot takes from the article and comment services, which may not have applied its latest events yet. Its
// events are few, and applied again they change nothing (moderationVersion).
func SearchReplayedTopics(topicPrefix string) []string {
	return []string{event.ArticleModerated.Topic(topicPrefix)}
}

// follow starts the consumer of the named index, in the index's own group.
func (f *searchFollower) follow(ctx context.Context, name string, ix search.Indexer) (*following, error) {
	topics := SearchTopics(f.e.Config.TopicPrefix)
	lctx, cancel := context.WithTimeout(ctx, searchWatch*5)
	ends, err := kafka.EndOffsets(lctx, f.e.KafkaBrokers, topics)
	cancel()
	if err != nil {
		return nil, err
	}
	u := search.NewUpdater(ix)
	c, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: f.e.KafkaBrokers, Group: SearchGroup(f.e.Config.TopicPrefix, name),
		Topics: topics, Handlers: u.Handlers(), Flush: u.Flush, Logger: f.e.Logger, Metrics: f.r.metrics})
	if err != nil {
		return nil, err
	}
	cctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	fl := &following{name: name, ix: ix, ends: ends, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(fl.done)
		if err := c.Run(cctx); err != nil {
			f.r.failed <- fmt.Errorf("search consumer: %w", err)
		}
	}()
	return fl, nil
}

// catchUp waits until the consumer of a rebuilt index has handled everything produced before it started; false if
// ctx ended first.
func (f *searchFollower) catchUp(ctx context.Context, fl *following) bool {
	group := SearchGroup(f.e.Config.TopicPrefix, fl.name)
	for logged := time.Now(); ; {
		lctx, cancel := context.WithTimeout(ctx, searchWatch)
		reached, err := kafka.Reached(lctx, f.e.KafkaBrokers, group, fl.ends)
		cancel()
		if err == nil && reached {
			return true
		}
		if time.Since(logged) > 10*time.Second {
			f.e.Logger.Info("search: the rebuilt index is catching up; the old one answers meanwhile", "index", fl.name, "err", err)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(searchWatch):
		}
	}
}

// close stops the index's consumer (it commits what it flushed) and closes the index.
func (fl *following) close() error {
	fl.stop()
	<-fl.done
	return fl.ix.Close()
}

// run follows cur until ctx ends, switching to the index that `board search reindex` makes current: the rebuilt
// index's own consumer applies what changed since the rebuild began, the old index answers until it has caught up,
// and is then closed and dropped.
func (f *searchFollower) run(ctx context.Context, cur *following) {
	defer func() {
		if err := cur.close(); err != nil {
			f.e.Logger.Warn("search: closing the index", "index", cur.name, "err", err)
		}
	}()
	t := time.NewTicker(searchWatch)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		name, err := f.engine.Current(ctx)
		if err != nil || name == "" || name == cur.name {
			if err != nil {
				f.e.Logger.Warn("search: cannot read which index is current", "err", err)
			}
			continue
		}
		ix, err := f.engine.Open(ctx, name)
		if err != nil {
			f.e.Logger.Warn("search: cannot open the rebuilt index; answering from the old one", "index", name, "err", err)
			continue
		}
		next, err := f.follow(ctx, name, ix)
		if err != nil {
			_ = ix.Close()
			f.e.Logger.Warn("search: cannot follow the rebuilt index; answering from the old one", "index", name, "err", err)
			continue
		}
		if !f.catchUp(ctx, next) {
			if err := next.close(); err != nil {
				f.e.Logger.Warn("search: closing the rebuilt index", "index", name, "err", err)
			}
			return
		}
		f.svc.Swap(ix) // returns once no request uses the old index
		old := cur
		cur = next
		if err := old.close(); err != nil {
			f.e.Logger.Warn("search: closing the old index", "index", old.name, "err", err)
		}
		dropOlderIndexes(ctx, f.e, f.engine, name)
		f.e.Logger.Info("search: now answering from the rebuilt index", "index", name, "old", old.name)
	}
}
