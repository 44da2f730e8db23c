package bench

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"board/internal/app"
	"board/internal/article"
	"board/internal/auth"
	"board/internal/httpio"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

const benchUsage = `Usage: board bench paging|comments|relay|likes|freshness|read|pages|standing|search|search-freshness|notifications|markdown|media|fanout|delete-user|mail [flags]

Measurements that print their figures; run 'board bench <name> --help' for one's flags.`

// Command is `board bench <name> [flags]`: the measurement args name, printing its figures to stdout.
func Command(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "-help", "--help":
			fmt.Fprintln(stdout, benchUsage)
			return nil
		case "paging":
			return benchPaging(ctx, args[1:], getenv, stdout, stderr)
		case "comments":
			return benchComments(ctx, args[1:], getenv, stdout, stderr)
		case "relay":
			return benchRelay(ctx, args[1:], getenv, stdout, stderr)
		case "likes":
			return benchLikes(ctx, args[1:], getenv, stdout, stderr)
		case "freshness":
			return benchFreshness(ctx, args[1:], getenv, stdout, stderr)
		case "read":
			return benchRead(ctx, args[1:], getenv, stdout, stderr)
		case "pages":
			return benchPages(ctx, args[1:], getenv, stdout, stderr)
		case "standing":
			return benchStanding(ctx, args[1:], getenv, stdout, stderr)
		case "search":
			return benchSearch(ctx, args[1:], getenv, stdout, stderr)
		case "search-freshness":
			return benchSearchFreshness(ctx, args[1:], getenv, stdout, stderr)
		case "notifications":
			return benchNotifications(ctx, args[1:], getenv, stdout, stderr)
		case "markdown":
			return benchMarkdown(ctx, args[1:], getenv, stdout, stderr)
		case "media":
			return benchMedia(ctx, args[1:], getenv, stdout, stderr)
		case "fanout":
			return benchFanout(ctx, args[1:], getenv, stdout, stderr)
		case "delete-user":
			return benchDeleteUser(ctx, args[1:], getenv, stdout, stderr)
		case "mail":
			return benchMail(ctx, args[1:], getenv, stdout, stderr)
		}
	}
	fmt.Fprintln(stderr, benchUsage)
	if len(args) > 0 {
		return fmt.Errorf("unknown benchmark %q", args[0])
	}
	return errors.New("name a benchmark")
}

// listBenchFlags are the flags of the list benchmarks (paging, comments).
type listBenchFlags struct {
	fs                    *flag.FlagSet
	page, depth, pageSize *int64
	runs                  *int
}

// The deep cases' defaults, for the seed's default of 12,000,000 rows; fit lowers them for smaller data.
const (
	defaultBenchPage  = 50_000
	defaultBenchDepth = 6_000_000
)

func newListBenchFlags(fs *flag.FlagSet, what string) listBenchFlags {
	return listBenchFlags{
		fs:       fs,
		page:     fs.Int64("page", defaultBenchPage, "deep page number for the offset cases (at most the last page; lowered to it when not given)"),
		depth:    fs.Int64("depth", defaultBenchDepth, what+" skipped for the deep infinite-scroll cases (lowered to half the data when not given)"),
		pageSize: fs.Int64("page-size", 30, what+" per page"),
		runs:     fs.Int("runs", 20, "timed runs per case (after 2 warm-up runs)"),
	}
}

func (f listBenchFlags) check() error {
	if *f.page < 1 || *f.depth < 1 || *f.pageSize < 1 || *f.pageSize > 100 || *f.runs < 1 {
		return errors.New("need --page >= 1, --depth >= 1, 1 <= --page-size <= 100, --runs >= 1")
	}
	return nil
}

