package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/article"
	"board/internal/auth"
	"board/internal/progress"
	"board/internal/redisclient"
)

const (
	// readRequestTimeout bounds every request of the read bench: past the board's own deadline (5 s by default),
	// so that a slow answer is still counted as what the board said.
	readRequestTimeout = 10 * time.Second
	// readRedisTimeout bounds one Redis call of the bench and of its floor server.
	readRedisTimeout = 2 * time.Second
	// readSetupWorkers is how many writes the bench sends at once while it creates its data.
	readSetupWorkers = 8
	// readPageSize is the page size of the page case, the article-read default.
	readPageSize = 30
	// readPollEvery spaces the polls of the setup's waits.
	readPollEvery = 20 * time.Millisecond
)

func benchRead(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := app.NewFlagSet("bench read", `Usage: board bench read [flags]

Measures the read path of a running board's article-read service (started separately with board serve) over HTTP,
against a floor. Creates a new board of --articles articles through the producers, each with --likes likes and
--comments comments, and waits until article-read answers them all and has synced the board's list. Then runs four
cases one after the other, each closed loop from --connections keep-alive clients of one Go HTTP client for
--warmup untimed and --duration timed:
  floor         a bare net/http handler served by this process on a loopback port that GETs one value from the
                board's Redis (one article-read answer of the bench, written under a key of its own) and writes it;
  warm article  GET /v1/articles/{id}, round the bench's articles, whose models are in Redis;
  page 1        GET /v1/articles?boardId=&page=1&pageSize=30 of the bench's board, from its synced list in Redis;
  page 1 top-week, page 1 comments
                the same with sort=top-week and sort=comments, from the board's sorted sets in Redis, also shown
                relative to page 1 (newest);
  cold article  GET /v1/articles/{id} in rounds: before each round the models of all the bench's articles are
                deleted (untimed), and the round reads each once, so that each read rebuilds its model from the
                article, comment and like services.
Prints, per case, requests, failures, requests/s, p50 and p99 latency, and requests/s relative to the floor.
The view counts are not in the model: every read also reads its view count through article-read's 1 s cache.
With --sort-articles N, the board gets N more articles before the cases, written directly into the board's Redis
through article-read's own event handler (ARTICLE_CREATED, and ARTICLE_LIKED and COMMENT_CREATED with their counts),
created over the last 20 hours: they fill the sorts (and the list) as events would, but only article-read knows them.`, stderr)
	board := newRunningBoardFlags(fs)
	articles := fs.Int("articles", 200, "articles created on the bench's board")
	likes := fs.Int("likes", 2, "likes of every article, each by another user")
	comments := fs.Int("comments", 1, "comments on every article")
	contentSize := fs.Int("content-size", 500, "characters of every article's content")
	connections := fs.Int("connections", 32, "concurrent keep-alive clients, each sending its next request when its last is answered")
	duration := fs.Duration("duration", 5*time.Second, "timed length of each case")
	warmup := fs.Duration("warmup", time.Second, "untimed run of each case before its timed one")
	wait := fs.Duration("wait", time.Minute, "how long to wait for article-read to answer the new articles, and again for it to sync the board's list")
	floorAddr := fs.String("floor-addr", "127.0.0.1:0", "listen address of the floor server")
	openTokens := boardUserDBFlags(fs)
	acceptEncoding := acceptEncodingFlag(fs)
	sortArticles := fs.Int("sort-articles", 0, "articles seeded into the board through article-read's event handler (see above), e.g. 1000000")
	keepFloor := fs.Bool("keep-floor", false, "after the table, keep the floor server up until interrupted, for an outside load generator such as wrk")
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *articles < 1 || *likes < 0 || *comments < 0 || *contentSize < 1 || *contentSize > article.MaxContentChars ||
		*connections < 1 || *duration <= 0 || *warmup < 0 || *wait <= 0 || *sortArticles < 0 {
		return fmt.Errorf("need --articles >= 1, --likes >= 0, --comments >= 0, 1 <= --content-size <= %d, --connections >= 1, --duration > 0, --warmup >= 0, --wait > 0, --sort-articles >= 0",
			article.MaxContentChars)
	}

	rdb, err := board.redis(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()

	// The setup's client; the cases share one of their own (loadTransport), so the client's cost is the same in each.
	client := &http.Client{Timeout: readRequestTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: readSetupWorkers}}
	tokens, closeTokens, err := openTokens(ctx, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return err
	}
	defer closeTokens()
	setup := readSetup{client: client, tokens: tokens, rdb: rdb, prefix: *board.redisPrefix, readURL: *board.readURL,
		board: 1_000_000_000 + rand.Int64N(1_000_000_000)}
	if err := setup.createData(ctx, *board.articleURL, *board.commentURL, *board.likeURL, *articles, *likes, *comments, *contentSize, stderr); err != nil {
		return err
	}
	floorValue, err := setup.waitForArticles(ctx, *likes, *comments, *wait)
	if err != nil {
		return err
	}
	pageURL := fmt.Sprintf("%s/v1/articles?boardId=%d&page=1&pageSize=%d", *board.readURL, setup.board, readPageSize)
	if err := setup.waitForList(ctx, pageURL, min(*articles, readPageSize), *wait); err != nil {
		return err
	}

	// Seeded once the list is synced: their events carry an older board count, and the list keeps the newest.
	if *sortArticles > 0 {
		start := time.Now()
		if err := seedSorted(ctx, rdb, *board.redisPrefix, setup.board, *sortArticles, benchContent(*contentSize), stderr); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "seeded %d articles through article-read's event handler in %s\n", *sortArticles,
			time.Since(start).Round(time.Second))
	}
	sortURL := func(sort string) string { return pageURL + "&sort=" + sort }

	floorKey := fmt.Sprintf("%sbench-read::floor::{%d}", *board.redisPrefix, setup.board)
	floorURL, stopFloor, err := startFloor(ctx, rdb, floorKey, floorValue, *floorAddr)
	if err != nil {
		return err
	}
	defer stopFloor()

	articleURLs := make([]string, len(setup.ids))
	for i, id := range setup.ids {
		articleURLs[i] = fmt.Sprintf("%s/v1/articles/%d", *board.readURL, id)
	}
	fmt.Fprintf(stdout, "board %d: %d articles of %d characters; per article %d likes, %d comments; redis %s, prefix %q\n",
		setup.board, len(setup.ids), *contentSize, *likes, *comments, *board.redisAddr, *board.redisPrefix)
	if *sortArticles > 0 {
		fmt.Fprintf(stdout, "and %d seeded articles in article-read's sorts (%d in all)\n", *sortArticles, *sortArticles+len(setup.ids))
	}
	fmt.Fprintf(stdout, "floor %s: one GET of a %d-byte value (an article-read answer); a warm article: %s\n",
		floorURL, len(floorValue), articleURLs[0])
	fmt.Fprintf(stdout, "%d connections, closed loop, Accept-Encoding %q; per case %s untimed, then %s timed\n\n",
		*connections, *acceptEncoding, *warmup, *duration)

	l := loader{client: &http.Client{Timeout: readRequestTimeout, Transport: loadTransport(*connections, *acceptEncoding)},
		connections: *connections}
	cases := []struct {
		name string
		run  func(time.Duration) loadResult
	}{
		{"floor", func(d time.Duration) loadResult { return l.run(ctx, []string{floorURL}, d) }},
		{"warm article", func(d time.Duration) loadResult { return l.run(ctx, articleURLs, d) }},
		{"page 1", func(d time.Duration) loadResult { return l.run(ctx, []string{pageURL}, d) }},
		{"page 1 top-week", func(d time.Duration) loadResult { return l.run(ctx, []string{sortURL("top-week")}, d) }},
		{"page 1 comments", func(d time.Duration) loadResult { return l.run(ctx, []string{sortURL("comments")}, d) }},
		{"cold article", func(d time.Duration) loadResult { return l.runCold(ctx, articleURLs, d, setup.deleteModels) }},
	}
	fmt.Fprintf(stdout, "%-16s %9s %9s %10s %10s %10s %9s %9s\n", "case", "requests", "failures", "req/s", "p50", "p99", "vs floor", "vs page 1")
	var floorRate, newestRate float64
	var cold loadResult
	for _, c := range cases {
		if *warmup > 0 {
			c.run(*warmup)
		}
		r := c.run(*duration)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rate := float64(r.requests) / r.elapsed.Seconds()
		if c.name == "floor" {
			floorRate = rate
		}
		if c.name == "cold article" {
			cold = r
		}
		if c.name == "page 1" {
			newestRate = rate
		}
		p50, p99 := "-", "-"
		if len(r.latencies) > 0 {
			sorted := slices.Sorted(slices.Values(r.latencies))
			p50, p99 = roundDuration(percentile(sorted, 0.5)), roundDuration(percentile(sorted, 0.99))
		}
		vsFloor := "-"
		if floorRate > 0 {
			vsFloor = fmt.Sprintf("%.2f", rate/floorRate)
		}
		vsNewest := "-"
		if strings.HasPrefix(c.name, "page 1 ") && newestRate > 0 {
			vsNewest = fmt.Sprintf("%.2f", rate/newestRate)
		}
		fmt.Fprintf(stdout, "%-16s %9d %9d %10.0f %10s %10s %9s %9s\n", c.name, r.requests, r.failures, rate, p50, p99, vsFloor, vsNewest)
		if r.failures > 0 {
			fmt.Fprintf(stdout, "  first failure: %s\n", r.firstFailure)
		}
	}
	fmt.Fprintf(stdout, "\ncold reads: %d timed, in %d rounds over the %d articles (their models deleted before each round, untimed)\n",
		cold.requests, cold.rounds, len(setup.ids))
	if *keepFloor {
		fmt.Fprintf(stdout, "the floor stays up at %s until interrupted\n", floorURL)
		<-ctx.Done()
	}
	return nil
}

