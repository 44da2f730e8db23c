package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"board/internal/app"
	"board/internal/boardpage"
	"board/internal/progress"
	"board/internal/search"
	"board/internal/search/bleveindex"
)

const (
	// searchPageSize is the page size of every query of the bench.
	searchPageSize = 20
	// searchCorpusStart is the creation time of the first generated article; the others follow it over a year, in
	// id order as snowflake ids are.
	searchCorpusStart = "2025-01-01T00:00:00Z"
)

func benchSearch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	flags := app.NewFlagSet("bench search", `Usage: board bench search [flags]

Measures the embedded search engine (internal/search/bleveindex) on generated articles, each figure beside its floor
measured in the same run:
  indexing  --articles seeded articles (titles of 30-60 and bodies of 300-1500 characters, --korean-share of them
            Korean: common nouns with particles attached; the rest English words drawn Zipf-like from a vocabulary
            of a few thousand), generated in memory first (untimed), then put in batches of --batch, --puts at a
            time; the floor is the same documents analyzed (search.Analyze, the analysis every engine pays) on
            every core;
  queries   --queries distinct one- and two-word queries from the same vocabularies (frequent and rare words,
            Korean and English), sorted by relevance and by newest, page size 20, through the HTTP API of the search
            service served in this process on a loopback port (search deadline --timeout), closed loop from
            --clients clients for --duration: round robin with the service's cache of answers off, then a Zipf mix
            of the same queries with it on (--cache-ttl, --cache-mb). The floor is the same clients on /healthz of
            the same server; beside them, the distinct queries through Indexer.Search without HTTP;
  freshness the distinct queries by relevance again (cache on) while --create-rate new articles a second are put
            through Indexer.Put, one batch at a time as the service's updater does, and one poller searches for
            them, newest first (as board bench search-freshness does against a running board): create-to-found
            is from an article's queueing for its batch to the first answer that holds it;
  memory    the resident memory of this process (VmRSS, VmHWM), which serves the index.
Then runs wrk (when on the PATH) against the same queries and prints its summary.
The index is kept in a new directory under --dir, removed at the end unless --keep. --index runs the queries again on
an index so kept, without generating or indexing the articles: the corpus flags are that run's, read from the
directory, and the queries are generated from them as then.`, stderr)
	articles := flags.Int("articles", 1_000_000, "articles generated and indexed")
	boards := flags.Int("boards", 100, "boards the articles are spread over")
	writers := flags.Int("writers", 100_000, "writers the articles are spread over")
	koreanShare := flags.Float64("korean-share", 0.3, "share of the articles written in Korean")
	batchSize := flags.Int("batch", 2000, "articles per Put (one durable batch)")
	puts := flags.Int("puts", 1, "Put calls at a time (the service's updater makes one at a time)")
	seed := flags.Uint64("seed", 1, "seed of the generated articles and queries")
	queries := flags.Int("queries", 2000, "distinct queries, sent round robin")
	clients := flags.Int("clients", 50, "concurrent clients, each sending its next query when its last is answered")
	duration := flags.Duration("duration", 10*time.Second, "timed length of each query case")
	warmup := flags.Duration("warmup", 2*time.Second, "untimed run of each query case before its timed one")
	dir := flags.String("dir", "", "directory under which the index's directory is made (default the system's temporary directory)")
	keep := flags.Bool("keep", false, "keep the index's directory at the end")
	reuse := flags.String("index", "", "directory of an index kept by an earlier run (--keep): run the queries on it, skipping generation and indexing")
	wrk := flags.String("wrk", "wrk", "wrk binary run against the queries after the table; empty: only print how")
	timeout := flags.Duration("timeout", search.DefaultTimeout, "the search service's deadline of one search (as board serve's --search-timeout)")
	cacheTTL := flags.Duration("cache-ttl", search.DefaultCacheTTL, "TTL of the search service's cache in the cases that have it on (as --search-cache-ttl)")
	cacheMB := flags.Int("cache-mb", search.DefaultCacheBytes>>20, "memory of the search service's cache in MiB (as --search-cache-mb)")
	createRate := flags.Int("create-rate", 200, "new articles a second put while the freshness case's queries run; 0: no freshness case")
	if err := app.Parse(flags, args, getenv); err != nil {
		return err
	}
	if *articles < 1 || *boards < 1 || *writers < 1 || *koreanShare < 0 || *koreanShare > 1 || *batchSize < 1 ||
		*puts < 1 || *queries < 1 || *clients < 1 || *duration <= 0 || *warmup < 0 || *timeout <= 0 || *cacheTTL <= 0 ||
		*cacheMB < 1 || *createRate < 0 {
		return errors.New("need --articles, --boards, --writers, --batch, --puts, --queries, --clients, --cache-mb >= 1, 0 <= --korean-share <= 1, --duration, --timeout, --cache-ttl > 0, --warmup, --create-rate >= 0")
	}
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()

	params := corpusParams{Seed: *seed, Articles: *articles, Boards: *boards, Writers: *writers, KoreanShare: *koreanShare}
	indexDir := *reuse
	var err error
	if indexDir != "" {
		if params, err = keptCorpus(indexDir, params, flags); err != nil {
			return err
		}
	} else {
		if indexDir, err = os.MkdirTemp(*dir, "board-bench-search-"); err != nil {
			return err
		}
		if *keep {
			defer fmt.Fprintf(stdout, "\nthe index is kept in %s (run its queries again with --index %[1]s)\n", indexDir)
		} else {
			defer os.RemoveAll(indexDir)
		}
	}
	ix, err := bleveindex.New(indexDir).Open(ctx, "bench")
	if err != nil {
		return err
	}
	defer ix.Close()

	c := newCorpus(params.Seed, params.Articles, params.Boards, params.Writers, params.KoreanShare)
	fmt.Fprintf(stdout, "%d articles (%.0f%% Korean) on %d boards by %d writers, seed %d; %d CPUs; index in %s\n\n",
		c.articles, c.koreanShare*100, c.boards, c.writers, c.seed, runtime.GOMAXPROCS(0), indexDir)
	if *reuse == "" {
		if err := c.benchIndexing(ctx, ix, *batchSize, *puts, stdout, stderr); err != nil {
			return err
		}
		if err := keepCorpus(indexDir, params); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "indexing: skipped (--index); the index is an earlier run's\n")
	}
	if size, err := dirSize(indexDir); err == nil {
		fmt.Fprintf(stdout, "  index on disk: %.0f MB (%.0f bytes per article)\n", float64(size)/1e6, float64(size)/float64(c.articles))
	}

	qs := c.queries(c.seed, *queries)
	if err := describeQueries(ctx, ix, qs, stdout); err != nil {
		return err
	}
	// The memory of the generated articles goes back to the system: what stays resident is what serving takes.
	debug.FreeOSMemory()
	off := search.Options{Timeout: *timeout}
	on := search.Options{Timeout: *timeout, CacheTTL: *cacheTTL, CacheBytes: int64(*cacheMB) << 20}
	run := searchRun{ix: ix, c: c, qs: qs, clients: *clients, warmup: *warmup, duration: *duration,
		client: &http.Client{Timeout: readRequestTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: *clients + 1}}}
	base, stop, err := serveLoopback("search", search.Routes(search.NewService(ix, off), e.Logger), nil, e)
	if err != nil {
		return err
	}
	defer stop()
	counted := &countedIndex{Indexer: ix}
	cachedBase, stopCached, err := serveLoopback("search", search.Routes(search.NewService(counted, on), e.Logger), nil, e)
	if err != nil {
		return err
	}
	defer stopCached()
	relevance, newest := make([]string, len(qs)), make([]string, len(qs))
	for i, q := range qs {
		relevance[i] = searchPath(q, "relevance")
		newest[i] = searchPath(q, "newest")
	}
	fmt.Fprintf(stdout, "\nsearch deadline %s; cache of answers %s TTL, %d MiB where on\n", *timeout, *cacheTTL, *cacheMB)
	if err := run.cases(ctx, base, cachedBase, counted, relevance, newest, stdout); err != nil {
		return err
	}
	if *createRate > 0 {
		if err := run.freshness(ctx, cachedBase, relevance, *createRate, stdout, stderr); err != nil {
			return err
		}
	}
	printMemory(stdout, *reuse != "")
	return runWrk(ctx, *wrk, base, relevance, *clients, *duration, indexDir, stdout)
}

