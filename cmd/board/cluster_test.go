package main

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/redisclient/redisclienttest"
	"board/internal/sqldb/sqldbtest"
	"board/internal/view"
)

// The cluster suite (issue 13): three `board serve` processes with every service on MariaDB, a Redis Cluster and
// one shared broker, a mixed workload through random instances, and checks, once the system is quiet, that every
// acknowledged write is where it belongs. It needs the real engines, so it runs only when asked to.
const (
	clusterEnv         = "BOARD_TEST_CLUSTER"          // 1 runs the cluster suite
	clusterDurationEnv = "BOARD_TEST_CLUSTER_DURATION" // how long the workload runs (default 75s: one round of faults); e.g. 10m runs about nine
	clusterInstances   = 3
	clusterWorkers     = 8
	clusterBoards      = 3
	hotArticles        = 20 // how many of the newest articles take most comments, likes and views
	// quietBound bounds every wait for the system to settle after the workload; a healthy cluster needs seconds.
	quietBound = 2 * time.Minute
)

// cluster is the running system under test, and what the test needs to read its state directly.
type cluster struct {
	mu           sync.Mutex // guards instances, incarnations and engines, which the faults replace under the workload
	instances    []*process
	incarnations []*incarnation
	args         [][]string // each instance's serve flags, its addresses fixed once known, to restart it alike
	engines      *enginesProcess
	enginesDir   string
	kafka        string // the shared broker's addresses
	topicPrefix  string
	redisAddrs   []string // the Redis Cluster's seeds
	redis        *redis.ClusterClient
	dbs          map[string]*sql.DB // service database name (article, comment, ...) -> the test's database
}

// incarnation is one process that ran as an instance, from its start to its kill (or until now).
type incarnation struct {
	instance       int
	p              *process
	started, ended time.Time
}

// startCluster starts one `board engines` (for its broker) and three `board serve` with every service, on the test's
// own MariaDB databases, Redis key prefix and topic prefix, all removed at the end.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	suffix := sqldbtest.RandomSuffix()
	dbPrefix := sqldbtest.Databases(t, "board_cluster_", testDatabases()...) // dropped at the end
	redisPrefix := "test:cluster:" + suffix + ":"
	c := &cluster{topicPrefix: "cluster-" + suffix + "-", dbs: map[string]*sql.DB{}}

	addrs := strings.Split(os.Getenv(redisclienttest.ClusterAddrsEnv), ",")
	c.redisAddrs = addrs
	c.redis = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() {
		redisclienttest.DeletePrefix(t, c.redis, redisPrefix) // after the instances stopped: cleanups run last first
		redisclienttest.DeletePrefix(t, c.redis, redisclienttest.RateLimitPrefix+redisPrefix)
		c.redis.Close()
	})
	for _, s := range app.Services() {
		if s.Database == "" {
			continue
		}
		if !s.Publishes {
			continue // the checks read the producers' databases only
		}
		db, err := sql.Open("mysql", sqldbtest.DSN(t, dbPrefix+s.Database))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() }) // before the databases' drop, registered earlier
		c.dbs[s.Database] = db
	}

	c.enginesDir = t.TempDir()
	c.engines = startEngines(t, c.enginesDir, "in-process")
	c.kafka = c.engines.kafkaBrokers
	for i := range clusterInstances {
		args := []string{"--data-dir", t.TempDir(), "--log-format", "json",
			"--mysql-dsn", os.Getenv(sqldbtest.MySQLDSNEnv), "--mysql-db-prefix", dbPrefix,
			"--redis-addr", strings.Join(addrs, ","), "--redis-prefix", redisPrefix,
			"--kafka-brokers", c.kafka, "--topic-prefix", c.topicPrefix, "--hot-article-time-zone", "UTC",
			// Every write asks the rate limiter, through the faults too, with a limit the workload stays under.
			"--rate-limits=true", "--write-rate-limit", "1000000/1m"}
		for _, s := range app.Services() {
			args = append(args, "--"+s.Name+"-addr", "127.0.0.1:0")
		}
		p := startProcess(t, args...)
		for _, s := range app.Services() { // a restart listens where this one does, so the workload's URLs stay valid
			args[slices.Index(args, "--"+s.Name+"-addr")+1] = strings.TrimPrefix(p.urls[s.Name], "http://")
		}
		c.args = append(c.args, args)
		c.instances = append(c.instances, p)
		c.incarnations = append(c.incarnations, &incarnation{instance: i, p: p, started: time.Now()})
	}
	// The instances stop (SIGTERM, cleanly) before the engines they flush to; startProcess's cleanup kills
	// whatever is left.
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, p := range c.instances {
			if !p.hasExited() {
				_ = p.cmd.Process.Signal(syscall.SIGCONT) // a test that failed amid a SIGSTOP left it stopped
				stopCleanly(t, fmt.Sprintf("instance %d", i), p)
			}
		}
		if !c.engines.hasExited() { // a failed broker restart left none running
			stopCleanly(t, "board engines", c.engines.process)
		}
	})
	return c
}

