// Package redislock is a lock in Redis held by one owner at a time: taken with SET NX PX under a random token, and
// released only by that token, in one script (a lock that expired while its owner was slow, and that another caller
// took, stays the other caller's). The lock is one key, so it works on Redis Cluster.
package redislock

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Lock is a lock this caller holds.
type Lock struct {
	rdb   redis.UniversalClient
	key   string
	token string
}

// TryAcquire takes the lock at key for ttl. It returns nil, without error, when another owner holds it.
func TryAcquire(ctx context.Context, rdb redis.UniversalClient, key string, ttl time.Duration) (*Lock, error) {
	token := rand.Text()
	took, err := rdb.SetNX(ctx, key, token, ttl).Result()
	if err != nil {
		return nil, fmt.Errorf("take lock %s: %w", key, err)
	}
	if !took {
		return nil, nil
	}
	return &Lock{rdb: rdb, key: key, token: token}, nil
}

// releaseScript deletes a lock only while it holds the owner's token.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// Release deletes the lock if this owner still holds it. If it fails, the lock expires by itself.
func (l *Lock) Release(ctx context.Context) error {
	if err := releaseScript.Run(ctx, l.rdb, []string{l.key}, l.token).Err(); err != nil {
		return fmt.Errorf("release lock %s: %w", l.key, err)
	}
	return nil
}
