package embedded

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServerBinary returns the redis-server on PATH, skipping the test without one (CI installs it).
func redisServerBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath(RedisServerBinary)
	if err != nil {
		t.Skip("redis-server is not installed; the in-process Redis is tested instead")
	}
	return bin
}

func startRedisServer(t *testing.T, dir, password string) (*RedisServer, *redis.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := StartRedisServer(ctx, RedisServerConfig{Binary: redisServerBinary(t), Addr: "127.0.0.1:0", Dir: dir,
		Password: password}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: password})
	t.Cleanup(func() {
		c.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, c
}

func TestRedisServerKeepsDataAcrossACleanRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, c := startRedisServer(t, dir, "")
	writeSample(t, c)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, c = startRedisServer(t, dir, "")
	checkSample(t, c)
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 3 {
		t.Errorf("DBSIZE after restart = %d, %v; want 3", n, err)
	}
}

// A crash of the server (kill -9) loses nothing it acknowledged: the append-only file is written before the reply.
func TestRedisServerKeepsAcknowledgedWritesAcrossKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, c := startRedisServer(t, dir, "")
	writeSample(t, c)
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.exited
	_, c = startRedisServer(t, dir, "")
	checkSample(t, c)
}

// A redis-server that outlived its board (here: one never closed) is stopped by the next start on its directory,
// which then has its data.
func TestRedisServerStopsOneLeftRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stale, c := startRedisServer(t, dir, "")
	writeSample(t, c)
	_, c = startRedisServer(t, dir, "")
	select {
	case <-stale.exited: // closes just after the reap that let the new start go on
	case <-time.After(10 * time.Second):
		t.Fatal("the redis-server left running was not stopped")
	}
	checkSample(t, c)
}

func TestRedisServerRequiresItsPassword(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := startRedisServer(t, t.TempDir(), `pa ss"w\rd`)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with the password: %v", err)
	}
	anonymous := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer anonymous.Close()
	if err := anonymous.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("PING without the password: %v, want NOAUTH", err)
	}
}

func TestRedisServerReportsWhyItDidNotStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	// A directory where the append-only directory should be makes redis-server exit at start.
	if err := os.WriteFile(filepath.Join(dir, "appendonlydir"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := StartRedisServer(ctx, RedisServerConfig{Binary: redisServerBinary(t), Addr: "127.0.0.1:0", Dir: dir},
		testLogger(t))
	if err == nil || !strings.Contains(err.Error(), "exited at start") || !strings.Contains(err.Error(), "appendonlydir") {
		t.Errorf("start with a broken directory: %v; want the exit and redis-server's own reason", err)
	}
}

func TestRedisListenAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr, password string
		ok             bool
	}{
		{"127.0.0.1:6380", "", true},
		{"localhost:0", "", true},
		{"[::1]:6380", "", true},
		{"0.0.0.0:6380", "", false},
		{":6380", "", false},
		{"192.0.2.1:6380", "", false},
		{"0.0.0.0:6380", "secret", true},
		{"127.0.0.1", "", false},
		{"127.0.0.1:70000", "", false},
	} {
		if _, _, err := redisListenAddr(tc.addr, tc.password); (err == nil) != tc.ok {
			t.Errorf("redisListenAddr(%q, %q) = %v, want ok %v", tc.addr, tc.password, err, tc.ok)
		}
	}
}

func TestRedisServerConfQuotesValues(t *testing.T) {
	t.Parallel()
	conf, err := redisServerConf("127.0.0.1", 6380, `/data/my "dir"`, `p\w`)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`dir "/data/my \"dir\""`, `requirepass "p\\w"`, "appendonly yes", `save ""`} {
		if !strings.Contains(conf, want+"\n") {
			t.Errorf("conf has no line %q:\n%s", want, conf)
		}
	}
	if _, err := redisServerConf("127.0.0.1", 6380, "/data", "a\nrequirepass x"); err == nil {
		t.Error("a password with a newline was accepted")
	}
}

func writeSample(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx := context.Background()
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "plain", "a\x00\xffb", 0)
		p.Set(ctx, "ttl", "v", time.Hour)
		p.Incr(ctx, "counter")
		p.Incr(ctx, "counter")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkSample(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx := context.Background()
	if v, err := c.Get(ctx, "plain").Result(); err != nil || v != "a\x00\xffb" {
		t.Errorf("plain = %q, %v", v, err)
	}
	if v, err := c.Get(ctx, "counter").Result(); err != nil || v != "2" {
		t.Errorf("counter = %q, %v", v, err)
	}
	if ttl, err := c.TTL(ctx, "ttl").Result(); err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("TTL of ttl = %v, %v; want just under an hour", ttl, err)
	}
}
