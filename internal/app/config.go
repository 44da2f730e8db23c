package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	netmail "net/mail"
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/go-redis/redis_rate/v10"
	"github.com/go-sql-driver/mysql"

	"board/internal/articleread"
	"board/internal/blob"
	"board/internal/embedded"
	"board/internal/httpio"
	"board/internal/like"
	"board/internal/mail"
	"board/internal/media"
	"board/internal/notification"
	"board/internal/outbox"
	"board/internal/ratelimit"
	"board/internal/search"
	"board/internal/sqldb"
	"board/internal/user"
	"board/internal/web"
)

// Config is everything the binary can be told, by flag or by the BOARD_* environment variable of the same name
// (--data-dir and BOARD_DATA_DIR). It is parsed here and nowhere else.
type Config struct {
	DataDir string

	MySQLDSN      string
	MySQLDBPrefix string
	MySQLMaxConns int
	MySQLTimeouts struct{ Dial, Read, Write time.Duration }
	Migrate       bool

	RedisAddr         string
	RedisPassword     string
	RedisPrefix       string
	EmbeddedRedis     string
	EmbeddedRedisAddr string
	RedisSnapshot     time.Duration

	KafkaBrokers      string
	EmbeddedKafkaAddr string
	KafkaRetention    time.Duration
	TopicPrefix       string
	TopicPartitions   int
	DeliveryTimeout   time.Duration

	OutboxShards        int
	RelayPollInterval   time.Duration
	RelayMinAge         time.Duration
	Relay               string // how a relay finds the outbox's rows: "poll" (the table) or "vstream" (Vitess's change stream)
	VTGateGRPCAddr      string // vtgate's gRPC address, for the vstream relay
	CoordinatorPing     time.Duration
	CoordinatorDeadline time.Duration

	ArticleAddr  string
	CommentAddr  string
	LikeAddr     string
	LikeStrategy like.Strategy
	ViewAddr     string

	HotArticleAddr     string
	HotArticleTimeZone *time.Location
	Replay             []string

	ArticleReadAddr string
	NearCacheMB     int // memory of article-read's near cache per Redis node, in MiB; 0: off
	DeepPageTTL     time.Duration
	Origins         map[string]string // service name -> base URL that other services call it at; "" for the default

	UserAddr       string
	TokenTTL       time.Duration
	PasswordHash   user.HashParams
	KeyReload      time.Duration
	UsernameGrace  time.Duration // how long a deleted account's username stays taken
	RateLimits     bool
	Limits         map[string]redis_rate.Limit // rate limit name (httpio.WriteLimit, sign-in, sign-up) -> limit
	ClientIPHeader string
	TrustedProxies []netip.Prefix
	// OIDCProviders are the identity providers people may sign in with; a provider's client secret may come from
	// BOARD_OIDC_<NAME>_CLIENT_SECRET instead of the flag, and its redirect URL defaults to the web's callback.
	OIDCProviders []user.OIDCProvider

	ModerationAddr  string
	ReportThreshold int // distinct open reports that hide an article or a comment pending review

	SearchAddr     string
	SearchEngine   string        // where the search index lives: "bleve" (on disk under DataDir) or "sql" (the SQL engine's full-text search)
	SearchTimeout  time.Duration // deadline of one search's work in the index; past it the answer is 503 SEARCH_TIMEOUT
	SearchCacheTTL time.Duration // how long an answer is given again to the same query; 0: no cache
	SearchCacheMB  int           // memory of the cached answers, in MiB

	NotificationAddr  string
	MaxStreams        int           // open notification streams per instance
	MaxStreamsPerUser int           // open notification streams per user per instance
	EmailDigestEvery  time.Duration // how often the notification service looks for daily digests due

	MediaAddr            string
	MediaS3              blob.S3Config // the S3-compatible store of the images; no Endpoint: a directory under DataDir
	MediaPublicURL       string        // put in front of /media/KEY in the URLs the media service answers
	MediaDailyQuotaMB    int64
	MediaTotalQuotaMB    int64
	MediaUnreferencedFor time.Duration
	MediaGCInterval      time.Duration

	MailAddr string
	SMTP     mail.SMTPConfig // no Addr: mails are written as files under DataDir/mail

	WebAddr string
	// PublicURL is the site's address as its readers reach it: the links in mails (verify an address, reset a
	// password, unsubscribe) point under it.
	PublicURL     string
	Boards        []web.Board
	SecureCookies bool

	NodeLeaseTTL    time.Duration
	RequestTimeout  time.Duration
	ShutdownTimeout time.Duration
	DebugAddr       string // pprof's listener; "" for none
	LogLevel        slog.Level
	LogFormat       string

	Services []string // the services serve runs, in any order
}

