package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"board/internal/app"

	"github.com/redis/go-redis/v9"
)

// The faults of the cluster suite (issue 13), injected one after another while the workload runs.
const (
	faultWarmup     = 8 * time.Second  // workload before the first fault, so there is something to lose
	faultGap        = 4 * time.Second  // workload between two faults, so each starts from a healed system
	afterLastFault  = 5 * time.Second  // workload after the last fault, which must be acknowledged as usual
	sigstopDuration = 12 * time.Second // longer than the coordinator's dead-after (9 s): the others expel it
	outboxShards    = 4                // serve's --outbox-shards default
	faultBound      = time.Minute      // bounds each wait for a fault's effect (a takeover, a failover)
	// troubleGrace is how long after a fault ended requests may still go unanswered or get a 5xx and be blamed on it.
	troubleGrace = 10 * time.Second
)

type fault struct {
	name       string
	start, end time.Time
	detail     string
}

// faultRun is what the faults did and measured.
type faultRun struct {
	started   time.Time
	faults    []fault
	takeovers []time.Duration // per kill, from the kill to the survivors owning every outbox shard; -1 if not seen
	lastEnd   time.Time
}

// outsideFaults counts the times that fall in no fault (nor troubleGrace after it).
func (f *faultRun) outsideFaults(times []time.Time) int {
	n := 0
	for _, at := range times {
		if !slices.ContainsFunc(f.faults, func(x fault) bool { return !at.Before(x.start) && at.Before(x.end.Add(troubleGrace)) }) {
			n++
		}
	}
	return n
}

// injectFaults runs rounds of the four faults in sequence: kill -9 and restart of the instance owning the most
// outbox shards, SIGSTOP of another beyond the coordinator's dead-after, the loss of a Redis Cluster primary, and a
// stop and restart of the broker. A round takes about a minute; it starts another while one more fits before
// until, so a short run has one round and a long one many.
func injectFaults(t *testing.T, c *cluster, until time.Time) *faultRun {
	t.Helper()
	f := &faultRun{started: time.Now()}
	record := func(x fault) {
		f.faults = append(f.faults, x)
		f.lastEnd = x.end
		t.Logf("fault %s: %v, %s", x.name, x.end.Sub(x.start).Round(time.Millisecond), x.detail)
	}
	time.Sleep(faultWarmup)
	for {
		roundStarted := time.Now()
		victim := outboxOwner(t, c)
		record(killAndRestart(t, c, victim, f))
		time.Sleep(faultGap)
		record(stopAndContinue(t, c, (victim+1)%clusterInstances))
		time.Sleep(faultGap)
		record(killRedisPrimary(t, c))
		time.Sleep(faultGap)
		record(restartBroker(t, c))
		if time.Until(until) < time.Since(roundStarted)+faultGap+afterLastFault {
			return f
		}
		time.Sleep(faultGap)
	}
}

// metricsClient reads /metrics; short, so a poll of a dead instance does not hold up the others'.
var metricsClient = &http.Client{Timeout: 2 * time.Second}

// shardsOwned reads board_outbox_shards_owned from an instance's /metrics: service -> shards it polls.
func shardsOwned(p *process) (map[string]int, error) {
	resp, err := metricsClient.Get(p.urls["article"] + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	owned := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		// board_outbox_shards_owned{service="article"} 2
		rest, ok := strings.CutPrefix(sc.Text(), `board_outbox_shards_owned{service="`)
		if !ok {
			continue
		}
		service, value, _ := strings.Cut(rest, `"} `)
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("board_outbox_shards_owned of %s: %q: %w", service, value, err)
		}
		owned[service] = int(n)
	}
	return owned, sc.Err()
}

// outboxOwner returns the instance that owns the most outbox shards, summed over its services.
func outboxOwner(t *testing.T, c *cluster) int {
	t.Helper()
	best, most := 0, -1
	for i := range clusterInstances {
		owned, err := shardsOwned(c.instance(i))
		if err != nil {
			t.Fatalf("outbox shards of instance %d: %v", i, err)
		}
		total := 0
		for _, n := range owned {
			total += n
		}
		t.Logf("instance %d owns outbox shards %v", i, owned)
		if total > most {
			best, most = i, total
		}
	}
	return best
}