// url returns the base URL of service on a random instance.
func (c *cluster) url(service string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.instances[rand.IntN(len(c.instances))].urls[service]
}

// instance returns the process that runs instance i now.
func (c *cluster) instance(i int) *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.instances[i]
}

// clusterDuration is how long the workload runs: BOARD_TEST_CLUSTER_DURATION, or a short default for CI.
func clusterDuration(t *testing.T) time.Duration {
	s := os.Getenv(clusterDurationEnv)
	if s == "" {
		return 75 * time.Second // long enough for every fault (see injectFaults) and a quiet end
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s=%s: %v", clusterDurationEnv, s, err)
	}
	return d
}

func TestCluster(t *testing.T) {
	if os.Getenv(clusterEnv) != "1" || os.Getenv(sqldbtest.MySQLDSNEnv) == "" ||
		os.Getenv(redisclienttest.ClusterAddrsEnv) == "" {
		t.Skipf("the cluster suite needs %s=1, %s (MariaDB) and %s (a Redis Cluster, e.g. $(scripts/redis-cluster start))",
			clusterEnv, sqldbtest.MySQLDSNEnv, redisclienttest.ClusterAddrsEnv)
	}
	c := startCluster(t)
	l := newLedger()
	duration := clusterDuration(t)
	started := time.Now()
	ctx, stopWorkload := context.WithCancel(context.Background())
	defer stopWorkload()
	workloadDone := runWorkload(ctx, c, l)
	sampler := sampleViews(ctx, c, l)

	// The faults run here, on the test's goroutine (they start processes, which may fail the test), while the
	// workload runs on; it runs for the duration given, and at least a few seconds past the last fault.
	faults := injectFaults(t, c, started.Add(duration))
	time.Sleep(max(time.Until(started.Add(duration)), afterLastFault))
	stopWorkload()
	<-workloadDone
	workloadEnded := time.Now()
	l.viewsWithinWindow = workloadEnded.Sub(started) < view.DefaultDedupeTTL
	t.Logf("workload: %v through %d instances, %d workers", workloadEnded.Sub(started).Round(time.Millisecond),
		clusterInstances, clusterWorkers)

	viewSamples, viewsBackwards := sampler.result()
	for _, msg := range viewsBackwards {
		t.Errorf("view count went backwards: %s", msg)
	}
	r := checkCluster(t, c, l, workloadEnded, faults)
	r.viewSamples, r.viewsBackwards = viewSamples, viewsBackwards
	logInstanceErrors(t, c)
	logLedger(t, l, r, faults)
}

// ledger records what every client was told: the writes acknowledged and the answers that refused one.
type ledger struct {
	mu        sync.Mutex
	acked     map[string]int // kind -> writes acknowledged
	answers   map[string]int // "kind: status code" -> count, for every answer that acknowledged nothing
	failed    map[string]int // kind -> requests without an answer (outcome unknown)
	unknown   map[string]int // kind -> requests without an answer or with a 5xx one: they may or may not have committed
	troubles  []time.Time    // when each of those came, to compare with the faults' times
	surprises []string       // answers that contradict what was acknowledged before
	ids       []int64        // every id an acknowledged write returned
	articles  map[int64]*articleRecord
	comments  map[commentKey]*commentRecord
	likes     map[likeKey]likeState
	// doubtfulLikes: a request on that like got no answer. A request to a stopped instance may still commit
	// after later ones were acknowledged, so its state is unknown for good.
	doubtfulLikes map[likeKey]bool
	viewers       map[int64]map[int64]bool // article -> users whose view was acknowledged
	maxViews      map[int64]int64          // article -> highest count a view answered
	// viewsWithinWindow: the run is shorter than the view dedupe window, so no user's view counted twice.
	viewsWithinWindow bool
}

