package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/auth"
)

// writeKind is one of the writes the freshness bench sends; each raises one count of the read models.
type writeKind int

const (
	kindLike writeKind = iota
	kindComment
	kindView
	kindCount
)

var kindNames = [kindCount]string{"like", "comment", "view"}

const (
	// freshnessRequestTimeout bounds every request of the bench: past the board's own deadline (5 s by default),
	// so that a slow answer is still counted as what the board said.
	freshnessRequestTimeout = 10 * time.Second
	// freshnessPollBackoff spaces polls after a failed one, so that a failing hot-article service is not hammered.
	freshnessPollBackoff = 100 * time.Millisecond
	// viewPublishEvery is how often the view service publishes a view count (SPEC §3.4): only those counts reach
	// the ranking.
	viewPublishEvery = 100
	// hotListSize is how many articles a day's list shows (SPEC §3.5).
	hotListSize = 10
)

func benchFreshness(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := app.NewFlagSet("bench freshness", `Usage: board bench freshness [flags]

Measures how soon a read model of a running board (started separately with board serve) shows writes, over HTTP
only: the hot-article ranking (--read-model hot-article) or article-read (--read-model article-read). Creates
--articles new articles on a random board, then sends likes, comments and views of them, each by a new user, open
loop at --rate per second for --duration, from at most --workers concurrent requests. Each acknowledged write sets
an expectation: after the i-th acknowledged like of an article, its like count is at least i; likewise comments; a
view only when the count it returns is a multiple of 100, the counts the view service publishes (article-read
refreshes view counts once a second). One poller reads back to back the ranking of the articles' day, or
article-read's first page of their board; an expectation's latency runs from the write's acknowledgement to the
first response that shows it. Prints the latencies, the expectations never seen, and the read model's consumer's
rate and lag from its /metrics.`, stderr)
	articleURL := fs.String("article-url", "http://127.0.0.1:9000", "base URL of the article service")
	commentURL := fs.String("comment-url", "http://127.0.0.1:9001", "base URL of the comment service")
	likeURL := fs.String("like-url", "http://127.0.0.1:9002", "base URL of the like service")
	viewURL := fs.String("view-url", "http://127.0.0.1:9003", "base URL of the view service")
	hotURL := fs.String("hot-article-url", "http://127.0.0.1:9004", "base URL of the hot-article service")
	readURL := fs.String("article-read-url", "http://127.0.0.1:9005", "base URL of the article-read service")
	readModel := fs.String("read-model", "hot-article", "what the poller reads: hot-article or article-read")
	rate := fs.Int("rate", 500, "writes per second, sent on schedule whether or not earlier ones were answered")
	duration := fs.Duration("duration", 10*time.Second, "how long writes are sent")
	articles := fs.Int("articles", 8, "articles written to, at most 10 so that all of them fit in the day's list")
	workers := fs.Int("workers", 64, "most requests in flight at once")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait after the writes for expectations not yet seen")
	topicPrefix := fs.String("topic-prefix", "board-", "the board's --topic-prefix, which names the read model's consumer group")
	openTokens := boardUserDBFlags(fs)
	loc, zoneGiven := time.Local, false
	fs.Func("time-zone", "the board's --hot-article-time-zone: the list read is the articles' creation day in it (default $BOARD_HOT_ARTICLE_TIME_ZONE, else the machine's)",
		func(v string) (err error) { zoneGiven = true; loc, err = time.LoadLocation(v); return err })
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *rate < 1 || *duration <= 0 || *articles < 1 || *articles > hotListSize || *workers < 1 || *wait < 0 {
		return fmt.Errorf("need --rate >= 1, --duration > 0, 1 <= --articles <= %d, --workers >= 1, --wait >= 0", hotListSize)
	}
	if *readModel != "hot-article" && *readModel != "article-read" {
		return fmt.Errorf("--read-model is hot-article or article-read, not %q", *readModel)
	}
	if float64(*rate)*duration.Seconds() < 1 {
		return errors.New("--rate × --duration is less than one write")
	}
	if v := getenv("BOARD_HOT_ARTICLE_TIME_ZONE"); !zoneGiven && v != "" {
		var err error
		if loc, err = time.LoadLocation(v); err != nil {
			return fmt.Errorf("BOARD_HOT_ARTICLE_TIME_ZONE=%q: %w", v, err)
		}
	}

	tokens, closeTokens, err := openTokens(ctx, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return err
	}
	defer closeTokens()
	r := &freshnessRun{
		tokens: tokens,
		urls:   [kindCount]string{kindLike: *likeURL, kindComment: *commentURL, kindView: *viewURL},
		// One kept-alive connection per worker: the default keeps 2 and would open a connection per request.
		client: &http.Client{Timeout: freshnessRequestTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: *workers}},
		group:  *topicPrefix + *readModel,
	}
	metricsURL := *hotURL + "/metrics"
	if *readModel == "article-read" {
		metricsURL = *readURL + "/metrics"
	}
	before, beforeErr := readConsumerMetrics(ctx, r.client, metricsURL, r.group)
	beforeAt := time.Now()

	board := 1_000_000_000 + rand.Int64N(1_000_000_000)
	writer, err := r.tokens.Mint(auth.Principal{UserID: benchWriter, Role: auth.RoleUser})
	if err != nil {
		return err
	}
	for i := range *articles {
		a, err := createArticle(ctx, r.client, writer, *articleURL, board, fmt.Sprintf("freshness bench %d", i+1))
		if err != nil {
			return fmt.Errorf("create article %d of %d (is board serve running?): %w", i+1, *articles, err)
		}
		a.day = a.createdAt.In(loc).Format("20060102")
		r.articles = append(r.articles, a)
	}
	days := r.days()
	read := r.hotList(*hotURL + "/v1/hot-articles/articles/date/")
	if *readModel == "article-read" {
		// One list: the board's first page, which holds every article of the bench.
		for i := range r.articles {
			r.articles[i].day = "page 1"
		}
		days = r.days()
		read = boardPage(r.client, fmt.Sprintf("%s/v1/articles?boardId=%d&page=1&pageSize=%d", *readURL, board, *articles))
		fmt.Fprintf(stdout, "%d articles on board %d, read from article-read's page 1; writes at %d/s for %s from at most %d workers\n",
			len(r.articles), board, *rate, *duration, *workers)
	} else {
		fmt.Fprintf(stdout, "%d articles on board %d, created on %s in %s; writes at %d/s for %s from at most %d workers\n",
			len(r.articles), board, strings.Join(days, " and "), loc, *rate, *duration, *workers)
		if err := r.warnOfCompetition(ctx, *hotURL+"/v1/hot-articles/articles/date/", days, stdout); err != nil {
			return fmt.Errorf("read the hot-article list (is the hot-article service running?): %w", err)
		}
	}

	pollCtx, stopPolling := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		r.poll(pollCtx, read, days)
	}()
	defer func() { stopPolling(); <-polled }()

	sendStart := time.Now()
	scheduled, skipped := r.sendWrites(ctx, *rate, *duration, *workers, stderr)
	sendElapsed := time.Since(sendStart)
	during, duringErr := readConsumerMetrics(ctx, r.client, metricsURL, r.group)
	duringAt := time.Now()

	waited := r.waitForPending(ctx, *wait)
	stopPolling()
	<-polled

	// After Ctrl-C the figures are still worth reading: the last metrics get a deadline of their own.
	finalCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), freshnessRequestTimeout)
	defer cancel()
	after, afterErr := readConsumerMetrics(finalCtx, r.client, metricsURL, r.group)
	afterAt := time.Now()

	r.reportWrites(stdout, ctx.Err() != nil, *rate, *duration, scheduled, skipped, sendElapsed)
	r.reportLatencies(stdout, ctx.Err() != nil, waited)
	reportConsumer(stdout, r.group, metricsURL, consumerSnapshot{before, beforeAt, beforeErr},
		consumerSnapshot{during, duringAt, duringErr}, consumerSnapshot{after, afterAt, afterErr})
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted; the figures above cover what ran: %w", err)
	}
	return nil
}

