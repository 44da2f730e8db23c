package redislock

import (
	"context"
	"testing"
	"time"

	"board/internal/redisclient/redisclienttest"
)

func TestOwnerOnly(t *testing.T) {
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		ctx := context.Background()
		key := b.Prefix + "lock"
		first, err := TryAcquire(ctx, b.Client, key, time.Minute)
		if err != nil || first == nil {
			t.Fatalf("TryAcquire of a free lock = %v, %v", first, err)
		}
		if second, err := TryAcquire(ctx, b.Client, key, time.Minute); err != nil || second != nil {
			t.Fatalf("TryAcquire of a held lock = %v, %v; want nil, nil", second, err)
		}
		if pttl := b.Client.PTTL(ctx, key).Val(); pttl <= 0 || pttl > time.Minute {
			t.Errorf("the lock's PTTL = %v, want in (0, 1m]", pttl)
		}
		// The lock expired and another owner took it: the first owner's release leaves it alone.
		b.Client.Set(ctx, key, "someone else", time.Minute)
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := b.Client.Get(ctx, key).Val(); got != "someone else" {
			t.Errorf("after a stale owner's release the lock holds %q, want the new owner's token", got)
		}
		b.Client.Del(ctx, key)
		third, err := TryAcquire(ctx, b.Client, key, time.Minute)
		if err != nil || third == nil {
			t.Fatalf("TryAcquire after a delete = %v, %v", third, err)
		}
		if err := third.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := b.Client.Exists(ctx, key).Val(); n != 0 {
			t.Errorf("the owner's release left the lock")
		}
	})
}
