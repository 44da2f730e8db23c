// Package notification is the notification service (SPEC §3.11): it keeps each user's inbox in its own SQL
// database, written from the comment, like, moderation and ban topics, and pushes the inbox's changes to the user's
// open streams (Server-Sent Events) on every instance, through Redis pub/sub.
package notification

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// Kind says what a notification tells of.
type Kind string

const (
	ArticleComment Kind = "article-comment" // a comment on the user's article
	CommentReply   Kind = "comment-reply"   // a reply to the user's comment
	ArticleLike    Kind = "article-like"    // likes of the user's article, grouped while unread
	Moderation     Kind = "moderation"      // a moderator's act on the user's content or account
	// Following (SPEC §3.13).
	Mention        Kind = "mention"         // the user's @name in an article or comment
	WatchedComment Kind = "watched-comment" // a comment on an article the user watches
	WatchedArticle Kind = "watched-article" // a new article on a board the user watches
)

// priority orders the kinds one post may tell a person of: the person is told once, of the highest.
func (k Kind) priority() int {
	switch k {
	case CommentReply:
		return 4
	case ArticleComment:
		return 3
	case Mention:
		return 2
	case WatchedComment, WatchedArticle:
		return 1
	}
	return 0
}

// maxActors bounds the actors a notification names; actorCount counts them all.
const maxActors = 5

