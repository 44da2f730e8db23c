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
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/auth"
	"board/internal/notification"
	"board/internal/progress"
)

const (
	// streamReconnectDelay spaces the reopenings of a stream that ended, as EventSource's retry does.
	streamReconnectDelay = 100 * time.Millisecond
	// floorEvery spaces the floor's calls: enough samples, and too few to load the instances.
	floorEvery = 20 * time.Millisecond
)

func benchNotifications(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := app.NewFlagSet("bench notifications", `Usage: board bench notifications [flags]

Measures the notification service of a running board over HTTP only, in two phases, run in this order (--phase
delivery, streams or both): one command prints both targets of the notifications issue, and either runs alone.

delivery: writes an article for each of --users new users, and opens a stream (GET /v1/notifications/stream) for
each, spread round the --notification-urls; then the run's users comment on each other's articles, open loop at
--rate per second for --duration from at most --workers concurrent requests. A comment's latency runs from its
create's acknowledgement (and from its send) to the notification event that names it on its article's writer's
stream. Prints p50/p90/p99/max, by instance of the stream too, the comments never delivered within --wait, any
notification that came twice, and as the floor the round trip of GET /v1/notifications/unread-count from the
same client, sampled every 20ms during the run; and the rate and lag of the notification service's consumer,
summed over the instances' /metrics.

streams: opens --streams streams to the first of --notification-urls, --streams-per-user per user (the service's
--max-streams-per-user is 8), --workers opening at once, holds them for --hold and reads the instance's /metrics
before and after: heap and stacks in use, resident memory and goroutines, per stream. The figures are the whole
process's, and the heap counts garbage not yet collected (Go collects at least every 2 minutes: a --hold past that
shows a collected heap); after closing, net/http keeps the streams' buffers in its pools until a second collection. Then one comment on an article of the first stream's user must reach all that user's
streams while every stream is open. This process holds a socket per stream and so does the server: raise both
descriptor limits (ulimit -n 20000); the server's --max-streams (default 20000) must be above --streams.

Two instances on MariaDB and one pair of embedded engines, ports 3xxxx (from a checkout: go build -o board ./cmd/board):
  ulimit -n 20000
  ./board engines --data-dir ./bn-engines --embedded-kafka-addr 127.0.0.1:39092 --embedded-redis-addr 127.0.0.1:36380 &
  for i in 1 2; do
    ./board serve article comment user notification --mysql-dsn 'root@tcp(127.0.0.1:3306)/' --mysql-db-prefix bn_ \
      --mysql-max-conns 16 --redis-addr 127.0.0.1:36380 --kafka-brokers 127.0.0.1:39092 --data-dir ./bn-node$i \
      --rate-limits=false --article-addr :3${i}000 --comment-addr :3${i}001 --user-addr :3${i}006 --notification-addr :3${i}009 &
  done
  ./board bench notifications --mysql-dsn 'root@tcp(127.0.0.1:3306)/' --mysql-db-prefix bn_ \
    --article-url http://127.0.0.1:31000 --comment-url http://127.0.0.1:31001 \
    --notification-urls http://127.0.0.1:31009,http://127.0.0.1:32009
  kill %2 %3; wait %2 %3; kill %1
  for d in article comment user notification; do mariadb -uroot -e "drop database bn_$d"; done
Only the services on the path run, so that the others' consumers do not share the cores; --rate-limits=false since
the bench's users write faster than a person may; --mysql-max-conns 16 since 2 instances of 4 services with 50 each
pass MariaDB's default max_connections (151), and a stream refused for it is a 503.`, stderr)
	articleURL := fs.String("article-url", "http://127.0.0.1:9000", "base URL of the article service")
	commentURL := fs.String("comment-url", "http://127.0.0.1:9001", "base URL of the comment service")
	notificationURLs := fs.String("notification-urls", "http://127.0.0.1:9009", "comma-separated base URLs of the notification service's instances; the streams phase uses the first")
	phase := fs.String("phase", "both", "what to measure: delivery, streams or both")
	users := fs.Int("users", 500, "delivery: users with an article and a stream each")
	rate := fs.Int("rate", 500, "delivery: comments per second, sent on schedule whether or not earlier ones were answered")
	duration := fs.Duration("duration", 10*time.Second, "delivery: how long comments are sent")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for notifications not yet delivered")
	workers := fs.Int("workers", 64, "most comments in flight at once, and streams opening at once")
	streams := fs.Int("streams", 10000, "streams: streams held open by one instance")
	perUser := fs.Int("streams-per-user", 8, "streams: streams of each user")
	hold := fs.Duration("hold", 30*time.Second, "streams: how long the streams are held before the instance's memory is read")
	topicPrefix := fs.String("topic-prefix", "board-", "the board's --topic-prefix, which names the notification consumer's group")
	openTokens := boardUserDBFlags(fs)
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	delivery, held := *phase == "delivery" || *phase == "both", *phase == "streams" || *phase == "both"
	if !delivery && !held {
		return fmt.Errorf("--phase is delivery, streams or both, not %q", *phase)
	}
	if *users < 2 || *rate < 1 || *duration <= 0 || *wait < 0 || *workers < 1 || *streams < 1 || *perUser < 1 || *hold < 0 {
		return errors.New("need --users >= 2 (they comment on each other's articles), --rate >= 1, --duration > 0, --wait >= 0, --workers >= 1, --streams >= 1, --streams-per-user >= 1, --hold >= 0")
	}
	var urls []string
	for u := range strings.SplitSeq(*notificationURLs, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, strings.TrimSuffix(u, "/"))
		}
	}
	if len(urls) == 0 {
		return errors.New("--notification-urls names no instance")
	}
	tokens, closeTokens, err := openTokens(ctx, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return err
	}
	defer closeTokens()
	b := &notifyBench{
		tokens: tokens, articleURL: *articleURL, commentURL: *commentURL, notificationURLs: urls,
		client: &http.Client{Timeout: freshnessRequestTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: *workers}},
		// No client timeout, which would end the streams: their contexts do. The server sends a stream's header
		// and first events in one write, so the header's deadline bounds its opening.
		streamClient: &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: freshnessRequestTimeout,
			DialContext: (&net.Dialer{Timeout: freshnessRequestTimeout}).DialContext}},
		board: 1_000_000_000 + rand.Int64N(1_000_000_000),
		// Users of their own, far from the seeds' and other benches'.
		firstUser: 5_000_000_000 + rand.Int64N(1_000_000_000),
		group:     *topicPrefix + "notification",
	}
	if delivery {
		if err := b.delivery(ctx, stdout, stderr, *users, *rate, *duration, *workers, *wait); err != nil {
			return err
		}
	}
	if held {
		if delivery {
			fmt.Fprintln(stdout)
		}
		if err := b.heldStreams(ctx, stdout, stderr, *streams, *perUser, *workers, *hold, *wait); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted; the figures above cover what ran: %w", err)
	}
	return nil
}

