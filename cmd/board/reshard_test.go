package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"board/internal/polltest"
)

// The live reshard (issue 37): a real Vitess cluster (scripts/vitess cluster start: etcd, vtctld, vtgate, a
// vttablet and mysqld per shard), two boards in-process on it, a mixed load of writes (the cluster suite's workers)
// and reads, and, under that load, each keyspace named split from 2 shards into 4 with Vitess's Reshard: new
// tablets, the copy, a VDiff, SwitchTraffic of reads then writes, complete. Nothing in board changes. Then the
// cluster suite's checks: every acknowledged write in SQL, every count equal to its recount, the read side equal to
// SQL; and no answer a 500. It prints each switch's write pause and the rates reached; timings never fail it.
const (
	vitessClusterEnv    = "BOARD_TEST_VITESS_CLUSTER"      // 1 runs TestReshard
	reshardKeyspacesEnv = "BOARD_TEST_RESHARD_KEYSPACES"   // the keyspaces to reshard, in order (default article)
	vitessBuildDirEnv   = "BOARD_TEST_VITESS_BUILD_DIR"    // scripts/vitess's --build-dir (default board-data/vitess)
	vitessClusterPort   = "BOARD_TEST_VITESS_CLUSTER_PORT" // vtgate's port (default 16306; the cluster takes more above it)
	reshardRelayEnv     = "BOARD_TEST_RESHARD_RELAY"       // the boards' --relay (default poll)
	reshardWorkers      = 16                               // the cluster suite's writers, one write at a time each
	reshardReaders      = 8                                // readers, one read at a time each
	reshardWarmup       = 10 * time.Second                 // load before the first reshard, so there is something to copy
	reshardCooldown     = 5 * time.Second                  // load after the last one, which must be served as usual
	reshardWorkflow     = "r2to4"                          // the Reshard workflow's name
	reshardStepBound    = 5 * time.Minute                  // bounds each wait for a step of the workflow
	reshardSourceShards = "-80,80-"                        // the cluster's 2 shards
	reshardSamplePeriod = 5 * time.Millisecond             // how often the acknowledged writes are counted
)

// keyspaceKinds maps a keyspace to the prefixes of the ledger's write kinds that write to it.
var keyspaceKinds = map[string][]string{"article": {"article "}, "comment": {"comment "}, "article_like": {"like ", "unlike "}}

