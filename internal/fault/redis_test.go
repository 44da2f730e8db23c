package fault

import (
	"context"
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func TestFromRedis(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	reply := func(msg string) error { // a reply error exactly as the client sees it
		mr.SetError(msg)
		defer mr.SetError("")
		return rdb.Get(ctx, "k").Err()
	}
	for msg, want := range map[string]Kind{
		"LOADING Redis is loading the dataset in memory":                                                   Unavailable,
		"READONLY You can't write against a read only replica.":                                            Unavailable,
		"CLUSTERDOWN The cluster is down":                                                                  Unavailable,
		"TRYAGAIN Multiple keys request during rehashing of slot":                                          Unavailable,
		"MASTERDOWN Link with MASTER is down":                                                              Unavailable,
		"ERR max number of clients reached":                                                                Unavailable,
		"OOM command not allowed when used memory > 'maxmemory'.":                                          Unavailable,
		"NOREPLICAS Not enough good replicas to write.":                                                    Unavailable,
		"MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.": Unavailable,
		"BUSY Redis is busy running a script.":                                                             Unavailable,
		"MOVED 2391 127.0.0.1:7105":                                                                        Unavailable,
		"ASK 2391 127.0.0.1:7105":                                                                          Unavailable,
		"WRONGTYPE Operation against a key holding the wrong kind of value":                                0,
		"ERR Error running script (call to f_x): user_script:1: oops":                                      0,
	} {
		if got := KindOf(FromRedis(reply(msg), "REDIS_UNAVAILABLE", "down")); got != want {
			t.Errorf("%q: kind %d, want %d", msg, got, want)
		}
	}
	mr.Close()
	down := FromRedis(rdb.Get(ctx, "k").Err(), "REDIS_UNAVAILABLE", "down")
	if fe, ok := As(down); !ok || fe.Kind != Unavailable || fe.Code != "REDIS_UNAVAILABLE" || errors.Unwrap(fe) == nil {
		t.Errorf("a stopped Redis: %v, want Unavailable REDIS_UNAVAILABLE with its cause", down)
	}
}