type articleRecord struct {
	owner          int // the worker that created it, the only one that updates and deletes it
	board          int64
	title, content string
	deleted        bool
	maybeTitles    map[string]bool // titles of updates without an answer: SQL may hold any of them
	maybeDeleted   bool            // a delete without an answer: SQL may or may not hold it; the workload leaves it
}

type commentKey struct {
	version string // v1 or v2
	id      int64
}

type commentRecord struct {
	owner        int
	article      int64
	parent       int64  // v1: the root's id (its own for a root)
	path         string // v2
	deleted      bool
	maybeDeleted bool // a delete without an answer
}

type likeKey struct{ article, user int64 }

// likeState is a like as acknowledged last: liked, unliked, or unknown after a request without an answer.
type likeState int

const (
	unliked likeState = iota
	liked
	likeUnknown
)

func newLedger() *ledger {
	return &ledger{acked: map[string]int{}, answers: map[string]int{}, failed: map[string]int{}, unknown: map[string]int{},
		articles: map[int64]*articleRecord{}, comments: map[commentKey]*commentRecord{}, likes: map[likeKey]likeState{},
		doubtfulLikes: map[likeKey]bool{}, viewers: map[int64]map[int64]bool{}, maxViews: map[int64]int64{}}
}

// answer is what one request got: a status and body, or an error when no answer came.
type answer struct {
	status int
	code   string
	body   []byte
	err    error
}

func (a answer) ok() bool { return a.err == nil && a.status < 300 }

// unknownOutcome says whether the request may have committed although nothing acknowledged it: no answer came, or
// a 5xx one (a write can commit and its answer fail).
func (a answer) unknownOutcome() bool { return a.err != nil || a.status >= 500 }

// decode decodes a successful answer's body; a body that does not decode is recorded as a surprise.
func (l *ledger) decode(kind string, a answer, out any) bool {
	if err := json.Unmarshal(a.body, out); err != nil {
		l.surprise("%s: %d answer %q does not decode: %v", kind, a.status, a.body, err)
		return false
	}
	return true
}

// note records an answer that acknowledged nothing.
func (l *ledger) note(kind string, a answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.unknownOutcome() {
		l.unknown[kind]++
		l.troubles = append(l.troubles, time.Now())
	}
	if a.err != nil {
		l.failed[kind]++
		return
	}
	l.answers[fmt.Sprintf("%s: %d %s", kind, a.status, a.code)]++
}

func (l *ledger) surprise(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.surprises = append(l.surprises, fmt.Sprintf(format, args...))
}

// ack records an acknowledged write of kind, with the id it returned (0 for none), and applies change to the
// ledger under its lock.
func (l *ledger) ack(kind string, id int64, change func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[kind]++
	if id != 0 {
		l.ids = append(l.ids, id)
	}
	if change != nil {
		change()
	}
}

// liveArticles returns the articles not acknowledged deleted, optionally only those of one owner.
func (l *ledger) liveArticles(owner int) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []int64
	for id, a := range l.articles {
		if !a.deleted && !a.maybeDeleted && (owner < 0 || a.owner == owner) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // map order is random but not uniformly so; pick from a sorted list
	return ids
}

// ownComments returns the live comments of one version that a worker created, on live articles.
func (l *ledger) ownComments(owner int, version string) []commentKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	var keys []commentKey
	for k, c := range l.comments {
		a := l.articles[c.article]
		if k.version == version && c.owner == owner && !c.deleted && !c.maybeDeleted && !a.deleted && !a.maybeDeleted {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b commentKey) int { return int(a.id - b.id) })
	return keys
}

// clusterClient bounds every request, so that a request to a stopped instance fails instead of hanging: well
// below the SIGSTOP fault, so the workers go on through the other instances.
var clusterClient = &http.Client{Timeout: 5 * time.Second}

// clusterRequest sends body (when not nil) as JSON and returns the answer, or the error that came instead.
func clusterRequest(method, url string, body any) answer {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{err: err}
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return answer{err: err}
	}
	resp, err := clusterClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{err: err}
	}
	a := answer{status: resp.StatusCode, body: raw}
	if a.status >= 300 {
		var e struct{ Code string }
		_ = json.Unmarshal(raw, &e)
		a.code = e.Code
	}
	return a
}