// corpusParams are the flags that make the corpus, kept beside a kept index (corpusFile) so that --index generates
// the same queries, and new articles after the index's own.
type corpusParams struct {
	Seed        uint64  `json:"seed"`
	Articles    int     `json:"articles"`
	Boards      int     `json:"boards"`
	Writers     int     `json:"writers"`
	KoreanShare float64 `json:"koreanShare"`
}

// corpusFile names, in the index's directory, the corpus's parameters.
const corpusFile = "corpus.json"

func keepCorpus(dir string, p corpusParams) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, corpusFile), b, 0o644)
}

// keptCorpus returns the parameters of the corpus indexed in dir. A corpus flag set on this run (given, which holds
// this run's flags) must agree with them: the figures would otherwise describe another corpus than the one asked.
func keptCorpus(dir string, given corpusParams, flags *flag.FlagSet) (corpusParams, error) {
	b, err := os.ReadFile(filepath.Join(dir, corpusFile))
	if err != nil {
		return corpusParams{}, fmt.Errorf("--index %s: not an index kept by board bench search --keep: %w", dir, err)
	}
	var kept corpusParams
	if err := json.Unmarshal(b, &kept); err != nil {
		return corpusParams{}, fmt.Errorf("--index %s: %s: %w", dir, corpusFile, err)
	}
	differs := map[string]bool{"seed": given.Seed != kept.Seed, "articles": given.Articles != kept.Articles,
		"boards": given.Boards != kept.Boards, "writers": given.Writers != kept.Writers,
		"korean-share": given.KoreanShare != kept.KoreanShare}
	var mismatch error
	flags.Visit(func(f *flag.Flag) {
		if differs[f.Name] && mismatch == nil {
			mismatch = fmt.Errorf("--%s %s: the index in %s was made with %s", f.Name, f.Value, dir, b)
		}
	})
	return kept, mismatch
}

