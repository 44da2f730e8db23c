package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"board/internal/apidoc"
	"board/internal/article"
	"board/internal/articleread"
	"board/internal/auth"
	"board/internal/comment"
	"board/internal/existence"
	"board/internal/hotarticle"
	"board/internal/httpio"
	"board/internal/kafka"
	"board/internal/like"
	"board/internal/optcache"
	"board/internal/outbox"
	"board/internal/ratelimit"
	"board/internal/snowflake"
	"board/internal/sqldb"
	"board/internal/user"
	"board/internal/view"
	"board/internal/web"
)

// service is one runnable service: its SQL database, where it listens, and how it is built on the shared engines.
// A service that publishes is a producer: its changes go through an outbox that a relay publishes. A service with
// a consumer group is a consumer of the event topics.
type service struct {
	name     string
	database string // SQL database name; "" for a service without one
	migrate  func(context.Context, *sqldb.DB) error
	group    string // consumer group name under the topic prefix; "" for a service that consumes nothing
	// replayable: the service's state is in Redis and rebuilt from the events alone, so --replay may clear it.
	replayable bool
	// publishes: the service writes events, through an outbox in its database that a relay publishes.
	publishes bool
	// pages: the service serves pages for browsers, whose forms carry a session cookie rather than a Bearer token;
	// it checks that they come from its own pages (web.Service.Routes) instead of going through the Guard.
	pages bool
	// open maps the route patterns of the writes it takes without an access token to the rate limit that holds
	// each instead, per client address (see httpio.Guard).
	open  map[string]string
	addr  func(*config) string
	build func(ctx context.Context, e *engines, r runtime) (*http.ServeMux, []httpio.Check, error)
}

// runtime is what a service is built on besides the engines.
type runtime struct {
	producer
	name      string // the service's name
	group     string // its consumer group under the topic prefix, if it consumes
	ids       *snowflake.Generator
	workers   *background // the service's own background work, stopped after the HTTP servers
	consumers *background // consumer loops, stopped after the HTTP servers and before the workers
	metrics   *kafka.Metrics
	// purgeBatchSeconds observes how long each batch of a deleted article's purge took, by service.
	purgeBatchSeconds *prometheus.HistogramVec
	failed            chan<- error      // a consumer that stops on its own reports here, which shuts the process down
	local             map[string]string // service name -> base URL, for the services already listening in this process
}

// producer is what a producer service is built on: its database and its outbox.
type producer struct {
	db *sqldb.DB
	ob *outbox.Outbox
}

// services lists every service the binary can run; this is the one place that imports them all.
var services = []service{
	// user comes first: in one process, the others fetch its signing keys where it listens.
	{name: "user", database: "user", migrate: user.Migrate, open: user.OpenRoutes, addr: func(c *config) string { return c.UserAddr },
		build: buildUser},
	{name: "article", database: "article", migrate: article.Migrate, publishes: true, addr: func(c *config) string { return c.ArticleAddr },
		build: buildArticle},
	// Comment, like and view consume the article topic for their record of which articles exist; they come after
	// article, so that in one process they look articles up where it listens.
	{name: "comment", database: "comment", publishes: true, migrate: comment.Migrate, group: "comment",
		addr: func(c *config) string { return c.CommentAddr }, build: buildComment},
	{name: "like", database: "article_like", publishes: true, migrate: like.Migrate, group: "like",
		addr: func(c *config) string { return c.LikeAddr }, build: buildLike},
	{name: "view", database: "article_view", publishes: true, migrate: view.Migrate, group: "view",
		addr: func(c *config) string { return c.ViewAddr }, build: buildView},
	{name: "hot-article", group: "hot-article", replayable: true, addr: func(c *config) string { return c.HotArticleAddr },
		build: buildHotArticle},
	// article-read comes after the services it rebuilds from, so that in one process it calls them where they listen.
	{name: "article-read", group: "article-read", replayable: true, addr: func(c *config) string { return c.ArticleReadAddr },
		build: buildArticleRead},
	// web comes last: in one process, it calls every other service where it listens.
	{name: "web", pages: true, addr: func(c *config) string { return c.WebAddr }, build: buildWeb},
}

