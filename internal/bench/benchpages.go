package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/auth"
)

// benchPagesUser is the user the signed-in cases read as: an id of its own, above the writers of the setup.
const benchPagesUser = 900_000_000

func benchPages(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := app.NewFlagSet("bench pages", `Usage: board bench pages [flags]

Measures the web pages of a running board (board serve) next to the article-read API calls they are made from, and
against a floor. Unless --skip-setup, creates --articles articles on board --board through the producers, each with
--comments comments, waits until article-read answers them all and has synced the board's list (a warm read model);
with --skip-setup, reads the board as it is (e.g. filled by board seed) and the newest --articles of its page 1. Then
runs each case closed loop from --connections keep-alive clients for --warmup untimed and --duration timed:
  floor             a bare net/http handler served by this process on a loopback port that GETs one value from the
                    board's Redis (an article-read answer of the board's, ~1 KB, under a key of its own) and writes
                    it: the same floor as board bench read's
  api page N        GET article-read /v1/articles?boardId=&page=N&pageSize=20
  web page N        GET web /boards/{board}?page=N signed out: the same call, plus the page around it; the web
                    shares a signed-out page for up to a second, so most of these are served from its cache
  web page N in     the same signed in: never shared, made for the reader every time
  api article       GET article-read /v1/articles/{id}, round the articles
  web article       GET web /articles/{id} signed out: article-read and the comment thread, in parallel (shared as a
                    board page is)
  web article in    the same signed in: also the reader's like (and a view posted behind the page, the first time
                    in 10 minutes)
for N = 1 and N = --deep-page. Prints, per case, requests, failures, requests/s, p50 and p99, requests/s relative to
the floor, and the backend calls of one page (from its Server-Timing header; "cache" for a page served from the
web's cache). The web must know the board: start board serve with e.g. --boards "1=General,9=Bench".`, stderr)
	webURL := fs.String("web-url", "http://127.0.0.1:8080", "base URL of the web pages")
	running := newRunningBoardFlags(fs)
	board := fs.Int64("board", 9, "the board the bench writes to, one the web knows (--boards)")
	articles := fs.Int("articles", 100, "articles created on the board (with --skip-setup: how many of page 1's the article cases read, at most 20)")
	comments := fs.Int("comments", 3, "comments on every article")
	skipSetup := fs.Bool("skip-setup", false, "create nothing: measure the board as it is, e.g. after board seed --board")
	deepPage := fs.Int64("deep-page", 20_000, "the deep page of the board cases (20 articles a page; 0: none)")
	connections := fs.Int("connections", 16, "concurrent keep-alive clients, each sending its next request when its last is answered")
	duration := fs.Duration("duration", 5*time.Second, "timed length of each case")
	warmup := fs.Duration("warmup", time.Second, "untimed run of each case before its timed one")
	wait := fs.Duration("wait", time.Minute, "how long to wait for article-read to answer the new articles and sync the board's list")
	floorAddr := fs.String("floor-addr", "127.0.0.1:0", "listen address of the floor server")
	acceptEncoding := acceptEncodingFlag(fs)
	openTokens := boardUserDBFlags(fs)
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *articles < 1 || *comments < 0 || *board < 1 || *deepPage < 0 || *connections < 1 || *duration <= 0 || *warmup < 0 || *wait <= 0 {
		return fmt.Errorf("need --articles >= 1, --comments >= 0, --board >= 1, --deep-page >= 0, --connections >= 1, --duration > 0, --warmup >= 0, --wait > 0")
	}

	client := &http.Client{Timeout: readRequestTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: *connections}}
	boardPage := fmt.Sprintf("%s/boards/%d", *webURL, *board)
	if err := get(ctx, client, boardPage); err != nil {
		return fmt.Errorf("the web does not serve board %d (start board serve with --boards listing it, and check --web-url): %w", *board, err)
	}
	rdb, err := running.redis(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	tokens, closeTokens, err := openTokens(ctx, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return err
	}
	defer closeTokens()
	setup := readSetup{client: client, tokens: tokens, rdb: rdb, prefix: *running.redisPrefix, readURL: *running.readURL, board: *board}
	apiPage := func(page int64) string {
		return fmt.Sprintf("%s/v1/articles?boardId=%d&page=%d&pageSize=20", *running.readURL, *board, page)
	}
	var floorValue []byte
	if *skipSetup {
		if floorValue, err = setup.readNewest(ctx, apiPage(1), *articles); err != nil {
			return err
		}
	} else {
		if err := setup.createData(ctx, *running.articleURL, *running.commentURL, *running.likeURL, *articles, 0, *comments, 500, stderr); err != nil {
			return err
		}
		if floorValue, err = setup.waitForArticles(ctx, 0, *comments, *wait); err != nil {
			return err
		}
		if err := setup.waitForList(ctx, apiPage(1), min(*articles, 20), *wait); err != nil {
			return err
		}
	}
	floorURL, stopFloor, err := startFloor(ctx, rdb, fmt.Sprintf("%sbench-pages::floor::{%d}", *running.redisPrefix, *board), floorValue, *floorAddr)
	if err != nil {
		return err
	}
	defer stopFloor()

	// The signed-in reader holds a session cookie as a browser would.
	token, err := tokens.Mint(auth.Principal{UserID: benchPagesUser, Role: auth.RoleUser})
	if err != nil {
		return err
	}
	jar, _ := cookiejar.New(nil)
	site, err := url.Parse(*webURL)
	if err != nil {
		return err
	}
	jar.SetCookies(site, []*http.Cookie{{Name: "board_session", Value: token, Path: "/"}})
	// The cases' clients, signed out and in, share one transport: the setup's reads its answers decoded.
	load := &http.Client{Timeout: readRequestTimeout, Transport: loadTransport(*connections, *acceptEncoding)}
	signedIn := &http.Client{Timeout: readRequestTimeout, Jar: jar, Transport: load.Transport}

	apiArticles, webArticles := make([]string, len(setup.ids)), make([]string, len(setup.ids))
	for i, id := range setup.ids {
		apiArticles[i] = fmt.Sprintf("%s/v1/articles/%d", *running.readURL, id)
		webArticles[i] = fmt.Sprintf("%s/articles/%d", *webURL, id)
	}
	type pageCase struct {
		name   string
		client *http.Client
		urls   []string
	}
	cases := []pageCase{{"floor", load, []string{floorURL}}}
	for _, page := range []int64{1, *deepPage} {
		if page == 0 {
			continue
		}
		webPage := fmt.Sprintf("%s?page=%d", boardPage, page)
		cases = append(cases,
			pageCase{fmt.Sprintf("api page %d", page), load, []string{apiPage(page)}},
			pageCase{fmt.Sprintf("web page %d", page), load, []string{webPage}},
			pageCase{fmt.Sprintf("web page %d in", page), signedIn, []string{webPage}})
	}
	cases = append(cases,
		pageCase{"api article", load, apiArticles},
		pageCase{"web article", load, webArticles},
		pageCase{"web article in", signedIn, webArticles})

	what := fmt.Sprintf("%d new articles with %d comments each", len(setup.ids), *comments)
	if *skipSetup {
		what = fmt.Sprintf("as it is, its newest %d articles", len(setup.ids))
	}
	fmt.Fprintf(stdout, "board %d: %s; floor: one GET of a %d-byte value at %s\n%d connections, closed loop, Accept-Encoding %q; per case %s untimed, then %s timed\n\n",
		*board, what, len(floorValue), floorURL, *connections, *acceptEncoding, *warmup, *duration)
	fmt.Fprintf(stdout, "%-18s %9s %9s %10s %10s %10s %9s %6s\n", "case", "requests", "failures", "req/s", "p50", "p99", "vs floor", "calls")
	var floorRate float64
	for _, c := range cases {
		l := loader{client: c.client, connections: *connections}
		if *warmup > 0 {
			l.run(ctx, c.urls, *warmup)
		}
		r := l.run(ctx, c.urls, *duration)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rate := float64(r.requests) / r.elapsed.Seconds()
		if c.name == "floor" {
			floorRate = rate
		}
		p50, p99 := "-", "-"
		if len(r.latencies) > 0 {
			sorted := slices.Sorted(slices.Values(r.latencies))
			p50, p99 = roundDuration(percentile(sorted, 0.5)), roundDuration(percentile(sorted, 0.99))
		}
		fmt.Fprintf(stdout, "%-18s %9d %9d %10.0f %10s %10s %9.2f %6s\n", c.name, r.requests, r.failures, rate, p50, p99,
			rate/floorRate, backendCalls(ctx, c.client, c.urls[0]))
		if r.failures > 0 {
			fmt.Fprintf(stdout, "  first failure: %s\n", r.firstFailure)
		}
	}
	return nil
}

