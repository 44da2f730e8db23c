package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/auth"
	"board/internal/progress"
)

// searchPollPage is the page size of the poller's query for the run's articles, the most the API gives.
const searchPollPage = 100

func benchSearchFreshness(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := app.NewFlagSet("bench search-freshness", `Usage: board bench search-freshness [flags]

Measures how soon the search service of a running board (started separately with board serve) finds a new article,
over HTTP only. Creates articles on a new board, each by a new user, open loop at --rate per second for --duration
from at most --workers concurrent requests; each title holds a word of the run and a word of the article's own.
One poller searches back to back for the run's word on the board, newest first, a page of 100: an article's latency
runs from its create's acknowledgement to the first answer that holds it. An article still unseen while the page
is full of newer ones is searched for by its own word. Prints the latencies, the articles never found within
--wait, and, as the floor, how long one poll takes: an article cannot be seen sooner than that after it is found.`, stderr)
	articleURL := fs.String("article-url", "http://127.0.0.1:9000", "base URL of the article service")
	searchURL := fs.String("search-url", "http://127.0.0.1:9008", "base URL of the search service")
	rate := fs.Int("rate", 200, "creates per second, sent on schedule whether or not earlier ones were answered")
	duration := fs.Duration("duration", 10*time.Second, "how long creates are sent")
	workers := fs.Int("workers", 64, "most creates in flight at once")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait after the creates for articles not yet found")
	openTokens := boardUserDBFlags(fs)
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *rate < 1 || *duration <= 0 || *workers < 1 || *wait < 0 {
		return errors.New("need --rate >= 1, --duration > 0, --workers >= 1, --wait >= 0")
	}
	if float64(*rate)*duration.Seconds() < 1 {
		return errors.New("--rate × --duration is less than one create")
	}
	tokens, closeTokens, err := openTokens(ctx, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return err
	}
	defer closeTokens()
	r := &searchFreshnessRun{
		tokens: tokens, articleURL: *articleURL, searchURL: *searchURL,
		client: &http.Client{Timeout: freshnessRequestTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: *workers}},
		board:  1_000_000_000 + rand.Int64N(1_000_000_000),
		word:   fmt.Sprintf("sf%08x", rand.Uint32()),
		// Users of their own, far from the seeds' and other benches': a running board holds each to its write rate.
		firstUser: 3_000_000_000 + rand.Int64N(1_000_000_000),
		pending:   map[int64]searchPending{},
	}
	if _, err := r.search(ctx, r.word); err != nil {
		return fmt.Errorf("the search service (is board serve running with search?): %w", err)
	}
	fmt.Fprintf(stdout, "board %d: creates at %d/s for %s from at most %d workers; run word %q; search at %s\n",
		r.board, *rate, *duration, *workers, r.word, *searchURL)

	stopPolling := r.pollUntilDone(ctx)
	defer stopPolling() // stopping twice does nothing more
	sendStart := time.Now()
	scheduled, skipped := openLoop(ctx, "creates", *rate, *duration, *workers, stderr, r.create)
	sendElapsed := time.Since(sendStart)
	waited := r.waitForPending(ctx, *wait)
	stopPolling()

	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(stdout, "creates: %d scheduled in %s, %d acknowledged (%.0f/s), %d failed, %d skipped (every worker busy)\n",
		scheduled, sendElapsed.Round(time.Millisecond), r.acknowledged, float64(r.acknowledged)/sendElapsed.Seconds(), r.failed, skipped)
	if r.firstFailure != "" {
		fmt.Fprintf(stdout, "  first failure: %s\n", r.firstFailure)
	}
	fmt.Fprintf(stdout, "%-32s %9s %10s %10s %10s %10s\n", "", "count", "p50", "p90", "p99", "max")
	printQuantiles(stdout, "floor: one poll", r.polls)
	printQuantiles(stdout, "ack to found (target p99 <= 1s)", r.latencies)
	fmt.Fprintf(stdout, "never found within %s after the creates: %d; by their own word: %d found\n", waited.Round(time.Millisecond),
		len(r.pending), r.foundByWord)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted; the figures above cover what ran: %w", err)
	}
	return nil
}

func printQuantiles(w io.Writer, name string, ds []time.Duration) {
	if len(ds) == 0 {
		fmt.Fprintf(w, "%-32s %9d %10s %10s %10s %10s\n", name, 0, "-", "-", "-", "-")
		return
	}
	sorted := slices.Sorted(slices.Values(ds))
	fmt.Fprintf(w, "%-32s %9d %10s %10s %10s %10s\n", name, len(sorted), roundDuration(percentile(sorted, 0.5)),
		roundDuration(percentile(sorted, 0.9)), roundDuration(percentile(sorted, 0.99)), roundDuration(sorted[len(sorted)-1]))
}