// runWorkload runs the workers until ctx is done, and closes the channel it returns once they all stopped.
func runWorkload(ctx context.Context, c *cluster, l *ledger) <-chan struct{} {
	var wg sync.WaitGroup
	for i := range clusterWorkers {
		w := newWorker(i, c, l)
		wg.Go(func() {
			for ctx.Err() == nil {
				w.step()
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

func newWorker(id int, c *cluster, l *ledger) *worker {
	return &worker{id: id, c: c, l: l, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(id)))}
}

// worker sends one write at a time. It alone updates and deletes its articles and comments, and likes and views
// as its own users, so the ledger knows the state each of its writes leaves; comments, likes and views go to any
// article, so writes of different workers meet on the same rows.
type worker struct {
	id  int
	c   *cluster
	l   *ledger
	rng *rand.Rand
}

// user returns one of the worker's n users.
func (w *worker) user(n int) int64 { return int64(w.id+1)*1_000_000 + int64(w.rng.IntN(n)) + 1 }

// step sends one write, chosen at random with weights that keep a few dozen articles alive.
func (w *worker) step() {
	if len(w.l.liveArticles(w.id)) < 3 {
		w.createArticle()
		return
	}
	ops := []struct {
		weight int
		run    func()
	}{
		{6, w.createArticle}, {4, w.updateArticle}, {1, w.deleteArticle},
		{6, func() { w.createComment("v1", false) }}, {4, func() { w.createComment("v1", true) }},
		{3, func() { w.deleteComment("v1") }},
		{6, func() { w.createComment("v2", false) }}, {4, func() { w.createComment("v2", true) }},
		{3, func() { w.deleteComment("v2") }},
		{16, w.likeOrUnlike}, {20, w.view},
	}
	total := 0
	for _, op := range ops {
		total += op.weight
	}
	n := w.rng.IntN(total)
	for _, op := range ops {
		if n < op.weight {
			op.run()
			return
		}
		n -= op.weight
	}
}

// anyArticle returns a random live article of any worker, most often one of the newest, so that writes of
// different workers and instances meet on the same rows.
func (w *worker) anyArticle() int64 {
	ids := w.l.liveArticles(-1)
	if len(ids) > hotArticles && w.rng.IntN(4) > 0 {
		ids = ids[len(ids)-hotArticles:] // Snowflake ids grow with time: the newest are last
	}
	return ids[w.rng.IntN(len(ids))]
}

func (w *worker) ownArticle() int64 {
	ids := w.l.liveArticles(w.id)
	return ids[w.rng.IntN(len(ids))]
}

type articleAnswer struct {
	ArticleID, BoardID apijson.ID
	Title, Content     string
}

func (w *worker) createArticle() {
	const kind = "article create"
	board := int64(w.rng.IntN(clusterBoards) + 1)
	title := fmt.Sprintf("title %d", w.rng.Int64())
	a := clusterRequest("POST", w.c.url("article")+"/v1/articles", map[string]any{"title": title, "content": "content " + title,
		"writerId": w.user(10), "boardId": board})
	if !a.ok() {
		w.l.note(kind, a)
		return
	}
	var out articleAnswer
	if !w.l.decode(kind, a, &out) {
		return
	}
	id := int64(out.ArticleID)
	w.l.ack(kind, id, func() {
		w.l.articles[id] = &articleRecord{owner: w.id, board: board, title: out.Title, content: out.Content}
	})
}

func (w *worker) updateArticle() {
	const kind = "article update"
	id := w.ownArticle()
	title := fmt.Sprintf("updated %d", w.rng.Int64())
	a := clusterRequest("PUT", fmt.Sprintf("%s/v1/articles/%d", w.c.url("article"), id), map[string]any{"title": title,
		"content": "content " + title})
	if !a.ok() {
		w.l.note(kind, a)
		if a.unknownOutcome() {
			w.l.mu.Lock()
			r := w.l.articles[id]
			if r.maybeTitles == nil {
				r.maybeTitles = map[string]bool{}
			}
			r.maybeTitles[title] = true
			w.l.mu.Unlock()
		}
		return
	}
	var out articleAnswer
	if !w.l.decode(kind, a, &out) {
		return
	}
	w.l.ack(kind, 0, func() { w.l.articles[id].title, w.l.articles[id].content = out.Title, out.Content })
}

func (w *worker) deleteArticle() {
	const kind = "article delete"
	id := w.ownArticle()
	a := clusterRequest("DELETE", fmt.Sprintf("%s/v1/articles/%d", w.c.url("article"), id), nil)
	if !a.ok() {
		w.l.note(kind, a)
		if a.unknownOutcome() {
			w.l.mu.Lock()
			w.l.articles[id].maybeDeleted = true
			w.l.mu.Unlock()
		}
		return
	}
	w.l.ack(kind, 0, func() { w.l.articles[id].deleted = true })
}

type commentAnswer struct {
	CommentID, ArticleID, ParentCommentID apijson.ID
	Path                                  string
}

// createComment creates a root on any live article or, with reply, a reply to one of the worker's live comments.
func (w *worker) createComment(version string, reply bool) {
	kind := "comment " + version + " root"
	body := map[string]any{"writerId": w.user(10), "content": "a comment"}
	var article int64
	if reply {
		kind = "comment " + version + " reply"
		own := w.l.ownComments(w.id, version)
		if len(own) == 0 {
			return
		}
		w.l.mu.Lock()
		parent := w.l.comments[own[w.rng.IntN(len(own))]]
		article = parent.article
		if version == "v1" {
			body["parentCommentId"] = fmt.Sprint(parent.parent) // a reply to a reply answers its root
		} else {
			body["parentPath"] = parent.path
		}
		w.l.mu.Unlock()
	} else {
		article = w.anyArticle()
	}
	body["articleId"] = fmt.Sprint(article)
	a := clusterRequest("POST", w.c.url("comment")+"/"+version+"/comments", body)
	if !a.ok() {
		w.l.note(kind, a)
		return
	}
	var out commentAnswer
	if !w.l.decode(kind, a, &out) {
		return
	}
	id := int64(out.CommentID)
	if int64(out.ArticleID) != article {
		w.l.surprise("%s %d: created on article %d, asked for %d", kind, id, out.ArticleID, article)
	}
	w.l.ack(kind, id, func() {
		w.l.comments[commentKey{version, id}] = &commentRecord{owner: w.id, article: article,
			parent: int64(out.ParentCommentID), path: out.Path}
	})
}

func (w *worker) deleteComment(version string) {
	kind := "comment " + version + " delete"
	own := w.l.ownComments(w.id, version)
	if len(own) == 0 {
		return
	}
	key := own[w.rng.IntN(len(own))]
	a := clusterRequest("DELETE", fmt.Sprintf("%s/%s/comments/%d", w.c.url("comment"), version, key.id), nil)
	if !a.ok() {
		w.l.note(kind, a)
		if a.unknownOutcome() {
			w.l.mu.Lock()
			w.l.comments[key].maybeDeleted = true
			w.l.mu.Unlock()
		}
		return
	}
	w.l.ack(kind, 0, func() { w.l.comments[key].deleted = true })
}

// likeStrategies are the like service's strategies, each named by its path segment.
var likeStrategies = []string{"pessimistic-lock-1", "pessimistic-lock-2", "optimistic-lock"}

// likeOrUnlike likes an article as one of the worker's users, or unlikes it when the ledger says the user likes
// it, with a random strategy. An answer that contradicts the ledger (409 ALREADY_LIKED for a user whose unlike was
// acknowledged) is a surprise.
func (w *worker) likeOrUnlike() {
	key := likeKey{w.anyArticle(), w.user(30)}
	if own := w.ownLikes(); len(own) > 0 && w.rng.IntN(3) == 0 {
		key = own[w.rng.IntN(len(own))]
	}
	strategy := likeStrategies[w.rng.IntN(len(likeStrategies))]
	w.l.mu.Lock()
	state, doubtful := w.l.likes[key], w.l.doubtfulLikes[key]
	w.l.mu.Unlock()
	method, kind := "POST", "like "+strategy
	if state == liked {
		method, kind = "DELETE", "unlike "+strategy
	}
	a := clusterRequest(method, fmt.Sprintf("%s/v1/article-likes/articles/%d/users/%d/%s", w.c.url("like"), key.article,
		key.user, strategy), nil)
	if !a.ok() {
		w.l.note(kind, a)
		switch {
		case a.unknownOutcome():
			w.l.mu.Lock()
			w.l.likes[key] = likeUnknown // the write may or may not have committed
			if a.err != nil {
				w.l.doubtfulLikes[key] = true // and may still commit later
			}
			w.l.mu.Unlock()
		case a.code == "ALREADY_LIKED" && state == unliked && !doubtful:
			w.l.surprise("like of article %d by user %d: 409 ALREADY_LIKED after its unlike was acknowledged", key.article, key.user)
		}
		return
	}
	var id int64
	if method == "POST" {
		var out struct{ ArticleLikeID apijson.ID }
		if !w.l.decode(kind, a, &out) {
			return
		}
		id = int64(out.ArticleLikeID)
	}
	w.l.ack(kind, id, func() { w.l.likes[key] = map[string]likeState{"POST": liked, "DELETE": unliked}[method] })
}

// ownLikes returns the likes of the worker's users on live articles, as acknowledged.
func (w *worker) ownLikes() []likeKey {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	var keys []likeKey
	for k, state := range w.l.likes {
		a := w.l.articles[k.article]
		if state == liked && k.user/1_000_000 == int64(w.id+1) && !a.deleted && !a.maybeDeleted {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b likeKey) int { return cmp.Or(cmp.Compare(a.article, b.article), cmp.Compare(a.user, b.user)) })
	return keys
}

// view views an article as one of the worker's users; views by the same user within the dedupe window count once.
func (w *worker) view() {
	w.viewAs(w.anyArticle(), w.user(100))
}

// viewAs views article as user and returns the count answered, or false without one.
func (w *worker) viewAs(article, user int64) (int64, bool) {
	const kind = "view"
	a := clusterRequest("POST", fmt.Sprintf("%s/v1/article-views/articles/%d/users/%d", w.c.url("view"), article, user), nil)
	if !a.ok() {
		w.l.note(kind, a)
		return 0, false
	}
	var count int64
	if !w.l.decode(kind, a, &count) {
		return 0, false
	}
	w.l.ack(kind, 0, func() {
		if w.l.viewers[article] == nil {
			w.l.viewers[article] = map[int64]bool{}
		}
		w.l.viewers[article][user] = true
		w.l.maxViews[article] = max(w.l.maxViews[article], count)
	})
	return count, true
}

// logLedger prints the table of writes acknowledged, refused and without an answer, by kind, and what the faults
// and the checks measured.
func logLedger(t *testing.T, l *ledger, r checkResult, f *faultRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%-32s %10s %10s %10s\n", "kind", "acked", "no answer", "unknown")
	total := 0
	for _, kind := range slices.Sorted(mapsKeys(l.acked, l.failed, l.unknown)) {
		fmt.Fprintf(&b, "%-32s %10d %10d %10d\n", kind, l.acked[kind], l.failed[kind], l.unknown[kind])
		total += l.acked[kind]
	}
	fmt.Fprintf(&b, "%-32s %10d\n", "writes acknowledged", total)
	for _, k := range slices.Sorted(mapsKeys(l.answers)) {
		fmt.Fprintf(&b, "refused  %-40s %6d\n", k, l.answers[k])
	}
	fmt.Fprintf(&b, "faults injected (time from the start of the workload):\n")
	for _, x := range f.faults {
		fmt.Fprintf(&b, "  %6.1fs-%6.1fs  %-24s %s\n", x.start.Sub(f.started).Seconds(), x.end.Sub(f.started).Seconds(),
			x.name, x.detail)
	}
	outside := f.outsideFaults(l.troubles)
	fmt.Fprintf(&b, "%-44s %d of %d\n", "unknown outcomes outside the faults (+10 s)", outside, len(l.troubles))
	fmt.Fprintf(&b, "%-44s %d\n", "writes lost", r.lost)
	fmt.Fprintf(&b, "%-44s %s\n", "events published twice", r.duplicates)
	takeovers := make([]string, len(f.takeovers))
	for i, d := range f.takeovers {
		takeovers[i] = "not observed"
		if d >= 0 {
			takeovers[i] = d.Round(time.Millisecond).String()
		}
	}
	fmt.Fprintf(&b, "%-44s %s (aim <= 10s)\n", "outbox takeover time after each kill", strings.Join(takeovers, ", "))
	if r.consistentAfter >= 0 {
		fmt.Fprintf(&b, "%-44s %v (%v after the workload ended)\n", "last fault to a consistent read side",
			r.consistentAfterFault.Round(time.Millisecond), r.consistentAfter.Round(time.Millisecond))
	} else {
		fmt.Fprintf(&b, "read side not consistent within %v after the workload ended\n", quietBound)
	}
	fmt.Fprintf(&b, "%-44s %d samples, %d went backwards\n", "view counts sampled", r.viewSamples, len(r.viewsBackwards))
	t.Logf("cluster run:\n%s", b.String())
}

// mapsKeys returns the keys of several maps, each once.
func mapsKeys[V any](ms ...map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}
