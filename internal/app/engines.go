package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/blocks"
	"board/internal/embedded"
	"board/internal/event"
	"board/internal/kafka"
	"board/internal/redisclient"
	"board/internal/sqldb"
	"board/internal/standing"
)

// Engines are the data engines a command runs on: the configured servers, or embedded ones started here.
type Engines struct {
	Config       *Config
	Logger       *slog.Logger
	Redis        redis.UniversalClient // made by StartRedis
	redisAddrs   []string
	KafkaBrokers []string    // found by StartKafka
	Producer     *kgo.Client // publishes events; made by StartKafka
	// Standing is the process's table of users' bans, roles and sessions, which every service's Guard consults;
	// started by Run after Kafka, before the services.
	Standing *standing.Table
	// Blocks is the process's table of who blocks whom, started with Standing.
	Blocks  *blocks.Table
	closers []func() error // run in reverse order by Close
}

// NewEngines returns no engines yet, logging to logger; commands start what they need.
func NewEngines(cfg *Config, logger *slog.Logger) *Engines {
	driverLog.Store(logger)
	return &Engines{Config: cfg, Logger: logger}
}

// StartRedis connects to the configured Redis, or starts the embedded one.
func (e *Engines) StartRedis(ctx context.Context) error {
	addrs := SplitList(e.Config.RedisAddr)
	if len(addrs) == 0 {
		srv, err := e.startEmbeddedRedis(ctx)
		if err != nil {
			return fmt.Errorf("start embedded redis: %w", err)
		}
		e.closers = append(e.closers, srv.Close)
		addrs = []string{srv.Addr()}
	}
	// Calls end at their context's deadline: a request's, or the one by which the view service needs a count
	// written (internal/view, "A crashed instance").
	rdb, err := redisclient.Connect(ctx, addrs, e.Config.RedisPassword)
	if err != nil {
		return err
	}
	e.Redis = rdb
	e.closers = append(e.closers, e.Redis.Close)
	e.redisAddrs = addrs
	return nil
}

// startEmbeddedRedis runs redis-server as a child process when it is installed (or required), else the in-process
// server. The README's table says why.
func (e *Engines) startEmbeddedRedis(ctx context.Context) (interface {
	Addr() string
	Close() error
}, error) {
	dir := filepath.Join(e.Config.DataDir, "redis")
	bin, lookErr := exec.LookPath(embedded.RedisServerBinary)
	switch {
	case e.Config.EmbeddedRedis == embeddedRedisServer && lookErr != nil:
		return nil, fmt.Errorf("--embedded-redis=%s: %w (install Debian's redis-server package)", embeddedRedisServer, lookErr)
	case e.Config.EmbeddedRedis == embeddedRedisInProcess || lookErr != nil:
		e.setAsideGobSnapshot(dir)
		return embedded.StartRedis(e.Config.EmbeddedRedisAddr, filepath.Join(dir, "snapshot"), e.Config.RedisSnapshot,
			e.Config.RedisPassword, e.Logger)
	}
	startCtx, cancel := context.WithTimeout(ctx, redisServerStartTimeout)
	defer cancel()
	return embedded.StartRedisServer(startCtx, embedded.RedisServerConfig{Binary: bin, Addr: e.Config.EmbeddedRedisAddr,
		Dir: dir, Password: e.Config.RedisPassword}, e.Logger)
}

// setAsideGobSnapshot renames the gob snapshot of boards before the in-process Redis kept change logs, which this
// version cannot read. What it held comes back on its own: view counts from their SQL backups, the rest (dedupe
// locks, the coordinator set, node leases) is short-lived.
func (e *Engines) setAsideGobSnapshot(dir string) {
	old := filepath.Join(dir, "snapshot.gob")
	if _, err := os.Stat(old); err != nil {
		return
	}
	if err := os.Rename(old, old+".unused"); err != nil {
		e.Logger.Warn("cannot set aside an older board's Redis snapshot", "path", old, "err", err)
		return
	}
	e.Logger.Warn("an older board's Redis snapshot is in a format this version does not read; set aside, view counts come back from their SQL backups",
		"path", old+".unused")
}

// driverLog receives the Redis and MySQL drivers' own log lines, which report connection trouble and would
// otherwise go straight to stderr: the logger of the newest engines (a process has one; tests make many), else the
// default logger.
var driverLog atomic.Pointer[slog.Logger]

// init installs driverLogger in both drivers before anything else runs: their setters are process-wide and MySQL's
// is unsynchronised, so a later call would race with every DSN parsed meanwhile (tests start boards in parallel).
func init() {
	redis.SetLogger(driverLogger{})
	_ = mysql.SetLogger(driverLogger{}) // fails only for nil
}