// The relays --relay names.
const (
	RelayPoll    = "poll"
	RelayVStream = "vstream"
)

// Default is the configuration of a board given no flag and no environment: every default is here, and the flags
// show these as theirs.
func Default() Config {
	c := Config{
		DataDir:              "./board-data",
		MySQLMaxConns:        50,
		Migrate:              true,
		EmbeddedRedis:        embeddedRedisAuto,
		EmbeddedRedisAddr:    "127.0.0.1:6380",
		RedisSnapshot:        time.Second,
		EmbeddedKafkaAddr:    "127.0.0.1:9092",
		KafkaRetention:       embedded.DefaultKafkaRetention,
		TopicPrefix:          "board-",
		TopicPartitions:      3,
		DeliveryTimeout:      30 * time.Second,
		OutboxShards:         outbox.DefaultShards,
		RelayPollInterval:    10 * time.Second,
		RelayMinAge:          10 * time.Second,
		Relay:                RelayPoll,
		CoordinatorPing:      3 * time.Second,
		CoordinatorDeadline:  9 * time.Second,
		ArticleAddr:          ":9000",
		CommentAddr:          ":9001",
		LikeAddr:             ":9002",
		LikeStrategy:         like.DefaultStrategy,
		ViewAddr:             ":9003",
		HotArticleAddr:       ":9004",
		HotArticleTimeZone:   time.Local,
		ArticleReadAddr:      ":9005",
		NearCacheMB:          256,
		DeepPageTTL:          articleread.DefaultDeepPageTTL,
		Origins:              map[string]string{},
		UserAddr:             ":9006",
		TokenTTL:             time.Hour,
		PasswordHash:         user.DefaultHashParams,
		KeyReload:            user.DefaultReload,
		UsernameGrace:        user.DefaultUsernameGrace,
		RateLimits:           true,
		Limits:               map[string]redis_rate.Limit{},
		ClientIPHeader:       "X-Forwarded-For",
		TrustedProxies:       []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		ModerationAddr:       ":9007",
		ReportThreshold:      5,
		SearchAddr:           ":9008",
		SearchEngine:         "bleve",
		SearchTimeout:        search.DefaultTimeout,
		SearchCacheTTL:       search.DefaultCacheTTL,
		SearchCacheMB:        search.DefaultCacheBytes >> 20,
		NotificationAddr:     ":9009",
		MaxStreams:           notification.DefaultMaxStreams,
		MaxStreamsPerUser:    notification.DefaultMaxStreamsPerUser,
		EmailDigestEvery:     notification.DefaultDigestEvery,
		MediaAddr:            ":9010",
		MediaS3:              blob.S3Config{Bucket: "board-media"},
		MediaDailyQuotaMB:    media.DefaultDailyQuota >> 20,
		MediaTotalQuotaMB:    media.DefaultTotalQuota >> 20,
		MediaUnreferencedFor: media.DefaultUnreferencedFor,
		MediaGCInterval:      media.DefaultGCInterval,
		MailAddr:             ":9011",
		SMTP:                 mail.SMTPConfig{From: mail.DefaultFrom, TLS: mail.TLSOpportunistic},
		WebAddr:              ":8080",
		PublicURL:            "http://localhost:8080",
		Boards:               web.DefaultBoards,
		NodeLeaseTTL:         30 * time.Second,
		RequestTimeout:       httpio.DefaultRequestTimeout,
		ShutdownTimeout:      10 * time.Second,
		LogLevel:             slog.LevelInfo,
		LogFormat:            "text",
		Services:             ServiceNames(),
	}
	c.MySQLTimeouts.Dial, c.MySQLTimeouts.Read, c.MySQLTimeouts.Write =
		sqldb.DefaultMySQLDialTimeout, sqldb.DefaultMySQLReadTimeout, sqldb.DefaultMySQLWriteTimeout
	for _, l := range rateLimits {
		c.Limits[l.name], _ = ratelimit.Parse(l.def)
	}
	return c
}

