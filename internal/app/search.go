package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"board/internal/httpio"
	"board/internal/kafka"
	"board/internal/search"
	"board/internal/search/bleveindex"
)

// The search service's wiring (SPEC §3.10).

// searchWatch is how often the service looks for a rebuilt index made current by `board search reindex`.
const searchWatch = time.Second

// searchEngine returns the engine the configuration names.
func searchEngine(ctx context.Context, e *Engines) (search.Engine, error) {
	switch e.Config.SearchEngine {
	case "bleve":
		return bleveindex.New(filepath.Join(e.Config.DataDir, "search")), nil
	default:
		return nil, fmt.Errorf("--search-engine %q: want bleve or sql", e.Config.SearchEngine)
	}
}

// NewSearchIndexName names a new index: unique, so that its consumer group is its own.
func NewSearchIndexName(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102t150405") + "_" + hex.EncodeToString(b[:])
}

// SearchGroup is the consumer group of the named index.
func SearchGroup(topicPrefix, name string) string { return topicPrefix + "search-" + name }

// buildSearch opens the current index (a new, empty one the first time, which then follows the topics from their
// oldest records) and keeps it following the topics among the workers, switching to a rebuilt one when it becomes
// current.
func buildSearch(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	engine, err := searchEngine(ctx, e)
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
	ix, err := engine.Open(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	svc := search.NewService(ix)
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
	stop context.CancelFunc
	done chan struct{}
}

// follow starts the consumer of the named index, in the index's own group.
func (f *searchFollower) follow(ctx context.Context, name string, ix search.Indexer) (*following, error) {
	u := search.NewUpdater(ix)
	handlers := u.Handlers()
	var topics []string
	for t := range handlers {
		if topic := t.Topic(f.e.Config.TopicPrefix); !slices.Contains(topics, topic) {
			topics = append(topics, topic)
		}
	}
	slices.Sort(topics)
	c, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: f.e.KafkaBrokers, Group: SearchGroup(f.e.Config.TopicPrefix, name),
		Topics: topics, Handlers: handlers, Flush: u.Flush, Logger: f.e.Logger, Metrics: f.r.metrics})
	if err != nil {
		return nil, err
	}
	cctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	fl := &following{name: name, ix: ix, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(fl.done)
		if err := c.Run(cctx); err != nil {
			f.r.failed <- fmt.Errorf("search consumer: %w", err)
		}
	}()
	return fl, nil
}

// close stops the index's consumer (it commits what it flushed) and closes the index.
func (fl *following) close() error {
	fl.stop()
	<-fl.done
	return fl.ix.Close()
}

// run follows cur until ctx ends, switching to the index that `board search reindex` makes current: the rebuilt
// index answers from the moment it is opened, its own consumer takes over from where the rebuild left off, and the
// old index is dropped.
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
		f.svc.Swap(ix)
		old := cur
		cur = next
		if err := old.close(); err != nil {
			f.e.Logger.Warn("search: closing the old index", "index", old.name, "err", err)
		}
		if err := f.engine.Drop(ctx, old.name); err != nil {
			f.e.Logger.Warn("search: dropping the old index", "index", old.name, "err", err)
		}
		f.e.Logger.Info("search: now answering from the rebuilt index", "index", name, "old", old.name)
	}
}
