package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBenchFreshnessAgainstARunningBoard runs the bench over HTTP against a board started as board serve: every
// acknowledged write shows up in the ranking, and in article-read, and the report has its tables.
func TestBenchFreshnessAgainstARunningBoard(t *testing.T) {
	t.Parallel()
	flags := testFlags(t, t.TempDir())
	p := startProgram(t, flags)
	for _, model := range []string{"hot-article", "article-read"} {
		t.Run(model, func(t *testing.T) { benchFreshness(t, p, flags, model) })
	}
}

func benchFreshness(t *testing.T, p *program, flags []string, model string) {
	args := []string{"bench", "freshness", "--duration", "2s", "--rate", "50", "--articles", "3",
		"--article-url", p.urls["article"], "--comment-url", p.urls["comment"], "--like-url", p.urls["like"],
		"--view-url", p.urls["view"], "--hot-article-url", p.urls["hot-article"],
		"--article-read-url", p.urls["article-read"], "--read-model", model}
	args = append(args, userDBArgs(flags)...)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), args, noEnv, &out, &errOut); err != nil {
		t.Fatalf("bench freshness: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	for _, want := range []string{
		"kind     expectations      seen        p50        p90        p99        max  never seen",
		"\nexpectations never seen: 0\n",
		"events applied over the run:",
		"consumer lag at the end:",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	if strings.Contains(out.String(), "failed: ") {
		t.Errorf("writes failed:\n%s", &out)
	}
}