// consumerSnapshot is the consumer group's metrics read at one time, or why they could not be read.
type consumerSnapshot struct {
	m   consumerMetrics
	at  time.Time
	err error
}

// reportConsumer prints what the read model's consumer did between the snapshots before the writes, at their end,
// and after the wait for the expectations not yet seen.
func reportConsumer(w io.Writer, group, metricsURL string, before, during, after consumerSnapshot) {
	fmt.Fprintf(w, "consumer group %s (from %s):\n", group, metricsURL)
	switch {
	case before.err != nil:
		fmt.Fprintf(w, "  no figures: reading the metrics before the run failed: %v\n", before.err)
	case after.err != nil:
		fmt.Fprintf(w, "  no figures: reading the metrics after the run failed: %v\n", after.err)
	default:
		applied := func(label string, until consumerSnapshot) {
			n, d := until.m.consumed-before.m.consumed, until.at.Sub(before.at)
			fmt.Fprintf(w, "  %-30s %8.0f in %s: %.0f/s\n", label, n, roundDuration(d), n/d.Seconds())
		}
		if during.err == nil {
			applied("events applied while writing:", during)
		}
		applied("events applied over the run:", after)
		fmt.Fprintf(w, "  consumer lag at the end:       %8.0f records\n", after.m.lag)
		if age, ok := after.m.eventAge.minus(before.m.eventAge); ok && age.count > 0 {
			fmt.Fprintf(w, "  event age when applied:        p50 %s, p99 %s over %.0f events (board_event_age_seconds, interpolated in its buckets)\n",
				age.quantile(0.5), age.quantile(0.99), age.count)
		}
	}
}