// killAndRestart kills instance i with SIGKILL, waits until the survivors own every outbox shard of every
// service (the takeover), and restarts it on the same data directory and addresses.
func killAndRestart(t *testing.T, c *cluster, i int, f *faultRun) fault {
	t.Helper()
	p := c.instance(i)
	before, _ := shardsOwned(p)
	x := fault{name: fmt.Sprintf("kill -9 instance %d", i), start: time.Now()}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait() // killed: the exit status says so
	c.mu.Lock()
	for _, inc := range c.incarnations {
		if inc.p == p {
			inc.ended = time.Now()
		}
	}
	c.mu.Unlock()

	takeover := time.Duration(-1)
	var outboxServices []string
	for _, s := range app.Services() {
		if s.Publishes {
			outboxServices = append(outboxServices, s.Name)
		}
	}
	for deadline := time.Now().Add(faultBound); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		sums := map[string]int{}
		for j := range clusterInstances {
			if j == i {
				continue
			}
			owned, err := shardsOwned(c.instance(j))
			if err != nil {
				continue
			}
			for s, n := range owned {
				sums[s] += n
			}
		}
		if !slices.ContainsFunc(outboxServices, func(s string) bool { return sums[s] != outboxShards }) {
			takeover = time.Since(x.start)
			break
		}
	}
	f.takeovers = append(f.takeovers, takeover)
	if takeover < 0 {
		t.Errorf("the survivors did not take over the outbox shards of killed instance %d within %v", i, faultBound)
	}

	restarted := startProcess(t, c.args[i]...)
	// startProcess's cleanup kills it, and runs before startCluster's, which stops the instances cleanly: this
	// one, registered later still, stops it cleanly first.
	t.Cleanup(func() {
		if !restarted.hasExited() {
			_ = restarted.cmd.Process.Signal(syscall.SIGCONT)
			stopCleanly(t, fmt.Sprintf("restarted instance %d", i), restarted)
		}
	})
	c.mu.Lock()
	c.instances[i] = restarted
	c.incarnations = append(c.incarnations, &incarnation{instance: i, p: restarted, started: time.Now()})
	c.mu.Unlock()
	x.end = time.Now()
	x.detail = fmt.Sprintf("it owned shards %v; takeover %v; restarted on the same ports", before,
		takeover.Round(time.Millisecond))
	return x
}

// stopAndContinue stops instance i with SIGSTOP for longer than the coordinator's dead-after, so the others
// expel it and take its shards, then wakes it up with SIGCONT: a stale owner that must find out.
func stopAndContinue(t *testing.T, c *cluster, i int) fault {
	t.Helper()
	p := c.instance(i)
	x := fault{name: fmt.Sprintf("SIGSTOP instance %d", i), start: time.Now()}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(sigstopDuration)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	x.end = time.Now()
	x.detail = fmt.Sprintf("SIGCONT after %v", sigstopDuration)
	return x
}

// redisNode is one node of the Redis Cluster, as its INFO describes it.
type redisNode struct {
	addr, id, dir string
	pid           int
	primary       bool
}

func describeRedisNode(ctx context.Context, addr string) (redisNode, error) {
	cl := redis.NewClient(&redis.Options{Addr: addr})
	defer cl.Close()
	info, err := cl.Info(ctx, "server", "replication").Result()
	if err != nil {
		return redisNode{}, err
	}
	n := redisNode{addr: addr}
	for line := range strings.SplitSeq(info, "\n") {
		key, value, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch key {
		case "process_id":
			n.pid, _ = strconv.Atoi(value)
		case "role":
			n.primary = value == "master"
		}
	}
	if n.id, err = cl.ClusterMyID(ctx).Result(); err != nil {
		return redisNode{}, err
	}
	dir, err := cl.ConfigGet(ctx, "dir").Result()
	if err != nil {
		return redisNode{}, err
	}
	n.dir = dir["dir"]
	return n, nil
}

