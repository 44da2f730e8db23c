package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"time"

	"board/internal/app"
	"board/internal/auth"
)

// benchPagesUser is the user the signed-in cases read as: an id of its own, above the writers of the setup.
const benchPagesUser = 900_000_000

func benchPages(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := app.NewFlagSet("bench pages", `Usage: board bench pages [flags]

Measures the web pages of a running board (board serve) next to the article-read API calls they are made from.
Creates --articles articles on board --board through the producers, each with --comments comments, waits until
article-read answers them all and has synced the board's list (a warm read model), then runs each case closed loop
from --connections keep-alive clients for --warmup untimed and --duration timed:
  api page          GET article-read /v1/articles?boardId=&page=1&pageSize=20
  web board page    GET web /boards/{board}: the same call, plus the page around it
  api article       GET article-read /v1/articles/{id}, round the bench's articles
  web article       GET web /articles/{id} signed out: article-read and the comment thread, in parallel
  web article in    the same signed in: also the reader's like, and a view posted behind the page
Prints, per case, requests, failures, requests/s, p50 and p99, and the backend calls of one page (from its
Server-Timing header). The web must know the board: start board serve with e.g. --boards "1=General,9=Bench".`, stderr)
	webURL := fs.String("web-url", "http://127.0.0.1:8080", "base URL of the web pages")
	running := newRunningBoardFlags(fs)
	board := fs.Int64("board", 9, "the board the bench writes to, one the web knows (--boards)")
	articles := fs.Int("articles", 100, "articles created on the board")
	comments := fs.Int("comments", 3, "comments on every article")
	connections := fs.Int("connections", 16, "concurrent keep-alive clients, each sending its next request when its last is answered")
	duration := fs.Duration("duration", 5*time.Second, "timed length of each case")
	warmup := fs.Duration("warmup", time.Second, "untimed run of each case before its timed one")
	wait := fs.Duration("wait", time.Minute, "how long to wait for article-read to answer the new articles and sync the board's list")
	openTokens := boardUserDBFlags(fs)
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *articles < 1 || *comments < 0 || *board < 1 || *connections < 1 || *duration <= 0 || *warmup < 0 || *wait <= 0 {
		return fmt.Errorf("need --articles >= 1, --comments >= 0, --board >= 1, --connections >= 1, --duration > 0, --warmup >= 0, --wait > 0")
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
	if err := setup.createData(ctx, *running.articleURL, *running.commentURL, *running.likeURL, *articles, 0, *comments, 500, stderr); err != nil {
		return err
	}
	if _, err := setup.waitForArticles(ctx, 0, *comments, *wait); err != nil {
		return err
	}
	apiPage := fmt.Sprintf("%s/v1/articles?boardId=%d&page=1&pageSize=20", *running.readURL, *board)
	if err := setup.waitForList(ctx, apiPage, min(*articles, 20), *wait); err != nil {
		return err
	}

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
	signedIn := &http.Client{Timeout: readRequestTimeout, Jar: jar, Transport: client.Transport}

	apiArticles, webArticles := make([]string, len(setup.ids)), make([]string, len(setup.ids))
	for i, id := range setup.ids {
		apiArticles[i] = fmt.Sprintf("%s/v1/articles/%d", *running.readURL, id)
		webArticles[i] = fmt.Sprintf("%s/articles/%d", *webURL, id)
	}
	fmt.Fprintf(stdout, "board %d: %d new articles with %d comments each; %d connections, closed loop; per case %s untimed, then %s timed\n\n",
		*board, len(setup.ids), *comments, *connections, *warmup, *duration)
	cases := []struct {
		name   string
		client *http.Client
		urls   []string
	}{
		{"api page", client, []string{apiPage}},
		{"web board page", client, []string{boardPage}},
		{"api article", client, apiArticles},
		{"web article", client, webArticles},
		{"web article in", signedIn, webArticles},
	}
	fmt.Fprintf(stdout, "%-15s %9s %9s %10s %10s %10s %6s\n", "case", "requests", "failures", "req/s", "p50", "p99", "calls")
	for _, c := range cases {
		l := loader{client: c.client, connections: *connections}
		if *warmup > 0 {
			l.run(ctx, c.urls, *warmup)
		}
		r := l.run(ctx, c.urls, *duration)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p50, p99 := "-", "-"
		if len(r.latencies) > 0 {
			sorted := slices.Sorted(slices.Values(r.latencies))
			p50, p99 = roundDuration(percentile(sorted, 0.5)), roundDuration(percentile(sorted, 0.99))
		}
		fmt.Fprintf(stdout, "%-15s %9d %9d %10.0f %10s %10s %6s\n", c.name, r.requests, r.failures,
			float64(r.requests)/r.elapsed.Seconds(), p50, p99, backendCalls(ctx, c.client, c.urls[0]))
		if r.failures > 0 {
			fmt.Fprintf(stdout, "  first failure: %s\n", r.firstFailure)
		}
	}
	return nil
}

var serverTimingCalls = regexp.MustCompile(`backend;desc="(\d+) calls"`)

// backendCalls is how many backend calls a web page says it made (Server-Timing); "-" for an API call.
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
	if m := serverTimingCalls.FindStringSubmatch(resp.Header.Get("Server-Timing")); m != nil {
		return m[1]
	}
	return "-"
}