// fit makes the deep cases land inside rows rows: defaults are lowered to the last page and half the rows (and
// say so on w); values given that lie beyond the data are an error, as timing an empty page measures nothing.
func (f listBenchFlags) fit(rows int64, what, seedHint string, w io.Writer) error {
	if rows < 2 {
		return fmt.Errorf("%s: %d rows; seed it first (%s)", what, rows, seedHint)
	}
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	lastPage := (rows + *f.pageSize - 1) / *f.pageSize
	switch {
	case *f.page <= lastPage:
	case given["page"]:
		return fmt.Errorf("--page %d is past the last page (%d) of %s with %d rows; seed more (%s)", *f.page, lastPage, what, rows, seedHint)
	default:
		fmt.Fprintf(w, "%s has %d rows: the deep page is its last, %d (--page)\n", what, rows, lastPage)
		*f.page = lastPage
	}
	switch {
	case *f.depth < rows:
	case given["depth"]:
		return fmt.Errorf("--depth %d is not inside %s with %d rows; seed more (%s)", *f.depth, what, rows, seedHint)
	default:
		*f.depth = rows / 2
		fmt.Fprintf(w, "%s has %d rows: the deep scroll starts half way, at %d (--depth)\n", what, rows, *f.depth)
	}
	return nil
}

func benchPaging(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("bench paging", `Usage: board bench paging [flags]

Times article list queries on a seeded board (see board seed) two ways: through the HTTP API of an article service
started in this process on a loopback port, and as the same store calls (the SQL through database/sql) without
HTTP. Prints the median of --runs runs of each and the ratio API/raw.`, stderr)
	cfg.EngineFlags(fs)
	board := fs.Int64("board", 1, "seeded board to read")
	lf := newListBenchFlags(fs, "articles")
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if err := lf.check(); err != nil {
		return err
	}
	page, depth, pageSize, runs := lf.page, lf.depth, lf.pageSize, lf.runs
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()
	db, ob, ids, err := toolDatabase(ctx, e, "article", article.Migrate)
	if err != nil {
		return err
	}
	store := article.NewStore(db, ob)
	svc := article.NewService(store, ids, time.Now)
	count, err := svc.BoardCount(ctx, *board)
	if err != nil {
		return err
	}
	if err := lf.fit(count, fmt.Sprintf("board %d", *board), fmt.Sprintf("board seed --board %d", *board), stdout); err != nil {
		return err
	}
	cursor, err := store.Page(ctx, *board, *depth-1, 1)
	if err != nil {
		return err
	}
	lastID := cursor[0].ID

	base, stop, err := serveLoopback("article", article.Routes(svc, e.Logger), nil, e)
	if err != nil {
		return err
	}
	defer stop()
	cases := []benchCase{
		{"page 1", fmt.Sprintf("/v1/articles?boardId=%d&page=1&pageSize=%d", *board, *pageSize),
			func() error { _, err := svc.List(ctx, *board, 1, *pageSize); return err }},
		{fmt.Sprintf("page %d", *page), fmt.Sprintf("/v1/articles?boardId=%d&page=%d&pageSize=%d", *board, *page, *pageSize),
			func() error { _, err := svc.List(ctx, *board, *page, *pageSize); return err }},
		{"scroll depth 0", fmt.Sprintf("/v1/articles/infinite-scroll?boardId=%d&pageSize=%d", *board, *pageSize),
			func() error { _, err := svc.Scroll(ctx, *board, *pageSize, 0); return err }},
		{fmt.Sprintf("scroll depth %d", *depth),
			fmt.Sprintf("/v1/articles/infinite-scroll?boardId=%d&pageSize=%d&lastArticleId=%d", *board, *pageSize, lastID),
			func() error { _, err := svc.Scroll(ctx, *board, *pageSize, lastID); return err }},
	}
	fmt.Fprintf(stdout, "board %d: %d articles on %s %s; page size %d; median of %d runs\n",
		*board, count, db.Dialect, db.Name, *pageSize, *runs)
	return runBenchCases(ctx, stdout, base, *runs, cases)
}

// serveLoopback serves a service's API on a loopback port, as board serve would, with guard (nil for a read-only
// bench) in front of its writes, and returns its base URL.
func serveLoopback(service string, api *http.ServeMux, guard *httpio.Guard, e *app.Engines) (base string, stop func(), err error) {
	return serveStreams(service, api, guard, e, nil)
}

