package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"board/internal/auth"
	"board/internal/httpio"
	"board/internal/kafka"
	"board/internal/outbox"
)

// App is a running board: the engines and the services of its configuration, from Run until Shutdown.
type App struct {
	logger  *slog.Logger
	engines *Engines
	urls    map[string]string // service name -> base URL of its listener
	servers []*http.Server    // the services', in order of start
	debug   *http.Server      // the profiler's, if any

	relays, workers, consumers *background
	failed                     chan error
}

// Run starts the engines and the services cfg names, and returns once every service listens. On an error, what it
// had started is stopped again.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) (a *App, err error) {
	logger.Info("starting", "version", Version(), "config", cfg)
	a = &App{logger: logger, engines: NewEngines(&cfg, logger), urls: map[string]string{},
		relays: &background{}, workers: &background{}, consumers: &background{},
		failed: make(chan error, 2*len(cfg.Services)+1)} // a server and a consumer per service, and the profiler
	defer func() {
		if err != nil {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
			defer cancel()
			err = errors.Join(err, a.stop(stopCtx))
			a = nil
		}
	}()
	e := a.engines
	if err := e.StartRedis(ctx); err != nil {
		return a, err
	}
	if err := e.StartKafka(ctx); err != nil {
		return a, err
	}
	if err := startStanding(ctx, e, a.consumers); err != nil {
		return a, err
	}
	ids, err := leaseIDs(ctx, e)
	if err != nil {
		return a, err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := httpio.NewMetrics(reg)
	outboxMetrics := outbox.NewMetricVecs(reg)
	consumerMetrics := kafka.NewMetrics(reg)
	purgeBatchSeconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "board_article_purge_batch_seconds",
		Help:    "How long each batch of a deleted article's purge took, waits included: an upper bound of how long it held its locks.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"service"})
	reg.MustRegister(purgeBatchSeconds)
	limiter := rateLimiter(e)
	var tokens *auth.Verifier // made once the user service, when it runs in this process, listens
	for _, s := range services {
		if !slices.Contains(cfg.Services, s.Name) {
			continue
		}
		p, err := startProducer(ctx, e, s, ids, outboxMetrics.For(s.Name), a.relays)
		if err != nil {
			return a, fmt.Errorf("start %s: %w", s.Name, err)
		}
		api, checks, err := s.build(ctx, e, deps{producer: p, name: s.Name, group: s.Group, concurrent: s.concurrent, ids: ids, workers: a.workers,
			consumers: a.consumers, metrics: consumerMetrics, purgeBatchSeconds: purgeBatchSeconds, failed: a.failed, local: a.urls})
		if err != nil {
			return a, fmt.Errorf("start %s: %w", s.Name, err)
		}
		ln, err := net.Listen("tcp", s.addr(&cfg))
		if err != nil {
			return a, fmt.Errorf("start %s: %w", s.Name, err)
		}
		a.urls[s.Name] = "http://" + loopbackAddr(ln.Addr().String())
		if tokens == nil {
			tokens = newVerifier(e, deps{local: a.urls})
		}
		var guard *httpio.Guard
		if !s.pages {
			guard = &httpio.Guard{Verify: tokens.Verify, Standing: e.Standing, Sessions: e.Standing, Open: s.open, Unbanned: s.unbanned,
				ClientAddr: clientAddr(cfg.ClientIPHeader, cfg.TrustedProxies)}
			if limiter != nil {
				guard.Limiter = limiter
			}
			checks = append(checks, httpio.Check{Name: "standing", Ping: e.Standing.Ready})
		}
		var doc []byte
		if s.openAPI != nil {
			doc = s.openAPI()
		}
		srv := httpio.Server{Service: s.Name, API: api, Guard: guard, OpenAPI: doc, Checks: checks, Gatherer: reg,
			Metrics: metrics, Logger: logger, RequestTimeout: cfg.RequestTimeout, Streams: s.streams,
			Files: s.files}.HTTPServer()
		a.servers = append(a.servers, srv)
		a.serve(s.Name, srv, ln)
	}
	if cfg.DebugAddr != "" {
		if err := a.serveDebug(cfg.DebugAddr); err != nil {
			return a, err
		}
	}
	return a, nil
}

// serve serves srv on ln until Shutdown; a server that fails on its own is reported by Failed.
func (a *App) serve(name string, srv *http.Server, ln net.Listener) {
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			a.failed <- fmt.Errorf("%s: %w", name, err)
		}
	}()
	a.logger.Info("serving", "service", name, "addr", ln.Addr().String())
}

// serveDebug serves the Go profiler on its own listener, which only an operator should reach.
func (a *App) serveDebug(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--debug-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No write timeout: a CPU profile or a trace streams for as long as it was asked to (?seconds=).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
	a.urls["debug"] = "http://" + loopbackAddr(ln.Addr().String())
	a.debug = srv
	a.serve("debug", srv, ln)
	return nil
}

// URL returns the base URL at which this process serves the named service ("article", ..., or "debug" for the
// profiler), with a wildcard listen address made loopback; "" when it does not serve it.
func (a *App) URL(service string) string { return a.urls[service] }

// RedisAddrs returns the addresses of the Redis the app uses: the configured ones, or the embedded server's.
func (a *App) RedisAddrs() []string { return a.engines.redisAddrs }

// Failed reports a server or consumer that stopped on its own; the app should then be shut down.
func (a *App) Failed() <-chan error { return a.failed }

// Shutdown stops the app in reverse order of start: the HTTP servers (waiting for requests in flight until ctx
// ends), then the consumers (they commit what they applied and leave their groups), the services' background work
// (which may still write events), the relays (which flush what was written and leave their coordinators), and last
// the engines. The profiler's listener is closed at once: a profile being taken must not hold the others up.
func (a *App) Shutdown(ctx context.Context) error { return a.stop(ctx) }

func (a *App) stop(ctx context.Context) error {
	var errs []error
	if a.debug != nil {
		errs = append(errs, a.debug.Close())
		a.debug = nil
	}
	for i := len(a.servers) - 1; i >= 0; i-- {
		if err := a.servers[i].Shutdown(ctx); err != nil {
			// Past the deadline: end the requests still in flight before the engines under them close.
			errs = append(errs, err, a.servers[i].Close())
		}
	}
	a.servers = nil
	a.consumers.stop()
	a.workers.stop()
	a.relays.stop()
	return errors.Join(append(errs, a.engines.Close())...)
}

// Serve runs the app of cfg until ctx ends or a part of it fails, then shuts it down within cfg.ShutdownTimeout.
func Serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	a, err := Run(ctx, cfg, logger)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err = <-a.Failed():
		logger.Error("a part failed; shutting down", "err", err)
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err = errors.Join(err, a.Shutdown(shutdownCtx)); err == nil {
		logger.Info("shutdown complete") // else main reports err
	}
	return err
}