// rateLimits are the limits --rate-limits holds requests to, with their flags and defaults.
var rateLimits = []struct{ name, flag, def, what string }{
	{httpio.WriteLimit, "write-rate-limit", "60/1m", "writes per user to each service"},
	{"sign-in", "sign-in-rate-limit", "10/1m", "sign-in attempts per client address"},
	{user.SignInAccountLimit, "sign-in-account-rate-limit", "20/10m", "sign-in attempts per username, from all addresses together"},
	{"sign-up", "sign-up-rate-limit", "20/1h", "sign-ups per client address"},
	{"password-reset", "password-reset-rate-limit", "10/1h", "password reset requests and redemptions per client address"},
	{"email-verification", "email-verification-rate-limit", "30/1h", "e-mail verification links redeemed per client address"},
	{user.OIDCLimit, "oidc-rate-limit", "30/10m", "OIDC sign-in starts, links and callbacks per client address (a sign-in takes two)"},
	{user.MailAddressLimit, "mail-address-rate-limit", "3/1h", "verification and reset mails per recipient address (over it: answered alike, nothing sent)"},
	{media.UploadLimit, "media-upload-rate-limit", "60/1h", "image uploads per user"},
	{notification.UnsubscribeLimit, "email-unsubscribe-rate-limit", "30/1h", "one-click unsubscribes from notification mails per client address"},
}

// The embedded Redis engines (--embedded-redis).
const (
	embeddedRedisAuto      = "auto"
	embeddedRedisServer    = "redis-server"
	embeddedRedisInProcess = "in-process"
	// redisServerStartTimeout bounds the start of an embedded redis-server, which loads its data first.
	redisServerStartTimeout = 2 * time.Minute
)

// EngineFlags registers the flags every command that touches the engines shares.
func (c *Config) EngineFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the embedded engines' files (SQLite, Redis snapshot, Kafka log)")
	fs.StringVar(&c.MySQLDSN, "mysql-dsn", c.MySQLDSN, "MySQL/MariaDB DSN, e.g. user:pass@tcp(host:3306)/; each service uses its own database on that server (empty: SQLite files in --data-dir)")
	fs.StringVar(&c.MySQLDBPrefix, "mysql-db-prefix", c.MySQLDBPrefix, "prefix for the services' MySQL database names (user, article, comment, article_like, article_view, moderation, notification, media, ...)")
	fs.IntVar(&c.MySQLMaxConns, "mysql-max-conns", c.MySQLMaxConns, "maximum open MySQL connections per service")
	fs.DurationVar(&c.MySQLTimeouts.Dial, "mysql-dial-timeout", c.MySQLTimeouts.Dial, "how long connecting to MySQL may take")
	fs.DurationVar(&c.MySQLTimeouts.Read, "mysql-read-timeout", c.MySQLTimeouts.Read, "how long MySQL may stay silent on a connection, even for work no request waits for; longer than the longest statement (migrations)")
	fs.DurationVar(&c.MySQLTimeouts.Write, "mysql-write-timeout", c.MySQLTimeouts.Write, "how long a write to a MySQL connection may block")
	fs.BoolVar(&c.Migrate, "migrate", c.Migrate, "create or upgrade schemas at start")
	fs.StringVar(&c.RedisAddr, "redis-addr", c.RedisAddr, "Redis address, or a comma-separated list of Redis Cluster nodes (empty: embedded Redis-protocol server)")
	fs.StringVar(&c.RedisPassword, "redis-password", c.RedisPassword, "password of the Redis server (and of the embedded one, which needs one to listen off loopback)")
	fs.StringVar(&c.RedisPrefix, "redis-prefix", c.RedisPrefix, "prefix for every Redis key this process writes (the rate limiter's keys are rate:<prefix>rate-limit::...)")
	fs.Func("embedded-redis", "embedded Redis engine: auto (redis-server when installed, else in-process), redis-server or in-process (default auto)",
		func(v string) error {
			if !slices.Contains([]string{embeddedRedisAuto, embeddedRedisServer, embeddedRedisInProcess}, v) {
				return fmt.Errorf("want auto, redis-server or in-process, not %q", v)
			}
			c.EmbeddedRedis = v
			return nil
		})
	fs.StringVar(&c.EmbeddedRedisAddr, "embedded-redis-addr", c.EmbeddedRedisAddr, "address of the embedded Redis; off loopback only with --redis-password")
	fs.DurationVar(&c.RedisSnapshot, "embedded-redis-snapshot", c.RedisSnapshot, "how often the in-process Redis syncs its change log to disk (each command's changes are written before its reply)")
	fs.StringVar(&c.KafkaBrokers, "kafka-brokers", c.KafkaBrokers, "comma-separated Kafka seed brokers (empty: embedded Kafka-protocol broker)")
	fs.StringVar(&c.EmbeddedKafkaAddr, "embedded-kafka-addr", c.EmbeddedKafkaAddr, "loopback address of the embedded Kafka-protocol broker")
	fs.DurationVar(&c.KafkaRetention, "embedded-kafka-retention", c.KafkaRetention, "how long the embedded Kafka-protocol broker keeps records (at least 1s); a consumer further behind loses what was deleted")
	fs.StringVar(&c.TopicPrefix, "topic-prefix", c.TopicPrefix, "prefix of the event topics (board-article, board-comment, ...)")
	fs.IntVar(&c.TopicPartitions, "topic-partitions", c.TopicPartitions, "partitions of each event topic created at start")
	fs.DurationVar(&c.DeliveryTimeout, "kafka-delivery-timeout", c.DeliveryTimeout, "how long a publish may wait for the broker before the outbox poller takes the event over")
	fs.IntVar(&c.OutboxShards, "outbox-shards", c.OutboxShards, "logical outbox shards; fixed per deployment")
	fs.DurationVar(&c.RelayPollInterval, "relay-poll-interval", c.RelayPollInterval, "how often each relay polls its shards for events the fast path missed")
	fs.DurationVar(&c.RelayMinAge, "relay-min-age", c.RelayMinAge, "how old an outbox row must be before the poller publishes it")
	fs.Func("relay", "how relays find the outbox's events: poll (the table, after the fast path; every engine) or vstream (Vitess's change stream through --vtgate-grpc-addr; --mysql-dsn must be a vtgate) (default "+c.Relay+")",
		func(v string) error {
			if v != RelayPoll && v != RelayVStream {
				return fmt.Errorf("want %s or %s, not %q", RelayPoll, RelayVStream, v)
			}
			c.Relay = v
			return nil
		})
	fs.StringVar(&c.VTGateGRPCAddr, "vtgate-grpc-addr", c.VTGateGRPCAddr, "vtgate's gRPC address (host:port), for --relay vstream")
	fs.DurationVar(&c.CoordinatorPing, "coordinator-ping", c.CoordinatorPing, "how often a relay pings the coordinator set in Redis")
	fs.DurationVar(&c.CoordinatorDeadline, "coordinator-dead-after", c.CoordinatorDeadline, "silence after which a relay instance's shards are taken over")
	fs.DurationVar(&c.NodeLeaseTTL, "node-lease-ttl", c.NodeLeaseTTL, "TTL of this process's Snowflake node id lease in Redis")
	fs.TextVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn or error")
	fs.Func("log-format", "log format: text or json (default "+c.LogFormat+")", func(v string) error {
		if v != "text" && v != "json" {
			return fmt.Errorf("want text or json, not %q", v)
		}
		c.LogFormat = v
		return nil
	})
}

