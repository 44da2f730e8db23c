package app

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"board/internal/article"
	"board/internal/articleread"
	"board/internal/auth"
	"board/internal/comment"
	"board/internal/existence"
	"board/internal/hotarticle"
	"board/internal/httpio"
	"board/internal/idempotency"
	"board/internal/kafka"
	"board/internal/like"
	"board/internal/logicalttl"
	"board/internal/mail"
	"board/internal/media"
	"board/internal/notification"
	"board/internal/outbox"
	"board/internal/ratelimit"
	"board/internal/redisclient"
	"board/internal/search"
	"board/internal/snowflake"
	"board/internal/sqldb"
	"board/internal/user"
	"board/internal/view"
)

// Service says what one service of board is: its name, its SQL database, and how it meets the event topics. A
// service that publishes is a producer: its changes go through an outbox that a relay publishes. A service with a
// consumer group is a consumer of the event topics.
type Service struct {
	Name     string
	Database string // SQL database name; "" for a service without one
	Group    string // consumer group name under the topic prefix; "" for a service that consumes nothing
	// Publishes: the service writes events, through an outbox in its database that a relay publishes.
	Publishes bool
	// Replayable: the service's state is in Redis and rebuilt from the events alone, so --replay may clear it.
	Replayable bool
}

// service is one runnable service: what it is, where it listens, and how it is built on the shared engines.
type service struct {
	Service
	migrate func(context.Context, *sqldb.DB) error
	// pages: the service serves pages for browsers, whose forms carry a session cookie rather than a Bearer token;
	// it checks that they come from its own pages (web.Service.Routes) instead of going through the Guard.
	pages bool
	// unbanned are the route patterns of the writes a banned user may still make (httpio.Guard.Unbanned).
	unbanned map[string]bool
	// open maps the route patterns of the writes it takes without an access token to the rate limit that holds
	// each instead, per client address (see httpio.Guard).
	open map[string]string
	// streams are the paths whose answers stay open (httpio.Server.Streams).
	streams map[string]bool
	// files are the path prefixes of stored files it serves (httpio.Server.Files).
	files []string
	// concurrent: its handlers may run at once for records of different partitions (kafka.ConsumerConfig.Concurrent).
	concurrent bool
	addr       func(*Config) string
	openAPI    func() []byte // the service's OpenAPI document, served at /openapi.json; nil for the web pages
	build      func(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error)
}

