package standing

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/auth"
	"board/internal/event"
)

// listTimeout bounds one listing of the topics' offsets; retryWait spaces the listings that failed.
const (
	listTimeout = 5 * time.Second
	retryWait   = time.Second
)

// Run reads both topics into the table until ctx ends, then closes the reader's client. It first lists where the
// topics end, retrying until the broker answers; the table is caught up once it has read up to there.
func (t *Table) Run(ctx context.Context) {
	defer t.cl.Close()
	start := time.Now()
	left, ok := t.ends(ctx)
	if !ok {
		return
	}
	if len(left) == 0 {
		t.caughtUp(start)
	}
	for {
		fs := t.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				t.cfg.Logger.Warn("standing: fetch error", "topic", topic, "partition", partition, "err", err)
			}
		})
		if errors.Is(fs.Err0(), kgo.ErrClientClosed) {
			return
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, r := range p.Records {
				t.apply(r)
			}
			if n := len(p.Records); n > 0 {
				if end, ok := left[tp{p.Topic, p.Partition}]; ok && p.Records[n-1].Offset+1 >= end {
					delete(left, tp{p.Topic, p.Partition})
					if len(left) == 0 {
						t.caughtUp(start)
					}
				}
			}
		})
	}
}

// tp names a partition.
type tp struct {
	topic     string
	partition int32
}

// ends returns, for each partition of the topics that holds records, the offset after its last record at this
// moment. It retries until the broker answers; false when ctx ended first.
func (t *Table) ends(ctx context.Context) (map[tp]int64, bool) {
	adm := kadm.NewClient(t.cl)
	for {
		lctx, cancel := context.WithTimeout(ctx, listTimeout)
		starts, err := adm.ListStartOffsets(lctx, t.topics...)
		if err == nil {
			err = starts.Error()
		}
		var ends kadm.ListedOffsets
		if err == nil {
			ends, err = adm.ListEndOffsets(lctx, t.topics...)
		}
		if err == nil {
			err = ends.Error()
		}
		cancel()
		if err == nil {
			left := map[tp]int64{}
			ends.Each(func(o kadm.ListedOffset) {
				if s, ok := starts.Lookup(o.Topic, o.Partition); !ok || o.Offset > s.Offset {
					left[tp{o.Topic, o.Partition}] = o.Offset
				}
			})
			return left, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		t.cfg.Logger.Warn("standing: cannot list the ends of the ban and user topics; retrying", "topics", t.topics, "err", err)
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(retryWait):
		}
	}
}

func (t *Table) caughtUp(start time.Time) {
	t.mu.RLock()
	n := len(t.users)
	t.mu.RUnlock()
	t.cfg.Logger.Info("standing: read bans and roles", "users", n, "took", time.Since(start).Round(time.Millisecond))
	t.setCaughtUp()
}

// apply applies one record. A record that cannot be decoded is logged and skipped: reading it again would not help,
// and the rest of the user's standing must not wait for it.
func (t *Table) apply(r *kgo.Record) {
	env, err := event.Decode(r.Value)
	if err == nil {
		switch env.Type {
		case event.UserBanned, event.UserUnbanned:
			var b event.Ban
			if b, err = event.Payload[event.Ban](env); err == nil {
				if b.UserID <= 0 || b.BanVersion <= 0 {
					err = errors.New("no userId or banVersion")
				} else {
					t.applyBan(b)
				}
			}
		case event.UserRoleChanged:
			var p event.Role
			if p, err = event.Payload[event.Role](env); err == nil {
				var role auth.Role
				if role, err = auth.ParseRole(p.Role); err == nil {
					if p.UserID <= 0 || p.RoleVersion <= 0 {
						err = errors.New("no userId or roleVersion")
					} else {
						t.applyRole(int64(p.UserID), role, p.RoleVersion)
					}
				}
			}
		}
	}
	if err != nil {
		t.cfg.Logger.Error("standing: skipping a record that cannot be applied", "topic", r.Topic, "partition", r.Partition,
			"offset", r.Offset, "err", err)
	}
}
