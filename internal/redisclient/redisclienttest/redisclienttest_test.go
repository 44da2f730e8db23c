package redisclienttest

import (
	"context"
	"fmt"
	"testing"
)

// TestKeysAndCleanup writes keys spread over many slots, finds them all with Keys, and checks that Flush and the
// backend's cleanup delete them all from every node.
func TestKeysAndCleanup(t *testing.T) {
	const count = 200
	for name, backend := range map[string]func(testing.TB) Backend{"redis": Real, "cluster": Cluster} {
		t.Run(name, func(t *testing.T) {
			var prefix string
			t.Run("write", func(t *testing.T) {
				b := backend(t)
				prefix = b.Prefix
				write(t, b, count)
				b.Flush(t)
				if left := Keys(t, b.Client, b.Prefix+"*"); len(left) != 0 {
					t.Errorf("%d keys left after Flush, e.g. %s", len(left), left[0])
				}
				write(t, b, count)
			})
			after := backend(t)
			if after.Mini != nil {
				t.Skip("miniredis: each backend is a server of its own, deleted with the test")
			}
			if left := Keys(t, after.Client, prefix+"*"); len(left) != 0 {
				t.Errorf("%d keys left after the cleanup, e.g. %s", len(left), left[0])
			}
		})
	}
}

func write(t *testing.T, b Backend, count int) {
	t.Helper()
	ctx := context.Background()
	for i := range count {
		if err := b.Client.Set(ctx, fmt.Sprintf("%skey:%d", b.Prefix, i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(Keys(t, b.Client, b.Prefix+"*")); got != count {
		t.Errorf("Keys found %d keys, want %d", got, count)
	}
}