func TestReshard(t *testing.T) {
	if os.Getenv(vitessClusterEnv) != "1" {
		t.Skipf("the live reshard needs %s=1 (it starts scripts/vitess cluster start; %s names its build directory)",
			vitessClusterEnv, vitessBuildDirEnv)
	}
	keyspaces := strings.Split(cmp.Or(os.Getenv(reshardKeyspacesEnv), "article"), ",")
	for _, ks := range keyspaces {
		if keyspaceKinds[ks] == nil {
			t.Fatalf("%s: keyspace %q; the test reshards article, comment and article_like", reshardKeyspacesEnv, ks)
		}
	}
	// The clients wait past board's request deadline (5 s), so that they see its answer, slow or a 503, not a
	// timeout of their own.
	timeout := clusterClient.Timeout
	clusterClient.Timeout = 15 * time.Second
	t.Cleanup(func() { clusterClient.Timeout = timeout })
	vc := startVitessCluster(t, clusterDir(t))
	dsn := "root@tcp(" + vc.vtgate + ")/"
	// The services the load and the checks use; search, notification, moderation and web would only index and
	// notify, on the same 2 cores.
	flags := []string{"--data-dir", t.TempDir(), "--embedded-redis-addr", "127.0.0.1:0", "--embedded-kafka-addr",
		"127.0.0.1:0", "--log-format", "json", "--mysql-dsn", dsn,
		"article", "comment", "like", "view", "hot-article", "article-read", "user"}
	streamRelay := os.Getenv(reshardRelayEnv) == "vstream"
	if streamRelay {
		flags = append(flags, "--relay", "vstream", "--vtgate-grpc-addr", vc.vtgateGRPC(t))
	}
	first := startProgram(t, flags)
	second := startProgram(t, append(slices.Clone(flags[2:]), "--data-dir", t.TempDir(), "--redis-addr",
		first.redisAddr(), "--kafka-brokers", strings.Join(first.logs.kafkaAddrs(), ",")))
	c := &cluster{instances: []*process{{urls: first.urls}, {urls: second.urls}}, dbs: map[string]*sql.DB{}}
	for _, name := range []string{"article", "comment", "article_like", "article_view"} {
		db, err := sql.Open("mysql", dsn+name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		c.dbs[name] = db
	}

	l := newLedger()
	reads := &readLedger{statuses: map[int]int{}}
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	started := time.Now()
	var wg sync.WaitGroup
	for i := range reshardWorkers {
		w := newWorker(i, c, l)
		wg.Go(func() {
			for ctx.Err() == nil {
				w.step()
			}
		})
	}
	for i := range reshardReaders {
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i)))
		wg.Go(func() {
			for ctx.Err() == nil {
				reads.read(c, l, rng)
			}
		})
	}
	pauses := sampleAcks(ctx, l)

	time.Sleep(reshardWarmup)
	var runs []reshardRun
	for _, ks := range keyspaces {
		runs = append(runs, reshard(t, vc, ks))
	}
	time.Sleep(reshardCooldown)
	stopLoad()
	wg.Wait()
	elapsed := time.Since(started)

	// The checks of the cluster suite, on the quiet system.
	for _, s := range l.surprises {
		t.Errorf("answer contradicting an earlier acknowledgement: %s", s)
	}
	waitQuiet(t, "every outbox is empty", func() []string {
		var pending []string
		for name, db := range c.dbs {
			if n := queryInt(t, db, "SELECT COUNT(*) FROM outbox"); n > 0 {
				pending = append(pending, fmt.Sprintf("%s: %d outbox rows", name, n))
			}
		}
		return pending
	})
	waitQuiet(t, "the read side equals SQL", func() []string { return readSideDiffs(t, c, l) })
	if streamRelay {
		// Every event came through the change stream, across the shard split: the table's poller, the stream
		// relay's safety net for rows a minute old, published none.
		for _, p := range []*program{first, second} {
			if n := polledEvents(t, p); n > 0 {
				t.Errorf("the poller published %d events the change stream did not", n)
			}
		}
	}
	lost := lostWrites(t, c, l)
	for _, msg := range lost {
		t.Errorf("acknowledged write lost: %s", msg)
	}
	for _, msg := range recountDiffs(t, c) {
		t.Errorf("count row differs from its recount: %s", msg)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, n := range l.answers {
		if strings.Contains(k, ": 500") {
			t.Errorf("%d writes answered %s (a 500 is a bug)", n, k)
		}
	}
	if n := reads.statuses[500]; n > 0 {
		t.Errorf("%d reads answered 500 (a bug)", n)
	}
	t.Logf("after: %d articles, %d + %d comments (v1 + v2), %d likes in SQL; every count row equal to its recount unless said above",
		queryInt(t, c.dbs["article"], "SELECT COUNT(*) FROM article"), queryInt(t, c.dbs["comment"], "SELECT COUNT(*) FROM comment"),
		queryInt(t, c.dbs["comment"], "SELECT COUNT(*) FROM comment_v2"), queryInt(t, c.dbs["article_like"], "SELECT COUNT(*) FROM article_like"))
	logReshard(t, l, reads, runs, pauses.result(runs), elapsed, len(lost))
	logRequestFailures(t, first, second)
}

