package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/embedded"
	"board/internal/polltest"
)

// enginesProcess is a `board engines` running as a real process, with the flags it printed for `board serve`.
type enginesProcess struct {
	*process
	redisAddr, kafkaBrokers string
}

// serveFlags are the flags that point a `board serve` at these engines.
func (e *enginesProcess) serveFlags() []string {
	return []string{"--redis-addr", e.redisAddr, "--kafka-brokers", e.kafkaBrokers}
}

// startEngines runs `board engines` on port 0 addresses in dir and waits until it prints the serve flags.
func startEngines(t *testing.T, dir, engine string) *enginesProcess {
	t.Helper()
	bin, err := buildBoard()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{logs: newLogWatcher(), exited: make(chan struct{})}
	p.cmd = exec.Command(bin, "engines", "--data-dir", dir, "--embedded-redis", engine,
		"--embedded-redis-addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0", "--log-format", "json")
	p.cmd.Stderr = p.logs
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	firstLine := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case firstLine <- sc.Text():
			default: // only the first line is wanted
			}
		}
		p.err = p.cmd.Wait() // after the last read, as os/exec requires
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill() // fails harmlessly once it has exited
		_ = p.wait()
		waitGone(t, p.redisPid) // before the data directory is removed
	})
	var line string
	select {
	case line = <-firstLine:
	case <-p.exited:
		t.Fatalf("board engines exited early: %v\n%s", p.err, p.logs)
	case <-time.After(time.Minute):
		t.Fatalf("board engines printed no serve flags in time\n%s", p.logs)
	}
	p.redisPid = redisServerPid(t, filepath.Join(dir, "redis"))
	e := &enginesProcess{process: p}
	if _, err := fmt.Sscanf(line, "--redis-addr %s --kafka-brokers %s", &e.redisAddr, &e.kafkaBrokers); err != nil {
		t.Fatalf("board engines printed %q, want --redis-addr <addr> --kafka-brokers <addrs>: %v", line, err)
	}
	// The addresses it printed are those the engines logged. Stdout and stderr are separate pipes: the log lines,
	// written before the serve flags, may still be on their way.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(p.logs.String(), `"msg":"engines ready`); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("board engines logged no readiness\n%s", p.logs)
		}
	}
	if logged := strings.Join(p.logs.kafkaAddrs(), ","); logged != e.kafkaBrokers {
		t.Errorf("printed --kafka-brokers %s, logged the broker at %s", e.kafkaBrokers, logged)
	}
	p.logs.mu.Lock()
	if p.logs.redis != e.redisAddr {
		t.Errorf("printed --redis-addr %s, logged the Redis at %s", e.redisAddr, p.logs.redis)
	}
	p.logs.mu.Unlock()
	return e
}

// stopCleanly sends SIGTERM and checks that the process exits without error, saying its shutdown is complete.
func stopCleanly(t *testing.T, what string, p *process) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err != nil {
		t.Errorf("%s after SIGTERM: %v\n%s", what, err, p.logs)
	}
	if !strings.Contains(p.logs.String(), `"msg":"shutdown complete"`) {
		t.Errorf("%s stopped without logging that shutdown is complete:\n%s", what, p.logs)
	}
}

