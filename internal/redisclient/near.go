package redisclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/rueidis"
)

// ConnectReads returns a client of the Redis at addrs (a Redis Cluster too) for a service's hot reads, which it
// pipelines with fewer allocations than go-redis. When cacheBytes is above zero and the Redis supports client
// tracking (RESP3 and CLIENT TRACKING), near is true: its cached reads are answered from process memory, kept
// right by Redis itself, which reports every change to a key the client has read, and the client drops it. It
// keeps one connection per node, so cacheBytes bounds the memory held for each node; past it the least recently
// used keys are evicted. Without tracking (the in-process engine) every read goes to Redis.
//
// rueidis rather than go-redis: go-redis's client-side cache is experimental, standalone only, and applies a
// report on an idle connection only when it is next used.
func ConnectReads(ctx context.Context, addrs []string, password string, cacheBytes int) (c rueidis.Client, near bool, err error) {
	opts := rueidis.ClientOption{InitAddress: addrs, Password: password, CacheSizeEachConn: cacheBytes,
		PipelineMultiplex: -1, // one connection per node: the cache's bound is per node
		Dialer:            net.Dialer{Timeout: time.Second}, ConnWriteTimeout: 3 * time.Second,
		DisableRetry: true, // fail fast when Redis is down, as Connect does: the caller answers 503
		DisableCache: cacheBytes <= 0}
	c, err = rueidis.NewClient(opts)
	if errors.Is(err, rueidis.ErrNoCache) {
		opts.DisableCache = true
		c, err = rueidis.NewClient(opts)
	}
	if err != nil {
		return nil, false, fmt.Errorf("connect to redis %v for reads: %w", addrs, err)
	}
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		c.Close()
		return nil, false, fmt.Errorf("connect to redis %v for reads: %w", addrs, err)
	}
	return c, !opts.DisableCache, nil
}
