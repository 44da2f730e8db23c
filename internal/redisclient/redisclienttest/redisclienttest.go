// Package redisclienttest runs one test suite on every Redis backend: miniredis always, the real Redis at
// BOARD_TEST_REDIS_ADDR when that is set, and the Redis Cluster at BOARD_TEST_REDIS_CLUSTER_ADDRS when that is set
// (scripts/redis-cluster starts one). Each run gets a key prefix of its own; its keys are deleted when the test
// ends, so tests share one real Redis or cluster safely.
package redisclienttest

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// AddrEnv names the environment variable that turns the real-Redis backend on.
const AddrEnv = "BOARD_TEST_REDIS_ADDR"

// ClusterAddrsEnv names the environment variable, a comma-separated list of seed nodes, that turns the Redis
// Cluster backend on.
const ClusterAddrsEnv = "BOARD_TEST_REDIS_CLUSTER_ADDRS"

// Backend is one Redis to test against.
type Backend struct {
	// Client is a *redis.Client, or a *redis.ClusterClient for the cluster backend.
	Client redis.UniversalClient
	// Prefix starts every key a test writes. It holds no hash tag, so the keys' own tags decide their slots and a
	// script or pipeline whose keys do not share a tag fails on the cluster as it would in production.
	Prefix string
	Addrs  []string             // where it listens, for a client of another library
	Mini   *miniredis.Miniredis // the in-process server, to steer its clock; nil for a real Redis
}

// Run calls fn in a subtest per backend.
func Run(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) { fn(t, Mini(t)) })
	if os.Getenv(AddrEnv) != "" {
		t.Run("redis", func(t *testing.T) { fn(t, Real(t)) })
	}
	if os.Getenv(ClusterAddrsEnv) != "" {
		t.Run("cluster", func(t *testing.T) { fn(t, Cluster(t)) })
	}
}

// Mini returns a fresh miniredis of the test's own.
func Mini(t testing.TB) Backend {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return Backend{Client: rdb, Prefix: prefix(), Addrs: []string{mr.Addr()}, Mini: mr}
}

// Real returns the Redis at BOARD_TEST_REDIS_ADDR with a fresh prefix, or miniredis when the variable is unset.
func Real(t testing.TB) Backend {
	t.Helper()
	addr := os.Getenv(AddrEnv)
	if addr == "" {
		return Mini(t)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("%s=%s: %v", AddrEnv, addr, err)
	}
	b := Backend{Client: rdb, Prefix: prefix(), Addrs: []string{addr}}
	t.Cleanup(func() {
		defer rdb.Close()
		b.Flush(t)
	})
	return b
}

// Cluster returns the Redis Cluster at BOARD_TEST_REDIS_CLUSTER_ADDRS with a fresh prefix, or miniredis when the
// variable is unset.
func Cluster(t testing.TB) Backend {
	t.Helper()
	addrs := os.Getenv(ClusterAddrsEnv)
	if addrs == "" {
		return Mini(t)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	ctx := context.Background()
	if err := rdb.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
		return node.Ping(ctx).Err()
	}); err != nil {
		t.Fatalf("%s=%s: %v", ClusterAddrsEnv, addrs, err)
	}
	b := Backend{Client: rdb, Prefix: prefix(), Addrs: strings.Split(addrs, ",")}
	t.Cleanup(func() {
		defer rdb.Close()
		b.Flush(t)
	})
	return b
}

// Flush deletes every key with the backend's prefix from every node, as a flushed or replaced Redis would have
// lost them.
func (b Backend) Flush(t testing.TB) {
	t.Helper()
	DeletePrefix(t, b.Client, b.Prefix)
	DeletePrefix(t, b.Client, RateLimitPrefix+b.Prefix)
}

// RateLimitPrefix is what the rate limiter (redis_rate) puts before the keys it is given, ours included.
const RateLimitPrefix = "rate:"

// DeletePrefix deletes every key that starts with prefix, from every primary of a cluster.
func DeletePrefix(t testing.TB, rdb redis.UniversalClient, prefix string) {
	t.Helper()
	cluster, ok := rdb.(*redis.ClusterClient)
	if !ok {
		deleteKeys(t, rdb, prefix)
		return
	}
	if err := cluster.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		deleteKeys(t, node, prefix)
		return nil
	}); err != nil {
		t.Errorf("delete keys %s*: %v", prefix, err)
	}
}

// Keys returns every key matching pattern, from every primary of a cluster. Tests use it instead of KEYS, which a
// cluster answers from one node only.
func Keys(t testing.TB, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	cluster, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return scan(t, rdb, pattern)
	}
	var keys []string
	var mu sync.Mutex // ForEachMaster calls its function on every primary at once
	if err := cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		found := scan(t, node, pattern)
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, found...)
		return nil
	}); err != nil {
		t.Fatalf("keys %s: %v", pattern, err)
	}
	return keys
}

func scan(t testing.TB, rdb redis.Cmdable, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("scan %s: %v", pattern, err)
	}
	return keys
}

// deleteKeys deletes the keys with the prefix on one node, one DEL a key: a DEL of keys in several slots is
// refused by a cluster node even when it holds them all.
func deleteKeys(t testing.TB, node redis.Cmdable, prefix string) {
	t.Helper()
	keys := scan(t, node, prefix+"*")
	if len(keys) == 0 {
		return
	}
	ctx := context.Background()
	if _, err := node.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, key := range keys {
			pipe.Del(ctx, key)
		}
		return nil
	}); err != nil {
		t.Errorf("delete test keys: %v", err)
	}
}

func prefix() string { return "test:" + rand.Text()[:12] + ":" }
