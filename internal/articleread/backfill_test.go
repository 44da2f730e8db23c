package articleread

import (
	"context"
	"testing"

	"board/internal/event"
	"board/internal/redistest"
)

// TestBackfillDropsArticlesItDidNotSee: after a flush, a late ARTICLE_CREATED lists an article that was deleted
// before it. The backfill's read does not return it, so the backfill takes it out of the list: a page past it is
// right at once, without first reading the page that holds it.
func TestBackfillDropsArticlesItDidNotSee(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b redistest.Backend) {
		e := newEnv(t, b)
		for range 12 {
			e.truth.create(6)
		}
		victim := e.truth.live(6)[2]
		e.truth.delete(victim)
		e.apply(t, e.truth.eventsSince(0))
		e.flush(t)
		e.apply(t, []event.Envelope{e.truth.createEvent(victim)})
		if err := e.svc.Backfill(context.Background(), 6); err != nil {
			t.Fatal(err)
		}
		if rank, err := b.Client.ZRevRank(context.Background(), e.svc.boardKeys(6)[0], member(victim)).Result(); err == nil {
			t.Errorf("the deleted article is still listed at rank %d after the backfill", rank)
		}
		e.checkPage(t, 6, 2, 5, true) // page 2 first: the deleted article sat on page 1
	})
}
