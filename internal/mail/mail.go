package mail

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/event"
	"board/internal/kafka"
	"board/internal/redisclient"
)

// Sender sends one mail. Its errors say what follows: fault.Unavailable when the mail may go through later (it is
// sent again, after a backoff, until it does), fault.Invalid or event.ErrMalformed when it never will (it is
// dead-lettered). A Sender is safe for concurrent use.
type Sender interface {
	Send(ctx context.Context, m event.Mail) error
}

const (
	// sentTTL is how long the id of a mail sent is kept, to skip the mail when its record is delivered again: far
	// longer than a redelivery takes (a rebalance, a restart).
	sentTTL = 24 * time.Hour
	// redisTimeout bounds each Redis call.
	redisTimeout = 2 * time.Second
)

// Config configures a Service.
type Config struct {
	Sender    Sender
	Redis     redis.UniversalClient // where the ids of the mails sent are kept
	KeyPrefix string                // before every Redis key the service writes
	Logger    *slog.Logger
}

// Service sends the mails of MAIL_REQUESTED events.
type Service struct {
	sender Sender
	redis  redis.UniversalClient
	prefix string
	log    *slog.Logger
}

// New returns the service of cfg.
func New(cfg Config) *Service {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Service{sender: cfg.Sender, redis: cfg.Redis, prefix: cfg.KeyPrefix, log: log}
}

// Handlers are the service's event handlers, for its consumer of the mail topic.
func (s *Service) Handlers() map[event.Type]kafka.Handler {
	return map[event.Type]kafka.Handler{event.MailRequested: s.handle}
}

// sentKey is the Redis key that says mail id was sent.
func (s *Service) sentKey(id string) string { return s.prefix + "mail::sent:" + id }

// handle sends the mail of env, unless it was sent already.
func (s *Service) handle(ctx context.Context, env event.Envelope) error {
	m, err := event.Payload[event.Mail](env)
	if err != nil {
		return err
	}
	if err := check(m); err != nil {
		return err
	}
	key := s.sentKey(m.MailID.String())
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	sent, err := s.redis.Exists(rctx, key).Result()
	cancel()
	if err != nil {
		// Sending without knowing would risk a duplicate; waiting for Redis loses nothing.
		return redisclient.Unavailable(err, "REDIS_UNAVAILABLE", "cannot tell whether the mail was sent already")
	}
	if sent > 0 {
		s.log.Info("mail: sent already; skipped", "mail_id", m.MailID, "kind", m.Kind)
		return nil
	}
	if err := s.sender.Send(ctx, m); err != nil {
		return err
	}
	// The server has the mail. Failing now would send it again: a Redis that cannot keep the id only leaves this
	// mail without the guard against a redelivery.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
	defer cancel()
	if err := s.redis.Set(wctx, key, 1, sentTTL).Err(); err != nil {
		s.log.Warn("mail: sent, but its id is not kept: a redelivery of its record would send it again",
			"mail_id", m.MailID, "err", err)
	}
	return nil
}
