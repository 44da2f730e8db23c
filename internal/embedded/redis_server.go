package embedded

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServerBinary is the name of the real Redis server looked up on PATH.
const RedisServerBinary = "redis-server"

const (
	redisServerPidFile = "redis-server.pid"
	// redisServerStopTimeout bounds a clean stop: SIGTERM makes redis-server fsync its append-only file and exit,
	// which takes milliseconds; past this it is killed.
	redisServerStopTimeout = 30 * time.Second
)

// RedisServerConfig says how to run a redis-server child process.
type RedisServerConfig struct {
	Binary   string // path of the redis-server executable
	Addr     string // host:port to listen on; port 0 picks a free port
	Dir      string // its working directory: the append-only files live here
	Password string // required of clients when set; needed for a non-loopback Addr
}

// RedisServer is a real redis-server run as a child process that board owns. It keeps its data in an append-only
// file in Dir, written before each reply and fsynced every second, so what a restart finds is the state at one
// point in time: all of it after a clean stop or a crash of board, at most about a second less after an OS crash.
// The child runs in a process group of its own (a Ctrl-C to board's terminal must not stop Redis before board has
// finished with it) and gets SIGTERM when board dies, even by SIGKILL.
type RedisServer struct {
	cmd    *exec.Cmd
	addr   string
	logger *slog.Logger
	exited chan struct{} // closed once the process has exited
	waited error         // cmd.Wait's result, set before exited closes
	ready  atomic.Bool   // it served; an exit from then on, unless closing, is reported

	closeOnce sync.Once
	closing   chan struct{}
	closeErr  error
}

// StartRedisServer starts redis-server and returns once it accepts commands with its data loaded. A redis-server
// that an earlier board left running on the same directory (its parent was killed while it was loading, say) is
// stopped first.
func StartRedisServer(ctx context.Context, cfg RedisServerConfig, logger *slog.Logger) (*RedisServer, error) {
	host, port, err := redisListenAddr(cfg.Addr, cfg.Password)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("embedded redis-server: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded redis-server: %w", err)
	}
	// The path the kernel reports as redis-server's working directory, to recognise one left running.
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil, fmt.Errorf("embedded redis-server: %w", err)
	}
	if err := stopStaleRedisServer(dir, logger); err != nil {
		return nil, err
	}
	if port == 0 {
		if port, err = freePort(host); err != nil {
			return nil, fmt.Errorf("embedded redis-server: %w", err)
		}
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conf, err := redisServerConf(host, port, dir, cfg.Password)
	if err != nil {
		return nil, err
	}

	cmd := exec.Command(cfg.Binary, "-") // "-": read the configuration from stdin, so the password is not in ps
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("embedded redis-server: %w", err)
	}
	cmd.Stderr = cmd.Stdout
	s := &RedisServer{cmd: cmd, addr: addr, logger: logger, exited: make(chan struct{}), closing: make(chan struct{})}
	logs := &recentLines{}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig is sent when the thread that started the child ends, not the process (go.dev/issue/27505): this
		// goroutine keeps its thread, which the runtime then never ends, until the child is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.forwardLog(out, logs) // to the end of the output, which Wait closes
		s.waited = cmd.Wait()
		close(s.exited)
		select {
		case <-s.closing:
		default:
			if s.ready.Load() { // else StartRedisServer reports it
				logger.Error("embedded redis-server exited unexpectedly; requests needing Redis fail until board restarts",
					"err", s.waited, "log", logs.String())
			}
		}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("embedded redis-server: start %s: %w", cfg.Binary, err)
	}

	err = s.waitReady(ctx, cfg.Password)
	if err == nil {
		s.ready.Store(true)
		select {
		case <-s.exited:
			err = s.exitedAtStart()
		default:
		}
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("embedded redis-server: %w; its last log lines:\n%s", err, logs.String()),
			s.Close())
	}
	logger.Info("embedded redis listening", "engine", "redis-server", "addr", addr, "dir", dir, "pid", cmd.Process.Pid)
	return s, nil
}

// Addr is the address the server listens on, as host:port.
func (s *RedisServer) Addr() string { return s.addr }

// Close stops redis-server with SIGTERM, which flushes its append-only file, and waits for it to exit.
func (s *RedisServer) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		select {
		case <-s.exited:
			return // already gone; StartRedisServer or the exit watcher said why
		default:
		}
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.closeErr = fmt.Errorf("embedded redis-server: stop: %w", err)
		}
		select {
		case <-s.exited:
			if s.waited != nil {
				s.closeErr = fmt.Errorf("embedded redis-server: stop: %w", s.waited)
			}
		case <-time.After(redisServerStopTimeout):
			s.closeErr = fmt.Errorf("embedded redis-server: did not stop within %v; killed", redisServerStopTimeout)
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
	return s.closeErr
}

// exitedAtStart is the error of a redis-server that exited before it was ready, with its exit status if it failed.
func (s *RedisServer) exitedAtStart() error {
	if s.waited == nil { // it exits 0 on SIGTERM
		return errors.New("exited at start")
	}
	return fmt.Errorf("exited at start: %w", s.waited)
}

