package app

import (
	"context"
	"time"

	"board/internal/standing"
)

// standingWait bounds how long a start waits for the table of bans and roles to catch up before the services
// listen. Past it they listen anyway: writes answer 503 and /readyz fails until it has.
const standingWait = 15 * time.Second

// startStanding starts the process's one table of users' bans and roles (internal/standing), which every service's
// Guard and the user service's sign-in consult, among the consumers (stopped with them), and waits a while for it to
// catch up, so that a fresh start does not answer its first writes with 503.
func startStanding(ctx context.Context, e *Engines, consumers *background) error {
	t, err := standing.New(standing.Config{Brokers: e.KafkaBrokers, TopicPrefix: e.Config.TopicPrefix, Logger: e.Logger})
	if err != nil {
		return err
	}
	e.Standing = t
	consumers.run(ctx, t.Run)
	select {
	case <-t.CaughtUp():
	case <-time.After(standingWait):
		e.Logger.Warn("bans and roles are not read yet; writes answer 503 until they are", "waited", standingWait)
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
