package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"board/internal/app"
	"board/internal/embedded"
	"board/internal/sqldb"
)

// boardBinDir holds the binary buildBoard built, removed by TestMain.
var boardBinDir string

// e2eParallel is how many end-to-end tests run at once unless -test.parallel says otherwise: they spend most of
// their time waiting for a board to start, answer or catch up, not on the processor.
const e2eParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	parallelGiven := false
	flag.Visit(func(f *flag.Flag) { parallelGiven = parallelGiven || f.Name == "test.parallel" })
	if !parallelGiven {
		_ = flag.Set("test.parallel", strconv.Itoa(max(e2eParallel, runtime.GOMAXPROCS(0))))
	}
	http.DefaultTransport = authorizing{http.DefaultTransport}
	code := validateAPI(m)
	stopBrowser()
	if boardBinDir != "" {
		os.RemoveAll(boardBinDir)
	}
	os.Exit(code)
}

// buildBoard builds the board binary once per test binary run.
var buildBoard = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "board-bin")
	if err != nil {
		return "", err
	}
	boardBinDir = dir
	bin := filepath.Join(dir, "board")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

// process is a `board serve` running as a real process, so that it can be killed with SIGKILL.
type process struct {
	cmd      *exec.Cmd
	logs     *logWatcher
	urls     map[string]string
	redisPid int           // the embedded redis-server's, 0 for the in-process Redis
	exited   chan struct{} // closed when the process has exited, with its error in err
	err      error
}

// wait waits for the process to exit and returns how it ended.
func (p *process) wait() error {
	<-p.exited
	return p.err
}

// launch builds the binary and starts it with args, its log lines going to the process's watcher.
func launch(t *testing.T, args ...string) *process {
	t.Helper()
	bin, err := buildBoard()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{logs: newLogWatcher(), exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	return p
}

// allServicesArgs are the flags of a `board serve` of every service on the embedded engines in a new data
// directory, each on a free port, with a relay that polls often (after a kill, what the fast path had not
// published is the poller's), followed by extra.
func allServicesArgs(t *testing.T, extra ...string) []string {
	args := []string{"--data-dir", t.TempDir(), "--embedded-redis-addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0",
		"--log-format", "json", "--relay-poll-interval", "200ms", "--relay-min-age", "200ms"}
	for _, s := range app.Services() {
		args = append(args, "--"+s.Name+"-addr", "127.0.0.1:0")
	}
	return append(args, extra...)
}

// startProcess runs `board serve` with args and waits until every service given a --<service>-addr listens.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	listening := 0
	for _, s := range app.Services() {
		if slices.Contains(args, "--"+s.Name+"-addr") {
			listening++
		}
	}
	p := launch(t, append(append([]string{"serve"}, testServeDefaults...), args...)...)
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill() // fails harmlessly once it has exited
		_ = p.wait()
		waitGone(t, p.redisPid) // before the data directory is removed
	})
	select {
	case p.urls = <-p.logs.ready(max(listening, 1)):
	case <-p.exited:
		t.Fatalf("board serve exited early: %v\n%s", p.err, p.logs)
	case <-time.After(time.Minute):
		t.Fatalf("board serve did not start in time\n%s", p.logs)
	}
	p.redisPid = redisServerPid(t, filepath.Join(flagValue(args, "--data-dir"), "redis"))
	registerMinter(t, p.urls, args)
	return p
}

