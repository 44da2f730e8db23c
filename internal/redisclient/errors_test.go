package redisclient

import (
	"context"
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"board/internal/fault"
)

func TestUnavailable(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	near, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true,
		ForceSingleClient: true, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(near.Close)
	ctx := context.Background()
	clients := map[string]func() error{ // a reply error exactly as each client sees it
		"go-redis": func() error { return rdb.Get(ctx, "k").Err() },
		"rueidis":  func() error { return near.Do(ctx, near.B().Get().Key("k").Build()).Error() },
	}
	for msg, want := range map[string]fault.Kind{
		"LOADING Redis is loading the dataset in memory":                                                   fault.Unavailable,
		"READONLY You can't write against a read only replica.":                                            fault.Unavailable,
		"CLUSTERDOWN The cluster is down":                                                                  fault.Unavailable,
		"TRYAGAIN Multiple keys request during rehashing of slot":                                          fault.Unavailable,
		"MASTERDOWN Link with MASTER is down":                                                              fault.Unavailable,
		"ERR max number of clients reached":                                                                fault.Unavailable,
		"OOM command not allowed when used memory > 'maxmemory'.":                                          fault.Unavailable,
		"NOREPLICAS Not enough good replicas to write.":                                                    fault.Unavailable,
		"MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.": fault.Unavailable,
		"BUSY Redis is busy running a script.":                                                             fault.Unavailable,
		"MOVED 2391 127.0.0.1:7105":                                                                        fault.Unavailable,
		"ASK 2391 127.0.0.1:7105":                                                                          fault.Unavailable,
		"WRONGTYPE Operation against a key holding the wrong kind of value":                                0,
		"ERR Error running script (call to f_x): user_script:1: oops":                                      0,
	} {
		for name, get := range clients {
			mr.SetError(msg)
			err := get()
			mr.SetError("")
			if got := fault.KindOf(Unavailable(err, "REDIS_UNAVAILABLE", "down")); got != want {
				t.Errorf("%s, %q: %v is of kind %d, want %d", name, msg, err, got, want)
			}
		}
	}
	mr.Close()
	down := Unavailable(rdb.Get(ctx, "k").Err(), "REDIS_UNAVAILABLE", "down")
	fe, ok := fault.As(down)
	if !ok || fe.Kind != fault.Unavailable || fe.Code != "REDIS_UNAVAILABLE" || errors.Unwrap(fe) == nil {
		t.Errorf("a stopped Redis: %v, want Unavailable REDIS_UNAVAILABLE with its cause", down)
	}
}