// logRequestFailures logs each distinct error behind a 5xx answer of the programs, with how many there were: what
// board did not retry, or could not within the deadline.
func logRequestFailures(t *testing.T, programs ...*program) {
	t.Helper()
	counts := map[string]int{}
	for _, p := range programs {
		sc := bufio.NewScanner(strings.NewReader(p.logs.String()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var line struct {
				Msg, Err, Method, Path string
				Status                 int
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "request failed" {
				counts[fmt.Sprintf("%d %s: %s", line.Status, line.Method, line.Err)]++
			}
		}
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "%6d  %s\n", counts[k], k)
	}
	t.Logf("5xx answers by cause:\n%s", b.String())
}

// vitessCluster is a running scripts/vitess cluster start.
type vitessCluster struct {
	path, dir string // the script's, and the cluster's directory
	vtgate    string
	cmd       *exec.Cmd
	done      chan struct{} // closed when the script has exited, with its error in err
	err       error
}

// clusterDir makes a directory of the test's own for a cluster, which the user Vitess runs as (mysql, when the test
// runs as root) can reach, and removes it when the test ends. Of its own: others on the machine run clusters too, and
// a start cleans up what an earlier one left in its directory. A test killed with kill -9 leaves its cluster running:
// scripts/vitess stop --dir DIR, with the directory its log names, stops it.
func clusterDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "board-test-vitess-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // last, after the cluster stopped
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove the cluster's directory: %v", err)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startVitessCluster starts scripts/vitess cluster start in dir, and stops it when the test ends.
func startVitessCluster(t *testing.T, dir string) *vitessCluster {
	t.Helper()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	vc := &vitessCluster{path: filepath.Join(repo, "scripts", "vitess"), dir: dir, done: make(chan struct{})}
	buildDir := cmp.Or(os.Getenv(vitessBuildDirEnv), filepath.Join(repo, "board-data", "vitess"))
	vc.cmd = exec.Command(vc.path, "cluster", "start", "--dir", vc.dir, "--build-dir", buildDir,
		"--port", cmp.Or(os.Getenv(vitessClusterPort), "16306"))
	var stderr lockedBuffer
	vc.cmd.Stderr = &stderr
	stdout, err := vc.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	begun := time.Now()
	if err := vc.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case line <- sc.Text():
			default: // only the first line is wanted
			}
		}
		vc.err = vc.cmd.Wait() // after the last read, as os/exec requires
		close(vc.done)
	}()
	t.Cleanup(func() {
		_ = vc.cmd.Process.Signal(syscall.SIGTERM) // the script stops every process of the cluster, then exits
		select {
		case <-vc.done:
			var exit *exec.ExitError
			if vc.err != nil && !(errors.As(vc.err, &exit) && exit.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL) {
				t.Errorf("scripts/vitess cluster start stopped with %v:\n%s", vc.err, stderr.String())
			}
		case <-time.After(3 * time.Minute):
			_ = vc.cmd.Process.Kill()
			t.Errorf("scripts/vitess cluster start did not stop within 3 minutes:\n%s", stderr.String())
		}
	})
	select {
	case l := <-line:
		addr, ok := strings.CutPrefix(l, "vtgate ")
		if !ok {
			t.Fatalf("scripts/vitess cluster start printed %q, want \"vtgate ADDR\"", l)
		}
		vc.vtgate = addr
	case <-vc.done:
		t.Fatalf("scripts/vitess cluster start exited: %v\n%s", vc.err, stderr.String())
	case <-time.After(15 * time.Minute): // a first run builds Vitess
		t.Fatalf("scripts/vitess cluster start did not print vtgate's address within 15 minutes:\n%s", stderr.String())
	}
	took := time.Since(begun)
	var started string // the script's line saying what it started, which its stderr may bring after the address
	polltest.Until(t, 10*time.Second, func() (bool, string) {
		started = lastLine(stderr.String(), "vitess: started")
		return started != "", stderr.String()
	})
	t.Logf("cluster started in %s in %v: %s", dir, took.Round(time.Millisecond), started)
	return vc
}

