package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"board/internal/article"
	"board/internal/httpio"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// service is one runnable service: its SQL database, where it listens, and how it is built on the shared engines.
type service struct {
	name     string
	database string // SQL database name; "" for a service without one
	migrate  func(context.Context, *sqldb.DB) error
	addr     func(*config) string
	build    func(e *engines, db *sqldb.DB, ids *snowflake.Generator) (*http.ServeMux, []httpio.Check)
}

// services lists every service the binary can run; this is the one place that imports them all.
var services = []service{
	{name: "article", database: "article", migrate: article.Migrate, addr: func(c *config) string { return c.ArticleAddr },
		build: buildArticle},
}

func buildArticle(e *engines, db *sqldb.DB, ids *snowflake.Generator) (*http.ServeMux, []httpio.Check) {
	svc := article.NewService(article.NewStore(db), ids, time.Now)
	checks := []httpio.Check{{Name: "database", Ping: db.Ping}, redisCheck(e)}
	return article.Routes(svc, e.logger), checks
}

func redisCheck(e *engines) httpio.Check {
	return httpio.Check{Name: "redis", Ping: func(ctx context.Context) error { return e.redis.Ping(ctx).Err() }}
}

func serviceNames() []string {
	names := make([]string, len(services))
	for i, s := range services {
		names[i] = s.name
	}
	return names
}

func serveCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cfg config
	fs := newFlagSet("serve", "Usage: board serve [flags] [service...]\n\nRuns the named services (default: all) in one process. Services: "+
		strings.Join(serviceNames(), ", ")+".", stderr)
	cfg.serveFlags(fs)
	if err := parse(fs, args, getenv); err != nil {
		return err
	}
	selected := fs.Args()
	if len(selected) == 0 {
		selected = serviceNames()
	}
	for _, name := range selected {
		if !slices.Contains(serviceNames(), name) {
			return fmt.Errorf("unknown service %q (services: %s)", name, strings.Join(serviceNames(), ", "))
		}
	}
	e, err := newEngines(&cfg, stderr)
	if err != nil {
		return err
	}
	return serve(ctx, e, selected)
}

// serve starts the engines and the selected services, and on ctx's end shuts them down in reverse order.
func serve(ctx context.Context, e *engines, selected []string) (err error) {
	defer func() { err = errors.Join(err, e.close()) }()
	cfg, logger := e.cfg, e.logger
	if err := e.startRedis(ctx); err != nil {
		return err
	}
	if err := e.startKafka(); err != nil {
		return err
	}
	ids, err := leaseIDs(ctx, e)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := httpio.NewMetrics(reg)
	var servers []*http.Server
	failed := make(chan error, len(selected))
	for _, s := range services {
		if !slices.Contains(selected, s.name) {
			continue
		}
		db, err := openServiceDB(ctx, e, s)
		if err != nil {
			return fmt.Errorf("start %s: %w", s.name, err)
		}
		api, checks := s.build(e, db, ids)
		ln, err := net.Listen("tcp", s.addr(cfg))
		if err != nil {
			return fmt.Errorf("start %s: %w", s.name, err)
		}
		srv := &http.Server{
			Handler: httpio.Server{Service: s.name, API: api, Checks: checks, Gatherer: reg, Metrics: metrics,
				Logger: logger}.Handler(),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				failed <- fmt.Errorf("%s: %w", s.name, err)
			}
		}()
		logger.Info("serving", "service", s.name, "addr", ln.Addr().String())
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err = <-failed:
		logger.Error("a server failed; shutting down", "err", err)
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	for i := len(servers) - 1; i >= 0; i-- {
		err = errors.Join(err, servers[i].Shutdown(shutdownCtx))
	}
	return err
}

// openServiceDB opens the service's SQL database, if it has one, and migrates it unless told not to.
func openServiceDB(ctx context.Context, e *engines, s service) (*sqldb.DB, error) {
	if s.database == "" {
		return nil, nil
	}
	db, err := e.openSQL(ctx, s.database)
	if err != nil {
		return nil, err
	}
	if e.cfg.Migrate {
		if err := s.migrate(ctx, db); err != nil {
			return nil, err
		}
	}
	return db, nil
}

// leaseIDs leases a Snowflake node id for this process and keeps the lease renewed until the engines close.
func leaseIDs(ctx context.Context, e *engines) (*snowflake.Generator, error) {
	ids, lease, err := snowflake.NewLeased(ctx, e.redis, e.cfg.RedisPrefix, e.cfg.NodeLeaseTTL, time.Now)
	if err != nil {
		return nil, fmt.Errorf("lease a snowflake node id: %w", err)
	}
	e.logger.Info("leased snowflake node id", "node", lease.Node())
	keepCtx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		lease.Keep(keepCtx, ids, e.logger)
	}()
	e.closers = append(e.closers, func() error {
		stopKeeping()
		<-kept
		releaseCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return lease.Release(releaseCtx)
	})
	return ids, nil
}