// deps is what a service is built on besides the engines.
type deps struct {
	producer
	name  string // the service's name
	group string // its consumer group under the topic prefix, if it consumes
	// concurrent: its consumer handles a batch's partitions at once.
	concurrent bool
	ids        *snowflake.Generator
	workers    *background // the service's own background work, stopped after the HTTP servers
	consumers  *background // consumer loops, stopped after the HTTP servers and before the workers
	metrics    *kafka.Metrics
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
	{Service: Service{Name: "user", Database: "user", Publishes: true}, migrate: user.Migrate, openAPI: user.OpenAPI,
		open: user.OpenRoutes, unbanned: user.UnbannedRoutes, streams: map[string]bool{user.ExportPath: true}, addr: func(c *Config) string { return c.UserAddr }, build: buildUser},
	// article consumes the moderation topic for its articles' moderation state, and USER_DELETED. Exports are streams.
	{Service: Service{Name: "article", Database: "article", Group: "article", Publishes: true}, migrate: article.Migrate,
		openAPI: article.OpenAPI, streams: map[string]bool{article.ExportPath: true},
		addr: func(c *Config) string { return c.ArticleAddr }, build: buildArticle},
	// Comment, like and view consume the article topic for their record of which articles exist; they come after
	// article, so that in one process they look articles up where it listens. Comment also consumes the moderation
	// topic and the like topic's comment likes; like consumes the comment topic too, for its record of comments, and
	// comes after comment for the same reason.
	{Service: Service{Name: "comment", Database: "comment", Group: "comment", Publishes: true}, migrate: comment.Migrate,
		openAPI: comment.OpenAPI, streams: map[string]bool{comment.ExportPath: true},
		addr: func(c *Config) string { return c.CommentAddr }, build: buildComment},
	{Service: Service{Name: "like", Database: "article_like", Group: "like", Publishes: true}, migrate: like.Migrate,
		openAPI: like.OpenAPI, streams: streamPaths(like.ExportPath), addr: func(c *Config) string { return c.LikeAddr }, build: buildLike},
	{Service: Service{Name: "view", Database: "article_view", Group: "view", Publishes: true}, migrate: view.Migrate,
		openAPI: view.OpenAPI, addr: func(c *Config) string { return c.ViewAddr }, build: buildView},
	{Service: Service{Name: "hot-article", Group: "hot-article", Replayable: true},
		openAPI: hotarticle.OpenAPI, addr: func(c *Config) string { return c.HotArticleAddr }, build: buildHotArticle},
	// article-read comes after the services it rebuilds from, so that in one process it calls them where they listen.
	{Service: Service{Name: "article-read", Group: "article-read", Replayable: true},
		openAPI: articleread.OpenAPI, addr: func(c *Config) string { return c.ArticleReadAddr }, build: buildArticleRead},
	{Service: Service{Name: "moderation", Database: "moderation", Group: "moderation", Publishes: true}, migrate: migrateModeration,
		openAPI: moderationOpenAPI, addr: func(c *Config) string { return c.ModerationAddr }, build: buildModeration},
	// search keeps its own index, on disk or in SQL, and names its consumer group after it (buildSearch).
	{Service: Service{Name: "search"}, openAPI: search.OpenAPI, addr: func(c *Config) string { return c.SearchAddr },
		build: buildSearch},
	// notification looks up, at the article and comment services, an article or comment whose event it has not read
	// yet, and at the user service the names that posts mention.
	// It mails notifications through its outbox, and reads the account topic for the addresses.
	{Service: Service{Name: "notification", Database: "notification", Group: "notification", Publishes: true}, migrate: notification.Migrate,
		openAPI: notification.OpenAPI, open: notification.OpenRoutes, streams: streamPaths(notification.StreamPath, notification.ExportPaths...), concurrent: true,
		addr: func(c *Config) string { return c.NotificationAddr }, build: buildNotification},
	// media consumes the article and comment topics for which posts show which images.
	{Service: Service{Name: "media", Database: "media", Group: "media", Publishes: true}, migrate: media.Migrate,
		openAPI: media.OpenAPI, streams: map[string]bool{media.UploadPath: true}, files: []string{media.BlobPrefix},
		addr: func(c *Config) string { return c.MediaAddr }, build: buildMedia},
	// mail sends the mails the other services write to their outboxes; a send is mostly waiting for the SMTP server,
	// so its partitions send side by side.
	{Service: Service{Name: "mail", Group: "mail"}, openAPI: mail.OpenAPI, concurrent: true,
		addr: func(c *Config) string { return c.MailAddr }, build: buildMail},
	// web comes last: in one process, it calls every other service where it listens.
	{Service: Service{Name: "web"}, pages: true, streams: map[string]bool{"/notifications/stream": true, "/account/export": true}, addr: func(c *Config) string { return c.WebAddr }, build: buildWeb},
}

// streamPaths is the set of the given paths, as service.streams.
func streamPaths(path string, more ...string) map[string]bool {
	out := map[string]bool{path: true}
	for _, p := range more {
		out[p] = true
	}
	return out
}

// buildUser starts the reload of the signing keys among the workers, so that a key rotated by another instance or by
// `board user rotate-key` is published, and then signed with, here too.
func buildUser(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	cfg := user.Config{TokenTTL: e.Config.TokenTTL, Hash: e.Config.PasswordHash, Reload: e.Config.KeyReload,
		Standing: e.Standing, Outbox: r.ob, PublicURL: e.Config.PublicURL, UsernameGrace: e.Config.UsernameGrace, Logger: e.Logger,
		Exports: func(service string) string { return r.origin(e, service, exportAddr(e.Config, service)) },
		OIDC:    e.Config.OIDCProviders, ClientAddr: clientAddr(e.Config.ClientIPHeader, e.Config.TrustedProxies)}
	if limiter := rateLimiter(e); limiter != nil {
		cfg.Limiter = limiter
	}
	svc, err := user.NewService(ctx, r.db, r.ids, cfg)
	if err != nil {
		return nil, nil, err
	}
	r.workers.run(ctx, svc.Run)
	return user.Routes(svc, e.Logger), []httpio.Check{{Name: "database", Ping: r.db.Ping}}, nil
}