// buildUser starts the reload of the signing keys among the workers, so that a key rotated by another instance or by
// `board user rotate-key` is published, and then signed with, here too.
func buildUser(ctx context.Context, e *engines, r runtime) (*http.ServeMux, []httpio.Check, error) {
	cfg := user.Config{TokenTTL: e.cfg.TokenTTL, Hash: e.cfg.PasswordHash, Reload: e.cfg.KeyReload, Logger: e.logger}
	if limiter := rateLimiter(e); limiter != nil {
		cfg.Limiter = limiter
	}
	svc, err := user.NewService(ctx, r.db, r.ids, cfg)
	if err != nil {
		return nil, nil, err
	}
	r.workers.run(ctx, svc.Run)
	return user.Routes(svc, e.logger), []httpio.Check{{Name: "database", Ping: r.db.Ping}}, nil
}

func buildArticle(_ context.Context, e *engines, r runtime) (*http.ServeMux, []httpio.Check, error) {
	svc := article.NewService(article.NewStore(r.db, r.ob), r.ids, time.Now)
	return article.Routes(svc, e.logger), r.checks(e), nil
}

func buildComment(ctx context.Context, e *engines, r runtime) (*http.ServeMux, []httpio.Check, error) {
	articles := r.articles(e)
	store := comment.NewStore(r.db, r.ob, articles)
	if err := startExistence(ctx, e, r, articles, store.Purge); err != nil {
		return nil, nil, err
	}
	svc := comment.NewService(store, r.ids, time.Now)
	return comment.Routes(svc, e.logger), r.checks(e), nil
}

func buildLike(ctx context.Context, e *engines, r runtime) (*http.ServeMux, []httpio.Check, error) {
	articles := r.articles(e)
	store := like.NewStore(r.db, r.ob, articles)
	if err := startExistence(ctx, e, r, articles, store.Purge); err != nil {
		return nil, nil, err
	}
	svc := like.NewService(store, r.ids, time.Now, e.cfg.LikeStrategy)
	return like.Routes(svc, e.logger), r.checks(e), nil
}

// buildView starts the view service's flusher among the workers, which stop after the HTTP servers (no view is
// counted after the last flush) and before the relays (which publish what it wrote).
func buildView(ctx context.Context, e *engines, r runtime) (*http.ServeMux, []httpio.Check, error) {
	articles := r.articles(e)
	svc := view.NewService(view.NewStore(r.db, r.ob, articles), e.redis, view.Config{KeyPrefix: e.cfg.RedisPrefix, Logger: e.logger})
	if err := startExistence(ctx, e, r, articles, svc.Purge); err != nil {
		return nil, nil, err
	}
	r.workers.run(context.Background(), func(ctx context.Context) {
		if err := svc.Run(ctx); err != nil {
			e.logger.Error("last view count flush failed; views since the last backup live on in Redis only", "err", err)
		}
	})
	return view.Routes(svc, e.logger), r.checks(e), nil
}

func buildHotArticle(ctx context.Context, e *engines, r runtime) (*http.ServeMux, []httpio.Check, error) {
	svc := hotarticle.NewService(e.redis, hotarticle.Config{KeyPrefix: e.cfg.RedisPrefix,
		Location: e.cfg.HotArticleTimeZone, Logger: e.logger})
	if err := startConsumer(ctx, e, r, svc.Handlers(), svc.KeyPattern()); err != nil {
		return nil, nil, err
	}
	return hotarticle.Routes(svc, e.logger), consumerChecks(e), nil
}

func buildArticleRead(ctx context.Context, e *engines, r runtime) (*http.ServeMux, []httpio.Check, error) {
	origin := func(name, listen string) string { return r.origin(e, name, listen) }
	views := optcache.New[int64](e.redis, e.cfg.RedisPrefix+"article-read::", optcache.Config{})
	svc := articleread.NewService(e.redis, views, articleread.Config{KeyPrefix: e.cfg.RedisPrefix,
		Origins: articleread.Origins{Article: origin("article", e.cfg.ArticleAddr), Comment: origin("comment", e.cfg.CommentAddr),
			Like: origin("like", e.cfg.LikeAddr), View: origin("view", e.cfg.ViewAddr)},
		Logger: e.logger})
	if err := startConsumer(ctx, e, r, svc.Handlers(), svc.KeyPattern()); err != nil {
		return nil, nil, err
	}
	if err := svc.Prepare(ctx); err != nil {
		return nil, nil, err
	}
	return articleread.Routes(svc, e.logger), consumerChecks(e), nil
}

