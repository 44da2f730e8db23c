package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"board/internal/polltest"
	"board/internal/search"
)

// The bench runs end to end on a tiny corpus, prints every figure, and removes its index.
func TestBenchSearchRuns(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	err := Command(context.Background(), []string{"search", "--articles", "300", "--batch", "100", "--queries", "20",
		"--clients", "2", "--duration", "100ms", "--warmup", "0", "--wrk", "", "--dir", dir}, func(string) string { return "" },
		&stdout, &stderr)
	if err != nil {
		t.Fatalf("bench search: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"floor: analyzed", "indexed (Put)", "floor /healthz", "http relevance",
		"http newest", "direct relevance", "direct newest", "http zipf, cached", "requests searched the index",
		"one batch's Put", "floor: queued to in the index", "create to found (target p99 <= 1s)", "never found within", "VmRSS", "VmHWM", "wrk -t"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "first failure") || !strings.Contains(out, "after the creates: 0;") {
		t.Errorf("a query failed, or a new article was never found:\n%s", out)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) > 0 {
		t.Errorf("the index's directory is left in --dir: %v %v", left, err)
	}
}

// An index kept with --keep runs its queries again with --index, without indexing, on the corpus it was made of; a
// corpus flag that disagrees with it is refused.
func TestBenchSearchIndexReused(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := Command(context.Background(), append([]string{"search", "--queries", "20", "--clients", "2",
			"--duration", "100ms", "--warmup", "0", "--wrk", ""}, args...), func(string) string { return "" }, &stdout, &stderr)
		return stdout.String() + stderr.String(), err
	}
	out, err := run("--articles", "300", "--batch", "100", "--seed", "5", "--dir", dir, "--keep")
	if err != nil {
		t.Fatalf("bench search --keep: %v\n%s", err, out)
	}
	kept, err := os.ReadDir(dir)
	if err != nil || len(kept) != 1 {
		t.Fatalf("--keep left %v, %v in --dir; want one directory", kept, err)
	}
	index := filepath.Join(dir, kept[0].Name())
	out, err = run("--index", index)
	if err != nil {
		t.Fatalf("bench search --index: %v\n%s", err, out)
	}
	for _, want := range []string{"300 articles", "seed 5", "indexing: skipped", "http relevance"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "indexed (Put)") || strings.Contains(out, "first failure") {
		t.Errorf("--index indexed again, or a query failed:\n%s", out)
	}
	if _, err := os.Stat(index); err != nil {
		t.Errorf("--index removed the index: %v", err)
	}
	if out, err := run("--index", index, "--seed", "6"); err == nil || !strings.Contains(err.Error(), "--seed 6") {
		t.Errorf("--index with another --seed: %v\n%s", err, out)
	}
	if out, err := run("--index", t.TempDir()); err == nil {
		t.Errorf("--index of a directory no run kept: no error\n%s", out)
	}
}

// The corpus is the same whoever generates it, of the lengths asked, in both languages, and its queries find it.
func TestSearchCorpus(t *testing.T) {
	c := newCorpus(7, 200, 5, 50, 0.5)
	var korean int
	for i := range c.articles {
		d := c.article(i)
		if again := c.article(i); again != d {
			t.Fatalf("article %d differs between two generations", i)
		}
		if n := utf8.RuneCountInString(d.Title); n < 10 || n > 60 {
			t.Errorf("article %d: title of %d characters, want 10 to 60: %q", i, n, d.Title)
		}
		if n := utf8.RuneCountInString(d.Content); n < 300 || n > 1600 {
			t.Errorf("article %d: content of %d characters, want 300 to 1500 and a sentence", i, n)
		}
		if d.BoardID < 1 || d.BoardID > 5 || d.WriterID < 1 || d.WriterID > 50 {
			t.Errorf("article %d: board %d, writer %d; want 1..5, 1..50", i, d.BoardID, d.WriterID)
		}
		if hasHangul(d.Content) {
			korean++
		}
	}
	if korean < 60 || korean > 140 {
		t.Errorf("%d of 200 articles are Korean, want about half", korean)
	}
	// A particle takes the form that follows the noun's last sound: 게시판 ends in a consonant, 사과 in a vowel.
	r := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		if p := particle(r, "게시판"); slices.Contains([]string{"는", "가", "를", "와", "로", "랑"}, p) {
			t.Errorf("게시판 takes %s, a form that follows a vowel", p)
		}
		if p := particle(r, "사과"); slices.Contains([]string{"은", "이", "을", "과", "으로", "이랑"}, p) {
			t.Errorf("사과 takes %s, a form that follows a consonant", p)
		}
	}
	for _, q := range c.queries(7, 50) {
		if got := len(search.Terms(q.text)); got != q.words {
			t.Errorf("query %q has %d terms, want %d", q.text, got, q.words)
		}
	}
}

func hasHangul(s string) bool {
	for _, r := range s {
		if r >= 0xAC00 && r <= 0xD7A3 {
			return true
		}
	}
	return false
}

// The poller finds the articles its page of the run's word shows, and those older than a full page by their own
// words; an article the search service lacks stays pending.
func TestSearchFreshnessPoll(t *testing.T) {
	const run = "sfrun"
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var indexed []int64 // article ids 1..150, oldest first, created a second apart
	for id := int64(1); id <= 150; id++ {
		indexed = append(indexed, id)
	}
	hit := func(id int64) map[string]any {
		return map[string]any{"articleId": fmt.Sprint(id), "createdAt": start.Add(time.Duration(id) * time.Second).Format(time.RFC3339Nano)}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		var results []map[string]any
		if q == run {
			for i := len(indexed) - 1; i >= 0 && len(results) < searchPollPage; i-- {
				results = append(results, hit(indexed[i]))
			}
		} else if id, err := strconv.ParseInt(strings.TrimPrefix(q, run+"n"), 10, 64); err == nil && slices.Contains(indexed, id) {
			results = append(results, hit(id))
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": results, "count": len(results)})
	}))
	defer srv.Close()

	r := &searchFreshnessRun{searchURL: srv.URL, client: srv.Client(), board: 1, word: run, pending: map[int64]searchPending{}}
	for _, id := range []int64{1, 150, 151} { // beyond the page, on it, and never indexed
		r.pending[id] = searchPending{word: r.articleWord(id), createdAt: start.Add(time.Duration(id) * time.Second), acked: time.Now()}
	}
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() { defer close(polled); r.poll(ctx) }()
	polltest.Until(t, 10*time.Second, func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.pending) == 1, fmt.Sprintf("pending %v", r.pending)
	})
	cancel()
	<-polled
	if _, ok := r.pending[151]; !ok || len(r.latencies) != 2 || r.foundByWord != 1 {
		t.Errorf("pending %v, %d latencies, %d found by word; want 151 pending, 2 latencies, 1 by word", r.pending, len(r.latencies), r.foundByWord)
	}
}
