// Package redistest runs one test suite on every Redis backend: miniredis always, and the real Redis at
// BOARD_TEST_REDIS_ADDR as well when that is set. Each run gets a key prefix of its own; its keys are deleted when
// the test ends, so tests share one real Redis safely.
package redistest

import (
	"context"
	"crypto/rand"
	"os"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// AddrEnv names the environment variable that turns the real-Redis backend on.
const AddrEnv = "BOARD_TEST_REDIS_ADDR"

// Backend is one Redis to test against.
type Backend struct {
	Client redis.UniversalClient
	Prefix string               // every key a test writes starts with it
	Mini   *miniredis.Miniredis // the in-process server, to steer its clock; nil for a real Redis
}

// Run calls fn in a subtest per backend.
func Run(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) { fn(t, Mini(t)) })
	if os.Getenv(AddrEnv) != "" {
		t.Run("redis", func(t *testing.T) { fn(t, Real(t)) })
	}
}

// Mini returns a fresh miniredis of the test's own.
func Mini(t testing.TB) Backend {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return Backend{Client: rdb, Prefix: prefix(), Mini: mr}
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
	b := Backend{Client: rdb, Prefix: prefix()}
	t.Cleanup(func() {
		defer rdb.Close()
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, b.Prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("scan %s*: %v", b.Prefix, err)
		}
		if len(keys) > 0 {
			if err := rdb.Del(ctx, keys...).Err(); err != nil {
				t.Errorf("delete test keys: %v", err)
			}
		}
	})
	return b
}

func prefix() string { return "test:" + rand.Text()[:12] + ":" }