// notifyBench is what both phases use: the board's services, the clients and the run's users.
type notifyBench struct {
	tokens                 *app.TokenMinter
	articleURL, commentURL string
	notificationURLs       []string
	client                 *http.Client // every request but the streams
	streamClient           *http.Client
	board                  int64
	group                  string // the notification service's consumer group
	firstUser              int64
	nextUser               atomic.Int64
}

// benchUser is a user of the run, with the article it wrote, if any.
type benchUser struct {
	id      int64
	token   string
	article int64
}

func (b *notifyBench) newUser() (benchUser, error) {
	id := b.firstUser + b.nextUser.Add(1)
	token, err := b.tokens.Mint(auth.Principal{UserID: id, Role: auth.RoleUser})
	return benchUser{id: id, token: token}, err
}

// writeArticles makes n users, each with an article, from workers at once.
func (b *notifyBench) writeArticles(ctx context.Context, stderr io.Writer, n, workers int) ([]benchUser, error) {
	out := make([]benchUser, n)
	bar := progress.Start(stderr, "articles", int64(n))
	defer bar.Finish()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				u, err := b.newUser()
				var a benchArticle
				if err == nil {
					a, err = createArticle(ctx, b.client, u.token, b.articleURL, b.board, fmt.Sprintf("notification bench %d", u.id))
				}
				if err != nil {
					cancel(err)
					return
				}
				u.article = a.id
				out[i] = u
				bar.Add(1)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("write the articles (is board serve running with article?): %w", err)
	}
	return out, nil
}