// ServeFlags registers the flags of `board serve`.
func (c *Config) ServeFlags(fs *flag.FlagSet) {
	c.EngineFlags(fs)
	fs.StringVar(&c.ArticleAddr, "article-addr", c.ArticleAddr, "listen address of the article service")
	fs.StringVar(&c.CommentAddr, "comment-addr", c.CommentAddr, "listen address of the comment service")
	fs.StringVar(&c.LikeAddr, "like-addr", c.LikeAddr, "listen address of the like service")
	fs.Func("like-strategy", "locking strategy of the unsuffixed like paths: pessimistic-lock-1, pessimistic-lock-2 or optimistic-lock (default pessimistic-lock-1)",
		func(v string) (err error) { c.LikeStrategy, err = like.ParseStrategy(v); return err })
	fs.StringVar(&c.ViewAddr, "view-addr", c.ViewAddr, "listen address of the view service")
	fs.StringVar(&c.HotArticleAddr, "hot-article-addr", c.HotArticleAddr, "listen address of the hot-article service")
	fs.Func("hot-article-time-zone", "time zone whose calendar days the hot-article lists follow, e.g. Asia/Seoul or UTC (default the machine's)",
		func(v string) (err error) { c.HotArticleTimeZone, err = time.LoadLocation(v); return err })
	fs.Func("replay", "comma-separated consumer services (hot-article, article-read) to rebuild at start: their Redis state is cleared and their consumer group reset to the oldest records; every instance of them must be stopped",
		func(v string) error {
			c.Replay = SplitList(v)
			for _, name := range c.Replay {
				if !slices.Contains(replayableNames(), name) {
					return fmt.Errorf("%q cannot be replayed (only %s)", name, strings.Join(replayableNames(), ", "))
				}
			}
			return nil
		})
	fs.StringVar(&c.ArticleReadAddr, "article-read-addr", c.ArticleReadAddr, "listen address of the article-read service")
	fs.DurationVar(&c.DeepPageTTL, "deep-page-ttl", c.DeepPageTTL, "how long article-read shares the article service's answer to a page past the newest 1000 articles of a board among the readers of that page (0: not shared)")
	mibFlag(fs, "near-cache-mb", fmt.Sprintf("memory in MiB of article-read's near cache: warm reads answered from memory, kept right by Redis's client tracking; half holds what it decoded, half the client's cache of each Redis node; 0: off (default %d, about 50,000 articles of 500 characters)", c.NearCacheMB),
		0, &c.NearCacheMB)
	originUsers := map[string]string{"user": "every service fetches the token signing keys (/.well-known/jwks.json) from, the moderation service looks users up at, the notification service resolves mentions at, and the web pages sign in at",
		"article":      "article-read rebuilds its model from, comment, like, view, moderation and notification look articles up at, and the web pages write to",
		"comment":      "article-read rebuilds its model from, like, moderation and notification look comments up at, and the web pages read threads from and write to",
		"like":         "article-read rebuilds its model from and the web pages write to",
		"view":         "article-read rebuilds its model from and the web pages count views at",
		"article-read": "the web pages read articles from",
		"hot-article":  "the web pages read hot articles from",
		"moderation":   "the web pages report to and moderate through",
		"search":       "the web pages search through",
		"notification": "the web pages show and stream people's notifications from",
		"media":        "the web pages upload images to"}
	for _, name := range []string{"article", "comment", "like", "view", "user", "article-read", "hot-article", "moderation", "search", "notification", "media"} {
		fs.Func(name+"-origin", "base URL of the "+name+" service that "+originUsers[name]+" (default: the "+name+" service of this process when it runs here, else http://127.0.0.1:<its default port>)",
			func(v string) error {
				u, err := url.Parse(v)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return fmt.Errorf("want a base URL such as http://10.0.0.5:9000, not %q", v)
				}
				c.Origins[name] = strings.TrimSuffix(v, "/")
				return nil
			})
	}
	fs.StringVar(&c.UserAddr, "user-addr", c.UserAddr, "listen address of the user service")
	fs.DurationVar(&c.TokenTTL, "token-ttl", c.TokenTTL, "how long an access token the user service signs is valid")
	fs.DurationVar(&c.KeyReload, "signing-key-reload", c.KeyReload, "how often the user service reads the signing keys again; a rotated key signs after twice that, once every instance publishes it")
	fs.DurationVar(&c.UsernameGrace, "username-grace", c.UsernameGrace, "how long a deleted account's username stays taken before a sign-up may take it")
	fs.Func("password-hash", fmt.Sprintf("argon2id parameters of new password hashes, as memory KiB,time,threads (default %d,%d,%d; stored hashes keep theirs)",
		c.PasswordHash.Memory, c.PasswordHash.Time, c.PasswordHash.Threads),
		func(v string) error {
			var p user.HashParams
			if n, err := fmt.Sscanf(v, "%d,%d,%d", &p.Memory, &p.Time, &p.Threads); err != nil || n != 3 {
				return fmt.Errorf("want memory KiB,time,threads such as 19456,2,1, not %q", v)
			}
			c.PasswordHash = p
			return nil
		})
	fs.BoolVar(&c.RateLimits, "rate-limits", c.RateLimits, "hold writes to the rate limits (false: no limits, for benchmarks)")
	for _, l := range rateLimits {
		fs.Func(l.flag, l.what+", as N/period, shared by every instance (default "+l.def+")", func(v string) (err error) {
			c.Limits[l.name], err = ratelimit.Parse(v)
			return err
		})
	}
	fs.StringVar(&c.ClientIPHeader, "client-ip-header", c.ClientIPHeader, "header that names the client's address, set by a trusted proxy in front (the web service sets X-Forwarded-For, whose last address is used; or X-Real-IP); empty: the connection's address")
	fs.Func("trusted-proxies", "comma-separated networks whose connections may name the client in --client-ip-header (default 127.0.0.0/8,::1/128); anyone else is known by their own address",
		func(v string) error {
			c.TrustedProxies = nil
			for _, s := range SplitList(v) {
				p, err := netip.ParsePrefix(s)
				if err != nil {
					return fmt.Errorf("want networks such as 10.0.0.0/8, not %q", s)
				}
				c.TrustedProxies = append(c.TrustedProxies, p.Masked())
			}
			return nil
		})
	fs.Func("oidc-provider", "an OpenID Connect provider people may sign in with, as name=NAME,issuer=URL,client-id=ID[,client-secret=SECRET][,redirect-url=URL]; repeat for more. The secret is better given as BOARD_OIDC_<NAME>_CLIENT_SECRET (NAME upper-cased, - as _); the redirect URL, to register at the provider, defaults to --public-url + /oidc/NAME/callback",
		func(v string) error {
			p, err := user.ParseOIDCProvider(v)
			c.OIDCProviders = append(c.OIDCProviders, p)
			return err
		})
	fs.StringVar(&c.ModerationAddr, "moderation-addr", c.ModerationAddr, "listen address of the moderation service")
	fs.IntVar(&c.ReportThreshold, "report-threshold", c.ReportThreshold, "distinct open reports that hide an article or a comment at once, pending a moderator's review")
	fs.StringVar(&c.SearchAddr, "search-addr", c.SearchAddr, "listen address of the search service")
	c.SearchEngineFlag(fs)
	fs.DurationVar(&c.SearchTimeout, "search-timeout", c.SearchTimeout, "deadline of one search's work in the index, within --request-timeout: a search that would run longer is cut there and answered 503 SEARCH_TIMEOUT")
	fs.DurationVar(&c.SearchCacheTTL, "search-cache-ttl", c.SearchCacheTTL, "how long the search service gives an answer again to the same query, from when its search began: a new article is found within this plus the index's own lag (0: no cache)")
	mibFlag(fs, "search-cache-mb", fmt.Sprintf("memory in MiB of the search service's cached answers (default %d)", c.SearchCacheMB),
		1, &c.SearchCacheMB)
	fs.StringVar(&c.NotificationAddr, "notification-addr", c.NotificationAddr, "listen address of the notification service")
	fs.IntVar(&c.MaxStreams, "max-streams", c.MaxStreams, "open notification streams this instance holds at most (each costs about a goroutine and a socket)")
	fs.IntVar(&c.MaxStreamsPerUser, "max-streams-per-user", c.MaxStreamsPerUser, "open notification streams one user may hold on this instance")
	fs.DurationVar(&c.EmailDigestEvery, "email-digest-every", c.EmailDigestEvery, "how often the notification service looks for the daily e-mail digests due")
	fs.StringVar(&c.MediaAddr, "media-addr", c.MediaAddr, "listen address of the media service")
	fs.StringVar(&c.MediaS3.Endpoint, "media-s3-endpoint", c.MediaS3.Endpoint, "URL of an S3-compatible store for the images, e.g. https://s3.eu-west-1.amazonaws.com or http://10.0.0.9:7070 (empty: files under --data-dir/media)")
	fs.StringVar(&c.MediaS3.Region, "media-s3-region", c.MediaS3.Region, "region of the S3 bucket (empty: us-east-1)")
	fs.StringVar(&c.MediaS3.Bucket, "media-s3-bucket", c.MediaS3.Bucket, "S3 bucket of the images, created if missing")
	fs.StringVar(&c.MediaS3.Prefix, "media-s3-prefix", c.MediaS3.Prefix, "prefix of the images' keys in the S3 bucket")
	fs.StringVar(&c.MediaS3.AccessKey, "media-s3-access-key", c.MediaS3.AccessKey, "S3 access key id")
	fs.StringVar(&c.MediaS3.SecretKey, "media-s3-secret-key", c.MediaS3.SecretKey, "S3 secret access key (better from BOARD_MEDIA_S3_SECRET_KEY)")
	fs.StringVar(&c.MediaPublicURL, "media-public-url", c.MediaPublicURL, "base URL put in front of /media/KEY in the image URLs the media service answers, e.g. https://img.example.com (empty: relative URLs, for a site that routes /media/ to the media service)")
	fs.Int64Var(&c.MediaDailyQuotaMB, "media-daily-quota-mb", c.MediaDailyQuotaMB, "MiB of images a user may upload per UTC day")
	fs.Int64Var(&c.MediaTotalQuotaMB, "media-total-quota-mb", c.MediaTotalQuotaMB, "MiB of images a user may keep in all")
	fs.DurationVar(&c.MediaUnreferencedFor, "media-unreferenced-for", c.MediaUnreferencedFor, "how long an image no post or avatar shows is kept before it is collected")
	fs.DurationVar(&c.MediaGCInterval, "media-gc-interval", c.MediaGCInterval, "how often the media service collects unreferenced images")
	fs.StringVar(&c.MailAddr, "mail-addr", c.MailAddr, "listen address of the mail service (health and metrics)")
	fs.Func("smtp-addr", "host:port of the SMTP server the mail service sends through (empty: mails are written as .eml files under --data-dir/mail)",
		func(v string) error {
			if _, _, err := net.SplitHostPort(v); err != nil && v != "" {
				return fmt.Errorf("want host:port such as smtp.example.com:587, not %q", v)
			}
			c.SMTP.Addr = v
			return nil
		})
	fs.Func("smtp-from", "From of the mails, e.g. 'board <noreply@example.com>'; Message-IDs end with its domain (default "+c.SMTP.From+")",
		func(v string) error {
			if _, err := netmail.ParseAddress(v); err != nil {
				return fmt.Errorf("want an address such as 'board <noreply@example.com>', not %q", v)
			}
			c.SMTP.From = v
			return nil
		})
	fs.StringVar(&c.SMTP.Username, "smtp-username", c.SMTP.Username, "login at the SMTP server (empty: none)")
	fs.StringVar(&c.SMTP.Password, "smtp-password", c.SMTP.Password, "password of --smtp-username (better from BOARD_SMTP_PASSWORD)")
	fs.Func("smtp-tls", "STARTTLS to the SMTP server: opportunistic (when offered), mandatory (or no mail) or none (default "+c.SMTP.TLS+")",
		func(v string) error {
			if err := mail.ParseTLS(v); err != nil {
				return err
			}
			c.SMTP.TLS = v
			return nil
		})
	fs.StringVar(&c.WebAddr, "web-addr", c.WebAddr, "listen address of the web pages")
	fs.StringVar(&c.PublicURL, "public-url", c.PublicURL, "the site's address as readers reach it, e.g. https://board.example.com: links in mails point under it")
	fs.BoolVar(&c.SecureCookies, "secure-cookies", c.SecureCookies, "mark the web's session cookie Secure on every answer, for a site whose TLS a proxy in front ends (without it: only on answers over TLS)")
	fs.Func("boards", "the site's boards, as id=name pairs separated by commas (default 1=General,2=Questions,3=Showcase)",
		func(v string) (err error) { c.Boards, err = web.ParseBoards(v); return err })
	fs.DurationVar(&c.RequestTimeout, "request-timeout", c.RequestTimeout, "deadline of each request's work, its SQL and Redis calls included; past it the answer is 503")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long shutdown waits for requests in flight")
	fs.StringVar(&c.DebugAddr, "debug-addr", c.DebugAddr, "listen address of the Go profiler (/debug/pprof/), e.g. 127.0.0.1:6060; off loopback only behind a network you trust (empty: off)")
}