// A board killed with SIGKILL under view load comes back with view counts and dedupe locks from one point in time:
// no count below its SQL backup, and every user who viewed counted exactly once, even when viewing again after the
// restart. The old snapshot, which listed keys first and read them later, failed this (re-views counted twice).
func TestViewCountsSurviveKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	engines := []string{"in-process"}
	if _, err := exec.LookPath(embedded.RedisServerBinary); err == nil {
		engines = append(engines, "redis-server")
	}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"user", "article", "view", "--user-addr", "127.0.0.1:0", "--article-addr", "127.0.0.1:0", "--view-addr", "127.0.0.1:0", "--data-dir", dir, "--embedded-redis", engine,
				"--embedded-redis-addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0", "--log-format", "json"}
			p := startProcess(t, args...)
			var a articleOut
			call(t, "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": "t", "content": "c", "writerId": 1,
				"boardId": 1}, http.StatusCreated, &a)
			api := p.urls["view"] + "/v1/article-views/articles/" + a.ArticleID

			// 20 viewers, each user viewing once, until the process dies under them.
			var next, acked, maxAcked, viewing atomic.Int64
			var wg sync.WaitGroup
			for range 20 {
				viewing.Add(1)
				wg.Go(func() {
					defer viewing.Add(-1)
					for {
						user := next.Add(1)
						count, err := postView(api, user)
						if err != nil {
							return // killed
						}
						acked.Add(1)
						for m := maxAcked.Load(); count > m && !maxAcked.CompareAndSwap(m, count); m = maxAcked.Load() {
						}
					}
				})
			}
			for acked.Load() < 450 {
				if viewing.Load() == 0 {
					t.Fatalf("every viewer failed after %d views\n%s", acked.Load(), p.logs)
				}
				time.Sleep(time.Millisecond)
			}
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = p.wait() // killed: the exit status says so
			wg.Wait()
			attempted := next.Load() // users 1..attempted sent a view; some were in flight at the kill
			waitGone(t, p.redisPid)

			backup := viewBackup(t, filepath.Join(dir, "sqlite", "article_view.db"), a.ArticleID)
			p = startProcess(t, args...)
			api = p.urls["view"] + "/v1/article-views/articles/" + a.ArticleID
			var afterRestart int64
			call(t, "GET", api+"/count", nil, http.StatusOK, &afterRestart)
			t.Logf("%s: %d views acknowledged (highest count %d), %d attempted, SQL backup %d, count after restart %d",
				engine, acked.Load(), maxAcked.Load(), attempted, backup, afterRestart)
			if afterRestart < backup {
				t.Errorf("count after restart %d is below the SQL backup %d", afterRestart, backup)
			}
			if engine == "redis-server" && afterRestart < maxAcked.Load() {
				t.Errorf("count after restart %d is below the acknowledged %d: redis-server's append-only file lost writes",
					afterRestart, maxAcked.Load())
			}
			// Everyone views again: those whose view survived hold their lock and do not count twice; those whose view
			// was lost count now. Each user ends up counted exactly once.
			var final int64
			for user := int64(1); user <= attempted; user++ {
				c, err := postView(api, user)
				if err != nil {
					t.Fatal(err)
				}
				final = max(final, c)
			}
			if final != attempted {
				t.Errorf("after everyone viewed again: count %d, want %d (one per user)", final, attempted)
			}

			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := p.wait(); err != nil {
				t.Errorf("board serve after SIGTERM: %v\n%s", err, p.logs)
			}
		})
	}
}

func postView(url string, user int64) (int64, error) {
	resp, err := http.Post(url+"/users/"+strconv.FormatInt(user, 10), "", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("view: %s", resp.Status)
	}
	var count int64
	return count, json.NewDecoder(resp.Body).Decode(&count)
}

// viewBackup reads an article's backed-up view count from the view service's SQLite file.
func viewBackup(t *testing.T, path, articleID string) int64 {
	t.Helper()
	db, err := sqldb.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	err = db.QueryRowContext(context.Background(), "SELECT view_count FROM article_view_count WHERE article_id = ?", articleID).Scan(&n)
	if err != nil {
		t.Fatalf("read the view backup: %v", err)
	}
	return n
}

// redisServerPid returns the pid of the embedded redis-server keeping its files in dir, or 0 for the in-process one.
func redisServerPid(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "redis-server.pid"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitGone waits until the redis-server of a killed board has exited: it gets SIGTERM when its parent dies, so
// none is left holding the data directory.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	if pid == 0 {
		return
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
	}
	t.Errorf("redis-server (pid %d) still runs 30 s after its board was killed", pid)
}
