package outbox

import (
	"context"
	"errors"
)

// PublishQueued publishes the events queued on the relay's fast path, waits until the broker has answered for all of
// them or ctx ends, and deletes the rows it acknowledged. It is the fast path of a command that writes events and
// exits without running the relay (board user grant): a running service's relay would publish rows it did not
// write only once its poller finds them, MinAge later. What fails stays in the table for that poller. The relay
// needs no coordinator for this.
func (r *Relay) PublishQueued(ctx context.Context) error {
	var msgs []Message
	for drained := false; !drained; {
		select {
		case m := <-r.queue:
			msgs = append(msgs, m)
		default:
			drained = true
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	answered := make(chan bool, 1)
	r.publish(msgs, "commit", func(failed bool) { answered <- failed })
	select {
	case failed := <-answered:
		r.deleteAcked(ctx)
		if failed {
			return errors.New("outbox: the broker did not acknowledge every event; the relay's poller publishes the rest")
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