// runningBoardFlags say where a running board's services and Redis are, for the benchmarks that load it.
type runningBoardFlags struct {
	articleURL, commentURL, likeURL, readURL *string
	redisAddr, redisPassword, redisPrefix    *string
}

func newRunningBoardFlags(fs *flag.FlagSet) runningBoardFlags {
	return runningBoardFlags{
		articleURL:    fs.String("article-url", "http://127.0.0.1:9000", "base URL of the article service"),
		commentURL:    fs.String("comment-url", "http://127.0.0.1:9001", "base URL of the comment service"),
		likeURL:       fs.String("like-url", "http://127.0.0.1:9002", "base URL of the like service"),
		readURL:       fs.String("article-read-url", "http://127.0.0.1:9005", "base URL of the article-read service"),
		redisAddr:     fs.String("redis-addr", "127.0.0.1:6380", "the board's Redis (the embedded one of board serve by default), or a comma-separated list of Redis Cluster nodes"),
		redisPassword: fs.String("redis-password", "", "password of the board's Redis"),
		redisPrefix:   fs.String("redis-prefix", "", "the board's --redis-prefix"),
	}
}

// redis connects to the board's Redis and checks that it answers.
func (f runningBoardFlags) redis(ctx context.Context) (redis.UniversalClient, error) {
	pingCtx, cancel := context.WithTimeout(ctx, readRedisTimeout)
	defer cancel()
	rdb, err := redisclient.Connect(pingCtx, app.SplitList(*f.redisAddr), *f.redisPassword)
	if err != nil {
		return nil, fmt.Errorf("the board's redis (--redis-addr): %w", err)
	}
	return rdb, nil
}

