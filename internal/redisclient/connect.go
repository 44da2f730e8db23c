package redisclient

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Connect returns a client of the Redis at addrs, a Redis Cluster when addrs lists several seed nodes or names one
// node of a cluster, once it answers a PING within ctx.
//
// It fails fast when Redis is down, so that requests get their 503 in about a second instead of go-redis's default
// of several dial attempts and retries; calls also end at their context's deadline.
func Connect(ctx context.Context, addrs []string, password string) (redis.UniversalClient, error) {
	opts := &redis.UniversalOptions{Addrs: addrs, Password: password,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, PoolTimeout: 2 * time.Second,
		MaxRetries: 1, DialerRetries: 1, ContextTimeoutEnabled: true}
	rdb := redis.NewUniversalClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("connect to redis %v: %w", addrs, err)
	}
	// One address may be a node of a Redis Cluster: a plain client would get MOVED for most keys.
	if _, single := rdb.(*redis.Client); single {
		info, err := rdb.Info(ctx).Result() // the default sections include Cluster's (the in-process server has none)
		if err != nil {
			rdb.Close()
			return nil, fmt.Errorf("ask redis %v whether it is a cluster: %w", addrs, err)
		}
		if strings.Contains(info, "cluster_enabled:1") {
			rdb.Close()
			opts.IsClusterMode = true
			rdb = redis.NewUniversalClient(opts)
		}
	}
	return rdb, nil
}