// benchIndexing generates the articles, times analyzing them (the floor) and putting them into ix, and prints both.
func (c *corpus) benchIndexing(ctx context.Context, ix search.Indexer, batchSize, puts int, stdout, stderr io.Writer) error {
	workers := runtime.GOMAXPROCS(0)
	docs, generated, err := c.generate(ctx, workers, stderr)
	if err != nil {
		return err
	}
	var tokens atomic.Int64
	analyzed, err := eachBatch(ctx, len(docs), batchSize, workers, "analyzed", stderr, func(first, end int) error {
		n := 0
		for _, d := range docs[first:end] {
			n += len(search.Analyze(d.Title + "\n" + d.Content))
		}
		tokens.Add(int64(n))
		return nil
	})
	if err != nil {
		return err
	}
	indexed, err := eachBatch(ctx, len(docs), batchSize, puts, "indexed", stderr, func(first, end int) error {
		return ix.Put(ctx, docs[first:end])
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "indexing, batches of %d (%.0f tokens per article; generating them took %s, untimed)\n",
		batchSize, float64(tokens.Load())/float64(len(docs)), generated.Round(time.Millisecond))
	fmt.Fprintf(stdout, "  floor: analyzed (search.Analyze), %d goroutines %8s %9.0f docs/s\n", workers,
		analyzed.Round(time.Millisecond), rate(len(docs), analyzed))
	fmt.Fprintf(stdout, "  indexed (Put), %d at a time                    %8s %9.0f docs/s (%.2fx the floor's time; target >= 10000 docs/s)\n",
		puts, indexed.Round(time.Millisecond), rate(len(docs), indexed), indexed.Seconds()/analyzed.Seconds())
	return nil
}

// generate makes the corpus's articles from workers goroutines, and returns them and the time taken.
func (c *corpus) generate(ctx context.Context, workers int, stderr io.Writer) ([]search.Doc, time.Duration, error) {
	docs := make([]search.Doc, c.articles)
	elapsed, err := eachBatch(ctx, len(docs), 1000, workers, "generated", stderr, func(first, end int) error {
		for i := first; i < end; i++ {
			docs[i] = c.article(i)
		}
		return nil
	})
	return docs, elapsed, err
}

// eachBatch calls use with the batches [first, end) of 0..n, batchSize long, from workers goroutines, and returns
// the time taken, shown on stderr as a progress bar.
func eachBatch(ctx context.Context, n, batchSize, workers int, what string, stderr io.Writer, use func(first, end int) error) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	bar := progress.Start(stderr, "articles "+what, int64(n))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				first := int(next.Add(int64(batchSize)) - int64(batchSize))
				if first >= n {
					return
				}
				end := min(first+batchSize, n)
				if err := use(first, end); err != nil {
					cancel(err)
					return
				}
				bar.Add(int64(end - first))
			}
		})
	}
	wg.Wait()
	elapsed := bar.Finish()
	return elapsed, context.Cause(ctx)
}

// searchQuery is one query of the bench.
type searchQuery struct {
	text   string
	korean bool
	words  int
}

func searchPath(q searchQuery, sort string) string {
	return fmt.Sprintf("/v1/search?q=%s&sort=%s&pageSize=%d", url.QueryEscape(q.text), sort, searchPageSize)
}

// describeQueries prints what the queries are, and what a sample of them finds, searching each of the sample once
// directly (untimed, which also warms the index).
func describeQueries(ctx context.Context, ix search.Indexer, qs []searchQuery, stdout io.Writer) error {
	var korean, twoWords int
	for _, q := range qs {
		if q.korean {
			korean++
		}
		if q.words == 2 {
			twoWords++
		}
	}
	const sample = 200 // a frequent word's query counts every match: a few hundred are enough to describe them
	every := max(1, len(qs)/sample)
	var counts []int
	empty := 0
	for i := 0; i < len(qs); i += every {
		q := qs[i]
		res, err := ix.Search(ctx, search.Query{Terms: search.Terms(q.text), Limit: searchPageSize, CountLimit: 1_000_000_000})
		if err != nil {
			return fmt.Errorf("search %q: %w", q.text, err)
		}
		counts = append(counts, res.Count)
		if res.Count == 0 {
			empty++
		}
	}
	slices.Sort(counts)
	fmt.Fprintf(stdout, "\nqueries: %d distinct (%d Korean, %d of two words), e.g. %q, %q; page size %d\n", len(qs), korean, twoWords,
		qs[0].text, qs[len(qs)-1].text, searchPageSize)
	fmt.Fprintf(stdout, "  articles matched per query, in a sample of %d: median %d, p90 %d, max %d; %d match none\n",
		len(counts), counts[len(counts)/2], counts[len(counts)*9/10], counts[len(counts)-1], empty)
	return nil
}