// readSetup creates the bench's data through the producers and waits until article-read serves it.
type readSetup struct {
	client  *http.Client
	tokens  *app.TokenMinter // of the users the setup's writes act for
	rdb     redis.UniversalClient
	prefix  string
	readURL string
	board   int64
	ids     []int64 // the bench's articles, in creation order
}

// createData creates the articles, then their likes and comments, readSetupWorkers writes at a time.
func (s *readSetup) createData(ctx context.Context, articleURL, commentURL, likeURL string, articles, likes, comments, contentSize int, stderr io.Writer) error {
	content := benchContent(contentSize)
	s.ids = make([]int64, articles)
	bar := progress.Start(stderr, "articles", int64(articles))
	err := parallel(ctx, articles, func(ctx context.Context, i int) error {
		// Every write by a user of its own: a running board holds each user to its write rate limit.
		token, err := s.tokens.Mint(auth.Principal{UserID: int64(i + 1), Role: auth.RoleUser})
		if err != nil {
			return err
		}
		body, err := request(ctx, s.client, token, http.MethodPost, articleURL+"/v1/articles", map[string]any{"title": fmt.Sprintf("bench read %d", i+1),
			"content": content, "boardId": apijson.ID(s.board)}, http.StatusCreated)
		if err != nil {
			return fmt.Errorf("create article %d of %d (is board serve running?): %w", i+1, articles, err)
		}
		var a struct {
			ArticleID apijson.ID `json:"articleId"`
		}
		if err := json.Unmarshal(body, &a); err != nil {
			return fmt.Errorf("POST %s/v1/articles: %w", articleURL, err)
		}
		s.ids[i] = int64(a.ArticleID)
		bar.Add(1)
		return nil
	})
	bar.Finish()
	if err != nil {
		return err
	}
	perArticle := likes + comments
	bar = progress.Start(stderr, "likes and comments", int64(articles*perArticle))
	err = parallel(ctx, articles*perArticle, func(ctx context.Context, i int) error {
		id, n := s.ids[i/perArticle], i%perArticle
		writer := int64(articles + i + 1)
		token, err := s.tokens.Mint(auth.Principal{UserID: writer, Role: auth.RoleUser})
		switch {
		case err != nil:
		case n < likes:
			_, err = request(ctx, s.client, token, http.MethodPost, fmt.Sprintf("%s/v1/article-likes/articles/%d/users/%d", likeURL, id, writer), nil, http.StatusCreated)
		default:
			_, err = request(ctx, s.client, token, http.MethodPost, commentURL+"/v2/comments",
				map[string]any{"articleId": apijson.ID(id), "content": "bench read"}, http.StatusCreated)
		}
		bar.Add(1)
		return err
	})
	bar.Finish()
	return err
}

