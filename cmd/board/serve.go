package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"board/internal/article"
	"board/internal/comment"
	"board/internal/httpio"
	"board/internal/like"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
	"board/internal/view"
)

// service is one runnable service: its SQL database, where it listens, and how it is built on the shared engines.
// A service with a database is a producer: its changes go through an outbox that a relay publishes.
type service struct {
	name     string
	database string // SQL database name; "" for a service without one
	migrate  func(context.Context, *sqldb.DB) error
	addr     func(*config) string
	build    func(e *engines, p producer, ids *snowflake.Generator, workers *background) (*http.ServeMux, []httpio.Check)
}

// producer is what a producer service is built on: its database and its outbox.
type producer struct {
	db *sqldb.DB
	ob *outbox.Outbox
}

// services lists every service the binary can run; this is the one place that imports them all.
var services = []service{
	{name: "article", database: "article", migrate: article.Migrate, addr: func(c *config) string { return c.ArticleAddr },
		build: buildArticle},
	{name: "comment", database: "comment", migrate: comment.Migrate, addr: func(c *config) string { return c.CommentAddr },
		build: buildComment},
	{name: "like", database: "article_like", migrate: like.Migrate, addr: func(c *config) string { return c.LikeAddr },
		build: buildLike},
	{name: "view", database: "article_view", migrate: view.Migrate, addr: func(c *config) string { return c.ViewAddr },
		build: buildView},
}

func buildArticle(e *engines, p producer, ids *snowflake.Generator, _ *background) (*http.ServeMux, []httpio.Check) {
	svc := article.NewService(article.NewStore(p.db, p.ob), ids, time.Now)
	return article.Routes(svc, e.logger), p.checks(e)
}

func buildComment(e *engines, p producer, ids *snowflake.Generator, _ *background) (*http.ServeMux, []httpio.Check) {
	svc := comment.NewService(comment.NewStore(p.db, p.ob), ids, time.Now)
	return comment.Routes(svc, e.logger), p.checks(e)
}

func buildLike(e *engines, p producer, ids *snowflake.Generator, _ *background) (*http.ServeMux, []httpio.Check) {
	svc := like.NewService(like.NewStore(p.db, p.ob), ids, time.Now, e.cfg.LikeStrategy)
	return like.Routes(svc, e.logger), p.checks(e)
}

// buildView starts the view service's flusher among the workers, which stop after the HTTP servers (no view is
// counted after the last flush) and before the relays (which publish what it wrote).
func buildView(e *engines, p producer, _ *snowflake.Generator, workers *background) (*http.ServeMux, []httpio.Check) {
	svc := view.NewService(view.NewStore(p.db, p.ob), e.redis, view.Config{KeyPrefix: e.cfg.RedisPrefix, Logger: e.logger})
	workers.run(context.Background(), func(ctx context.Context) {
		if err := svc.Run(ctx); err != nil {
			e.logger.Error("last view count flush failed; views since the last backup live on in Redis only", "err", err)
		}
	})
	return view.Routes(svc, e.logger), p.checks(e)
}

// checks are what a producer's readiness depends on: its database, Redis (the relay coordinator, the node lease)
// and Kafka (the relay).
func (p producer) checks(e *engines) []httpio.Check {
	return []httpio.Check{{Name: "database", Ping: p.db.Ping},
		{Name: "redis", Ping: func(ctx context.Context) error { return e.redis.Ping(ctx).Err() }},
		{Name: "kafka", Ping: e.producer.Ping}}
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
	selected, err := parseWithOperands(fs, args, getenv)
	if err != nil {
		return err
	}
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
	cfg, logger := e.cfg, e.logger
	defer func() {
		if err = errors.Join(err, e.close()); err == nil {
			logger.Info("shutdown complete") // else main reports err
		}
	}()
	if err := e.startRedis(ctx); err != nil {
		return err
	}
	if err := e.startKafka(ctx); err != nil {
		return err
	}
	ids, err := leaseIDs(ctx, e)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := httpio.NewMetrics(reg)
	outboxMetrics := outbox.NewMetricVecs(reg)
	relays, workers := &background{}, &background{}
	defer relays.stop() // also on a failed start; on the normal path they stop before the engines close
	defer workers.stop()
	var servers []*http.Server
	failed := make(chan error, len(selected))
	for _, s := range services {
		if !slices.Contains(selected, s.name) {
			continue
		}
		p, err := startProducer(ctx, e, s, ids, outboxMetrics.For(s.name), relays)
		if err != nil {
			return fmt.Errorf("start %s: %w", s.name, err)
		}
		api, checks := s.build(e, p, ids, workers)
		ln, err := net.Listen("tcp", s.addr(cfg))
		if err != nil {
			return fmt.Errorf("start %s: %w", s.name, err)
		}
		srv := httpio.Server{Service: s.name, API: api, Checks: checks, Gatherer: reg, Metrics: metrics,
			Logger: logger, RequestTimeout: cfg.RequestTimeout}.HTTPServer()
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
	workers.stop() // services' background work, which may still write events
	relays.stop()  // flush what the requests and workers wrote, then leave the coordinators
	return err
}

// background runs goroutines that stop, and are waited for, together.
type background struct {
	cancels []context.CancelFunc
	wg      sync.WaitGroup
}

func (b *background) run(ctx context.Context, fn func(context.Context)) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b.cancels = append(b.cancels, cancel)
	b.wg.Go(func() { fn(ctx) })
}

func (b *background) stop() {
	for _, cancel := range b.cancels {
		cancel()
	}
	b.wg.Wait()
}

// startProducer opens the service's SQL database, if it has one, migrates it unless told not to, and starts the
// relay of its outbox.
func startProducer(ctx context.Context, e *engines, s service, ids *snowflake.Generator, metrics *outbox.Metrics,
	relays *background) (producer, error) {
	if s.database == "" {
		return producer{}, nil
	}
	db, err := e.openSQL(ctx, s.database)
	if err != nil {
		return producer{}, err
	}
	if e.cfg.Migrate {
		if err := s.migrate(ctx, db); err != nil {
			return producer{}, err
		}
	}
	cfg := e.cfg
	ob := outbox.New(db, cfg.OutboxShards, ids, time.Now, metrics)
	coord := outbox.NewCoordinator(e.redis, cfg.RedisPrefix, s.name, cfg.OutboxShards,
		outbox.CoordinatorConfig{Ping: cfg.CoordinatorPing, DeadAfter: cfg.CoordinatorDeadline}, e.logger, metrics)
	relay := outbox.NewRelay(ob, e.producer, coord, outbox.RelayConfig{TopicPrefix: cfg.TopicPrefix,
		PollInterval: cfg.RelayPollInterval, MinAge: cfg.RelayMinAge, AckTimeout: cfg.DeliveryTimeout}, e.logger)
	relays.run(ctx, relay.Run)
	return producer{db: db, ob: ob}, nil
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