// benchArticle is one of the articles the bench writes to.
type benchArticle struct {
	id        int64
	createdAt time.Time
	day       string // yyyyMMdd of its creation in the board's hot-article time zone: the list it competes in
}

// expectation is what an acknowledged write guarantees the read model shows from then on: a count of at least atLeast.
type expectation struct {
	article int // index into freshnessRun.articles
	kind    writeKind
	atLeast int64
	acked   time.Time
}

// writeStats counts one kind of write.
type writeStats struct {
	sent, acked, failed, interrupted, expected int64
}

// failure is one class of failed write (a kind and a status or error class), with the first message seen.
type failure struct {
	count int
	first string
}

// failures counts a run's errors by class, each with the first one's text.
type failures map[string]*failure

// add counts err under key.
func (fs *failures) add(key string, err error) {
	if *fs == nil {
		*fs = failures{}
	}
	f := (*fs)[key]
	if f == nil {
		f = &failure{first: err.Error()}
		(*fs)[key] = f
	}
	f.count++
}

// waitUntil checks done every 10 ms until it holds, wait has passed or ctx is done, and returns how long it waited.
func waitUntil(ctx context.Context, wait time.Duration, done func() bool) time.Duration {
	start := time.Now()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	check := time.NewTicker(10 * time.Millisecond)
	defer check.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-deadline.C:
			return time.Since(start)
		case <-check.C:
		}
	}
	return time.Since(start)
}

// freshnessRun is the state of one freshness bench: the writes acknowledged, the expectations they set, and the
// latencies of those the poller has seen.
type freshnessRun struct {
	urls     [kindCount]string
	client   *http.Client
	tokens   *app.TokenMinter // of the users the writes act for
	group    string
	articles []benchArticle
	nextUser atomic.Int64

	mu        sync.Mutex
	stats     [kindCount]writeStats
	counts    map[int][kindCount]int64 // acknowledged likes and comments per article
	pending   []expectation
	latencies [kindCount][]time.Duration
	failures  failures
	inList    map[int]bool // bench articles in the last successful poll of their day

	// Written by the poller only, read after it stopped.
	pollRoundTrips []time.Duration
	pollFailures   int
	lastPollError  string
}

