package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/embedded"
	"board/internal/event"
	"board/internal/kafka"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// engines are the data engines a command runs on: the configured servers, or embedded ones started here.
type engines struct {
	cfg          *config
	logger       *slog.Logger
	redis        redis.UniversalClient
	kafkaBrokers []string
	producer     *kgo.Client    // publishes events; made by startKafka
	closers      []func() error // run in reverse order by close
}

// newEngines returns no engines yet, and a logger writing to w; commands start what they need.
func newEngines(cfg *config, w io.Writer) (*engines, error) {
	logger, err := cfg.logger(w)
	if err != nil {
		return nil, err
	}
	driverLog.Store(logger)
	routeDriverLogs()
	return &engines{cfg: cfg, logger: logger}, nil
}

// startRedis connects to the configured Redis, or starts the embedded one.
func (e *engines) startRedis(ctx context.Context) error {
	addrs := splitList(e.cfg.RedisAddr)
	if len(addrs) == 0 {
		srv, err := e.startEmbeddedRedis(ctx)
		if err != nil {
			return fmt.Errorf("start embedded redis: %w", err)
		}
		e.closers = append(e.closers, srv.Close)
		addrs = []string{srv.Addr()}
	}
	// Fail fast when Redis is down, so that requests get their 503 in about a second instead of go-redis's
	// default of several dial attempts and retries. Calls end at their context's deadline too: a request's, or
	// the one by which the view service needs a count written (internal/view, "A crashed instance").
	opts := &redis.UniversalOptions{Addrs: addrs, Password: e.cfg.RedisPassword,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, PoolTimeout: 2 * time.Second,
		MaxRetries: 1, DialerRetries: 1, ContextTimeoutEnabled: true}
	e.redis = redis.NewUniversalClient(opts)
	if err := e.redis.Ping(ctx).Err(); err != nil {
		e.redis.Close()
		return fmt.Errorf("connect to redis %v: %w", addrs, err)
	}
	// One address may be a node of a Redis Cluster: a plain client would get MOVED for most keys.
	if _, single := e.redis.(*redis.Client); single {
		info, err := e.redis.Info(ctx).Result() // the default sections include Cluster's (the in-process server has none)
		if err != nil {
			e.redis.Close()
			return fmt.Errorf("ask redis %v whether it is a cluster: %w", addrs, err)
		}
		if strings.Contains(info, "cluster_enabled:1") {
			e.redis.Close()
			opts.IsClusterMode = true
			e.redis = redis.NewUniversalClient(opts)
		}
	}
	e.closers = append(e.closers, e.redis.Close)
	return nil
}

// startEmbeddedRedis runs redis-server as a child process when it is installed (or required), else the in-process
// server. The README's table says why.
func (e *engines) startEmbeddedRedis(ctx context.Context) (interface {
	Addr() string
	Close() error
}, error) {
	dir := filepath.Join(e.cfg.DataDir, "redis")
	bin, lookErr := exec.LookPath(embedded.RedisServerBinary)
	switch {
	case e.cfg.EmbeddedRedis == embeddedRedisServer && lookErr != nil:
		return nil, fmt.Errorf("--embedded-redis=%s: %w (install Debian's redis-server package)", embeddedRedisServer, lookErr)
	case e.cfg.EmbeddedRedis == embeddedRedisInProcess || lookErr != nil:
		e.setAsideGobSnapshot(dir)
		return embedded.StartRedis(e.cfg.EmbeddedRedisAddr, filepath.Join(dir, "snapshot"), e.cfg.RedisSnapshot,
			e.cfg.RedisPassword, e.logger)
	}
	startCtx, cancel := context.WithTimeout(ctx, redisServerStartTimeout)
	defer cancel()
	return embedded.StartRedisServer(startCtx, embedded.RedisServerConfig{Binary: bin, Addr: e.cfg.EmbeddedRedisAddr,
		Dir: dir, Password: e.cfg.RedisPassword}, e.logger)
}

// setAsideGobSnapshot renames the gob snapshot of boards before the in-process Redis kept change logs, which this
// version cannot read. What it held comes back on its own: view counts from their SQL backups, the rest (dedupe
// locks, the coordinator set, node leases) is short-lived.
func (e *engines) setAsideGobSnapshot(dir string) {
	old := filepath.Join(dir, "snapshot.gob")
	if _, err := os.Stat(old); err != nil {
		return
	}
	if err := os.Rename(old, old+".unused"); err != nil {
		e.logger.Warn("cannot set aside an older board's Redis snapshot", "path", old, "err", err)
		return
	}
	e.logger.Warn("an older board's Redis snapshot is in a format this version does not read; set aside, view counts come back from their SQL backups",
		"path", old+".unused")
}

