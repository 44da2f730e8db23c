package mail

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/event"
	"board/internal/fault"
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
	// claimTTL is how long a mail's claim by the member sending it lasts, should that member die mid-send; the send
	// itself is bounded by half of it, so that a claim never ends while its send may still go through.
	claimTTL = 4 * time.Minute
	// sentMark is the value of a mail's key once it is sent; a claim's value is "sending:" and a random token.
	sentMark = "1"
)

// release deletes a mail's claim if it is still the caller's (its token), so that a retry may claim it at once.
var release = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

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
	// The mail's key is claimed before the send and marked sent after it: a record redelivered later finds the mark
	// and is skipped, and one handled at the same moment by another member (two owners of a partition during a
	// rebalance) finds the claim and waits, then finds the mark.
	key := s.sentKey(m.MailID.String())
	token := "sending:" + strconv.FormatUint(rand.Uint64(), 36)
	rctx, cancel := context.WithTimeout(ctx, redisTimeout)
	claimed, err := s.redis.SetNX(rctx, key, token, claimTTL).Result()
	var held string
	if err == nil && !claimed {
		held, err = s.redis.Get(rctx, key).Result()
	}
	cancel()
	switch {
	case errors.Is(err, redis.Nil):
		return fault.Unavailablef(nil, "MAIL_BEING_SENT", "a claim of this mail just ended; it is tried again")
	case err != nil:
		// Sending without knowing would risk a duplicate; waiting for Redis loses nothing.
		return redisclient.Unavailable(err, "REDIS_UNAVAILABLE", "cannot tell whether the mail was sent already")
	case !claimed && held == sentMark:
		s.log.Info("mail: sent already; skipped", "mail_id", m.MailID, "kind", m.Kind)
		return nil
	case !claimed:
		return fault.Unavailablef(nil, "MAIL_BEING_SENT", "another member is sending this mail; it is tried again")
	}
	sctx, cancel := context.WithTimeout(ctx, claimTTL/2)
	err = s.sender.Send(sctx, m)
	cancel()
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
		defer cancel()
		if rerr := release.Run(rctx, s.redis, []string{key}, token).Err(); rerr != nil {
			s.log.Warn("mail: a failed send's claim is not released; it ends by itself", "mail_id", m.MailID, "err", rerr)
		}
		return err
	}
	// The server has the mail. Failing now would send it again: a Redis that cannot keep the mark only leaves this
	// mail without the guard against a redelivery once its claim ends.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
	defer cancel()
	if err := s.redis.Set(wctx, key, sentMark, sentTTL).Err(); err != nil {
		s.log.Warn("mail: sent, but its id is not kept: a redelivery of its record would send it again",
			"mail_id", m.MailID, "err", err)
	}
	return nil
}