// SearchEngineFlag defines --search-engine, for serve and for the commands that open the search index.
func (c *Config) SearchEngineFlag(fs *flag.FlagSet) {
	fs.Func("search-engine", "where the search service keeps its index: bleve (on disk under --data-dir, one full index per instance) or sql (the full-text search of the SQL engine: SQLite FTS5 or MariaDB FULLTEXT, shared by the instances) (default bleve)",
		func(v string) error {
			if v != "bleve" && v != "sql" {
				return fmt.Errorf("want bleve or sql, not %q", v)
			}
			c.SearchEngine = v
			return nil
		})
}

// serveUsage is what `board serve --help` says before the flags.
var serveUsage = "Usage: board serve [flags] [service...]\n\nRuns the named services (default: all) in one process. Services: " +
	strings.Join(ServiceNames(), ", ") + "."

// ParseServe reads the arguments of `board serve`, flags and service names in any order, over the defaults and
// the environment; --help prints to w.
func ParseServe(args []string, getenv func(string) string, w io.Writer) (Config, error) {
	cfg := Default()
	fs := NewFlagSet("serve", serveUsage, w)
	cfg.ServeFlags(fs)
	selected, err := ParseWithOperands(fs, args, getenv)
	if err != nil {
		return Config{}, err
	}
	for _, name := range selected {
		if !slices.Contains(ServiceNames(), name) {
			return Config{}, fmt.Errorf("unknown service %q (services: %s)", name, strings.Join(ServiceNames(), ", "))
		}
	}
	if len(selected) > 0 {
		cfg.Services = selected
	}
	for i, p := range cfg.OIDCProviders {
		if p.ClientSecret == "" {
			cfg.OIDCProviders[i].ClientSecret = getenv(OIDCSecretEnv(p.Name))
		}
		if p.RedirectURL == "" {
			cfg.OIDCProviders[i].RedirectURL = strings.TrimSuffix(cfg.PublicURL, "/") + "/oidc/" + p.Name + "/callback"
		}
	}
	return cfg, nil
}

