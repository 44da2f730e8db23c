package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Coordinator decides which logical shards this instance's poller owns (SPEC §4). Every instance of a service
// pings a Redis sorted set — member: instance id, score: now — and drops members silent for longer than deadAfter;
// the live ids, sorted, split the shards into contiguous ranges.
//
// A heartbeat is not a fence: an instance that pauses may wake up still polling shards another instance now owns.
// That is safe here because a shard's rows are only ever published and deleted by id: two pollers of one shard
// publish some events twice, which consumers tolerate (docs/messaging.md), and never lose one.
type Coordinator struct {
	rdb       redis.UniversalClient
	key       string
	id        string
	shards    int
	ping      time.Duration
	deadAfter time.Duration
	now       func() time.Time
	logger    *slog.Logger
	metrics   *Metrics

	mu    sync.Mutex
	owned []int
}

// CoordinatorConfig sets a coordinator's timing; zero values take SPEC §5.2's (ping 3 s, dead after 9 s).
type CoordinatorConfig struct {
	Ping      time.Duration
	DeadAfter time.Duration
}

// NewCoordinator returns the coordinator of one instance of service.
func NewCoordinator(rdb redis.UniversalClient, keyPrefix, service string, shards int, cfg CoordinatorConfig,
	logger *slog.Logger, metrics *Metrics) *Coordinator {
	if cfg.Ping == 0 {
		cfg.Ping = 3 * time.Second
	}
	if cfg.DeadAfter == 0 {
		cfg.DeadAfter = 9 * time.Second
	}
	return &Coordinator{rdb: rdb, key: keyPrefix + "message-relay-coordinator::app-list::" + service, id: instanceID(),
		shards: shards, ping: cfg.Ping, deadAfter: cfg.DeadAfter, now: time.Now, logger: logger, metrics: metrics}
}

// instanceID names this process uniquely among the service's instances.
func instanceID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Owned returns the shards this instance polls, as of the last heartbeat.
func (c *Coordinator) Owned() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.owned)
}

// Run pings every ping until ctx is done, then leaves the set so the others take over at once. It also beats the
// moment another member's silence passes deadAfter, so a dead instance's shards are taken over deadAfter after its
// last ping, not up to a ping later.
func (c *Coordinator) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.leave()
			return
		case <-t.C:
		}
		next := c.now().Add(c.ping) // from the beat's start, so a slow beat does not stretch the period
		expiry, err := c.heartbeat(ctx)
		if err != nil && ctx.Err() == nil {
			// Keep the last assignment: at worst another instance polls the same shards, which only duplicates.
			c.logger.Warn("relay coordinator heartbeat failed", "key", c.key, "err", err)
		}
		// A millisecond past the expiry, when the member's score is strictly older than deadAfter.
		if expired := expiry.Add(time.Millisecond); !expiry.IsZero() && expired.Before(next) {
			next = expired
		}
		t.Reset(max(next.Sub(c.now()), 0))
	}
}

// heartbeat pings, expels the silent and recomputes this instance's shards. It returns when the next other member
// will have been silent for deadAfter, or the zero time when there is none.
func (c *Coordinator) heartbeat(ctx context.Context) (time.Time, error) {
	now := c.now()
	var members *redis.ZSliceCmd
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, c.key, redis.Z{Score: float64(now.UnixMilli()), Member: c.id})
		p.ZRemRangeByScore(ctx, c.key, "-inf", "("+strconv.FormatInt(now.Add(-c.deadAfter).UnixMilli(), 10))
		members = p.ZRangeWithScores(ctx, c.key, 0, -1) // oldest ping first
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	var live []string
	var expiry time.Time
	for _, m := range members.Val() {
		id := m.Member.(string)
		if id != c.id && expiry.IsZero() {
			expiry = time.UnixMilli(int64(m.Score)).Add(c.deadAfter)
		}
		live = append(live, id)
	}
	slices.Sort(live)
	owned := Assign(c.shards, live, c.id)
	c.mu.Lock()
	changed := !slices.Equal(owned, c.owned)
	c.owned = owned
	c.mu.Unlock()
	if changed {
		c.logger.Info("relay shards assigned", "key", c.key, "instance", c.id, "instances", len(live), "shards", owned)
	}
	c.metrics.shardsOwned(len(owned))
	return expiry, nil
}

func (c *Coordinator) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.rdb.ZRem(ctx, c.key, c.id).Err(); err != nil {
		c.logger.Warn("relay coordinator could not leave; the others take over after the dead timeout", "err", err)
	}
	c.mu.Lock()
	c.owned = nil
	c.mu.Unlock()
	c.metrics.shardsOwned(0)
}

// Assign returns the contiguous range of shards that instance owns among the sorted live instances.
func Assign(shards int, live []string, instance string) []int {
	i, found := slices.BinarySearch(live, instance)
	if !found {
		return nil
	}
	n := len(live)
	var owned []int
	for s := i * shards / n; s < (i+1)*shards/n; s++ {
		owned = append(owned, s)
	}
	return owned
}