// killRedisPrimary kills one primary of the Redis Cluster with SIGKILL, waits until its replica serves its slots,
// and brings it back (as a replica) with scripts/redis-cluster start, which heals a cluster missing nodes.
func killRedisPrimary(t *testing.T, c *cluster) fault {
	t.Helper()
	ctx := context.Background()
	var nodes []redisNode
	for _, addr := range c.redisAddrs {
		n, err := describeRedisNode(ctx, addr)
		if err != nil {
			t.Fatalf("redis node %s: %v", addr, err)
		}
		nodes = append(nodes, n)
	}
	victim := nodes[slices.IndexFunc(nodes, func(n redisNode) bool { return n.primary })]
	witness := nodes[slices.IndexFunc(nodes, func(n redisNode) bool { return n.primary && n.id != victim.id })]
	x := fault{name: "kill -9 redis primary", start: time.Now()}
	if err := syscall.Kill(victim.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// The failover is done when another primary sees the victim failed, holding no slot, and the cluster serving all.
	wcl := redis.NewClient(&redis.Options{Addr: witness.addr})
	defer wcl.Close()
	var failover time.Duration = -1
	for deadline := time.Now().Add(faultBound); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		info, err1 := wcl.ClusterInfo(ctx).Result()
		nodesConf, err2 := wcl.ClusterNodes(ctx).Result()
		if err1 != nil || err2 != nil || !strings.Contains(info, "cluster_state:ok") {
			continue
		}
		for line := range strings.SplitSeq(nodesConf, "\n") {
			fields := strings.Fields(line)
			if len(fields) == 8 && fields[0] == victim.id && strings.Contains(fields[2], "fail") { // 8 fields: no slots
				failover = time.Since(x.start)
			}
		}
		if failover >= 0 {
			break
		}
	}
	if failover < 0 {
		t.Errorf("the replica of killed redis primary %s did not take over within %v", victim.addr, faultBound)
	}

	firstPort := slices.Min(slices.Collect(func(yield func(int) bool) {
		for _, n := range nodes {
			_, port, _ := strings.Cut(n.addr, ":")
			p, _ := strconv.Atoi(port)
			if !yield(p) {
				return
			}
		}
	}))
	script, err := filepath.Abs("../../scripts/redis-cluster")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(script, "start", "--dir", filepath.Dir(victim.dir), "--port", strconv.Itoa(firstPort)).CombinedOutput()
	if err != nil {
		t.Errorf("scripts/redis-cluster start after the primary's loss: %v\n%s", err, out)
	}
	x.end = time.Now()
	x.detail = fmt.Sprintf("%s (pid %d); replica took over after %v; back as a replica", victim.addr, victim.pid,
		failover.Round(time.Millisecond))
	return x
}

// restartBroker stops `board engines` with SIGTERM and starts it again on the same data directory and broker address.
func restartBroker(t *testing.T, c *cluster) fault {
	t.Helper()
	c.mu.Lock()
	old := c.engines
	c.mu.Unlock()
	x := fault{name: "broker stop and restart", start: time.Now()}
	stopCleanly(t, "board engines", old.process)
	stopped := time.Now()
	restarted := startEnginesAt(t, c.enginesDir, c.kafka)
	c.mu.Lock()
	c.engines = restarted
	c.mu.Unlock()
	x.end = time.Now()
	x.detail = fmt.Sprintf("down %v, same data directory and address %s", x.end.Sub(stopped).Round(time.Millisecond), c.kafka)
	return x
}