// comment comments on article as u, and returns the comment's id.
func (b *notifyBench) comment(ctx context.Context, u benchUser, article int64) (int64, error) {
	body, err := request(ctx, b.client, u.token, http.MethodPost, b.commentURL+"/v2/comments",
		map[string]any{"articleId": apijson.ID(article), "content": "notification bench"}, http.StatusCreated)
	if err != nil {
		return 0, err
	}
	var c struct {
		CommentID apijson.ID `json:"commentId"`
	}
	if err := json.Unmarshal(body, &c); err != nil || c.CommentID == 0 {
		return 0, fmt.Errorf("POST %s/v2/comments: no commentId in %s", b.commentURL, body)
	}
	return int64(c.CommentID), nil
}

// notifiedComment is the comment a notification event names; 0 for any other event.
func notifiedComment(ev sseEvent) int64 {
	if ev.name != "notification" {
		return 0
	}
	var n struct {
		CommentID apijson.ID `json:"commentId"`
	}
	if json.Unmarshal([]byte(ev.data), &n) != nil {
		return 0
	}
	return int64(n.CommentID)
}

// sseEvent is one event of a Server-Sent Events stream.
type sseEvent struct{ id, name, data string }

// readSSE calls on with each event of in until in ends. Comment lines (the heartbeats) and retry fields are
// skipped; an event without data is not one (as in EventSource).
func readSSE(in io.Reader, on func(sseEvent)) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	var ev sseEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != nil {
				ev.data = strings.Join(data, "\n")
				on(ev)
			}
			ev, data = sseEvent{}, nil
			continue
		case line[0] == ':':
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.name = value
		case "data":
			data = append(data, value)
		case "id":
			ev.id = value
		}
	}
	return sc.Err()
}

// streamStats counts what a phase's streams met.
type streamStats struct {
	open       atomic.Int64 // connections that have had their first event and not ended
	reconnects atomic.Int64
	mu         sync.Mutex
	failures   failures // by class, of the openings and the ends of streams
}

func (s *streamStats) note(what string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures.add(what+" "+failureClass(err), err)
}

func (s *streamStats) report(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(s.failures)) {
		fmt.Fprintf(w, "  %s ×%d (first: %s)\n", k, s.failures[k].count, s.failures[k].first)
	}
}

// failureClass is an error's class for counting: its HTTP status, a timeout, or any other error.
func failureClass(err error) string {
	var status *statusError
	var netErr net.Error
	switch {
	case errors.As(err, &status):
		return fmt.Sprintf("HTTP %d", status.code)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	return "error"
}

// errStreamEnded is a stream that the server ended (its lifetime, or a failure it met).
var errStreamEnded = errors.New("the server ended the stream")

// hold reads user u's stream at base until ctx ends, calling on with each event and its arrival. opened is called
// once: with nil at the stream's first event (the server joins a stream to its instance's hub before it writes
// one), or with what kept it from opening. A stream that ends after that is opened again from its last event id.
func (b *notifyBench) hold(ctx context.Context, base string, u benchUser, stats *streamStats, opened func(error), on func(sseEvent, time.Time)) {
	last, first := "", true
	for ctx.Err() == nil {
		connected := false
		err := b.readStream(ctx, base, u, last, func(ev sseEvent, at time.Time) {
			if !connected {
				connected = true
				stats.open.Add(1)
			}
			if ev.id != "" {
				last = ev.id
			}
			if first {
				first = false
				opened(nil)
			}
			on(ev, at)
		})
		if connected {
			stats.open.Add(-1)
		}
		if ctx.Err() != nil {
			break
		}
		if first {
			opened(err)
			return
		}
		stats.reconnects.Add(1)
		stats.note("stream ended:", err)
		select {
		case <-ctx.Done():
		case <-time.After(streamReconnectDelay):
		}
	}
	if first {
		opened(ctx.Err())
	}
}

// readStream opens u's stream at base, from after event id last when not empty, and reads it until it ends.
func (b *notifyBench) readStream(ctx context.Context, base string, u benchUser, last string, on func(sseEvent, time.Time)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+notification.StreamPath, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("Accept", "text/event-stream")
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := b.streamClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return &statusError{method: http.MethodGet, url: req.URL.String(), code: resp.StatusCode, body: strings.TrimSpace(string(body))}
	}
	if err := readSSE(resp.Body, func(ev sseEvent) { on(ev, time.Now()) }); err != nil {
		return err
	}
	return errStreamEnded
}