// waitReady waits until redis-server accepts connections (dialling by hand: go-redis would log every refusal), then
// pings until it answers PONG: it answers LOADING while it reads its data back.
func (s *RedisServer) waitReady(ctx context.Context, password string) error {
	c := redis.NewClient(&redis.Options{Addr: s.addr, Password: password, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	defer c.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	listening := false
	for {
		var err error
		if !listening {
			var conn net.Conn
			if conn, err = net.DialTimeout("tcp", s.addr, time.Second); err == nil {
				conn.Close()
				listening = true
			}
		}
		if listening {
			if err = c.Ping(ctx).Err(); err == nil {
				return s.checkIsOurs(ctx, c)
			}
		}
		select {
		case <-s.exited:
			return s.exitedAtStart()
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last answer: %w)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// checkIsOurs makes sure the server answering at s.addr is the child: with port 0 the port is picked before
// redis-server binds it, and another process could have taken it in between.
func (s *RedisServer) checkIsOurs(ctx context.Context, c *redis.Client) error {
	info, err := c.InfoMap(ctx, "server").Result()
	if err != nil {
		return err
	}
	if pid := info["Server"]["process_id"]; pid != strconv.Itoa(s.cmd.Process.Pid) {
		return fmt.Errorf("%s is served by another Redis (pid %s), not the one started (pid %d)", s.addr, pid, s.cmd.Process.Pid)
	}
	return nil
}

// redisServerConf is the configuration given to redis-server: listen where asked, keep an append-only file in dir
// (an RDB preamble makes reloading a large data set fast), no RDB snapshots of its own, logs to stdout.
func redisServerConf(host string, port int, dir, password string) (string, error) {
	lines := []string{
		"bind " + host,
		"port " + strconv.Itoa(port),
		"protected-mode no", // access is restricted by the bind address and, off loopback, the password
		"daemonize no",
		"logfile \"\"",
		"databases 16",
		"save \"\"",
		"appendonly yes",
		"appendfsync everysec",
		"aof-use-rdb-preamble yes",
	}
	for _, s := range []struct{ name, value string }{
		{"dir", dir}, {"pidfile", filepath.Join(dir, redisServerPidFile)}, {"requirepass", password}} {
		if s.value == "" {
			continue
		}
		q, err := quoteRedisConf(s.value)
		if err != nil {
			return "", fmt.Errorf("embedded redis-server: %s: %w", s.name, err)
		}
		lines = append(lines, s.name+" "+q)
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// quoteRedisConf quotes a value for redis.conf, whose double-quoted strings take \" and \\ escapes.
func quoteRedisConf(v string) (string, error) {
	if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "", errors.New("control characters are not allowed")
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`, nil
}

// redisListenAddr checks where an embedded Redis may listen: off loopback only with a password, since anyone who
// can reach it can read and change every key.
func redisListenAddr(addr, password string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("embedded redis: listen address %q: %w", addr, err)
	}
	if port, err = strconv.Atoi(p); err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("embedded redis: listen address %q: bad port", addr)
	}
	ip := net.ParseIP(host)
	if host == "localhost" || ip != nil && ip.IsLoopback() {
		return host, port, nil
	}
	if password == "" {
		return "", 0, fmt.Errorf("embedded redis: listen address %q is not loopback: set a password (--redis-password) or listen on 127.0.0.1", addr)
	}
	return host, port, nil
}

// stopStaleRedisServer stops a redis-server still running on dir, found through the pid file it writes. The
// process must be a redis-server whose working directory is dir, so a recycled pid is never signalled.
func stopStaleRedisServer(dir string, logger *slog.Logger) error {
	b, err := os.ReadFile(filepath.Join(dir, redisServerPidFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("embedded redis-server: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return nil // torn or foreign content: nothing we started
	}
	proc := fmt.Sprintf("/proc/%d", pid)
	cwd, err1 := os.Readlink(proc + "/cwd")
	cmdline, err2 := os.ReadFile(proc + "/cmdline")
	if err1 != nil || err2 != nil || cwd != dir || !strings.Contains(filepath.Base(strings.SplitN(string(cmdline), "\x00", 2)[0]), "redis-server") {
		return nil
	}
	logger.Warn("embedded redis-server: stopping one left running by an earlier board", "pid", pid, "dir", dir)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return nil // it is gone already
	}
	deadline := time.Now().Add(redisServerStopTimeout)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("embedded redis-server: pid %d, left running on %s by an earlier board, did not stop", pid, dir)
}

func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// forwardLog passes redis-server's log lines ("pid:role date time level message") to slog, and keeps the last
// ones, which errors about its exit quote. Lines of level "#" while it serves (an append-only file it cannot
// write, say) are warnings; at start and stop they are routine notices, and the rest is chatter: debug.
func (s *RedisServer) forwardLog(r io.Reader, recent *recentLines) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		recent.add(line)
		level := slog.LevelDebug
		if fields := strings.Fields(line); len(fields) >= 6 && fields[5] == "#" && s.ready.Load() && !s.isClosing() {
			level = slog.LevelWarn
		}
		s.logger.Log(context.Background(), level, "redis-server: "+line)
	}
	// A line too long for the scanner ends it: keep reading, or redis-server would block on a full pipe.
	_, _ = io.Copy(io.Discard, r)
}

func (s *RedisServer) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// recentLines keeps the last few lines of a log.
type recentLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *recentLines) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 20 {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, line)
}

func (l *recentLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