// processesNaming returns the processes whose command line names dir, as every process of a cluster in dir does.
func processesNaming(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir+"/")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestVitessClusterAfterKill9 checks that a cluster start cleans up what a killed one left: kill -9 of the script
// leaves its cluster running (etcd, vtctld, vtgate, the tablets and their mysqld), and the next start in the same
// directory stops all of it before it starts its own; SIGTERM then leaves nothing.
func TestVitessClusterAfterKill9(t *testing.T) {
	if os.Getenv(vitessClusterEnv) != "1" {
		t.Skipf("needs %s=1 (it starts scripts/vitess cluster start twice)", vitessClusterEnv)
	}
	dir := clusterDir(t)
	t.Cleanup(func() { // after the second start's SIGTERM
		if left := processesNaming(t, dir); len(left) > 0 {
			t.Errorf("processes of the cluster left after SIGTERM: %v", left)
		}
	})
	killed := startVitessCluster(t, dir)
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-killed.done
	orphans := processesNaming(t, dir)
	if len(orphans) == 0 {
		t.Fatal("kill -9 of the script left no process of its cluster: nothing to clean up")
	}
	startVitessCluster(t, dir)
	for _, pid := range orphans {
		if err := syscall.Kill(pid, 0); err == nil {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Errorf("process %d of the killed start still runs: %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
	t.Logf("the second start stopped the %d processes the killed one left", len(orphans))
}

// script runs scripts/vitess cluster ARGS on the test's cluster and returns its standard output.
func (vc *vitessCluster) script(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(vc.path, append([]string{"cluster"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/vitess cluster %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// ctl runs vtctldclient ARGS on the cluster.
func (vc *vitessCluster) ctl(t *testing.T, args ...string) string {
	t.Helper()
	return vc.script(t, append([]string{"ctl", "--dir", vc.dir, "--"}, args...)...)
}

// reshardRun is what one keyspace's reshard did, and when.
type reshardRun struct {
	keyspace                          string
	targets                           string
	tablets, copied, vdiff, complete  time.Duration
	reads, writes                     time.Duration // each switchtraffic command
	readsStart, writesStart, writesAt time.Time     // writesAt: when the write switch returned
	vdiffResult                       string
	rows                              int64
}

// reshard splits keyspace from 2 shards into 4 with Vitess's Reshard, while the load runs.
func reshard(t *testing.T, vc *vitessCluster, keyspace string) reshardRun {
	t.Helper()
	r := reshardRun{keyspace: keyspace}
	step := func(d *time.Duration, f func()) {
		begun := time.Now()
		f()
		*d = time.Since(begun)
		t.Logf("%s: %v", keyspace, d.Round(time.Millisecond))
	}
	workflow := []string{"Reshard", "--workflow", reshardWorkflow, "--target-keyspace", keyspace}
	step(&r.tablets, func() {
		r.targets = strings.TrimSpace(vc.script(t, "add-shards", "--dir", vc.dir, "--keyspace", keyspace, "--shards", "4"))
	})
	step(&r.copied, func() {
		vc.ctl(t, append(workflow, "create", "--source-shards", reshardSourceShards, "--target-shards", r.targets,
			"--tablet-types", "primary")...)
		polltest.Until(t, reshardStepBound, func() (bool, string) {
			return copied(t, vc.ctl(t, "Workflow", "--keyspace", keyspace, "show", "--workflow", reshardWorkflow))
		})
	})
	step(&r.vdiff, func() {
		vc.ctl(t, "VDiff", "--workflow", reshardWorkflow, "--target-keyspace", keyspace, "create", "--tablet-types",
			"primary", "--wait", "--wait-update-interval", "1s")
		out := vc.ctl(t, "VDiff", "--format", "json", "--workflow", reshardWorkflow, "--target-keyspace", keyspace,
			"show", "last")
		var report struct {
			State        string
			RowsCompared int64
			HasMismatch  bool
		}
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("VDiff show last: %v\n%s", err, out)
		}
		r.rows, r.vdiffResult = report.RowsCompared, fmt.Sprintf("%s, %d rows compared, mismatch %v", report.State,
			report.RowsCompared, report.HasMismatch)
		if report.State != "completed" || report.HasMismatch {
			t.Errorf("VDiff of %s: %s\n%s", keyspace, r.vdiffResult, out)
		}
	})
	r.readsStart = time.Now()
	step(&r.reads, func() { vc.ctl(t, append(workflow, "switchtraffic", "--tablet-types", "rdonly,replica")...) })
	r.writesStart = time.Now()
	step(&r.writes, func() { vc.ctl(t, append(workflow, "switchtraffic", "--tablet-types", "primary")...) })
	r.writesAt = time.Now()
	step(&r.complete, func() { vc.ctl(t, append(workflow, "complete")...) })
	return r
}

// copied reads Workflow show's JSON: the copy is over when every target shard's stream is Running (it follows the
// sources' binlogs), no longer Copying.
func copied(t *testing.T, show string) (bool, string) {
	t.Helper()
	var out struct {
		Workflows []struct {
			ShardStreams map[string]struct {
				Streams []struct{ State, Message string }
			} `json:"shard_streams"`
		}
	}
	if err := json.Unmarshal([]byte(show), &out); err != nil {
		t.Fatalf("Workflow show: %v\n%s", err, show)
	}
	var states []string
	done := len(out.Workflows) == 1
	for _, w := range out.Workflows {
		for shard, ss := range w.ShardStreams {
			for _, s := range ss.Streams {
				states = append(states, fmt.Sprintf("%s: %s %s", shard, s.State, s.Message))
				done = done && s.State == "Running"
			}
		}
	}
	slices.Sort(states)
	return done && len(states) > 0, strings.Join(states, "; ")
}

// readLedger counts the answers of the readers.
type readLedger struct {
	mu       sync.Mutex
	statuses map[int]int // status -> reads; 0 for a read without an answer
	total    int
}

// read sends one read a user of the site sends: an article, a board's first page, an article's comments, its likes.
func (r *readLedger) read(c *cluster, l *ledger, rng *rand.Rand) {
	ids := l.liveArticles(-1)
	if len(ids) == 0 {
		time.Sleep(10 * time.Millisecond)
		return
	}
	id := ids[rng.IntN(len(ids))]
	var url string
	switch rng.IntN(4) {
	case 0:
		url = fmt.Sprintf("%s/v1/articles/%d", c.url("article"), id)
	case 1:
		url = fmt.Sprintf("%s/v1/articles?boardId=%d&page=1&pageSize=30", c.url("article"), rng.IntN(clusterBoards)+1)
	case 2:
		url = fmt.Sprintf("%s/v2/comments?articleId=%d&page=1&pageSize=30", c.url("comment"), id)
	default:
		url = fmt.Sprintf("%s/v1/article-likes/articles/%d/count", c.url("like"), id)
	}
	a := clusterRequest("GET", url, nil)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	if a.err != nil {
		r.statuses[0]++
		return
	}
	r.statuses[a.status]++
}

// ackSampler samples the count of acknowledged writes of each resharded keyspace, to find how long each switch
// left them without one.
type ackSampler struct {
	mu      sync.Mutex
	samples map[string][]ackSample // keyspace -> samples in time order
}

type ackSample struct {
	at    time.Time
	acked int
}

func sampleAcks(ctx context.Context, l *ledger) *ackSampler {
	s := &ackSampler{samples: map[string][]ackSample{}}
	go func() {
		tick := time.NewTicker(reshardSamplePeriod)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				l.mu.Lock()
				counts := map[string]int{}
				for kind, n := range l.acked {
					for ks, prefixes := range keyspaceKinds {
						if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(kind, p) }) {
							counts[ks] += n
						}
					}
				}
				l.mu.Unlock()
				s.mu.Lock()
				for ks, n := range counts {
					if ss := s.samples[ks]; len(ss) == 0 || ss[len(ss)-1].acked != n {
						s.samples[ks] = append(ss, ackSample{now, n})
					}
				}
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// result returns, per run, the longest time its keyspace went without an acknowledged write from the start of its
// write switch to 5 s after it returned.
func (s *ackSampler) result(runs []reshardRun) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, len(runs))
	for i, r := range runs {
		from, to := r.writesStart, r.writesAt.Add(5*time.Second)
		last := from
		for _, x := range s.samples[r.keyspace] {
			if x.at.Before(from) || x.at.After(to) {
				continue
			}
			out[i] = max(out[i], x.at.Sub(last))
			last = x.at
		}
		out[i] = max(out[i], to.Sub(last))
	}
	return out
}

func logReshard(t *testing.T, l *ledger, reads *readLedger, runs []reshardRun, pauses []time.Duration,
	elapsed time.Duration, lost int) {
	var b strings.Builder
	acked := 0
	for _, n := range l.acked {
		acked += n
	}
	unknown := 0 // 5xx answers and none
	for _, n := range l.unknown {
		unknown += n
	}
	fmt.Fprintf(&b, "load: %v, %d writers and %d readers through 2 boards\n", elapsed.Round(time.Second),
		reshardWorkers, reshardReaders)
	failed := 0
	for _, n := range l.failed {
		failed += n
	}
	fmt.Fprintf(&b, "writes acknowledged %d (%.0f/s), lost %d, 5xx %d, without an answer within the client's %v %d\n",
		acked, float64(acked)/elapsed.Seconds(), lost, unknown-failed, clusterClient.Timeout, failed)
	for _, k := range slices.Sorted(mapsKeys(l.answers)) {
		fmt.Fprintf(&b, "  refused  %-40s %6d\n", k, l.answers[k])
	}
	reads.mu.Lock()
	fmt.Fprintf(&b, "reads %d (%.0f/s), by status %v (0: no answer)\n", reads.total, float64(reads.total)/elapsed.Seconds(),
		reads.statuses)
	reads.mu.Unlock()
	during := 0 // of the 5xx answers and those without one, how many came while a write switch ran or soon after
	for _, at := range l.troubles {
		if slices.ContainsFunc(runs, func(r reshardRun) bool {
			return !at.Before(r.writesStart) && at.Before(r.writesAt.Add(clusterClient.Timeout))
		}) {
			during++
		}
	}
	fmt.Fprintf(&b, "of the writes with a 5xx or no answer, %d came during a write switch (or within %v of its end)\n",
		during, clusterClient.Timeout)
	for i, r := range runs {
		fmt.Fprintf(&b, "%s -> %s: tablets %v, create+copy %v, vdiff %v (%s), switch reads %v, switch writes %v "+
			"(write pause %v), complete %v\n", r.keyspace, r.targets, r.tablets.Round(time.Millisecond),
			r.copied.Round(time.Millisecond), r.vdiff.Round(time.Millisecond), r.vdiffResult,
			r.reads.Round(time.Millisecond), r.writes.Round(time.Millisecond), pauses[i].Round(time.Millisecond),
			r.complete.Round(time.Millisecond))
	}
	t.Logf("reshard run:\n%s", b.String())
}

// lockedBuffer is a bytes.Buffer safe for a process to write while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lastLine returns the last line of s that starts with prefix.
func lastLine(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], prefix) {
			return lines[i]
		}
	}
	return ""
}

// vtgateGRPC is the cluster's vtgate gRPC address: its MySQL port + 2 (scripts/vitess).
func (vc *vitessCluster) vtgateGRPC(t *testing.T) string {
	host, port, err := net.SplitHostPort(vc.vtgate)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(host, strconv.Itoa(n+2))
}

// polledEvents sums what p's relays published through their pollers (board_outbox_events_published_total, path poll).
func polledEvents(t *testing.T, p *program) int {
	t.Helper()
	total := 0
	for _, service := range []string{"article", "comment", "like", "view"} {
		resp, err := http.Get(p.urls[service] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(body)) {
			if strings.HasPrefix(line, "board_outbox_events_published_total{") && strings.Contains(line, `path="poll"`) {
				n, _ := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndexByte(line, ' '):]), 64)
				total += int(n)
			}
		}
	}
	return total
}