// openStreams starts holding the streams of users[i] at bases[i], at most workers opening at once, and returns
// when every one opened or failed to: how many opened.
func (b *notifyBench) openStreams(ctx context.Context, stderr io.Writer, users []benchUser, bases []string, workers int,
	stats *streamStats, on func(ev sseEvent, at time.Time)) (opened int, held *sync.WaitGroup) {
	held = &sync.WaitGroup{}
	bar := progress.Start(stderr, "streams", int64(len(users)))
	defer bar.Finish()
	slots := make(chan struct{}, workers)
	var mu sync.Mutex
	var settled sync.WaitGroup
	for i, u := range users {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		settled.Add(1)
		held.Go(func() {
			b.hold(ctx, bases[i], u, stats, func(err error) {
				if err == nil {
					mu.Lock()
					opened++
					mu.Unlock()
				} else if ctx.Err() == nil {
					stats.note("open:", err)
				}
				bar.Add(1)
				<-slots
				settled.Done()
			}, on)
		})
	}
	settled.Wait()
	return opened, held
}

// deliveryRun is the state of the delivery phase: the comments acknowledged and not yet delivered, and the figures.
type deliveryRun struct {
	*notifyBench
	writers []benchUser // writers[i] wrote the i-th article; its stream is on instance i % len(notificationURLs)

	mu             sync.Mutex
	pending        map[int64]sentComment // acknowledged, not yet delivered, by comment id
	early          map[int64]time.Time   // delivered before their acknowledgement was recorded
	delivered      map[int64]bool
	acked, failed  int64
	beforeAck, dup int64
	failures       failures
	fromAck        []time.Duration
	fromSend       []time.Duration
	byInstance     [][]time.Duration // fromAck by the instance of the stream
	floor          []time.Duration
	floorFailed    int
}

// sentComment is a comment, when it was sent and acknowledged, and where its writer's stream is.
type sentComment struct {
	sent, acked time.Time
	instance    int
}

