package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/event"
	"board/internal/kafka"
	"board/internal/redislock"
)

// replayPrepareTimeout bounds the reset of a group and the clearing of its service's state before a replay; it is
// also the life of the replay lock, should the replaying process die holding it.
const replayPrepareTimeout = 5 * time.Minute

// replayLockPoll is how often an instance that waits for another's replay looks again.
const replayLockPoll = 250 * time.Millisecond

// startConsumer starts the consumer loop of a consumer service among r.consumers.
//
// When --replay names the service, it is rebuilt first. Under a Redis lock, the group is reset to the oldest
// records (refused while any member of the group runs, and then nothing is changed) and the service's state is
// cleared. Every instance of the service, replaying or not, waits for that lock before it joins the group, so none
// can apply events that the clearing would then delete.
func startConsumer(ctx context.Context, e *Engines, r deps, handlers map[event.Type]kafka.Handler,
	keyPattern string) error {
	group := e.Config.TopicPrefix + r.group
	var topics []string // the topics of the events it handles
	for t := range handlers {
		if topic := t.Topic(e.Config.TopicPrefix); !slices.Contains(topics, topic) {
			topics = append(topics, topic)
		}
	}
	slices.Sort(topics)
	lock := e.Config.RedisPrefix + "replay::" + r.name
	if slices.Contains(e.Config.Replay, r.name) {
		clear := func(ctx context.Context) (int, error) { return deleteKeys(ctx, e.Redis, keyPattern) }
		if err := replay(ctx, e, lock, group, topics, clear); err != nil {
			return fmt.Errorf("--replay %s: %w", r.name, err)
		}
	} else if err := waitForReplay(ctx, e, lock); err != nil {
		return err
	}
	c, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: e.KafkaBrokers, Group: group, Topics: topics,
		Handlers: handlers, Logger: e.Logger, Metrics: r.metrics, Concurrent: r.concurrent})
	if err != nil {
		return err
	}
	r.consumers.run(ctx, func(ctx context.Context) {
		if err := c.Run(ctx); err != nil {
			r.failed <- fmt.Errorf("%s consumer: %w", r.name, err)
		}
	})
	return nil
}

// replay resets group to the oldest records and clears the service's state, holding lock throughout.
func replay(ctx context.Context, e *Engines, lock, group string, topics []string,
	clear func(context.Context) (int, error)) error {
	ctx, cancel := context.WithTimeout(ctx, replayPrepareTimeout)
	defer cancel()
	held, err := redislock.TryAcquire(ctx, e.Redis, lock, replayPrepareTimeout)
	if err != nil {
		return err
	}
	if held == nil {
		return fmt.Errorf("another instance is replaying (lock %s); wait for it, then start this one without --replay", lock)
	}
	defer func() {
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := held.Release(releaseCtx); err != nil {
			e.Logger.Warn("cannot release the replay lock; other instances wait until it expires", "lock", lock,
				"expires_in", replayPrepareTimeout, "err", err)
		}
	}()
	if err := kafka.ResetGroupToStart(ctx, e.KafkaBrokers, group, topics); err != nil {
		return err
	}
	n, err := clear(ctx)
	if err != nil {
		return err
	}
	e.Logger.Info("replaying from the oldest records", "group", group, "keys_cleared", n)
	return nil
}

// waitForReplay returns once no replay of the service is in progress (lock absent), or when ctx ends.
func waitForReplay(ctx context.Context, e *Engines, lock string) error {
	for logged := false; ; logged = true {
		n, err := e.Redis.Exists(ctx, lock).Result()
		if err != nil {
			return fmt.Errorf("look for a replay in progress (%s): %w", lock, err)
		}
		if n == 0 {
			return nil
		}
		if !logged {
			e.Logger.Info("waiting for another instance's replay to finish", "lock", lock)
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("waiting for a replay (%s)", lock), ctx.Err())
		case <-time.After(replayLockPoll):
		}
	}
}

// deleteKeys deletes every key matching pattern, on every primary of a cluster, and returns how many it deleted.
func deleteKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) (int, error) {
	var deleted atomic.Int64
	deleteOnNode := func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
		var batch []string
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			// One key per command: the keys of a batch may lie in different slots.
			pipe := node.Pipeline()
			for _, k := range batch {
				pipe.Unlink(ctx, k)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
			deleted.Add(int64(len(batch)))
			batch = batch[:0]
			return nil
		}
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == 1000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		return flush()
	}
	var err error
	if cluster, ok := rdb.(*redis.ClusterClient); ok {
		err = cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return deleteOnNode(ctx, node) })
	} else {
		err = deleteOnNode(ctx, rdb)
	}
	if err != nil {
		return int(deleted.Load()), fmt.Errorf("delete %s: %w", pattern, err)
	}
	return int(deleted.Load()), nil
}