// buildWeb builds the pages, which call the other services over HTTP like any client.
func buildWeb(_ context.Context, e *engines, r runtime) (*http.ServeMux, []httpio.Check, error) {
	origin := func(name, listen string) string { return r.origin(e, name, listen) }
	warnUnbelievedWeb(e, origin("user", e.cfg.UserAddr))
	svc := web.New(web.Config{
		Origins: web.Origins{ArticleRead: origin("article-read", e.cfg.ArticleReadAddr), HotArticle: origin("hot-article", e.cfg.HotArticleAddr),
			Article: origin("article", e.cfg.ArticleAddr), Comment: origin("comment", e.cfg.CommentAddr), Like: origin("like", e.cfg.LikeAddr),
			View: origin("view", e.cfg.ViewAddr), User: origin("user", e.cfg.UserAddr)},
		Boards:        e.cfg.Boards,
		Tokens:        newVerifier(e, r),
		Location:      e.cfg.HotArticleTimeZone,
		ClientAddr:    clientAddr(e.cfg.ClientIPHeader, e.cfg.TrustedProxies),
		SecureCookies: e.cfg.SecureCookies,
		Logger:        e.logger,
	})
	return svc.Routes(), []httpio.Check{{Name: "article-read", Ping: svc.Ready}}, nil
}

// warnUnbelievedWeb says at start when a user service configured as this process is would not believe the browser
// addresses the web passes on in X-Forwarded-For: every browser would then share the web's own sign-in budget, and
// one could lock the others out. A user origin named by host name is not checked.
func warnUnbelievedWeb(e *engines, userOrigin string) {
	u, err := url.Parse(userOrigin)
	if err != nil {
		return
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return
	}
	trusted := slices.ContainsFunc(e.cfg.TrustedProxies, func(p netip.Prefix) bool { return p.Contains(ip.Unmap()) })
	if !strings.EqualFold(e.cfg.ClientIPHeader, "X-Forwarded-For") || !trusted {
		e.logger.Warn("the user service will not believe the browser addresses the web passes on, so every browser shares the web's sign-in and sign-up limits; "+
			"give the user service --client-ip-header X-Forwarded-For and the web's address in --trusted-proxies", "user_origin", userOrigin)
	}
}

// articles returns the record of which articles exist of a service that writes on articles.
func (r runtime) articles(e *engines) *existence.Registry {
	return existence.New(r.db, existence.Config{Service: r.name, Origin: r.origin(e, "article", e.cfg.ArticleAddr),
		PurgeBatchSeconds: r.purgeBatchSeconds.WithLabelValues(r.name), Logger: e.logger})
}

// startExistence starts what keeps a service's record of articles current: its consumer of the article topic, and
// among the workers the purge of deleted articles' rows.
func startExistence(ctx context.Context, e *engines, r runtime, articles *existence.Registry, purge existence.Purge) error {
	if err := startConsumer(ctx, e, r, articles.Handlers(), ""); err != nil {
		return err
	}
	r.workers.run(ctx, func(ctx context.Context) { articles.RunPurges(ctx, purge) })
	return nil
}

// origin returns the base URL of the named service, which listens on listen by default: the configured origin,
// else where this process serves it, else its default port on the loopback address.
func (r runtime) origin(e *engines, name, listen string) string {
	if u := e.cfg.Origins[name]; u != "" {
		return u
	}
	if u := r.local[name]; u != "" {
		return u
	}
	return "http://" + loopbackAddr(listen)
}