// benchContent is the content of the bench's articles: size characters.
func benchContent(size int) string { return strings.Repeat("board bench read. ", size/18+1)[:size] }

// parallel runs fn for 0..n-1, readSetupWorkers at a time, and returns the first error, after which it starts no
// more.
func parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range readSetupWorkers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// readAnswer is the part of an article-read answer the bench checks.
type readAnswer struct {
	ArticleCommentCount int64 `json:"articleCommentCount"`
	ArticleLikeCount    int64 `json:"articleLikeCount"`
}

// waitForArticles reads every article through article-read until it answers it with its likes and comments, at
// most wait, and returns the first article's answer: the floor's value.
func (s *readSetup) waitForArticles(ctx context.Context, likes, comments int, wait time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var first []byte
	for i, id := range s.ids {
		url := fmt.Sprintf("%s/v1/articles/%d", s.readURL, id)
		for {
			body, err := request(ctx, s.client, "", http.MethodGet, url, nil, http.StatusOK)
			var got readAnswer
			if err == nil {
				err = json.Unmarshal(body, &got)
			}
			if err == nil && got.ArticleLikeCount == int64(likes) && got.ArticleCommentCount == int64(comments) {
				if i == 0 {
					first = body
				}
				break
			}
			if err == nil {
				err = fmt.Errorf("%d likes and %d comments, want %d and %d", got.ArticleLikeCount, got.ArticleCommentCount, likes, comments)
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("article-read did not answer article %d within %s (--wait; is the article-read service at --article-read-url running?): %w", id, wait, err)
			}
			time.Sleep(readPollEvery)
		}
	}
	return first, nil
}

// waitForList reads page 1 of the bench's board through article-read until its list in Redis is synced (the first
// read of a board starts its backfill) and page 1 has want articles, at most wait; then page 1 is served from Redis.
func (s *readSetup) waitForList(ctx context.Context, pageURL string, want int, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	meta := fmt.Sprintf("%sarticle-read::board::{%d}::meta", s.prefix, s.board)
	for {
		body, err := request(ctx, s.client, "", http.MethodGet, pageURL, nil, http.StatusOK)
		var page struct {
			Articles []json.RawMessage `json:"articles"`
		}
		if err == nil {
			err = json.Unmarshal(body, &page)
		}
		if err == nil && len(page.Articles) != want {
			err = fmt.Errorf("page 1 has %d articles, want %d", len(page.Articles), want)
		}
		var synced string
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, readRedisTimeout)
			synced, err = s.rdb.HGet(rctx, meta, "synced").Result()
			cancel()
		}
		if err == nil && synced == "1" {
			return nil
		}
		if ctx.Err() != nil {
			if errors.Is(err, redis.Nil) {
				err = fmt.Errorf("%s has no synced field (is --redis-prefix the board's?)", meta)
			}
			return fmt.Errorf("article-read did not sync the list of board %d within %s (--wait): %w", s.board, wait, err)
		}
		time.Sleep(readPollEvery)
	}
}