func (b *notifyBench) delivery(ctx context.Context, stdout, stderr io.Writer, users, rate int, duration time.Duration, workers int, wait time.Duration) error {
	writers, err := b.writeArticles(ctx, stderr, users, workers)
	if err != nil {
		return err
	}
	r := &deliveryRun{notifyBench: b, writers: writers, pending: map[int64]sentComment{}, early: map[int64]time.Time{},
		delivered: map[int64]bool{}, byInstance: make([][]time.Duration, len(b.notificationURLs))}
	bases := make([]string, len(writers))
	for i := range writers {
		bases[i] = b.notificationURLs[i%len(b.notificationURLs)]
	}
	streamCtx, closeStreams := context.WithCancel(ctx)
	defer closeStreams()
	var stats streamStats
	opened, held := b.openStreams(streamCtx, stderr, writers, bases, workers, &stats, func(ev sseEvent, at time.Time) {
		if c := notifiedComment(ev); c != 0 {
			r.notified(c, at)
		}
	})
	defer held.Wait()
	defer closeStreams()
	fmt.Fprintf(stdout, "delivery: %d users on board %d, each with an article and a stream, round %s; %d streams opened\n",
		len(writers), b.board, strings.Join(b.notificationURLs, " and "), opened)
	if opened < len(writers) {
		stats.report(stdout)
		return fmt.Errorf("%d of %d streams did not open (is board serve running with notification?)", len(writers)-opened, len(writers))
	}

	before := b.consumerSnapshot(ctx)
	floorCtx, stopFloor := context.WithCancel(ctx)
	floored := make(chan struct{})
	go func() { defer close(floored); r.sampleFloor(floorCtx) }()
	defer func() { stopFloor(); <-floored }()
	sendStart := time.Now()
	scheduled, skipped := openLoop(ctx, "comments", rate, duration, workers, stderr, r.send)
	sendElapsed := time.Since(sendStart)
	during := b.consumerSnapshot(ctx)
	waited := r.waitForDelivery(ctx, wait)
	stopFloor()
	<-floored
	// After Ctrl-C the figures are still worth reading: the last metrics get a deadline of their own.
	finalCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), freshnessRequestTimeout)
	defer cancel()
	after := b.consumerSnapshot(finalCtx)

	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(stdout, "comments: %d scheduled at %d/s in %s, %d acknowledged (%.0f/s), %d failed, %d skipped (every worker busy)\n",
		scheduled, rate, roundDuration(sendElapsed), r.acked, float64(r.acked)/sendElapsed.Seconds(), r.failed, skipped)
	for _, k := range slices.Sorted(maps.Keys(r.failures)) {
		fmt.Fprintf(stdout, "  failed: %s ×%d (first: %s)\n", k, r.failures[k].count, r.failures[k].first)
	}
	fmt.Fprintf(stdout, "%-32s %9s %10s %10s %10s %10s\n", "", "count", "p50", "p90", "p99", "max")
	printQuantiles(stdout, "floor: GET unread-count", r.floor)
	printQuantiles(stdout, "ack to notification (p99 <= 1s)", r.fromAck)
	for i, ds := range r.byInstance {
		printQuantiles(stdout, "  streams on "+strings.TrimPrefix(b.notificationURLs[i], "http://"), ds)
	}
	printQuantiles(stdout, "send to notification", r.fromSend)
	fmt.Fprintf(stdout, "never delivered within %s after the comments: %d; delivered twice: %d; before the ack: %d; "+
		"floor calls failed: %d; streams reopened: %d\n", roundDuration(waited), len(r.pending), r.dup, r.beforeAck,
		r.floorFailed, stats.reconnects.Load())
	stats.report(stdout)
	reportConsumer(stdout, b.group, strings.Join(b.notificationURLs, " + "), before, during, after)
	return nil
}

// consumerSnapshot reads the notification consumer's metrics of every instance, summed: the instances share the
// topics' partitions.
func (b *notifyBench) consumerSnapshot(ctx context.Context) consumerSnapshot {
	sum := consumerMetrics{eventAge: histogram{buckets: map[float64]float64{}}}
	for _, base := range b.notificationURLs {
		m, err := readConsumerMetrics(ctx, b.client, base+"/metrics", b.group)
		if err != nil {
			return consumerSnapshot{at: time.Now(), err: err}
		}
		sum.consumed += m.consumed
		sum.lag += m.lag
		sum.eventAge.count += m.eventAge.count
		for le, c := range m.eventAge.buckets {
			sum.eventAge.buckets[le] += c
		}
	}
	return consumerSnapshot{m: sum, at: time.Now()}
}

// send comments, as the writer of the next article, on the seq-th article.
func (r *deliveryRun) send(ctx context.Context, seq int64) {
	i := int(seq % int64(len(r.writers)))
	sent := time.Now()
	id, err := r.comment(ctx, r.writers[(i+1)%len(r.writers)], r.writers[i].article)
	acked := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			r.failed++
			r.failures.add(failureClass(err), err)
		}
		return
	}
	r.acked++
	c := sentComment{sent: sent, acked: acked, instance: i % len(r.notificationURLs)}
	if at, ok := r.early[id]; ok {
		delete(r.early, id)
		r.beforeAck++
		r.record(id, c, at)
		return
	}
	r.pending[id] = c
}