// loopbackAddr is addr (host:port) with an unspecified host (":9000", "[::]:9000") made the loopback address, so
// that this process can call a service it listens for.
func loopbackAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// consumerChecks are what a consumer service's readiness depends on: Redis, where its state is, and Kafka.
func consumerChecks(e *engines) []httpio.Check {
	return []httpio.Check{{Name: "redis", Ping: func(ctx context.Context) error { return e.redis.Ping(ctx).Err() }},
		{Name: "kafka", Ping: e.producer.Ping}}
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

// replayableNames are the services --replay can rebuild.
func replayableNames() []string {
	var names []string
	for _, s := range services {
		if s.replayable {
			names = append(names, s.name)
		}
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
	consumerMetrics := kafka.NewMetrics(reg)
	purgeBatchSeconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "board_article_purge_batch_seconds",
		Help:    "How long each batch of a deleted article's purge took, waits included: an upper bound of how long it held its locks.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"service"})
	reg.MustRegister(purgeBatchSeconds)
	relays, workers, consumers := &background{}, &background{}, &background{}
	defer relays.stop() // also on a failed start; on the normal path they stop before the engines close
	defer workers.stop()
	defer consumers.stop()
	var servers []*http.Server
	failed := make(chan error, 2*len(selected))
	local := map[string]string{}
	limiter := rateLimiter(e)
	var tokens *auth.Verifier // made once the user service, when it runs in this process, listens
	for _, s := range services {
		if !slices.Contains(selected, s.name) {
			continue
		}
		p, err := startProducer(ctx, e, s, ids, outboxMetrics.For(s.name), relays)
		if err != nil {
			return fmt.Errorf("start %s: %w", s.name, err)
		}
		api, checks, err := s.build(ctx, e, runtime{producer: p, name: s.name, group: s.group, ids: ids, workers: workers, consumers: consumers,
			metrics: consumerMetrics, purgeBatchSeconds: purgeBatchSeconds, failed: failed, local: local})
		if err != nil {
			return fmt.Errorf("start %s: %w", s.name, err)
		}
		ln, err := net.Listen("tcp", s.addr(cfg))
		if err != nil {
			return fmt.Errorf("start %s: %w", s.name, err)
		}
		local[s.name] = "http://" + loopbackAddr(ln.Addr().String())
		if tokens == nil {
			tokens = newVerifier(e, runtime{local: local})
		}
		var guard *httpio.Guard
		if !s.pages {
			guard = &httpio.Guard{Verify: tokens.Verify, Open: s.open, ClientAddr: clientAddr(cfg.ClientIPHeader, cfg.TrustedProxies)}
			if limiter != nil {
				guard.Limiter = limiter
			}
		}
		srv := httpio.Server{Service: s.name, API: api, Guard: guard, OpenAPI: apidoc.For(s.name), Checks: checks, Gatherer: reg, Metrics: metrics,
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
	consumers.stop() // commit what they applied and leave their groups
	workers.stop()   // services' background work, which may still write events
	relays.stop()    // flush what the requests and workers wrote, then leave the coordinators
	return err
}

// newVerifier returns the verifier of access tokens every service of the process shares, with the keys of the user
// service where r finds it.
func newVerifier(e *engines, r runtime) *auth.Verifier {
	jwks := r.origin(e, "user", e.cfg.UserAddr) + user.JWKSPath
	return auth.NewVerifier(auth.JWKS(&http.Client{}, jwks), auth.VerifierConfig{Logger: e.logger})
}

// rateLimiter returns the process's rate limiter, nil when --rate-limits is off.
func rateLimiter(e *engines) *ratelimit.Limiter {
	if !e.cfg.RateLimits {
		return nil
	}
	rules := map[string]ratelimit.Rule{}
	for name, limit := range e.cfg.Limits {
		// A brute-force limit that cannot be checked must not open the door; a user's write limit may.
		rules[name] = ratelimit.Rule{Limit: limit, FailOpen: name == httpio.WriteLimit}
	}
	return ratelimit.New(e.redis, e.cfg.RedisPrefix+"rate-limit::", rules, e.logger)
}

// clientAddr returns how the rate limits of sign-in and sign-up name a request's client: by the connection's
// address, or, for a connection from a trusted proxy, by the header the proxy sets. X-Forwarded-For lists every hop
// a client claims and then the one the proxy saw: only the last is the proxy's word. Anyone else who sends the
// header is known by their own address, so that a client cannot pick a fresh budget per request.
func clientAddr(header string, trusted []netip.Prefix) func(*http.Request) string {
	if header == "" {
		return nil
	}
	return func(r *http.Request) string {
		remote := httpio.RemoteHost(r)
		ip, err := netip.ParseAddr(remote)
		if err != nil || !slices.ContainsFunc(trusted, func(p netip.Prefix) bool { return p.Contains(ip.Unmap().WithZone("")) }) {
			return remote
		}
		v := r.Header.Values(header)
		if len(v) == 0 {
			return remote
		}
		last := v[len(v)-1]
		if i := strings.LastIndexByte(last, ','); i >= 0 {
			last = last[i+1:]
		}
		// Only an address names a client: anything else would be a fresh rate-limit budget per made-up name.
		if ip, err := netip.ParseAddr(strings.TrimSpace(last)); err == nil {
			return ip.String()
		}
		return remote
	}
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
// relay of its outbox if it publishes.
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
	if !s.publishes {
		return producer{db: db}, nil
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