// OIDCSecretEnv is the environment variable that holds the client secret of the OIDC provider name.
func OIDCSecretEnv(name string) string {
	return "BOARD_OIDC_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_CLIENT_SECRET"
}

// LogValue is the configuration as logged at start: every field, with the passwords (of Redis, of the SMTP server,
// in the MySQL DSN and in the origins' URLs) and the S3 secret masked; OIDC providers show without their secrets
// (user.OIDCProvider.String).
func (c Config) LogValue() slog.Value {
	const masked = "***"
	if c.RedisPassword != "" {
		c.RedisPassword = masked
	}
	if c.MediaS3.SecretKey != "" {
		c.MediaS3.SecretKey = masked
	}
	if c.SMTP.Password != "" {
		c.SMTP.Password = masked
	}
	if dsn, err := mysql.ParseDSN(c.MySQLDSN); err == nil && dsn.Passwd != "" {
		dsn.Passwd = masked
		c.MySQLDSN = dsn.FormatDSN()
	} else if err != nil && c.MySQLDSN != "" {
		c.MySQLDSN = masked // unparseable: it may hold a password anywhere
	}
	origins := make(map[string]string, len(c.Origins))
	for name, o := range c.Origins {
		if u, err := url.Parse(o); err == nil {
			origins[name] = u.Redacted() // a base URL may carry a user and password
		}
	}
	c.Origins = origins
	v := reflect.ValueOf(c)
	attrs := make([]slog.Attr, 0, v.NumField())
	for i := range v.NumField() {
		f := v.Type().Field(i)
		attrs = append(attrs, slog.String(snakeCase(f.Name), fmt.Sprint(v.Field(i).Interface())))
	}
	return slog.GroupValue(attrs...)
}