// exportAddr is where a service whose part a user's export reads listens by default (user.ExportOrigins).
func exportAddr(c *Config, service string) string {
	return map[string]string{"article": c.ArticleAddr, "comment": c.CommentAddr, "like": c.LikeAddr,
		"notification": c.NotificationAddr}[service]
}

func buildArticle(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	svc := article.NewService(article.NewStore(r.db, r.ob), r.ids, time.Now)
	if err := startConsumer(ctx, e, r, svc.Handlers(), ""); err != nil {
		return nil, nil, err
	}
	r.purgeKeys(ctx, e)
	return article.Routes(svc, e.Logger), r.checks(e), nil
}

// buildComment starts what startExistence would, with one consumer for the article topic's existence handlers, the
// moderation topic's handlers (locks, hidden comments) and the like topic's comment likes (like counts) together: the
// service has one consumer group, which so reads the like topic too (its article likes have no handler: skipped).
func buildComment(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	articles := r.articles(e)
	store := comment.NewStore(r.db, r.ob, articles)
	svc := comment.NewService(store, r.ids, time.Now)
	handlers := articles.Handlers()
	maps.Copy(handlers, svc.Handlers())
	if err := startConsumer(ctx, e, r, handlers, ""); err != nil {
		return nil, nil, err
	}
	r.workers.run(ctx, func(ctx context.Context) { articles.RunPurges(ctx, store.Purge) })
	r.purgeKeys(ctx, e)
	return comment.Routes(svc, e.Logger), r.checks(e), nil
}

// buildLike starts what startExistence would, with one consumer for the article topic's existence handlers and the
// comment topic's record of comments together (the service has one consumer group): comments are liked too.
func buildLike(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	articles := r.articles(e)
	comments := like.NewComments(r.db, r.origin(e, "comment", e.Config.CommentAddr), time.Now)
	store := like.NewStore(r.db, r.ob, articles, comments)
	handlers := articles.Handlers()
	maps.Copy(handlers, comments.Handlers())
	maps.Copy(handlers, store.LeavingHandlers()) // USER_DELETED: the consumer reads the session topic too
	if err := startConsumer(ctx, e, r, handlers, ""); err != nil {
		return nil, nil, err
	}
	r.workers.run(ctx, func(ctx context.Context) { articles.RunPurges(ctx, store.Purge) })
	svc := like.NewService(store, r.ids, time.Now, e.Config.LikeStrategy)
	r.purgeKeys(ctx, e)
	return like.Routes(svc, e.Logger), r.checks(e), nil
}

// buildView starts the view service's flusher among the workers, which stop after the HTTP servers (no view is
// counted after the last flush) and before the relays (which publish what it wrote).
func buildView(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	articles := r.articles(e)
	svc := view.NewService(view.NewStore(r.db, r.ob, articles), e.Redis, view.Config{KeyPrefix: e.Config.RedisPrefix, Logger: e.Logger})
	if err := startExistence(ctx, e, r, articles, svc.Purge); err != nil {
		return nil, nil, err
	}
	r.workers.run(context.Background(), func(ctx context.Context) {
		if err := svc.Run(ctx); err != nil {
			e.Logger.Error("last view count flush failed; views since the last backup live on in Redis only", "err", err)
		}
	})
	return view.Routes(svc, e.Logger), r.checks(e), nil
}