// Notification is one entry of a user's inbox.
type Notification struct {
	ID           int64
	Seq          int64 // the inbox's sequence at its last change: the stream's event id
	Kind         Kind
	ArticleID    int64
	ArticleTitle string
	CommentID    int64
	ActorIDs     []int64 // newest first, at most maxActors
	ActorCount   int64
	Action       string // moderation only
	Reason       string // moderation only
	Read         bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Preferences are the kinds a user wants, all by default, and whether writing watches what one wrote on.
type Preferences struct {
	Reply        bool `json:"reply"`        // article-comment
	CommentReply bool `json:"commentReply"` // comment-reply
	Like         bool `json:"like"`         // article-like
	Moderation   bool `json:"moderation"`
	Mention      bool `json:"mention"`
	Watched      bool `json:"watched"`   // watched-comment, watched-article
	AutoWatch    bool `json:"autoWatch"` // writing an article or a comment watches the article
	// Email says what is mailed to the user's verified address: EmailOff, EmailImmediate or EmailDaily.
	Email string `json:"email"`
}

// defaultPreferences are a new inbox's.
var defaultPreferences = Preferences{true, true, true, true, true, true, true, EmailOff}

// wants reports whether p lets a notification of kind k through.
func (p Preferences) wants(k Kind) bool {
	switch k {
	case ArticleComment:
		return p.Reply
	case CommentReply:
		return p.CommentReply
	case ArticleLike:
		return p.Like
	case Mention:
		return p.Mention
	case WatchedComment, WatchedArticle:
		return p.Watched
	}
	return p.Moderation
}

// Config is what the service is built with besides its engines.
type Config struct {
	// ArticleOrigin is the article service's base URL, where an article that no event has told of yet (its event
	// is on another topic, not yet read, or older than the topic's retention) is looked up.
	ArticleOrigin string
	// CommentOrigin is the comment service's base URL, where a comment to bookmark that no event has told of yet is
	// looked up.
	CommentOrigin string
	// UserOrigin is the user service's base URL, where mentioned names are resolved to users ("": no one is).
	UserOrigin string
	KeyPrefix  string // of the Redis pub/sub channel
	// FanoutBatch is how many inboxes one transaction of a fan-out writes (on Vitess always 1: a transaction stays
	// on one shard), FanoutWorkers how many of those transactions run at once.
	FanoutBatch, FanoutWorkers int
	// Blocks says whether a user blocks another: a recipient who blocks the actor is not told of the actor's acts
	// (any kind but moderation). Nil: nobody blocks anyone.
	Blocks interface{ Blocks(user, other int64) bool }
	// Sessions says whether a principal's session has ended since its stream opened (a password change, the
	// account deleted): the stream then ends at its next heartbeat, and its reconnect is refused by the Guard. And
	// whether a user deleted their account: they are told nothing more, so that an event read after their
	// USER_DELETED (a reply to a comment they kept) does not start a new inbox for them. Nil: neither.
	Sessions interface {
		Ended(auth.Principal) (bool, error)
		Deleted(userID int64) bool
	}
	// MaxStreams bounds the open streams of this instance, MaxStreamsPerUser those of one user on it.
	MaxStreams, MaxStreamsPerUser int
	// StreamLifetime ends a stream after that long, so that its token, and the user's ban, are checked again when
	// the client reconnects (which EventSource does by itself, resuming from its last event id).
	StreamLifetime time.Duration
	Heartbeat      time.Duration // how often an idle stream is written a comment line, to find dead clients
	Now            func() time.Time
	Logger         *slog.Logger
	// PublicURL is the site's address, which mails link under. Outbox is the service's, where the mails it asks for
	// are written (nil: one without a relay, whose rows wait for another process's). DigestEvery is how often the
	// digest worker looks for digests due (RunDigests).
	PublicURL   string
	Outbox      *outbox.Outbox
	DigestEvery time.Duration
}

// Defaults of Config's zero values.
const (
	DefaultMaxStreams        = 20000
	DefaultMaxStreamsPerUser = 8
	DefaultStreamLifetime    = 10 * time.Minute
	DefaultHeartbeat         = 15 * time.Second
	DefaultFanoutBatch       = 500
	DefaultFanoutWorkers     = 8
	vitessFanoutWorkers      = 16 // one inbox per transaction: more of them at once
	lookupTimeout            = 2 * time.Second
)

// Service is the notification service.
type Service struct {
	db  *sqldb.DB
	ids *snowflake.Generator
	rdb redis.UniversalClient
	hub *hub
	// announce holds the users whose inbox changed, for Run to announce to the other instances.
	announce chan []int64
	cfg      Config
	client   *http.Client
}

// New returns the service. Run must run for its streams to hear of changes made by other instances.
func New(db *sqldb.DB, ids *snowflake.Generator, rdb redis.UniversalClient, cfg Config) *Service {
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.MaxStreamsPerUser <= 0 {
		cfg.MaxStreamsPerUser = DefaultMaxStreamsPerUser
	}
	if cfg.StreamLifetime <= 0 {
		cfg.StreamLifetime = DefaultStreamLifetime
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FanoutBatch <= 0 {
		cfg.FanoutBatch = DefaultFanoutBatch
	}
	if cfg.FanoutWorkers <= 0 {
		cfg.FanoutWorkers = DefaultFanoutWorkers
		if db.Vitess() {
			cfg.FanoutWorkers = vitessFanoutWorkers
		}
	}
	if db.Vitess() {
		cfg.FanoutBatch = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Outbox == nil {
		cfg.Outbox = outbox.New(db, outbox.DefaultShards, ids, cfg.Now, nil, nil)
	}
	if cfg.DigestEvery <= 0 {
		cfg.DigestEvery = DefaultDigestEvery
	}
	client := &http.Client{Timeout: 2 * lookupTimeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: lookupTimeout}}
	return &Service{db: db, ids: ids, rdb: rdb, hub: newHub(cfg.MaxStreams, cfg.MaxStreamsPerUser),
		announce: make(chan []int64, announceQueue), cfg: cfg, client: client}
}

// channel is the Redis pub/sub channel that tells every instance whose inbox changed.
func (s *Service) channel() string { return s.cfg.KeyPrefix + "notification::changed" }

// formatActors and parseActors are the actor_ids column's form: ids, newest first, comma-separated.
func formatActors(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}

func parseActors(s string) []int64 {
	if s == "" {
		return []int64{}
	}
	parts := strings.Split(s, ",")
	ids := make([]int64, 0, len(parts))
	for _, p := range parts {
		if id, err := strconv.ParseInt(p, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// millis is t as the inbox stores and shows it.
func millis(t time.Time) time.Time { return apijson.Millis(t) }
