package redisclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/rueidis"
)

// ErrNoTracking is ConnectNear's answer for a Redis without client tracking (RESP3 and CLIENT TRACKING), such as
// the in-process engine: reads then go to Redis as they would without a near cache.
var ErrNoTracking = errors.New("redis does not support client tracking")

// ConnectNear returns a client of the Redis at addrs (a Redis Cluster too) whose cached reads are answered from
// process memory, kept right by Redis itself: with client tracking, Redis reports every change to a key the client
// has read, and the client drops it. It keeps one connection per node, so cacheBytes bounds the memory held for
// each node; past it the least recently used keys are evicted.
//
// rueidis is used here rather than go-redis, whose client-side cache is experimental, standalone only and applies
// reports on an idle connection only when it is next used.
func ConnectNear(ctx context.Context, addrs []string, password string, cacheBytes int) (rueidis.Client, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, Password: password,
		CacheSizeEachConn: cacheBytes, PipelineMultiplex: -1, // one connection per node: the bound is per node
		Dialer: net.Dialer{Timeout: time.Second}, ConnWriteTimeout: 3 * time.Second})
	if errors.Is(err, rueidis.ErrNoCache) {
		return nil, ErrNoTracking
	}
	if err != nil {
		return nil, fmt.Errorf("connect the near cache to redis %v: %w", addrs, err)
	}
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		c.Close()
		return nil, fmt.Errorf("connect the near cache to redis %v: %w", addrs, err)
	}
	return c, nil
}