// buildNotification starts the service's consumer, and among the workers its listener of the other instances'
// announcements, which its streams wait on, and its digest worker.
func buildNotification(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	svc := notification.New(r.db, r.ids, e.Redis, notification.Config{
		ArticleOrigin: r.origin(e, "article", e.Config.ArticleAddr), CommentOrigin: r.origin(e, "comment", e.Config.CommentAddr),
		UserOrigin: r.origin(e, "user", e.Config.UserAddr),
		KeyPrefix:  e.Config.RedisPrefix, MaxStreams: e.Config.MaxStreams, MaxStreamsPerUser: e.Config.MaxStreamsPerUser,
		Blocks: e.Blocks, Sessions: e.Standing, Logger: e.Logger,
		PublicURL: e.Config.PublicURL, Outbox: r.ob, DigestEvery: e.Config.EmailDigestEvery})
	handlers := svc.Handlers()
	maps.Copy(handlers, svc.LeavingHandlers()) // USER_DELETED: the consumer reads the session topic too
	if err := startConsumer(ctx, e, r, handlers, ""); err != nil {
		return nil, nil, err
	}
	r.workers.run(ctx, svc.Run)
	r.workers.run(ctx, svc.RunDigests)
	return notification.Routes(svc, e.Logger), r.checks(e), nil
}

func buildHotArticle(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	svc := hotarticle.NewService(e.Redis, hotarticle.Config{KeyPrefix: e.Config.RedisPrefix,
		Location: e.Config.HotArticleTimeZone, Logger: e.Logger})
	if err := startConsumer(ctx, e, r, svc.Handlers(), svc.KeyPattern()); err != nil {
		return nil, nil, err
	}
	return hotarticle.Routes(svc, e.Logger), consumerChecks(e), nil
}

func buildArticleRead(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	origin := func(name, listen string) string { return r.origin(e, name, listen) }
	reads, memo, err := redisclient.ConnectReads(ctx, e.redisAddrs, e.Config.RedisPassword, e.Config.NearCacheMB<<20)
	if err != nil {
		return nil, nil, err
	}
	if memo == nil && e.Config.NearCacheMB > 0 {
		e.Logger.Info("article-read: this Redis has no client tracking; reads go to Redis without a near cache")
	}
	// Closed with the workers, after the HTTP servers that read through it.
	r.workers.run(context.Background(), func(ctx context.Context) { <-ctx.Done(); reads.Close() })
	views := logicalttl.New[int64](e.Redis, e.Config.RedisPrefix+"article-read::", logicalttl.Config{})
	svc := articleread.NewService(e.Redis, views, articleread.Config{KeyPrefix: e.Config.RedisPrefix,
		Origins: articleread.Origins{Article: origin("article", e.Config.ArticleAddr), Comment: origin("comment", e.Config.CommentAddr),
			Like: origin("like", e.Config.LikeAddr), View: origin("view", e.Config.ViewAddr)},
		Reads: reads, Memo: memo, DeepPageTTL: e.Config.DeepPageTTL, Logger: e.Logger})
	if err := startConsumer(ctx, e, r, svc.Handlers(), svc.KeyPattern()); err != nil {
		return nil, nil, err
	}
	if err := svc.Prepare(ctx); err != nil {
		return nil, nil, err
	}
	return articleread.Routes(svc, e.Logger), consumerChecks(e), nil
}

// articles returns the record of which articles exist of a service that writes on articles.
func (r deps) articles(e *Engines) *existence.Registry {
	return existence.New(r.db, existence.Config{Service: r.name, Origin: r.origin(e, "article", e.Config.ArticleAddr),
		PurgeBatchSeconds: r.purgeBatchSeconds.WithLabelValues(r.name), Logger: e.Logger})
}

// startExistence starts what keeps a service's record of articles current: its consumer of the article topic, and
// among the workers the purge of deleted articles' rows.
func startExistence(ctx context.Context, e *Engines, r deps, articles *existence.Registry, purge existence.Purge) error {
	if err := startConsumer(ctx, e, r, articles.Handlers(), ""); err != nil {
		return err
	}
	r.workers.run(ctx, func(ctx context.Context) { articles.RunPurges(ctx, purge) })
	return nil
}

// purgeKeys starts, among the workers, the purge of the service's expired Idempotency-Keys (internal/idempotency).
func (r deps) purgeKeys(ctx context.Context, e *Engines) {
	keys := idempotency.New(r.db, time.Now)
	r.workers.run(ctx, func(ctx context.Context) { keys.RunPurge(ctx, e.Logger) })
}

