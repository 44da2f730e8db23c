package ratelimit

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"board/internal/fault"
	"board/internal/redisclient/redisclienttest"
)

func TestParse(t *testing.T) {
	t.Parallel()
	got, err := Parse("60/1m")
	if want := (redis_rate.Limit{Rate: 60, Burst: 60, Period: time.Minute}); err != nil || got != want {
		t.Errorf("Parse(60/1m) = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "60", "0/1m", "-1/1m", "x/1m", "60/", "60/1ms", "60/soon"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = nil error", bad)
		}
	}
}

// Two instances, each with its own client, draw from one budget: the third request over a limit of two is refused
// whichever instance it reaches, with a Retry-After.
func TestInstancesShareTheBudget(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		rules := map[string]Rule{"sign-in": {Limit: redis_rate.Limit{Rate: 2, Burst: 2, Period: time.Hour}}}
		a := New(b.Client, b.Prefix, rules, slog.New(slog.DiscardHandler))
		other := New(b.Client, b.Prefix, rules, slog.New(slog.DiscardHandler))
		ctx := context.Background()
		if err := a.Allow(ctx, "sign-in", "10.0.0.1"); err != nil {
			t.Fatal(err)
		}
		if err := other.Allow(ctx, "sign-in", "10.0.0.1"); err != nil {
			t.Fatal(err)
		}
		for _, l := range []*Limiter{a, other} {
			err := l.Allow(ctx, "sign-in", "10.0.0.1")
			fe, ok := fault.As(err)
			if !ok || fe.Kind != fault.RateLimited || fe.Code != "RATE_LIMITED" || fe.RetryAfter <= 0 {
				t.Fatalf("third request: %v (%+v), want RATE_LIMITED with a RetryAfter", err, fe)
			}
		}
		if err := a.Allow(ctx, "sign-in", "10.0.0.2"); err != nil {
			t.Errorf("another address: %v", err)
		}
		if err := a.Allow(ctx, "no such limit", "10.0.0.1"); err != nil {
			t.Errorf("a name without a rule: %v", err)
		}
		if keys := redisclienttest.Keys(t, b.Client, redisclienttest.RateLimitPrefix+b.Prefix+"*"); len(keys) != 2 {
			t.Errorf("keys %v, want one per address", keys)
		}
	})
}

// A limit refills at its rate: with Redis's clock a minute on, the budget is back.
func TestBudgetRefills(t *testing.T) {
	t.Parallel()
	b := redisclienttest.Mini(t)
	now := time.Now()
	b.Mini.SetTime(now)
	l := New(b.Client, b.Prefix, map[string]Rule{"write": {Limit: redis_rate.PerMinute(1)}}, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	if err := l.Allow(ctx, "write", "u"); err != nil {
		t.Fatal(err)
	}
	if err := l.Allow(ctx, "write", "u"); fault.KindOf(err) != fault.RateLimited {
		t.Fatalf("second write in the minute: %v, want rate limited", err)
	}
	b.Mini.SetTime(now.Add(time.Minute))
	if err := l.Allow(ctx, "write", "u"); err != nil {
		t.Errorf("a minute later: %v", err)
	}
}

// Without Redis, a fail-open limit lets requests through and a fail-closed one answers 503, within askTimeout.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	l := New(rdb, "test:", map[string]Rule{
		"write":   {Limit: redis_rate.PerMinute(1), FailOpen: true},
		"sign-in": {Limit: redis_rate.PerMinute(1)},
	}, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	if err := l.Allow(ctx, "write", "u"); err != nil {
		t.Errorf("fail-open limit: %v", err)
	}
	if err := l.Allow(ctx, "sign-in", "10.0.0.1"); fault.KindOf(err) != fault.Unavailable {
		t.Errorf("fail-closed limit: %v, want unavailable", err)
	}
}

// A Redis that accepts connections and never answers costs a request askTimeout, not its whole deadline.
func TestRedisHangs(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // held open, unanswered, until the test ends
		}
	}()
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1, ContextTimeoutEnabled: true})
	defer rdb.Close()
	l := New(rdb, "test:", map[string]Rule{"sign-in": {Limit: redis_rate.PerMinute(1)}}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = l.Allow(ctx, "sign-in", "10.0.0.1")
	if fault.KindOf(err) != fault.Unavailable {
		t.Errorf("hung Redis: %v, want unavailable", err)
	}
	if ctx.Err() != nil {
		t.Error("the request's own deadline passed first")
	}
}