// searchRun is what the query cases share.
type searchRun struct {
	ix               search.Indexer
	c                *corpus
	qs               []searchQuery
	clients          int
	warmup, duration time.Duration
	client           *http.Client
}

// countedIndex counts the searches that reach the index.
type countedIndex struct {
	search.Indexer
	searches atomic.Int64
}

func (c *countedIndex) Search(ctx context.Context, q search.Query) (search.Result, error) {
	c.searches.Add(1)
	return c.Indexer.Search(ctx, q)
}

// zipfMix returns n of paths drawn Zipf-like (s = 1.1), the first the most asked, as a query log has them.
func zipfMix(seed uint64, paths []string, n int) []string {
	r := rand.New(rand.NewPCG(seed, 2))
	z := rand.NewZipf(r, 1.1, 1, uint64(len(paths)-1))
	mix := make([]string, n)
	for i := range mix {
		mix[i] = paths[z.Uint64()]
	}
	return mix
}

func prefixed(base string, paths []string) []string {
	urls := make([]string, len(paths))
	for i, p := range paths {
		urls[i] = base + p
	}
	return urls
}

// cases prints the table of the query cases: base serves without a cache, cachedBase with one, over counted.
func (run searchRun) cases(ctx context.Context, base, cachedBase string, counted *countedIndex, relevance, newest []string,
	stdout io.Writer) error {
	l := loader{client: run.client, connections: run.clients}
	direct := func(newest bool) func(time.Duration) loadResult {
		terms := make([][]string, len(run.qs))
		for i, q := range run.qs {
			terms[i] = search.Terms(q.text)
		}
		return func(d time.Duration) loadResult {
			return closedLoop(ctx, run.clients, d, func(i int) error {
				// The count limit of page 1 (boardpage.CountLimit), as the service asks.
				_, err := run.ix.Search(ctx, search.Query{Terms: terms[i%len(terms)], Newest: newest, Limit: searchPageSize,
					CountLimit: int(boardpage.CountLimit(1, searchPageSize))})
				return err
			})
		}
	}
	mix := zipfMix(run.c.seed, relevance, 100_000)
	var searched, requested int64
	cases := []struct {
		name string
		run  func(time.Duration) loadResult
	}{
		{"floor /healthz", func(d time.Duration) loadResult { return l.run(ctx, []string{base + "/healthz"}, d) }},
		{"http relevance", func(d time.Duration) loadResult { return l.run(ctx, prefixed(base, relevance), d) }},
		{"http newest", func(d time.Duration) loadResult { return l.run(ctx, prefixed(base, newest), d) }},
		{"direct relevance", direct(false)},
		{"direct newest", direct(true)},
		{"http zipf, cached", func(d time.Duration) loadResult {
			before := counted.searches.Load()
			r := l.run(ctx, prefixed(cachedBase, mix), d)
			searched, requested = counted.searches.Load()-before, r.requests
			return r
		}},
	}
	fmt.Fprintf(stdout, "\nqueries at %d clients, closed loop; per case %s untimed, then %s timed (target: http p99 <= 50ms, >= 1000 req/s)\n",
		run.clients, run.warmup, run.duration)
	fmt.Fprintf(stdout, "  http and direct: the %d distinct queries round robin, no cache; zipf: %d draws of them, cache on\n",
		len(run.qs), len(mix))
	fmt.Fprintf(stdout, "%-17s %9s %9s %10s %10s %10s %9s\n", "case", "requests", "failures", "req/s", "p50", "p99", "vs floor")
	var floorRate float64
	for _, c := range cases {
		if run.warmup > 0 {
			c.run(run.warmup)
		}
		r := c.run(run.duration)
		if err := ctx.Err(); err != nil {
			return err
		}
		if floorRate == 0 {
			floorRate = float64(r.requests) / r.elapsed.Seconds()
		}
		printLoadRow(stdout, c.name, r, floorRate)
	}
	if requested > 0 {
		fmt.Fprintf(stdout, "  zipf, cached: %d of %d requests searched the index (%.1f%%); %d distinct queries in the mix\n",
			searched, requested, 100*float64(searched)/float64(requested), len(slices.Compact(slices.Sorted(slices.Values(mix)))))
	}
	return nil
}

// printLoadRow prints a row of the query table.
func printLoadRow(w io.Writer, name string, r loadResult, floorRate float64) {
	rate := float64(r.requests) / r.elapsed.Seconds()
	p50, p99 := "-", "-"
	if len(r.latencies) > 0 {
		sorted := slices.Sorted(slices.Values(r.latencies))
		p50, p99 = roundDuration(percentile(sorted, 0.5)), roundDuration(percentile(sorted, 0.99))
	}
	fmt.Fprintf(w, "%-17s %9d %9d %10.0f %10s %10s %9.2f\n", name, r.requests, r.failures, rate, p50, p99, rate/floorRate)
	if r.failures > 0 {
		fmt.Fprintf(w, "  first failure: %s\n", r.firstFailure)
	}
}