// origin returns the base URL of the named service, which listens on listen by default: the configured origin,
// else where this process serves it, else its default port on the loopback address.
func (r deps) origin(e *Engines, name, listen string) string {
	if u := e.Config.Origins[name]; u != "" {
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
func consumerChecks(e *Engines) []httpio.Check {
	return []httpio.Check{{Name: "redis", Ping: func(ctx context.Context) error { return e.Redis.Ping(ctx).Err() }},
		{Name: "kafka", Ping: e.Producer.Ping}}
}

// checks are what a producer's readiness depends on: its database, Redis (the relay coordinator, the node lease)
// and Kafka (the relay).
func (p producer) checks(e *Engines) []httpio.Check {
	return []httpio.Check{{Name: "database", Ping: p.db.Ping},
		{Name: "redis", Ping: func(ctx context.Context) error { return e.Redis.Ping(ctx).Err() }},
		{Name: "kafka", Ping: e.Producer.Ping}}
}

// Services lists the services board runs, in the order they start.
func Services() []Service {
	out := make([]Service, len(services))
	for i, s := range services {
		out[i] = s.Service
	}
	return out
}

// ServiceNames lists the names of the services board runs, in the order they start.
func ServiceNames() []string {
	names := make([]string, len(services))
	for i, s := range services {
		names[i] = s.Name
	}
	return names
}

// replayableNames are the services --replay can rebuild.
func replayableNames() []string {
	var names []string
	for _, s := range services {
		if s.Replayable {
			names = append(names, s.Name)
		}
	}
	return names
}

// newVerifier returns the verifier of access tokens every service of the process shares, with the keys of the user
// service where r finds it.
func newVerifier(e *Engines, r deps) *auth.Verifier {
	jwks := r.origin(e, "user", e.Config.UserAddr) + user.JWKSPath
	return auth.NewVerifier(auth.JWKS(&http.Client{}, jwks), auth.VerifierConfig{Logger: e.Logger})
}

// rateLimiter returns the process's rate limiter, nil when --rate-limits is off.
func rateLimiter(e *Engines) *ratelimit.Limiter {
	if !e.Config.RateLimits {
		return nil
	}
	rules := map[string]ratelimit.Rule{}
	for name, limit := range e.Config.Limits {
		// A brute-force limit that cannot be checked must not open the door; a user's write and upload limits may.
		rules[name] = ratelimit.Rule{Limit: limit, FailOpen: name == httpio.WriteLimit || name == media.UploadLimit}
	}
	return ratelimit.New(e.Redis, e.Config.RedisPrefix+"rate-limit::", rules, e.Logger)
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
func startProducer(ctx context.Context, e *Engines, s service, ids *snowflake.Generator, metrics *outbox.Metrics,
	relays *background) (producer, error) {
	if s.Database == "" {
		return producer{}, nil
	}
	db, err := e.OpenSQL(ctx, s.Database)
	if err != nil {
		return producer{}, err
	}
	if e.Config.Migrate {
		if err := s.migrate(ctx, db); err != nil {
			return producer{}, err
		}
	}
	if !s.Publishes {
		return producer{db: db}, nil
	}
	relay, err := newRelay(e, s.Name, db, metrics)
	if err != nil {
		return producer{}, err
	}
	ob := outbox.New(db, e.Config.OutboxShards, ids, time.Now, metrics, relay)
	relays.run(ctx, relay.Run)
	return producer{db: db, ob: ob}, nil
}

// leaseIDs leases a Snowflake node id for this process and keeps the lease renewed until the engines close.
func leaseIDs(ctx context.Context, e *Engines) (*snowflake.Generator, error) {
	ids, lease, err := snowflake.NewLeased(ctx, e.Redis, e.Config.RedisPrefix, e.Config.NodeLeaseTTL, time.Now)
	if err != nil {
		return nil, fmt.Errorf("lease a snowflake node id: %w", err)
	}
	e.Logger.Info("leased snowflake node id", "node", lease.Node())
	keepCtx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		lease.Keep(keepCtx, ids, e.Logger)
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
