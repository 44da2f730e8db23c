package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"

	"board/internal/redisclient/redisclienttest"
)

// TestBenchReadAgainstARunningBoard runs the read bench briefly against a board started as board serve: the table
// has its six cases, none with a failure, and the floor's key is gone afterwards.
func TestBenchReadAgainstARunningBoard(t *testing.T) {
	t.Parallel()
	flags := testFlags(t, t.TempDir())
	p := startProgram(t, flags)
	prefix := flagValue(p.flags, "--redis-prefix")
	args := []string{"bench", "read", "--articles", "40", "--connections", "4", "--duration", "1s", "--warmup", "100ms",
		"--article-url", p.urls["article"], "--comment-url", p.urls["comment"], "--like-url", p.urls["like"],
		"--article-read-url", p.urls["article-read"], "--redis-addr", p.redisAddr(), "--redis-prefix", prefix}
	var out, errOut bytes.Buffer
	args = append(args, userDBArgs(flags)...)
	if err := run(context.Background(), args, noEnv, &out, &errOut); err != nil {
		t.Fatalf("bench read: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	for _, name := range []string{"floor", "warm article", "page 1", "page 1 top-week", "page 1 comments", "cold article"} {
		// requests (at least one), 0 failures, req/s, p50, p99, vs floor, vs page 1 (a ratio for a sort, else "-")
		row := regexp.MustCompile(`(?m)^` + name + ` +[1-9]\d* +0 +\d+ +\S+ +\S+ +\d+\.\d\d +(\d+\.\d\d|-)$`)
		if !row.MatchString(out.String()) {
			t.Errorf("no row for %q with 0 failures:\n%s", name, &out)
		}
	}
	if !regexp.MustCompile(`cold reads: [1-9]\d* timed, in [1-9]\d* rounds over the 40 articles`).MatchString(out.String()) {
		t.Errorf("no count of the cold reads:\n%s", &out)
	}

	rdb := redisClient(p.redisAddr())
	defer rdb.Close()
	if keys := redisclienttest.Keys(t, rdb, prefix+"bench-read::*"); len(keys) > 0 {
		t.Errorf("floor keys left behind: %q", keys)
	}
}