func (r *freshnessRun) days() []string {
	var days []string
	for _, a := range r.articles {
		if !slices.Contains(days, a.day) {
			days = append(days, a.day)
		}
	}
	return days
}

// sendWrites dispatches writes on a fixed schedule (openLoop).
func (r *freshnessRun) sendWrites(ctx context.Context, rate int, duration time.Duration, workers int, stderr io.Writer) (scheduled, skipped int64) {
	return openLoop(ctx, "writes", rate, duration, workers, stderr, r.write)
}

// write sends write number seq: the writes go round the articles, and round the kinds once per round of articles.
func (r *freshnessRun) write(ctx context.Context, seq int64) {
	article := int(seq % int64(len(r.articles)))
	kind := writeKind(seq / int64(len(r.articles)) % int64(kindCount))
	id, user := r.articles[article].id, r.nextUser.Add(1)
	r.mu.Lock()
	r.stats[kind].sent++
	r.mu.Unlock()
	var count int64
	token, err := r.tokens.Mint(auth.Principal{UserID: user, Role: auth.RoleUser})
	switch {
	case err != nil:
	case kind == kindLike:
		_, err = request(ctx, r.client, token, http.MethodPost, fmt.Sprintf("%s/v1/article-likes/articles/%d/users/%d", r.urls[kind], id, user), nil, http.StatusCreated)
	case kind == kindComment:
		_, err = request(ctx, r.client, token, http.MethodPost, r.urls[kind]+"/v2/comments",
			map[string]any{"articleId": apijson.ID(id), "content": "freshness bench"}, http.StatusCreated)
	case kind == kindView:
		var body []byte
		body, err = request(ctx, r.client, token, http.MethodPost, fmt.Sprintf("%s/v1/article-views/articles/%d/users/%d", r.urls[kind], id, user), nil, http.StatusOK)
		if err == nil {
			count, err = strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
		}
	}
	r.acknowledge(ctx, article, kind, count, err)
}

// acknowledge records a write's outcome and, when it was acknowledged, the expectation it sets. The ack time is
// taken under the lock, so that the acknowledgements are numbered in the order of their times: when the i-th was
// acknowledged, all i writes were done.
func (r *freshnessRun) acknowledge(ctx context.Context, article int, kind writeKind, viewCount int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &r.stats[kind]
	if err != nil {
		if ctx.Err() != nil {
			st.interrupted++
			return
		}
		st.failed++
		r.noteFailure(kind, err)
		return
	}
	st.acked++
	at := time.Now()
	atLeast := viewCount
	if kind == kindView {
		if viewCount == 0 || viewCount%viewPublishEvery != 0 {
			return
		}
	} else {
		if r.counts == nil {
			r.counts = map[int][kindCount]int64{}
		}
		c := r.counts[article]
		c[kind]++
		r.counts[article] = c
		atLeast = c[kind]
	}
	st.expected++
	r.pending = append(r.pending, expectation{article: article, kind: kind, atLeast: atLeast, acked: at})
}

// noteFailure counts a failed write by kind and class (status, timeout, other), keeping the class's first message.
func (r *freshnessRun) noteFailure(kind writeKind, err error) {
	class := "error"
	var status *statusError
	var netErr net.Error
	switch {
	case errors.As(err, &status):
		class = fmt.Sprintf("HTTP %d", status.code)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		class = "timeout"
	}
	r.failures.add(kindNames[kind]+" "+class, err)
}