// deleteModels deletes the article-read models of the bench's articles, one key a command so that a cluster takes
// them too.
func (s *readSetup) deleteModels(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readRedisTimeout)
	defer cancel()
	pipe := s.rdb.Pipeline()
	for _, id := range s.ids {
		pipe.Del(ctx, s.prefix+"article-read::article::{"+strconv.FormatInt(id, 10)+"}")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("delete the models of the bench's articles: %w", err)
	}
	return nil
}

// startFloor writes value under key in the board's Redis and serves it on addr: each request is one GET of key,
// written as the answer. stop closes the server and deletes key.
func startFloor(ctx context.Context, rdb redis.UniversalClient, key string, value []byte, addr string) (url string, stop func(), err error) {
	setCtx, cancel := context.WithTimeout(ctx, readRedisTimeout)
	defer cancel()
	// The expiry only cleans up after a bench that was killed; stop deletes the key.
	if err := rdb.Set(setCtx, key, value, 24*time.Hour).Err(); err != nil {
		return "", nil, fmt.Errorf("write the floor's value: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("floor server (--floor-addr): %w", err)
	}
	srv := &http.Server{ReadHeaderTimeout: readRequestTimeout, IdleTimeout: time.Minute,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), readRedisTimeout)
			defer cancel()
			v, err := rdb.Get(ctx, key).Bytes()
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(v) // a client gone: nothing to tell it
		})}
	go func() { _ = srv.Serve(ln) }() // ErrServerClosed at stop; a failure before that shows as the load's errors
	return "http://" + ln.Addr().String() + "/", func() {
		srv.Close()
		// ctx may be cancelled (Ctrl-C); the deletion still gets its own deadline.
		delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readRedisTimeout)
		defer cancel()
		rdb.Del(delCtx, key)
	}, nil
}

// loader sends GETs closed loop: each of its connections sends its next request when its last is answered.
type loader struct {
	client      *http.Client
	connections int
}

// loadResult is what a run measured.
type loadResult struct {
	requests, failures int64
	elapsed            time.Duration
	latencies          []time.Duration // of the requests answered 200
	firstFailure       string
	rounds             int
}

func (r *loadResult) add(o loadResult) {
	r.requests += o.requests
	r.failures += o.failures
	r.elapsed += o.elapsed
	r.latencies = append(r.latencies, o.latencies...)
	if r.firstFailure == "" {
		r.firstFailure = o.firstFailure
	}
	r.rounds += o.rounds
}

// run requests urls round robin for d.
func (l loader) run(ctx context.Context, urls []string, d time.Duration) loadResult {
	return l.send(ctx, urls, time.Now().Add(d), false)
}

// runCold requests urls in rounds until d of rounds have passed: before each round (untimed) prepare deletes their
// models, and the round requests each url once.
func (l loader) runCold(ctx context.Context, urls []string, d time.Duration, prepare func(context.Context) error) loadResult {
	var total loadResult
	for total.elapsed < d && ctx.Err() == nil {
		if err := prepare(ctx); err != nil {
			total.failures++
			if total.firstFailure == "" {
				total.firstFailure = err.Error()
			}
			return total
		}
		r := l.send(ctx, urls, time.Now().Add(d-total.elapsed), true)
		r.rounds = 1
		total.add(r)
	}
	return total
}

// send requests urls round robin from l.connections workers until deadline, or, when once, until each url was
// requested once.
func (l loader) send(ctx context.Context, urls []string, deadline time.Time, once bool) loadResult {
	var next atomic.Int64
	results := make([]loadResult, l.connections)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range results {
		wg.Go(func() {
			r := &results[w]
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if once && i >= int64(len(urls)) {
					return
				}
				sent := time.Now()
				if sent.After(deadline) {
					return
				}
				r.requests++
				if err := get(ctx, l.client, urls[i%int64(len(urls))]); err != nil {
					if ctx.Err() != nil {
						r.requests--
						return
					}
					r.failures++
					if r.firstFailure == "" {
						r.firstFailure = err.Error()
					}
					continue
				}
				r.latencies = append(r.latencies, time.Since(sent))
			}
		})
	}
	wg.Wait()
	total := loadResult{elapsed: time.Since(start)}
	for _, r := range results {
		total.add(r)
	}
	return total
}