// acronyms are the runs of capitals in Config's field names, as words, so that MySQLDSN is mysql_dsn.
var acronyms = strings.NewReplacer("MySQL", "Mysql", "DSN", "Dsn", "DB", "Db", "TTL", "Ttl", "IP", "Ip", "VTGate", "Vtgate",
	"GRPC", "Grpc")

// snakeCase turns a Go field name (MySQLDSN, HotArticleTimeZone) into the log key style (mysql_dsn,
// hot_article_time_zone).
func snakeCase(name string) string {
	var b strings.Builder
	runes := []rune(acronyms.Replace(name))
	for i, r := range runes {
		upper := unicode.IsUpper(r)
		if upper && i > 0 && (!unicode.IsUpper(runes[i-1]) || i+1 < len(runes) && unicode.IsLower(runes[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// Parse reads args, which are flags only, into fs, taking each flag not given on the command line from
// BOARD_<NAME> when that is set.
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	operands, err := ParseWithOperands(fs, args, getenv)
	if err == nil && len(operands) > 0 {
		return fmt.Errorf("unexpected argument %q (see board %s --help)", operands[0], fs.Name())
	}
	return err
}

// ParseWithOperands is Parse for a command that also takes operands (serve's service names): flags and operands
// may come in any order, and everything after "--" is an operand.
func ParseWithOperands(fs *flag.FlagSet, args []string, getenv func(string) string) ([]string, error) {
	var operands []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			operands = append(operands, rest...)
			break
		}
		operands = append(operands, rest[0])
		args = rest[1:]
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := "BOARD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" && !given[f.Name] {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", env, v, err))
			}
		}
	})
	return operands, errors.Join(errs...)
}

// NewFlagSet returns a flag set whose --help prints usage and the flags to w.
func NewFlagSet(name, usage string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "%s\n\nFlags (each also read from BOARD_<FLAG_NAME>, e.g. --data-dir from BOARD_DATA_DIR):\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// NewLogger returns the logger of a process so configured, writing to w.
func (c *Config) NewLogger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// mibFlag defines a flag of a memory size in MiB, from least to 1 TiB, into p.
func mibFlag(fs *flag.FlagSet, name, usage string, least int, p *int) {
	fs.Func(name, usage, func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < least || n > 1<<20 {
			return fmt.Errorf("want MiB from %d to %d, not %q", least, 1<<20, v)
		}
		*p = n
		return nil
	})
}