// driverLog receives the Redis and MySQL drivers' own log lines, which report connection trouble and would
// otherwise go straight to stderr: the logger of the newest engines (a process has one; tests make many).
var driverLog atomic.Pointer[slog.Logger]

// routeDriverLogs installs driverLogger in both drivers, once: their setters are process-wide, MySQL's unsynchronised.
var routeDriverLogs = sync.OnceFunc(func() {
	redis.SetLogger(driverLogger{})
	_ = mysql.SetLogger(driverLogger{}) // fails only for nil
})

type driverLogger struct{}

// Printf is go-redis's logger interface.
func (driverLogger) Printf(ctx context.Context, format string, v ...any) {
	driverLog.Load().WarnContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

// Print is the MySQL driver's logger interface.
func (driverLogger) Print(v ...any) {
	driverLog.Load().Warn("mysql driver: " + strings.TrimSpace(fmt.Sprintln(v...)))
}

// startKafka connects to the configured brokers, or starts the embedded one, and creates the event topics (and
// their dead-letter topics) that do not exist yet.
func (e *engines) startKafka(ctx context.Context) error {
	e.kafkaBrokers = splitList(e.cfg.KafkaBrokers)
	if len(e.kafkaBrokers) == 0 {
		broker, err := e.startEmbeddedKafka()
		if err != nil {
			return fmt.Errorf("start embedded kafka: %w", err)
		}
		e.closers = append(e.closers, func() error { broker.Close(); return nil })
		e.kafkaBrokers = broker.Addrs()
	}
	producer, err := kafka.NewProducer(e.kafkaBrokers, e.cfg.DeliveryTimeout)
	if err != nil {
		return fmt.Errorf("kafka producer: %w", err)
	}
	e.closers = append(e.closers, func() error { producer.Close(); return nil })
	e.producer = producer
	if err := kafka.EnsureTopics(ctx, producer, event.Topics(e.cfg.TopicPrefix), int32(e.cfg.TopicPartitions)); err != nil {
		return fmt.Errorf("create topics on %v: %w", e.kafkaBrokers, err)
	}
	return nil
}

// startEmbeddedKafka starts the embedded Kafka-protocol broker, keeping its log under the data directory.
func (e *engines) startEmbeddedKafka() (*embedded.Kafka, error) {
	return embedded.StartKafka(e.cfg.EmbeddedKafkaAddr, filepath.Join(e.cfg.DataDir, "kafka"), e.cfg.KafkaRetention, e.logger)
}

// openSQL opens a service's database: <prefix><name> on the MySQL server, or <data-dir>/sqlite/<name>.db.
func (e *engines) openSQL(ctx context.Context, name string) (*sqldb.DB, error) {
	var db *sqldb.DB
	if e.cfg.MySQLDSN == "" {
		var err error
		if db, err = sqldb.OpenSQLite(filepath.Join(e.cfg.DataDir, "sqlite", name+".db")); err != nil {
			return nil, err
		}
	} else {
		cfg, err := mysql.ParseDSN(e.cfg.MySQLDSN)
		if err != nil {
			return nil, fmt.Errorf("--mysql-dsn: %w", err)
		}
		cfg.DBName = e.cfg.MySQLDBPrefix + name
		cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = e.cfg.MySQLTimeouts.Dial, e.cfg.MySQLTimeouts.Read, e.cfg.MySQLTimeouts.Write
		if db, err = sqldb.OpenMySQL(ctx, cfg.FormatDSN(), e.cfg.MySQLMaxConns); err != nil {
			return nil, err
		}
	}
	e.closers = append(e.closers, db.Close)
	return db, nil
}

// toolDatabase opens and migrates a database for a tool (seed, bench), and returns it with the outbox tools write
// through (no relay, no metrics) and their id generator, on the node reserved for tools.
func (e *engines) toolDatabase(ctx context.Context, name string, migrate func(context.Context, *sqldb.DB) error) (
	*sqldb.DB, *outbox.Outbox, *snowflake.Generator, error) {
	db, err := e.openSQL(ctx, name)
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
	return db, outbox.New(db, e.cfg.OutboxShards, ids, time.Now, nil), ids, nil
}

// close releases everything in reverse order of start.
func (e *engines) close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		errs = append(errs, e.closers[i]())
	}
	e.closers = nil
	return errors.Join(errs...)
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
