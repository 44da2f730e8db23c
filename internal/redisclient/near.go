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
// tracking (RESP3 and CLIENT TRACKING), memo is not nil: the client's cached reads are answered from process memory,
// kept right by Redis itself, which reports every change to a key the client has read, and the client drops it; the
// memo holds what the service decoded of them, and drops a key on the same reports. Half of cacheBytes bounds the
// memo, the other half the client's cache of each node (it keeps one connection per node); past them the least
// recently used keys are evicted. Without tracking (the in-process engine) every read goes to Redis.
//
// rueidis rather than go-redis: go-redis's client-side cache is experimental, standalone only, and applies a
// report on an idle connection only when it is next used.
func ConnectReads(ctx context.Context, addrs []string, password string, cacheBytes int) (c rueidis.Client, memo *Memo, err error) {
	memo = newMemo(cacheBytes / 2)
	opts := rueidis.ClientOption{InitAddress: addrs, Password: password, CacheSizeEachConn: max(cacheBytes/2, 1),
		PipelineMultiplex: -1, // one connection per node: the cache's bound is per node
		Dialer:            net.Dialer{Timeout: time.Second}, ConnWriteTimeout: 3 * time.Second,
		DisableRetry: true, // fail fast when Redis is down, as Connect does: the caller answers 503
		DisableCache: cacheBytes <= 0}
	if !opts.DisableCache {
		opts.OnInvalidations = memo.invalidate
	}
	// As Connect decides: one address is a cluster only if the node says so. rueidis would take a server that
	// answers CLUSTER SLOTS (the in-process engine does) for a cluster, and dial the address that reports rather
	// than the one given.
	if len(addrs) == 1 {
		cluster, err := isCluster(ctx, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to redis %v for reads: %w", addrs, err)
		}
		opts.ForceSingleClient = !cluster
	}
	c, err = rueidis.NewClient(opts)
	if errors.Is(err, rueidis.ErrNoCache) {
		opts.DisableCache, opts.OnInvalidations = true, nil
		c, err = rueidis.NewClient(opts)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("connect to redis %v for reads: %w", addrs, err)
	}
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("connect to redis %v for reads: %w", addrs, err)
	}
	if opts.DisableCache {
		memo = nil
	}
	return c, memo, nil
}

// isCluster asks the one node of opts whether it is a node of a Redis Cluster.
func isCluster(ctx context.Context, opts rueidis.ClientOption) (bool, error) {
	opts.ForceSingleClient, opts.DisableCache, opts.OnInvalidations = true, true, nil
	c, err := rueidis.NewClient(opts)
	if err != nil {
		return false, err
	}
	defer c.Close()
	info, err := c.Do(ctx, c.B().Info().Build()).ToString() // the default sections include Cluster's
	return strings.Contains(info, "cluster_enabled:1"), err
}