// freshness runs the distinct queries by relevance on cachedBase while rate new articles a second are put into the
// index, one batch at a time, and a poller finds them; it prints both.
func (run searchRun) freshness(ctx context.Context, cachedBase string, relevance []string, rate int, stdout, stderr io.Writer) error {
	// The run's articles are on a board of their own, after the corpus's, with ids after its own: a later run on the
	// same index (--index) replaces them.
	r := &searchFreshnessRun{searchURL: cachedBase, client: run.client, board: int64(run.c.boards) + 1,
		word: fmt.Sprintf("sf%08x", rand.Uint32()), pending: map[int64]searchPending{}}
	type queued struct {
		doc search.Doc
		at  time.Time
	}
	queue := make(chan queued, rate*int(run.duration.Seconds()+1))
	// The flusher's own, read once flushed is closed.
	var putErr error
	var putTimes, inIndex []time.Duration // each batch's Put; each article's queueing to its Put's return
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		// As the updater: each batch is what arrived while the last was written, at most a poll's 100 records.
		for q := range queue {
			batch := []queued{q}
		drain:
			for len(batch) < 100 {
				select {
				case q, ok := <-queue:
					if !ok {
						break drain
					}
					batch = append(batch, q)
				default:
					break drain
				}
			}
			docs := make([]search.Doc, len(batch))
			for i, q := range batch {
				docs[i] = q.doc
			}
			start := time.Now()
			if err := run.ix.Put(ctx, docs); err != nil && putErr == nil {
				putErr = err
			}
			done := time.Now()
			putTimes = append(putTimes, done.Sub(start))
			for _, q := range batch {
				inIndex = append(inIndex, done.Sub(q.at))
			}
		}
	}()
	stopPolling := r.pollUntilDone(ctx)
	defer stopPolling() // stopping twice does nothing more
	var queries loadResult
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		l := loader{client: run.client, connections: run.clients}
		queries = l.run(ctx, prefixed(cachedBase, relevance), run.duration)
	}()
	scheduled, skipped := openLoop(ctx, "creates", rate, run.duration, 64, stderr, func(_ context.Context, seq int64) {
		i := int(seq) % run.c.articles
		d := run.c.article(i)
		d.ArticleID = int64(run.c.articles) + 1 + seq
		d.BoardID = r.board
		d.Title = fmt.Sprintf("search freshness %s %s", r.word, r.articleWord(seq))
		d.CreatedAt = time.Now().UTC().Truncate(time.Millisecond)
		now := time.Now()
		r.mu.Lock()
		r.pending[d.ArticleID] = searchPending{word: r.articleWord(seq), createdAt: d.CreatedAt, acked: now}
		r.mu.Unlock()
		queue <- queued{doc: d, at: now}
	})
	close(queue)
	<-loaded
	<-flushed
	waited := r.waitForPending(ctx, 10*time.Second)
	stopPolling()
	if putErr != nil {
		return fmt.Errorf("put: %w", putErr)
	}
	fmt.Fprintf(stdout, "\nwhile %d new articles a second are put (%d scheduled, %d skipped; %d batches, %.1f articles each):\n",
		rate, scheduled, skipped, len(putTimes), float64(len(inIndex))/float64(max(len(putTimes), 1)))
	fmt.Fprintf(stdout, "%-17s %9s %9s %10s %10s %10s\n", "case", "requests", "failures", "req/s", "p50", "p99")
	printLoadRow(stdout, "http relevance", queries, float64(queries.requests)/queries.elapsed.Seconds())
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(stdout, "%-32s %9s %10s %10s %10s %10s\n", "", "count", "p50", "p90", "p99", "max")
	printQuantiles(stdout, "floor: one poll", r.polls)
	printQuantiles(stdout, "one batch's Put", putTimes)
	printQuantiles(stdout, "floor: queued to in the index", inIndex)
	printQuantiles(stdout, "create to found (target p99 <= 1s)", r.latencies)
	fmt.Fprintf(stdout, "never found within %s after the creates: %d; by their own word: %d found\n", waited.Round(time.Millisecond),
		len(r.pending), r.foundByWord)
	return ctx.Err()
}

// printMemory prints this process's resident memory beside the target. reused says that no corpus was generated in
// this run: the peak is then the serving's too.
func printMemory(w io.Writer, reused bool) {
	fmt.Fprintf(w, "\nresident memory of this process, which serves the index: VmRSS %d MiB, peak VmHWM %d MiB (target <= 1024 MiB)\n",
		residentKiB("VmRSS")>>10, residentKiB("VmHWM")>>10)
	// bleve maps its segment files: the pages of them a search touched count as resident, and the kernel takes them
	// back under pressure as it does the page cache's.
	fmt.Fprintf(w, "  of VmRSS: the process's own memory (RssAnon) %d MiB, the index's mapped files (RssFile) %d MiB\n",
		residentKiB("RssAnon")>>10, residentKiB("RssFile")>>10)
	if !reused {
		fmt.Fprintf(w, "  the peak includes the articles generated and held while indexing; --index measures serving alone\n")
	}
}

