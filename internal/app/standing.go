package app

import (
	"context"
	"time"

	"board/internal/blocks"
	"board/internal/standing"
)

// standingWait bounds how long a start waits for the tables of bans, roles and sessions, and of blocks, to catch up
// before the services listen. Past it they listen anyway: writes answer 503 and /readyz fails until the first has.
const standingWait = 15 * time.Second

// startStanding starts the process's one table of users' bans, roles and sessions (internal/standing), which every
// service's Guard, the web's session check and the user service's sign-in consult, and its one table of blocks (internal/blocks), which the services
// that tell or show a user others' acts consult, among the consumers (stopped with them), and waits a while for
// both to catch up, so that a fresh start does not answer its first writes with 503, nor tell a user of someone
// they block.
func startStanding(ctx context.Context, e *Engines, consumers *background) error {
	t, err := standing.New(standing.Config{Brokers: e.KafkaBrokers, TopicPrefix: e.Config.TopicPrefix, Logger: e.Logger})
	if err != nil {
		return err
	}
	b, err := blocks.New(blocks.Config{Brokers: e.KafkaBrokers, TopicPrefix: e.Config.TopicPrefix, Logger: e.Logger})
	if err != nil {
		return err
	}
	e.Standing, e.Blocks = t, b
	consumers.run(ctx, t.Run)
	consumers.run(ctx, b.Run)
	wait, cancel := context.WithTimeout(ctx, standingWait)
	defer cancel()
	for _, table := range []struct {
		caughtUp <-chan struct{}
		what     string
	}{{t.CaughtUp(), "bans, roles and sessions are not read yet; writes answer 503 until they are"},
		{b.CaughtUp(), "blocks are not read yet; until they are, a user may be told of someone they block"}} {
		select {
		case <-table.caughtUp:
		case <-wait.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			e.Logger.Warn(table.what, "waited", standingWait)
		}
	}
	return nil
}
