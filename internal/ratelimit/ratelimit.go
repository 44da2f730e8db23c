// Package ratelimit holds writers to their budgets across every instance: a GCRA limiter (redis_rate) whose state
// is one Redis key per budget, so that all instances of a service draw from the same budget, Redis Cluster included.
package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"board/internal/fault"
	"board/internal/redisclient"
)

// Rule is one named limit: Limit.Rate requests per Limit.Period, in bursts of up to Limit.Burst.
type Rule struct {
	Limit redis_rate.Limit
	// FailOpen lets requests through, with a warning, when Redis cannot be asked; otherwise they get 503. Limits
	// against brute force fail closed; the per-user write limit fails open, as the writer is known and Redis being
	// down should not take writes down with it.
	FailOpen bool
}

// Parse reads a limit written as N/period, e.g. 60/1m: N requests per period, in bursts of up to N.
func Parse(s string) (redis_rate.Limit, error) {
	n, period, ok := strings.Cut(s, "/")
	rate, err := strconv.Atoi(n)
	if !ok || err != nil || rate < 1 {
		return redis_rate.Limit{}, fmt.Errorf("want a limit such as 60/1m (N requests per period), not %q", s)
	}
	d, err := time.ParseDuration(period)
	if err != nil || d < time.Second {
		return redis_rate.Limit{}, fmt.Errorf("want a limit such as 60/1m with a period of at least 1s, not %q", s)
	}
	return redis_rate.Limit{Rate: rate, Burst: rate, Period: d}, nil
}

// askTimeout bounds one question to Redis, so that a hung Redis costs a write this much and not its whole deadline.
const askTimeout = 500 * time.Millisecond

// Limiter implements httpio.Limiter.
type Limiter struct {
	limiter *redis_rate.Limiter
	prefix  string
	rules   map[string]Rule
	logger  *slog.Logger
}

// New returns a Limiter of the named rules, whose keys are rate:<prefix><name>::<key>.
func New(rdb redis.UniversalClient, prefix string, rules map[string]Rule, logger *slog.Logger) *Limiter {
	return &Limiter{limiter: redis_rate.NewLimiter(rdb), prefix: prefix, rules: rules, logger: logger}
}

// Allow takes one request from key's budget under the named limit. A name without a rule is not limited.
func (l *Limiter) Allow(ctx context.Context, name, key string) error {
	rule, ok := l.rules[name]
	if !ok {
		return nil
	}
	askCtx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	res, err := l.limiter.Allow(askCtx, l.prefix+name+"::"+key, rule.Limit)
	switch {
	case err != nil && rule.FailOpen:
		l.logger.WarnContext(ctx, "rate limit not checked; letting the request through", "limit", name, "err", err)
		return nil
	case err != nil:
		return redisclient.Unavailable(err, "RATE_LIMIT_UNAVAILABLE", "the rate limit cannot be checked; try again later")
	case res.Allowed == 0:
		return &fault.Error{Kind: fault.RateLimited, Code: "RATE_LIMITED", RetryAfter: res.RetryAfter,
			Message: fmt.Sprintf("too many requests (limit %s); try again in %s", rule.Limit, res.RetryAfter.Round(time.Second))}
	}
	return nil
}