type driverLogger struct{}

func (driverLogger) logger() *slog.Logger {
	if l := driverLog.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// Printf is go-redis's logger interface.
func (l driverLogger) Printf(ctx context.Context, format string, v ...any) {
	l.logger().WarnContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

// Print is the MySQL driver's logger interface.
func (l driverLogger) Print(v ...any) {
	l.logger().Warn("mysql driver: " + strings.TrimSpace(fmt.Sprintln(v...)))
}

// StartKafka connects to the configured brokers, or starts the embedded one, and creates the event topics (and
// their dead-letter topics) that do not exist yet.
func (e *Engines) StartKafka(ctx context.Context) error {
	e.KafkaBrokers = SplitList(e.Config.KafkaBrokers)
	if len(e.KafkaBrokers) == 0 {
		broker, err := e.startEmbeddedKafka()
		if err != nil {
			return fmt.Errorf("start embedded kafka: %w", err)
		}
		e.closers = append(e.closers, func() error { broker.Close(); return nil })
		e.KafkaBrokers = broker.Addrs()
	}
	producer, err := kafka.NewProducer(e.KafkaBrokers, e.Config.DeliveryTimeout)
	if err != nil {
		return fmt.Errorf("kafka producer: %w", err)
	}
	e.closers = append(e.closers, func() error { producer.Close(); return nil })
	e.Producer = producer
	// The compacted ones first: EnsureTopics would create them as plain topics.
	partitions := int32(e.Config.TopicPartitions)
	if err := kafka.EnsureCompactedTopics(ctx, producer, event.CompactedTopics(e.Config.TopicPrefix), partitions); err != nil {
		return fmt.Errorf("create topics on %v: %w", e.KafkaBrokers, err)
	}
	if err := kafka.EnsureTopics(ctx, producer, event.Topics(e.Config.TopicPrefix), partitions); err != nil {
		return fmt.Errorf("create topics on %v: %w", e.KafkaBrokers, err)
	}
	return nil
}

// startEmbeddedKafka starts the embedded Kafka-protocol broker, keeping its log under the data directory.
func (e *Engines) startEmbeddedKafka() (*embedded.Kafka, error) {
	return embedded.StartKafka(e.Config.EmbeddedKafkaAddr, filepath.Join(e.Config.DataDir, "kafka"), e.Config.KafkaRetention, e.Logger)
}

// OpenSQL opens a service's database: <prefix><name> on the MySQL server, or <data-dir>/sqlite/<name>.db.
func (e *Engines) OpenSQL(ctx context.Context, name string) (*sqldb.DB, error) {
	var db *sqldb.DB
	if e.Config.MySQLDSN == "" {
		var err error
		if db, err = sqldb.OpenSQLite(filepath.Join(e.Config.DataDir, "sqlite", name+".db")); err != nil {
			return nil, err
		}
	} else {
		cfg, err := mysql.ParseDSN(e.Config.MySQLDSN)
		if err != nil {
			return nil, fmt.Errorf("--mysql-dsn: %w", err)
		}
		cfg.DBName = e.Config.MySQLDBPrefix + name
		cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = e.Config.MySQLTimeouts.Dial, e.Config.MySQLTimeouts.Read, e.Config.MySQLTimeouts.Write
		if db, err = sqldb.OpenMySQL(ctx, cfg.FormatDSN(), e.Config.MySQLMaxConns); err != nil {
			return nil, err
		}
	}
	e.closers = append(e.closers, db.Close)
	return db, nil
}

// Close releases everything in reverse order of start.
func (e *Engines) Close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		errs = append(errs, e.closers[i]())
	}
	e.closers = nil
	return errors.Join(errs...)
}

// SplitList returns the non-empty items of a comma-separated flag value, trimmed.
func SplitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// OpenService opens the SQL database of the named service, migrated unless the configuration says not to.
func (e *Engines) OpenService(ctx context.Context, name string) (*sqldb.DB, error) {
	i := slices.IndexFunc(services, func(s service) bool { return s.Name == name })
	if i < 0 || services[i].Database == "" {
		return nil, fmt.Errorf("no service %q with a database", name)
	}
	db, err := e.OpenSQL(ctx, services[i].Database)
	if err != nil {
		return nil, err
	}
	if e.Config.Migrate {
		if err := services[i].migrate(ctx, db); err != nil {
			return nil, err
		}
	}
	return db, nil
}