// openLoop calls send for 0, 1, ... (what, for the progress bar) on a fixed schedule from at most workers goroutines:
// by time t since the start,
// rate*t calls are due, whether or not the earlier ones returned. A due call that finds every worker busy and the
// queue full is skipped, so a board slower than the rate shows as a lower achieved rate, not a slipping schedule.
func openLoop(ctx context.Context, what string, rate int, duration time.Duration, workers int, stderr io.Writer,
	send func(context.Context, int64)) (scheduled, skipped int64) {
	total := int64(float64(rate) * duration.Seconds())
	jobs := make(chan int64, workers)
	bar := progress.Start(stderr, what, total)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for seq := range jobs {
				send(ctx, seq)
				bar.Add(1)
			}
		})
	}
	tick := time.NewTicker(max(time.Second/time.Duration(rate), time.Millisecond))
	start := time.Now()
	for scheduled < total && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case now := <-tick.C:
			due := min(total, int64(now.Sub(start).Seconds()*float64(rate)))
			for ; scheduled < due; scheduled++ {
				select {
				case jobs <- scheduled:
				default:
					skipped++
				}
			}
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait() // each request is bounded by the client's timeout
	bar.Finish()
	return scheduled, skipped
}

// searchFreshnessRun is the state of a run: the acknowledged articles not yet found, and the figures.
type searchFreshnessRun struct {
	tokens                *app.TokenMinter
	articleURL, searchURL string
	client                *http.Client
	board                 int64
	word                  string // in every title of the run
	firstUser             int64
	nextUser              atomic.Int64

	mu                   sync.Mutex
	pending              map[int64]searchPending // by article id
	acknowledged, failed int64
	firstFailure         string
	latencies            []time.Duration // from acknowledgement to found
	polls                []time.Duration
	foundByWord          int
}

// searchPending is an acknowledged article not yet found.
type searchPending struct {
	word      string // its own
	createdAt time.Time
	acked     time.Time
}

// articleWord is the word of the seq-th article alone.
func (r *searchFreshnessRun) articleWord(seq int64) string { return fmt.Sprintf("%sn%d", r.word, seq) }

func (r *searchFreshnessRun) create(ctx context.Context, seq int64) {
	token, err := r.tokens.Mint(auth.Principal{UserID: r.firstUser + r.nextUser.Add(1), Role: auth.RoleUser})
	var a benchArticle
	if err == nil {
		a, err = createArticle(ctx, r.client, token, r.articleURL, r.board, fmt.Sprintf("search freshness %s %s", r.word, r.articleWord(seq)))
	}
	acked := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			r.failed++
			if r.firstFailure == "" {
				r.firstFailure = err.Error()
			}
		}
		return
	}
	r.acknowledged++
	r.pending[a.id] = searchPending{word: r.articleWord(seq), createdAt: a.createdAt, acked: acked}
}

// searchHit is the part of a search result the bench reads.
type searchHit struct {
	ArticleID apijson.ID   `json:"articleId"`
	CreatedAt apijson.Time `json:"createdAt"`
}

// search returns the run board's articles that q finds, newest first, a page of searchPollPage.
func (r *searchFreshnessRun) search(ctx context.Context, q string) ([]searchHit, error) {
	u := fmt.Sprintf("%s/v1/search?q=%s&boardId=%d&sort=newest&pageSize=%d", r.searchURL, url.QueryEscape(q), r.board, searchPollPage)
	body, err := request(ctx, r.client, "", http.MethodGet, u, nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var page struct {
		Results []searchHit `json:"results"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return page.Results, nil
}

// poll searches for the run's word back to back until ctx ends, and marks found the pending articles each answer
// holds; when the page is full, the pending articles older than its oldest are searched for by their own words.
func (r *searchFreshnessRun) poll(ctx context.Context) {
	for ctx.Err() == nil {
		start := time.Now()
		hits, err := r.search(ctx, r.word)
		if err != nil {
			time.Sleep(freshnessPollBackoff)
			continue
		}
		answered := time.Now()
		r.mu.Lock()
		r.polls = append(r.polls, answered.Sub(start))
		for _, h := range hits {
			r.found(int64(h.ArticleID), answered, false)
		}
		var older []int64
		if len(hits) == searchPollPage {
			oldest := time.Time(hits[len(hits)-1].CreatedAt)
			for id, p := range r.pending {
				if p.createdAt.Before(oldest) {
					older = append(older, id)
				}
			}
		}
		r.mu.Unlock()
		for _, id := range older {
			r.mu.Lock()
			p, ok := r.pending[id]
			r.mu.Unlock()
			if !ok {
				continue
			}
			hits, _ := r.search(ctx, p.word) // a failed search finds nothing: the page's next poll tries again
			answered := time.Now()
			r.mu.Lock()
			for _, h := range hits {
				if int64(h.ArticleID) == id {
					r.found(id, answered, true)
				}
			}
			r.mu.Unlock()
		}
	}
}

// found records that article id was found at; r.mu is held.
func (r *searchFreshnessRun) found(id int64, at time.Time, byWord bool) {
	p, ok := r.pending[id]
	if !ok {
		return
	}
	delete(r.pending, id)
	r.latencies = append(r.latencies, at.Sub(p.acked))
	if byWord {
		r.foundByWord++
	}
}

// waitForPending waits until every acknowledged article is found, at most wait, and returns how long it waited.
func (r *searchFreshnessRun) waitForPending(ctx context.Context, wait time.Duration) time.Duration {
	return waitUntil(ctx, wait, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.pending) == 0
	})
}

// pollUntilDone polls in the background until the returned function is called, which waits for the last round.
func (r *searchFreshnessRun) pollUntilDone(ctx context.Context) (stop func()) {
	pollCtx, stopPolling := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		r.poll(pollCtx)
	}()
	return func() { stopPolling(); <-polled }
}