// notified records that the notification of comment id arrived at.
func (r *deliveryRun) notified(id int64, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.delivered[id] {
		r.dup++
		return
	}
	c, ok := r.pending[id]
	if !ok {
		r.early[id] = at
		return
	}
	delete(r.pending, id)
	r.record(id, c, at)
}

// record counts comment id, delivered at; r.mu is held. A notification that beat its acknowledgement took 0 from it.
func (r *deliveryRun) record(id int64, c sentComment, at time.Time) {
	r.delivered[id] = true
	d := max(at.Sub(c.acked), 0)
	r.fromAck = append(r.fromAck, d)
	r.byInstance[c.instance] = append(r.byInstance[c.instance], d)
	r.fromSend = append(r.fromSend, at.Sub(c.sent))
}

// sampleFloor times GET unread-count round the instances, as the run's users, until ctx ends.
func (r *deliveryRun) sampleFloor(ctx context.Context) {
	tick := time.NewTicker(floorEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		base := r.notificationURLs[i%len(r.notificationURLs)]
		start := time.Now()
		_, err := request(ctx, r.client, r.writers[i%len(r.writers)].token, http.MethodGet, base+"/v1/notifications/unread-count", nil, http.StatusOK)
		d := time.Since(start)
		r.mu.Lock()
		if err == nil {
			r.floor = append(r.floor, d)
		} else if ctx.Err() == nil {
			r.floorFailed++
		}
		r.mu.Unlock()
	}
}

// waitForDelivery waits until every acknowledged comment is delivered, at most wait, and returns how long it waited.
func (r *deliveryRun) waitForDelivery(ctx context.Context, wait time.Duration) time.Duration {
	return waitUntil(ctx, wait, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.pending) == 0
	})
}

// processGauges are the series of an instance's /metrics the streams phase reads, and how it names them.
var processGauges = []struct{ series, name string }{
	{"go_memstats_heap_inuse_bytes", "heap in use"},
	{"go_memstats_stack_inuse_bytes", "stacks in use"},
	{"process_resident_memory_bytes", "resident memory"},
	{"go_goroutines", "goroutines"},
}