// warnOfCompetition reads the lists of days once before the writes, and says when other articles already score
// above 0 there: the bench's articles, which start at 0, are then shown only once their scores pass enough of
// those, and the latencies of the writes before include that climb.
func (r *freshnessRun) warnOfCompetition(ctx context.Context, listURL string, days []string, w io.Writer) error {
	for _, day := range days {
		body, err := request(ctx, r.client, "", http.MethodGet, listURL+day, nil, http.StatusOK)
		if err != nil {
			return err
		}
		var list []struct {
			ArticleID apijson.ID `json:"articleId"`
			Score     int64      `json:"score"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return fmt.Errorf("GET %s%s: %w", listURL, day, err)
		}
		ours := 0
		for _, a := range r.articles {
			if a.day == day {
				ours++
			}
		}
		scoring, highest := 0, int64(0)
		for _, e := range list {
			if e.Score > 0 && !slices.ContainsFunc(r.articles, func(a benchArticle) bool { return a.id == int64(e.ArticleID) }) {
				scoring++
				highest = max(highest, e.Score)
			}
		}
		if scoring > hotListSize-ours {
			fmt.Fprintf(w, "warning: %s other articles of %s already score above 0 (the highest %d): the bench's articles are shown "+
				"only as their scores pass them, and the latencies of the writes before include that climb\n",
				atLeastIfFull(scoring, len(list)), day, highest)
		}
	}
	return nil
}

// atLeastIfFull writes a count taken from a full list, which may have been cut at the list's size.
func atLeastIfFull(n, listed int) string {
	if listed >= hotListSize {
		return fmt.Sprintf("at least %d", n)
	}
	return strconv.Itoa(n)
}

// hotEntry is what the bench reads of an article in a read model: its counts.
type hotEntry struct {
	ArticleID    apijson.ID `json:"articleId"`
	LikeCount    int64      `json:"likeCount"`
	CommentCount int64      `json:"commentCount"`
	ViewCount    int64      `json:"viewCount"`
}

// readList reads one list of a read model: a day of the ranking, or article-read's page.
type readList func(ctx context.Context, list string) ([]hotEntry, error)

// hotList reads the ranking of a day.
func (r *freshnessRun) hotList(listURL string) readList {
	return func(ctx context.Context, day string) ([]hotEntry, error) {
		body, err := request(ctx, r.client, "", http.MethodGet, listURL+day, nil, http.StatusOK)
		var list []hotEntry
		if err == nil {
			err = json.Unmarshal(body, &list)
		}
		return list, err
	}
}

// boardPage reads a page of article-read.
func boardPage(client *http.Client, pageURL string) readList {
	return func(ctx context.Context, _ string) ([]hotEntry, error) {
		body, err := request(ctx, client, "", http.MethodGet, pageURL, nil, http.StatusOK)
		var page struct {
			Articles []struct {
				ArticleID    apijson.ID `json:"articleId"`
				LikeCount    int64      `json:"articleLikeCount"`
				CommentCount int64      `json:"articleCommentCount"`
				ViewCount    int64      `json:"articleViewCount"`
			} `json:"articles"`
		}
		if err == nil {
			err = json.Unmarshal(body, &page)
		}
		list := make([]hotEntry, len(page.Articles))
		for i, a := range page.Articles {
			list[i] = hotEntry(a)
		}
		return list, err
	}
}

// poll reads the lists one request at a time, back to back, until ctx is done, and resolves the pending
// expectations each response satisfies.
func (r *freshnessRun) poll(ctx context.Context, read readList, days []string) {
	for ctx.Err() == nil {
		for _, day := range days {
			start := time.Now()
			list, err := read(ctx, day)
			arrived := time.Now()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				r.pollFailures++
				r.lastPollError = err.Error()
				select {
				case <-ctx.Done():
				case <-time.After(freshnessPollBackoff):
				}
				continue
			}
			r.pollRoundTrips = append(r.pollRoundTrips, arrived.Sub(start))
			r.resolve(day, list, arrived)
		}
	}
}

// resolve settles the pending expectations a list of day, received at arrived, shows. A response that arrived
// before a write was acknowledged does not count for it: the latency is from the ack to a response after it.
func (r *freshnessRun) resolve(day string, list []hotEntry, arrived time.Time) {
	shown := make(map[int64][kindCount]int64, len(list))
	for _, e := range list {
		shown[int64(e.ArticleID)] = [kindCount]int64{kindLike: e.LikeCount, kindComment: e.CommentCount, kindView: e.ViewCount}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inList == nil {
		r.inList = map[int]bool{}
	}
	for i, a := range r.articles {
		if a.day == day {
			_, r.inList[i] = shown[a.id]
		}
	}
	kept := r.pending[:0]
	for _, e := range r.pending {
		counts, ok := shown[r.articles[e.article].id]
		if ok && r.articles[e.article].day == day && !arrived.Before(e.acked) && counts[e.kind] >= e.atLeast {
			r.latencies[e.kind] = append(r.latencies[e.kind], arrived.Sub(e.acked))
			continue
		}
		kept = append(kept, e)
	}
	r.pending = kept
}

// waitForPending waits until every expectation is seen, at most wait (or until ctx is done), and returns how
// long it waited.
func (r *freshnessRun) waitForPending(ctx context.Context, wait time.Duration) time.Duration {
	return waitUntil(ctx, wait, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.pending) == 0
	})
}

func (r *freshnessRun) reportWrites(w io.Writer, interrupted bool, rate int, duration time.Duration, scheduled, skipped int64, elapsed time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(w, "\n%-8s %9s %9s %9s %12s\n", "writes", "sent", "acked", "failed", "interrupted")
	var total writeStats
	for k, st := range r.stats {
		fmt.Fprintf(w, "%-8s %9d %9d %9d %12d\n", kindNames[k], st.sent, st.acked, st.failed, st.interrupted)
		total.sent += st.sent
		total.acked += st.acked
		total.failed += st.failed
		total.interrupted += st.interrupted
	}
	fmt.Fprintf(w, "%-8s %9d %9d %9d %12d\n", "all", total.sent, total.acked, total.failed, total.interrupted)
	achieved := float64(total.acked) / elapsed.Seconds()
	fmt.Fprintf(w, "scheduled %d writes at %d/s over %s; acknowledged %.0f/s over %s\n", scheduled, rate, duration,
		achieved, roundDuration(elapsed))
	if skipped > 0 || (!interrupted && achieved < 0.95*float64(rate)) {
		fmt.Fprintf(w, "the workers could not keep up with --rate: %d due writes were skipped with every worker busy (raise --workers, or the board is slower than %d/s)\n",
			skipped, rate)
	}
	keys := make([]string, 0, len(r.failures))
	for k := range r.failures {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "failed: %s ×%d (first: %s)\n", k, r.failures[k].count, r.failures[k].first)
	}
}

func (r *freshnessRun) reportLatencies(w io.Writer, interrupted bool, waited time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rtt := "none"
	if len(r.pollRoundTrips) > 0 {
		sorted := slices.Sorted(slices.Values(r.pollRoundTrips))
		rtt = roundDuration(percentile(sorted, 0.5))
	}
	fmt.Fprintf(w, "\nack -> visible in the read model: from a write's acknowledgement to the first list response showing it;\n"+
		"resolution one poll round trip (median %s over %d polls, %d failed)\n", rtt, len(r.pollRoundTrips), r.pollFailures)
	if r.pollFailures > 0 {
		fmt.Fprintf(w, "last poll failure: %s\n", r.lastPollError)
	}
	fmt.Fprintf(w, "%-8s %12s %9s %10s %10s %10s %10s %11s\n", "kind", "expectations", "seen", "p50", "p90", "p99", "max", "never seen")
	var all []time.Duration
	var expected int64
	for k := range kindCount {
		all = append(all, r.latencies[k]...)
		expected += r.stats[k].expected
		printLatencyRow(w, kindNames[k], r.stats[k].expected, r.latencies[k])
	}
	printLatencyRow(w, "all", expected, all)
	neverSeen := len(r.pending)
	fmt.Fprintf(w, "expectations never seen: %d", neverSeen)
	switch {
	case neverSeen > 0 && interrupted:
		fmt.Fprint(w, " (interrupted)")
	case neverSeen > 0:
		fmt.Fprintf(w, " (after waiting %s after the writes)", roundDuration(waited))
	}
	fmt.Fprintln(w)
	if neverSeen == 0 {
		return
	}
	var missing []string
	for i, a := range r.articles {
		if !r.inList[i] {
			missing = append(missing, strconv.FormatInt(a.id, 10))
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(w, "%d of the bench's %d articles were not in the last list of their day (%s): the day has %d articles with higher scores, "+
			"or --time-zone is not the board's --hot-article-time-zone, or the consumer is behind\n",
			len(missing), len(r.articles), strings.Join(missing, ", "), hotListSize)
	}
}

func printLatencyRow(w io.Writer, kind string, expected int64, latencies []time.Duration) {
	sorted := slices.Sorted(slices.Values(latencies))
	never := expected - int64(len(sorted))
	if len(sorted) == 0 {
		fmt.Fprintf(w, "%-8s %12d %9d %10s %10s %10s %10s %11d\n", kind, expected, 0, "-", "-", "-", "-", never)
		return
	}
	fmt.Fprintf(w, "%-8s %12d %9d %10s %10s %10s %10s %11d\n", kind, expected, len(sorted),
		roundDuration(percentile(sorted, 0.5)), roundDuration(percentile(sorted, 0.9)),
		roundDuration(percentile(sorted, 0.99)), roundDuration(sorted[len(sorted)-1]), never)
}

// percentile is the nearest-rank p-th percentile of sorted, which is not empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// roundDuration keeps about three significant digits.
func roundDuration(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

func createArticle(ctx context.Context, client *http.Client, token, base string, board int64, title string) (benchArticle, error) {
	body, err := request(ctx, client, token, http.MethodPost, base+"/v1/articles",
		map[string]any{"title": title, "content": "written by board bench freshness", "boardId": apijson.ID(board)},
		http.StatusCreated)
	if err != nil {
		return benchArticle{}, err
	}
	var a struct {
		ArticleID apijson.ID   `json:"articleId"`
		CreatedAt apijson.Time `json:"createdAt"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return benchArticle{}, fmt.Errorf("POST %s/v1/articles: %w", base, err)
	}
	return benchArticle{id: int64(a.ArticleID), createdAt: time.Time(a.CreatedAt)}, nil
}

// statusError is an answer with a status other than the one expected.
type statusError struct {
	method, url string
	code        int
	body        string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s %s", e.method, e.url, e.code, http.StatusText(e.code), e.body)
}

// request makes a request with an optional JSON body and access token ("" for none), and returns the answer's body,
// or an error when the answer's status is not want.
func request(ctx context.Context, client *http.Client, token, method, url string, in any, want int) ([]byte, error) {
	var reqBody io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		reqBody = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, reqBody)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer: %w", method, url, err)
	}
	if resp.StatusCode != want {
		return nil, &statusError{method: method, url: url, code: resp.StatusCode, body: strings.TrimSpace(string(body))}
	}
	return body, nil
}

