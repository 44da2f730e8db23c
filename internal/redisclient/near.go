package redisclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
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
	// As Connect decides: one address is a cluster only if the node says so. rueidis would take a server that
	// answers CLUSTER SLOTS (the in-process engine does) for a cluster, and dial the address that reports rather
	// than the one given.
	if len(addrs) == 1 {
		cluster, err := isCluster(ctx, opts)
		if err != nil {
			return nil, false, fmt.Errorf("connect to redis %v for reads: %w", addrs, err)
		}
		opts.ForceSingleClient = !cluster
	}
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

// isCluster asks the one node of opts whether it is a node of a Redis Cluster.
func isCluster(ctx context.Context, opts rueidis.ClientOption) (bool, error) {
	opts.ForceSingleClient, opts.DisableCache = true, true
	c, err := rueidis.NewClient(opts)
	if err != nil {
		return false, err
	}
	defer c.Close()
	info, err := c.Do(ctx, c.B().Info().Build()).ToString() // the default sections include Cluster's
	return strings.Contains(info, "cluster_enabled:1"), err
}