// startEnginesAt runs `board engines` with its broker on kafkaAddr, the address an earlier run had, and waits until
// it is ready.
func startEnginesAt(t *testing.T, dir, kafkaAddr string) *enginesProcess {
	t.Helper()
	p := launch(t, "engines", "--data-dir", dir, "--embedded-redis", "in-process",
		"--embedded-redis-addr", "127.0.0.1:0", "--embedded-kafka-addr", kafkaAddr, "--log-format", "json")
	// No cleanup of its own: one would run before startCluster's, which stops the instances before the broker.
	// Until it is handed over, a failure here kills it.
	ready := false
	defer func() {
		if !ready {
			_ = p.cmd.Process.Kill()
			_ = p.wait() // killed: the exit status says so
		}
	}()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(p.logs.String(), `"msg":"engines ready`); time.Sleep(10 * time.Millisecond) {
		select {
		case <-p.exited:
			t.Fatalf("board engines exited early: %v\n%s", p.err, p.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("board engines logged no readiness\n%s", p.logs)
		}
	}
	if logged := strings.Join(p.logs.kafkaAddrs(), ","); logged != kafkaAddr {
		t.Errorf("restarted broker listens at %s, want %s", logged, kafkaAddr)
	}
	ready = true
	return &enginesProcess{process: p, kafkaBrokers: kafkaAddr}
}

// hasExited says whether the process has exited, without waiting.
func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// viewSampler creates a few articles of its own, which no worker deletes, and every second views each as a new
// user and reads its count through random instances: no count may be below one answered before.
type viewSampler struct {
	mu        sync.Mutex
	samples   int
	backwards []string
	done      chan struct{}
}

const sampledArticles = 5

func sampleViews(ctx context.Context, c *cluster, l *ledger) *viewSampler {
	s := &viewSampler{done: make(chan struct{})}
	w := newWorker(clusterWorkers, c, l) // an owner no worker is: its articles stay
	go func() {
		defer close(s.done)
		for len(l.liveArticles(w.id)) < sampledArticles && ctx.Err() == nil {
			w.createArticle()
		}
		articles := l.liveArticles(w.id)
		highest := map[int64]int64{}
		user := w.user(1)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, article := range articles {
				user++
				if n, ok := w.viewAs(article, user); ok {
					s.observe(article, n, highest, "view answer")
				}
				resp := clusterRequest("GET", fmt.Sprintf("%s/v1/article-views/articles/%d/count", c.url("view"), article), nil)
				var n int64
				if resp.ok() && l.decode("view count", resp, &n) {
					s.observe(article, n, highest, "count read")
				}
			}
		}
	}()
	return s
}

// observe compares a count answered for article with the highest answered before.
func (s *viewSampler) observe(article, n int64, highest map[int64]int64, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	if n < highest[article] {
		s.backwards = append(s.backwards, fmt.Sprintf("%s %s: article %d counted %d, %d answered before",
			time.Now().Format("15:04:05.000"), what, article, n, highest[article]))
	}
	highest[article] = max(highest[article], n)
}

// result waits for the sampler to stop (its context done) and returns its samples and the counts that went back.
func (s *viewSampler) result() (int, []string) {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.backwards
}

// logInstanceErrors logs how many error lines each process that ran as an instance logged, the first few
// distinct ones and every distinct 500, to tell what a 500 answer or a lost write came from.
func logInstanceErrors(t *testing.T, c *cluster) {
	t.Helper()
	c.mu.Lock()
	incarnations := slices.Clone(c.incarnations)
	c.mu.Unlock()
	for _, inc := range incarnations {
		sc := bufio.NewScanner(strings.NewReader(inc.p.logs.String()))
		sc.Buffer(nil, 1<<20)
		seen := map[string]bool{}
		var first []string
		errors := 0
		for sc.Scan() {
			var line struct {
				Level, Msg, Err, Method, Path string
				Status                        int
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil || line.Level != "ERROR" {
				continue
			}
			errors++
			key := line.Msg + ": " + line.Err
			if line.Status == http.StatusInternalServerError { // a bug: every one is shown
				key = fmt.Sprintf("500 on %s %s: %s", line.Method, line.Path, line.Err)
			}
			if !seen[key] && (len(first) < 5 || line.Status == http.StatusInternalServerError) {
				seen[key] = true
				first = append(first, key)
			}
		}
		if errors > 0 {
			t.Logf("instance %d (started %s) logged %d errors, e.g.:\n%s", inc.instance, inc.started.Format("15:04:05"),
				errors, strings.Join(first, "\n"))
		}
	}
}