// consumerMetrics are a consumer group's series on a service's /metrics, summed over topics and partitions.
type consumerMetrics struct {
	consumed float64 // board_events_consumed_total
	lag      float64 // board_consumer_lag
	eventAge histogram
}

// histogram is a Prometheus histogram summed over series: cumulative counts by upper bound, and the total count.
type histogram struct {
	buckets map[float64]float64
	count   float64
}

func readConsumerMetrics(ctx context.Context, client *http.Client, url, group string) (consumerMetrics, error) {
	body, err := request(ctx, client, "", http.MethodGet, url, nil, http.StatusOK)
	if err != nil {
		return consumerMetrics{}, err
	}
	return parseConsumerMetrics(bytes.NewReader(body), group)
}

// parseConsumerMetrics reads group's series from the Prometheus text exposition format.
func parseConsumerMetrics(in io.Reader, group string) (consumerMetrics, error) {
	m := consumerMetrics{eventAge: histogram{buckets: map[float64]float64{}}}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, err := parseSample(line)
		if err != nil {
			return consumerMetrics{}, err
		}
		if labels["group"] != group {
			continue
		}
		switch name {
		case "board_events_consumed_total":
			m.consumed += value
		case "board_consumer_lag":
			m.lag += value
		case "board_event_age_seconds_count":
			m.eventAge.count += value
		case "board_event_age_seconds_bucket":
			le, err := strconv.ParseFloat(labels["le"], 64)
			if err != nil {
				return consumerMetrics{}, fmt.Errorf("metrics: bucket bound in %q: %w", line, err)
			}
			m.eventAge.buckets[le] += value
		}
	}
	if err := sc.Err(); err != nil {
		return consumerMetrics{}, fmt.Errorf("read metrics: %w", err)
	}
	return m, nil
}