// serveStreams is serveLoopback with streams served as board serve serves them (httpio.Server.Streams).
func serveStreams(service string, api *http.ServeMux, guard *httpio.Guard, e *app.Engines, streams map[string]bool) (base string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	// The deadline of a bench request: a deep page on a large seed is slow by design, and is what is measured.
	srv := httpio.Server{Service: service, API: api, Guard: guard, Gatherer: prometheus.NewRegistry(),
		Metrics: httpio.NewMetrics(prometheus.NewRegistry()), Logger: e.Logger, RequestTimeout: time.Minute, Streams: streams}.HTTPServer()
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			e.Logger.Error("bench: the loopback server stopped", "service", service, "err", err)
		}
	}()
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// acceptEncodingFlag is the Accept-Encoding of a load bench's timed requests.
func acceptEncodingFlag(fs *flag.FlagSet) *string {
	return fs.String("accept-encoding", "", `Accept-Encoding of the timed requests, e.g. "gzip" or "zstd" as a browser sends; answers are read as sent, not decoded. Empty: none, as board's own service clients ask (the floor never compresses)`)
}

// loadTransport is the transport of a load bench's timed requests: one kept-alive connection per load client (the
// default keeps 2 idle and would open a connection per request), asking for acceptEncoding ("" for none).
func loadTransport(connections int, acceptEncoding string) http.RoundTripper {
	t := &http.Transport{MaxIdleConnsPerHost: connections, DisableCompression: true}
	if acceptEncoding == "" {
		return t
	}
	return encodingTransport{t, acceptEncoding}
}

type encodingTransport struct {
	next     http.RoundTripper
	encoding string
}

func (t encodingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Accept-Encoding", t.encoding)
	return t.next.RoundTrip(r)
}

// benchCase is one query timed through the API (url) and directly (raw).
type benchCase struct {
	name string
	url  string
	raw  func() error
}

// runBenchCases times each case through the API at base and raw, and prints a table of medians.
func runBenchCases(ctx context.Context, stdout io.Writer, base string, runs int, cases []benchCase) error {
	fmt.Fprintf(stdout, "%-26s %12s %12s %8s\n", "case", "api", "raw", "api/raw")
	client := &http.Client{}
	for _, c := range cases {
		api, err := median(runs, func() error { return get(ctx, client, base+c.url) })
		if err != nil {
			return fmt.Errorf("%s via api: %w", c.name, err)
		}
		raw, err := median(runs, c.raw)
		if err != nil {
			return fmt.Errorf("%s raw: %w", c.name, err)
		}
		fmt.Fprintf(stdout, "%-26s %12s %12s %8.2f\n", c.name, api.Round(time.Microsecond), raw.Round(time.Microsecond),
			float64(api)/float64(raw))
	}
	return nil
}

func get(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// median runs fn twice to warm caches, then runs times, and returns the median duration.
func median(runs int, fn func() error) (time.Duration, error) {
	times := make([]time.Duration, 0, runs)
	for i := -2; i < runs; i++ {
		start := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		if i >= 0 {
			times = append(times, time.Since(start))
		}
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// benchKey is a signing key of a bench's own, made for one run: the loopback services it serves trust it alone, so
// their writes are verified as a board's are, without a user service.
type benchKey struct{ key auth.Key }

func newBenchKey() (benchKey, error) {
	k, err := auth.NewKey(time.Now())
	return benchKey{k}, err
}

func (k benchKey) guard() *httpio.Guard {
	keys := map[string]ed25519.PublicKey{k.key.ID: k.key.Private.Public().(ed25519.PublicKey)}
	v := auth.NewVerifier(func(context.Context) (map[string]ed25519.PublicKey, error) { return keys, nil }, auth.VerifierConfig{})
	return &httpio.Guard{Verify: v.Verify}
}

// token mints an access token for a user.
func (k benchKey) token(userID int64) (string, error) {
	tok, _, err := auth.Sign(k.key, auth.Principal{UserID: userID, Role: auth.RoleUser}, time.Now(), time.Hour)
	return tok, err
}

// toolDatabase opens and migrates a database for a tool (seed, bench), and returns it with the outbox tools write
// through (no relay, no metrics) and their id generator, on the node reserved for tools.
func toolDatabase(ctx context.Context, e *app.Engines, name string, migrate func(context.Context, *sqldb.DB) error) (
	*sqldb.DB, *outbox.Outbox, *snowflake.Generator, error) {
	db, err := e.OpenSQL(ctx, name)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := migrate(ctx, db); err != nil {
		return nil, nil, nil, err
	}
	ids, err := snowflake.New(snowflake.MaxNode, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	return db, outbox.New(db, e.Config.OutboxShards, ids, time.Now, nil, nil), ids, nil
}