// closedLoop calls fn from clients goroutines, each calling again when its last call returned, for d.
func closedLoop(ctx context.Context, clients int, d time.Duration, fn func(i int) error) loadResult {
	var next atomic.Int64
	results := make([]loadResult, clients)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range results {
		wg.Go(func() {
			r := &results[w]
			for ctx.Err() == nil {
				sent := time.Now()
				if sent.After(deadline) {
					return
				}
				r.requests++
				if err := fn(int(next.Add(1) - 1)); err != nil {
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

// runWrk prints how wrk is run against the queries and, when the binary is found, runs it so and prints its
// output: a load generator that is not this process, for comparison with the table's client.
func runWrk(ctx context.Context, wrk, base string, paths []string, clients int, duration time.Duration, dir string, stdout io.Writer) error {
	script := filepath.Join(dir, "queries.lua")
	var lua strings.Builder
	lua.WriteString("-- board bench search: the bench's queries, round robin\nlocal paths = {\n")
	for _, p := range paths {
		fmt.Fprintf(&lua, "  %q,\n", p)
	}
	lua.WriteString("}\nlocal i = 0\nrequest = function()\n  i = i + 1\n  return wrk.format(\"GET\", paths[(i % #paths) + 1])\nend\n")
	if err := os.WriteFile(script, []byte(lua.String()), 0o644); err != nil {
		return err
	}
	threads := runtime.GOMAXPROCS(0)
	// wrk's own timeout is 2 s, and would cut off the slow answers the table counts.
	wrkArgs := []string{"-t", fmt.Sprint(threads), "-c", fmt.Sprint(clients), "-d", duration.String(), "--timeout",
		readRequestTimeout.String(), "--latency", "-s", script, base}
	fmt.Fprintf(stdout, "\nwrk, the same queries (relevance): wrk %s\n", strings.Join(wrkArgs, " "))
	fmt.Fprintf(stdout, "  or one query: wrk -t %d -c %d -d %s --timeout %s --latency '%s%s'\n", threads, clients, duration,
		readRequestTimeout, base, paths[0])
	if wrk == "" {
		return nil
	}
	bin, err := exec.LookPath(wrk)
	if err != nil {
		fmt.Fprintf(stdout, "  (not run: %v)\n", err)
		return nil
	}
	out, err := exec.CommandContext(ctx, bin, wrkArgs...).CombinedOutput()
	for line := range strings.Lines(string(out)) {
		fmt.Fprint(stdout, "  ", line)
	}
	if err != nil {
		return fmt.Errorf("wrk: %w", err)
	}
	return nil
}

func dirSize(dir string) (int64, error) {
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			size += info.Size()
		}
		return err
	})
	return size, err
}

// corpus generates the bench's articles: article i is the same whatever the order or goroutine it is made in.
type corpus struct {
	seed                       uint64
	articles, boards, writers  int
	koreanShare                float64
	english, korean, predicate []string // by rank: the first is the most frequent
	start                      time.Time
	spacing                    time.Duration // between two articles' creation
}

func newCorpus(seed uint64, articles, boards, writers int, koreanShare float64) *corpus {
	start, _ := time.Parse(time.RFC3339, searchCorpusStart)
	return &corpus{seed: seed, articles: articles, boards: boards, writers: writers, koreanShare: koreanShare,
		english: englishVocabulary(seed, 5000), korean: distinct(strings.Fields(koreanNouns)),
		predicate: strings.Fields(koreanPredicates), start: start, spacing: 365 * 24 * time.Hour / time.Duration(articles)}
}

// zipf draws ranks of a vocabulary of n words, the first the most frequent, roughly as words are in text.
func zipf(r *rand.Rand, n int) *rand.Zipf { return rand.NewZipf(r, 1.07, 2, uint64(n-1)) }

func (c *corpus) article(i int) search.Doc {
	r := rand.New(rand.NewPCG(c.seed, uint64(i)))
	d := search.Doc{Type: search.TypeArticle, ArticleID: int64(i) + 1, BoardID: 1 + r.Int64N(int64(c.boards)),
		WriterID: 1 + r.Int64N(int64(c.writers)), CreatedAt: c.start.Add(time.Duration(i) * c.spacing), Version: 1}
	sentence := c.englishSentence
	if r.Float64() < c.koreanShare {
		sentence = c.koreanSentence
	}
	words := zipf(r, max(len(c.english), len(c.korean)))
	d.Title = text(30+r.IntN(31), true, func(b *strings.Builder) { sentence(r, words, b) })
	d.Content = text(300+r.IntN(1201), false, func(b *strings.Builder) { sentence(r, words, b) })
	return d
}

// text writes sentences until it is at least want characters long; a title is cut after its last whole word
// within want.
func text(want int, title bool, sentence func(*strings.Builder)) string {
	var b strings.Builder
	for runes := 0; runes < want; {
		if b.Len() > 0 {
			b.WriteByte(' ')
			runes++
		}
		before := b.Len()
		sentence(&b)
		runes += utf8.RuneCountInString(b.String()[before:])
	}
	s := b.String()
	if !title {
		return s
	}
	s = strings.TrimRight(s, ".")
	for utf8.RuneCountInString(s) > want {
		cut := strings.LastIndexByte(s, ' ')
		if cut <= 0 {
			break
		}
		s = s[:cut]
	}
	return s
}

// englishSentence writes 5 to 14 words and a full stop.
func (c *corpus) englishSentence(r *rand.Rand, words *rand.Zipf, b *strings.Builder) {
	n := 5 + r.IntN(10)
	for k := range n {
		w := c.english[words.Uint64()%uint64(len(c.english))]
		if k == 0 {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
			continue
		}
		b.WriteByte(' ')
		b.WriteString(w)
	}
	b.WriteByte('.')
}

// koreanSentence writes 3 to 8 nouns, most with a particle attached, and a predicate.
func (c *corpus) koreanSentence(r *rand.Rand, words *rand.Zipf, b *strings.Builder) {
	n := 3 + r.IntN(6)
	for range n {
		noun := c.korean[words.Uint64()%uint64(len(c.korean))]
		b.WriteString(noun)
		if r.IntN(5) > 0 {
			b.WriteString(particle(r, noun))
		}
		b.WriteByte(' ')
	}
	b.WriteString(c.predicate[r.IntN(len(c.predicate))])
	b.WriteByte('.')
}

// particle returns a particle that fits after noun: the form after a final consonant or after a vowel.
func particle(r *rand.Rand, noun string) string {
	last, _ := utf8.DecodeLastRuneInString(noun)
	afterConsonant := last >= 0xAC00 && last <= 0xD7A3 && (last-0xAC00)%28 != 0
	pairs := [][2]string{{"은", "는"}, {"이", "가"}, {"을", "를"}, {"과", "와"}, {"으로", "로"}, {"에", "에"},
		{"에서", "에서"}, {"의", "의"}, {"도", "도"}, {"까지", "까지"}, {"부터", "부터"}, {"만", "만"}, {"이랑", "랑"}}
	p := pairs[r.IntN(len(pairs))]
	if afterConsonant {
		return p[0]
	}
	return p[1]
}

// queries returns n queries of one or two words from the corpus's vocabularies, half of the words frequent (drawn
// Zipf-like, as in the articles) and half drawn evenly, so mostly rare; none is only stop words.
func (c *corpus) queries(seed uint64, n int) []searchQuery {
	r := rand.New(rand.NewPCG(seed, ^uint64(0)))
	words := zipf(r, max(len(c.english), len(c.korean)))
	qs := make([]searchQuery, 0, n)
	for len(qs) < n {
		q := searchQuery{korean: r.Float64() < c.koreanShare, words: 1 + r.IntN(2)}
		vocabulary := c.english
		if q.korean {
			vocabulary = c.korean
		}
		parts := make([]string, q.words)
		for k := range parts {
			rank := r.IntN(len(vocabulary))
			if r.IntN(2) == 0 {
				rank = int(words.Uint64() % uint64(len(vocabulary)))
			}
			parts[k] = vocabulary[rank]
		}
		q.text = strings.Join(parts, " ")
		if len(search.Terms(q.text)) == q.words {
			qs = append(qs, q)
		}
	}
	return qs
}

// englishVocabulary returns n English words by rank: the commonest real words first (stop words among them, as in
// real text), then made-up words of two or three syllables, which stand for the long tail of a real vocabulary.
func englishVocabulary(seed uint64, n int) []string {
	vocabulary := distinct(strings.Fields(englishWords))
	seen := map[string]bool{}
	for _, w := range vocabulary {
		seen[w] = true
	}
	onsets := strings.Fields("b c d f g h j k l m n p r s t v w z br ch cl cr dr fl gr pl pr sh st th tr")
	vowels := strings.Fields("a e i o u ai ea ee oo ou")
	codas := append([]string{""}, strings.Fields("n r s t l ck nd st ng")...)
	r := rand.New(rand.NewPCG(seed, 0))
	for len(vocabulary) < n {
		var b strings.Builder
		for range 2 + r.IntN(2) {
			b.WriteString(onsets[r.IntN(len(onsets))] + vowels[r.IntN(len(vowels))] + codas[r.IntN(len(codas))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			vocabulary = append(vocabulary, w)
		}
	}
	return vocabulary
}

// distinct returns words without repeats, in their first order.
func distinct(words []string) []string {
	seen := map[string]bool{}
	out := words[:0:0]
	for _, w := range words {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// englishWords are common English words, the commonest first.
const englishWords = `the of and to a in is it you that he was for on are with as i his they be at one have this from
or had by not word but what some we can out other were all there when up use your how said an each she which do their
time if will way about many then them write would like so these her long make thing see him two has look more day
could go come did number sound no most people my over know water than call first who may down side been now find any
new work part take get place made live where after back little only round man year came show every good me give our
under name very through just form sentence great think say help low line differ turn cause much mean before move right
boy old too same tell does set three want air well also play small end put home read hand port large spell add even
land here must big high such follow act why ask men change went light kind off need house picture try us again animal
point mother world near build self earth father head stand own page should country found answer school grow study still
learn plant cover food sun four between state keep eye never last let thought city tree cross farm hard start might
story saw far sea draw left late run while press close night real life few north open seem together next white children
begin got walk example ease paper group always music those both mark often letter until mile river car feet care second
book carry took science eat room friend began idea fish mountain stop once base hear horse cut sure watch color face
wood main enough plain girl usual young ready above ever red list though feel talk bird soon body dog family direct pose
leave song measure door product black short numeral class wind question happen complete ship area half rock order fire
south problem piece told knew pass since top whole king space heard best hour better true during hundred five remember
step early hold west ground interest reach fast verb sing listen six table travel less morning ten simple several vowel
toward war lay against pattern slow center love person money serve appear road map rain rule govern pull cold notice
voice unit power town fine certain fly fall lead cry dark machine note wait plan figure star box noun field rest correct
able pound done beauty drive stood contain front teach week final gave green oh quick develop ocean warm free minute
strong special mind behind clear tail produce fact street inch multiply nothing course stay wheel full force blue object
decide surface deep moon island foot system busy test record boat common gold possible plane stead dry wonder laugh
thousand ago ran check game shape equate hot miss brought heat snow tire bring yes distant fill east paint language among
board post comment reply thread forum server update release version issue bug feature user account login password
search result phone computer internet website app code data file image video review price buy sell game team player
match season coffee recipe weather movie show episode`

// koreanNouns are common Korean nouns, the commonest first, roughly.
const koreanNouns = `사람 생각 오늘 문제 시간 게시판 친구 회사 학교 가족 내일 어제 정부 경제 사회 문화 역사 음악 영화 드라마
게임 여행 음식 요리 식당 커피 날씨 서울 부산 대구 인천 광주 대전 제주 한국 일본 중국 미국 세계 나라 도시 동네 아파트
자동차 버스 지하철 기차 비행기 공항 병원 약국 의사 간호사 선생님 학생 대학교 수업 시험 공부 숙제 성적 취업 면접 회의
업무 프로젝트 개발 프로그램 컴퓨터 노트북 휴대폰 스마트폰 인터넷 사이트 서버 데이터 보안 코드 질문 답변 댓글 추천 공지
이벤트 모임 행사 축제 공연 전시 사진 카메라 소설 잡지 신문 뉴스 기사 방송 유튜브 채널 영상 노래 가수 배우 감독 작가
선수 축구 야구 농구 배구 운동 헬스 건강 다이어트 감기 마음 사랑 행복 기분 걱정 고민 이야기 경험 추억 계획 목표 미래
과거 현재 주말 평일 아침 점심 저녁 새벽 여름 가을 겨울 하늘 바다 공원 나무 고양이 강아지 동물 바람 가격 월급 주식
부동산 은행 카드 쇼핑 신발 가방 선물 생일 결혼 아이 부모 엄마 아빠 누나 동생 할머니 할아버지 이웃 손님 주인 가게
시장 마트 편의점 배달 택배 주문 결제 환불 서비스 고객 상담 전화 문자 메일 주소 번호 이름 정보 방법 이유 결과 의견
정책 선거 대통령 국회 규칙 안전 사고 경찰 소방서 기술 과학 연구 실험 자료 분석 통계 지도 거리 교통 주차 자전거 산책
등산 캠핑 낚시 수영 요가 맛집 메뉴 반찬 김치 라면 치킨 피자 과일 사과 우유 맥주 소주 와인 물건 가구 청소 빨래 이사
인테리어 전기 가스 난방 에어컨 냉장고 세탁기 텔레비전 라디오 도서관 박물관 미술관 영화관 극장 호텔 숙소 예약 일정
휴가 출장 출근 퇴근 야근 연봉 사장 직원 동료 팀장 부장 신입 경력 자격증 교육 강의 학원 유학 외국어 영어 일본어 중국어
번역 문법 단어 발음 소리 목소리 얼굴 머리 모습 성격 습관 취미 관심 재미 실수 성공 실패 도전 기회 변화 발전 환경 기후
에너지 자연 지역 시골 고향 주민 시민 국민 사회생활 인간관계 대화 토론 논쟁 비판 칭찬 감사 부탁 약속 시작 마지막`

// koreanPredicates end a Korean sentence.
const koreanPredicates = `있습니다 없습니다 좋아요 싫어요 했습니다 합니다 같아요 봤어요 갔어요 왔어요 먹었어요 생각합니다 궁금합니다
감사합니다 추천합니다 알려주세요 부탁드립니다 어떨까요 맞아요 되나요 괜찮아요 많아요 적어요 어렵네요 쉽네요 재밌어요
힘들어요 필요해요 바랍니다 시작했어요`