// readNewest reads the newest n articles of the board as article-read has them (pageURL is its page 1) into s.ids,
// and returns the first one's answer: the floor's value.
func (s *readSetup) readNewest(ctx context.Context, pageURL string, n int) ([]byte, error) {
	body, err := request(ctx, s.client, "", http.MethodGet, pageURL, nil, http.StatusOK)
	if err != nil {
		return nil, fmt.Errorf("read board %d (is the article-read service at --article-read-url running?): %w", s.board, err)
	}
	var page struct {
		Articles []struct {
			ArticleID apijson.ID `json:"articleId"`
		} `json:"articles"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("GET %s: %w", pageURL, err)
	}
	if len(page.Articles) == 0 {
		return nil, fmt.Errorf("board %d has no articles: fill it first (board seed --board %d), or leave out --skip-setup", s.board, s.board)
	}
	for _, a := range page.Articles[:min(n, len(page.Articles))] {
		s.ids = append(s.ids, int64(a.ArticleID))
	}
	return request(ctx, s.client, "", http.MethodGet, fmt.Sprintf("%s/v1/articles/%d", s.readURL, s.ids[0]), nil, http.StatusOK)
}

var serverTimingCalls = regexp.MustCompile(`backend;desc="(\d+) calls"`)

// backendCalls is how many backend calls a web page says it made (Server-Timing): "cache" for a page the web served
// from its cache, "-" for an API call.
func backendCalls(ctx context.Context, client *http.Client, rawURL string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return "?"
	}
	resp, err := client.Do(req)
	if err != nil {
		return "?"
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	timing := resp.Header.Get("Server-Timing")
	if strings.HasPrefix(timing, "cache;") {
		return "cache"
	}
	if m := serverTimingCalls.FindStringSubmatch(timing); m != nil {
		return m[1]
	}
	return "-"
}