// Two `board serve` processes share one `board engines`: an article created on the first and liked on the second
// reaches the second's hot-article ranking through the shared broker (and the like service learns of the article
// from it, or at the first's article origin). The engines stop cleanly on SIGTERM, and a restart on the same data
// directory finds the Redis keys and the broker's records of before.
func TestEnginesSharedByTwoServes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs real processes")
	}
	engines := []string{"in-process"}
	if _, err := exec.LookPath(embedded.RedisServerBinary); err == nil {
		engines = append(engines, "redis-server")
	}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			dir := t.TempDir()
			eng := startEngines(t, dir, engine)
			writerArgs := append([]string{"user", "article", "--user-addr", "127.0.0.1:0", "--article-addr", "127.0.0.1:0",
				"--data-dir", t.TempDir(), "--log-format", "json"}, eng.serveFlags()...)
			writer := startProcess(t, writerArgs...)
			ranker := startProcess(t, append([]string{"like", "hot-article", "--like-addr", "127.0.0.1:0",
				"--hot-article-addr", "127.0.0.1:0", "--hot-article-time-zone", "UTC", "--article-origin", writer.urls["article"],
				"--user-origin", writer.urls["user"], "--data-dir", t.TempDir(), "--log-format", "json"}, eng.serveFlags()...)...)
			registerMinter(t, ranker.urls, writerArgs) // its like service trusts the writer's user service

			var a articleOut
			call(t, "POST", writer.urls["article"]+"/v1/articles", map[string]any{"title": "shared", "content": "c",
				"writerId": 1, "boardId": 1}, http.StatusCreated, &a)
			liked := time.Now()
			call(t, "POST", fmt.Sprintf("%s/v1/article-likes/articles/%s/users/1", ranker.urls["like"], a.ArticleID), nil,
				http.StatusCreated, nil)
			created, err := time.Parse(time.RFC3339, a.CreatedAt)
			if err != nil {
				t.Fatal(err)
			}
			ranking := ranker.urls["hot-article"] + "/v1/hot-articles/articles/date/" + created.UTC().Format("20060102")
			want := []hotOut{{ArticleID: a.ArticleID, Title: "shared", CreatedAt: a.CreatedAt, Score: 3, LikeCount: 1}}
			waitForRanking(t, ranking, want, ranker)
			t.Logf("%s: the like showed in the other process's ranking %v after it was acknowledged", engine,
				time.Since(liked).Round(time.Millisecond))

			stopCleanly(t, "board serve like,hot-article", ranker)
			stopCleanly(t, "board serve article", writer)
			ctx := context.Background()
			rdb := redis.NewClient(&redis.Options{Addr: eng.redisAddr})
			if err := rdb.Set(ctx, "enginescmd-test:kept", "yes", 0).Err(); err != nil {
				t.Fatal(err)
			}
			rdb.Close()
			before := endOffsets(t, eng.kafkaBrokers)
			if before["board-article"] == 0 || before["board-like"] == 0 {
				t.Fatalf("the broker holds no article or like records: %v", before)
			}
			stopCleanly(t, "board engines", eng.process)
			waitGone(t, eng.redisPid)

			restarted := time.Now()
			eng = startEngines(t, dir, engine)
			t.Logf("%s: engines restarted in %v", engine, time.Since(restarted).Round(time.Millisecond))
			rdb = redis.NewClient(&redis.Options{Addr: eng.redisAddr})
			defer rdb.Close()
			if got, err := rdb.Get(ctx, "enginescmd-test:kept").Result(); err != nil || got != "yes" {
				t.Errorf("after a restart the key written before reads %q, %v; want yes", got, err)
			}
			if after := endOffsets(t, eng.kafkaBrokers); !maps.Equal(after, before) {
				t.Errorf("after a restart the broker's end offsets are %v, want those of before, %v", after, before)
			}
			stopCleanly(t, "board engines", eng.process)
		})
	}
}

// waitForRanking polls a hot-article list until it equals want, failing after a generous bound.
func waitForRanking(t *testing.T, url string, want []hotOut, p *process) {
	t.Helper()
	polltest.Until(t, time.Minute, func() (bool, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
		}
		var got []hotOut
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("GET %s: %s: %v", url, body, err)
		}
		if slices.Equal(got, want) {
			return true, ""
		}
		return false, fmt.Sprintf("GET %s: %+v, want %+v\n%s", url, got, want, p.logs)
	})
}

// endOffsets returns the sum of the end offsets of each event topic's partitions on the brokers.
func endOffsets(t *testing.T, brokers string) map[string]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), "board-article", "board-like")
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Errorf("end offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		sums[o.Topic] += o.Offset
	})
	return sums
}

// --help works; --redis-addr and --kafka-brokers are refused on the command line, and ignored in the environment,
// where they may well point every serve at the engines.
func TestEnginesFlags(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"engines", "--help"}, noEnv, &out, &errOut); err != nil {
		t.Errorf("board engines --help: %v", err)
	}
	if help := errOut.String(); !strings.Contains(help, "Usage: board engines") || !strings.Contains(help, "-embedded-kafka-addr") ||
		strings.Contains(help, "-mysql-dsn") {
		t.Errorf("board engines --help printed:\n%s", help)
	}
	for _, refused := range []string{"--redis-addr", "--kafka-brokers"} {
		err := run(context.Background(), []string{"engines", refused, "127.0.0.1:6379"}, noEnv, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), refused+" leaves nothing to embed; give it to board serve") {
			t.Errorf("board engines %s: %v, want a refusal that says why", refused, err)
		}
	}
	for _, args := range [][]string{{"extra"}, {"--mysql-dsn", "root@tcp(127.0.0.1:3306)/"}} {
		if err := run(context.Background(), append([]string{"engines"}, args...), noEnv, io.Discard, io.Discard); err == nil {
			t.Errorf("board engines %s: no error", strings.Join(args, " "))
		}
	}

	env := map[string]string{"BOARD_REDIS_ADDR": "127.0.0.1:1", "BOARD_KAFKA_BROKERS": "127.0.0.1:1"}
	ctx, cancel := context.WithCancel(context.Background())
	stdout, printed := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"engines", "--data-dir", t.TempDir(), "--embedded-redis", "in-process",
			"--embedded-redis-addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0"},
			func(k string) string { return env[k] }, printed, io.Discard)
		printed.Close()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "--redis-addr 127.0.0.1:") {
		t.Errorf("with BOARD_REDIS_ADDR and BOARD_KAFKA_BROKERS set, board engines printed %q (%v)", line, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("board engines: %v", err)
	}
}