// parseSample reads one sample line of the text format: name{label="value",...} value [timestamp]. Label values
// may hold escaped quotes, backslashes and newlines, and any other character.
func parseSample(line string) (name string, labels map[string]string, value float64, err error) {
	bad := func(why string) error { return fmt.Errorf("metrics: %s in %q", why, line) }
	end := strings.IndexAny(line, "{ ")
	if end <= 0 {
		return "", nil, 0, bad("no value")
	}
	name, rest := line[:end], line[end:]
	labels = map[string]string{}
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq <= 0 {
				return "", nil, 0, bad("malformed labels")
			}
			label := rest[:eq]
			rest = rest[eq+2:]
			var v strings.Builder
			closed := false
			for i := 0; i < len(rest); i++ {
				c := rest[i]
				if c == '"' {
					rest, closed = rest[i+1:], true
					break
				}
				if c == '\\' && i+1 < len(rest) {
					i++
					c = rest[i]
					if c == 'n' {
						c = '\n'
					}
				}
				v.WriteByte(c)
			}
			if !closed {
				return "", nil, 0, bad("unterminated label value")
			}
			labels[label] = v.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, 0, bad("no value")
	}
	value, err = strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", nil, 0, bad("bad value")
	}
	return name, labels, value, nil
}

// minus is the histogram of the observations made since earlier; false when there are none to compare.
func (h histogram) minus(earlier histogram) (histogram, bool) {
	if len(h.buckets) == 0 {
		return histogram{}, false
	}
	d := histogram{buckets: make(map[float64]float64, len(h.buckets)), count: h.count - earlier.count}
	for le, c := range h.buckets {
		d.buckets[le] = c - earlier.buckets[le]
	}
	return d, true
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile does: linearly inside the bucket that holds
// it. Past the largest finite bound it can only say "above" that bound.
func (h histogram) quantile(q float64) string {
	bounds := slices.Sorted(func(yield func(float64) bool) {
		for le := range h.buckets {
			if !math.IsInf(le, 1) && !yield(le) {
				return
			}
		}
	})
	rank := q * h.count
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		c := h.buckets[le]
		if c >= rank {
			frac := 0.0
			if c > below {
				frac = (rank - below) / (c - below)
			}
			return roundDuration(time.Duration((lower + (le-lower)*frac) * float64(time.Second)))
		}
		lower, below = le, c
	}
	return "> " + roundDuration(time.Duration(lower*float64(time.Second)))
}