// parseGauges reads the unlabelled samples of names from the Prometheus text format.
func parseGauges(in io.Reader, names []string) (map[string]float64, error) {
	got := map[string]float64{}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, err := parseSample(line)
		if err != nil {
			return nil, err
		}
		if len(labels) == 0 && slices.Contains(names, name) {
			got[name] = value
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	for _, n := range names {
		if _, ok := got[n]; !ok {
			return nil, fmt.Errorf("metrics: no %s", n)
		}
	}
	return got, nil
}

func (b *notifyBench) readGauges(ctx context.Context, base string) (map[string]float64, error) {
	body, err := request(ctx, b.client, "", http.MethodGet, base+"/metrics", nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(processGauges))
	for i, g := range processGauges {
		names[i] = g.series
	}
	return parseGauges(bytes.NewReader(body), names)
}

func (b *notifyBench) heldStreams(ctx context.Context, stdout, stderr io.Writer, streams, perUser, workers int, hold, wait time.Duration) error {
	base := b.notificationURLs[0]
	owners := make([]benchUser, 0, streams)
	for len(owners) < streams {
		u, err := b.newUser()
		if err != nil {
			return err
		}
		for range min(perUser, streams-len(owners)) {
			owners = append(owners, u)
		}
	}
	// The first user's article, commented on while every stream is open.
	target := owners[0]
	a, err := createArticle(ctx, b.client, target.token, b.articleURL, b.board, "notification bench: held streams")
	if err != nil {
		return fmt.Errorf("write an article (is board serve running with article?): %w", err)
	}
	commenter, err := b.newUser()
	if err != nil {
		return err
	}
	before, err := b.readGauges(ctx, base)
	if err != nil {
		return fmt.Errorf("the instance's metrics before the streams: %w", err)
	}
	bases := make([]string, streams)
	for i := range bases {
		bases[i] = base
	}
	var mu sync.Mutex
	arrivals := map[int64][]time.Time{} // of each comment's notification, one per stream of the target
	var stats streamStats
	streamCtx, closeStreams := context.WithCancel(ctx)
	defer closeStreams()
	openStart := time.Now()
	opened, held := b.openStreams(streamCtx, stderr, owners, bases, workers, &stats, func(ev sseEvent, at time.Time) {
		if c := notifiedComment(ev); c != 0 {
			mu.Lock()
			arrivals[c] = append(arrivals[c], at)
			mu.Unlock()
		}
	})
	openTook := time.Since(openStart)
	stopStreams := func() { closeStreams(); held.Wait() }
	defer stopStreams()
	fmt.Fprintf(stdout, "streams: %d of %d opened to %s in %s (%d users, %d streams each)\n", opened, streams, base,
		roundDuration(openTook), (streams+perUser-1)/perUser, perUser)
	stats.report(stdout)
	if opened == 0 {
		return errors.New("no stream opened (is board serve running with notification?)")
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(hold):
	}
	during, err := b.readGauges(ctx, base)
	if err != nil {
		return fmt.Errorf("the instance's metrics with the streams open: %w", err)
	}

	// One comment: every open stream of the target must show it.
	targetStreams := min(perUser, streams)
	still := stats.open.Load()
	sent := time.Now()
	id, err := b.comment(ctx, commenter, a.id)
	acked := time.Now()
	var got []time.Time
	if err == nil {
		deadline := time.Now().Add(wait)
		for ctx.Err() == nil && time.Now().Before(deadline) {
			mu.Lock()
			got = slices.Clone(arrivals[id])
			mu.Unlock()
			if len(got) >= targetStreams {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stopStreams()
	select { // the server's handlers see their connections close
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	after, afterErr := b.readGauges(ctx, base)

	fmt.Fprintf(stdout, "%s's process (its /metrics), %d streams held %s:\n", base, opened, hold)
	fmt.Fprintf(stdout, "  %-16s %12s %12s %12s %14s\n", "", "before", "held", "per stream", "after closing")
	for _, g := range processGauges {
		afterCol := "-"
		if afterErr == nil {
			afterCol = formatGauge(g.series, after[g.series])
		}
		fmt.Fprintf(stdout, "  %-16s %12s %12s %12s %14s\n", g.name, formatGauge(g.series, before[g.series]),
			formatGauge(g.series, during[g.series]), formatGauge(g.series, (during[g.series]-before[g.series])/float64(opened)), afterCol)
	}
	if afterErr != nil {
		fmt.Fprintf(stdout, "  the metrics after closing: %v\n", afterErr)
	}
	switch {
	case err != nil:
		fmt.Fprintf(stdout, "a comment with %d streams open: %v\n", still, err)
	case len(got) == 0:
		fmt.Fprintf(stdout, "a comment with %d streams open: not delivered to any of its article's writer's %d streams within %s\n",
			still, targetStreams, wait)
	default:
		slices.SortFunc(got, func(x, y time.Time) int { return x.Compare(y) })
		fmt.Fprintf(stdout, "a comment with %d streams open: on %d of its article's writer's %d streams; ack to first %s, to last %s (send to ack %s)\n",
			still, len(got), targetStreams, roundDuration(max(got[0].Sub(acked), 0)), roundDuration(max(got[len(got)-1].Sub(acked), 0)),
			roundDuration(acked.Sub(sent)))
	}
	return nil
}

// formatGauge shows a gauge: bytes in KiB or MiB, counts as numbers (a count per stream with a decimal).
func formatGauge(series string, v float64) string {
	switch {
	case !strings.HasSuffix(series, "_bytes") && v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case !strings.HasSuffix(series, "_bytes"):
		return fmt.Sprintf("%.1f", v)
	}
	if v < 1<<20 && v > -(1<<20) {
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", v/(1<<20))
}
