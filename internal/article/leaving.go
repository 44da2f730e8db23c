package article

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/outbox"
)

// leavingBatch bounds the articles one page of a leaving writer's deletion reads, and so the articles one
// transaction deletes: a bounded transaction, however many articles the writer has.
const leavingBatch = 500

// leavingPageTimeout bounds one page's work: a hung database stalls the handler (retried by the consumer), not for
// good.
const leavingPageTimeout = 30 * time.Second

// applyUserDeleted handles USER_DELETED: content "remove" deletes every article of the user, as the user's own
// deletes would, events and all; "keep" keeps them (the user service names them as a deleted user's). A redelivery
// deletes what is left.
func (s *Service) applyUserDeleted(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.UserDeletion](env)
	if err != nil {
		return err
	}
	switch {
	case p.UserID <= 0:
		return fault.Invalidf("INVALID_USER_ID", "%s without a valid userId", env.Type)
	case p.Content == event.DeleteKeep:
		return nil
	case p.Content != event.DeleteRemove:
		return fault.Invalidf("INVALID_CONTENT", "%s with content %q", env.Type, p.Content)
	}
	return s.store.DeleteWrittenBy(ctx, int64(p.UserID))
}

// DeleteWrittenBy deletes every article of writer, newest first, in pages of leavingBatch (deleteWrittenPage).
func (s *Store) DeleteWrittenBy(ctx context.Context, writer int64) error {
	var before int64
	for {
		pageCtx, cancel := context.WithTimeout(ctx, leavingPageTimeout)
		next, err := s.deleteWrittenPage(pageCtx, writer, before)
		cancel()
		if err != nil || next == 0 {
			return err
		}
		before = next
	}
}

// deleteWrittenPage deletes the next page of writer's articles older than before (0: from the newest), and returns
// where the next page starts, or 0 after the last. It deletes them as Delete would, each writing its ARTICLE_DELETED
// in the transaction that deletes it, so that no reader sees half of it, in one transaction for the page (at most
// leavingBatch articles) that takes their boards in ascending order. Behind Vitess, whose transactions keep to one
// shard, each board's articles have a transaction of their own.
func (s *Store) deleteWrittenPage(ctx context.Context, writer, before int64) (int64, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT article_id, board_id FROM article"+s.db.ForceIndex(byWriter)+
		" WHERE writer_id = ? AND article_id < ? ORDER BY article_id DESC LIMIT ?", writer, cursor(before), leavingBatch)
	if err != nil {
		return 0, err
	}
	ids := map[int64][]int64{} // by board
	var last int64
	n := 0
	for rows.Next() {
		var id, board int64
		if err := rows.Scan(&id, &board); err != nil {
			rows.Close()
			return 0, err
		}
		ids[board] = append(ids[board], id)
		last, n = id, n+1
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	boards := slices.Sorted(maps.Keys(ids))
	groups := [][]int64{boards}
	if s.db.Vitess() {
		groups = groups[:0]
		for _, b := range boards {
			groups = append(groups, []int64{b})
		}
	}
	for _, group := range groups {
		err := s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
			for _, board := range group {
				for _, id := range ids[board] {
					// Deleted by someone else meanwhile: gone already, which is what this wants.
					if err := s.delete(ctx, tx, emit, id); err != nil && fault.KindOf(err) != fault.NotFound {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("delete the articles of user %d: %w", writer, err)
		}
	}
	if n < leavingBatch {
		return 0, nil
	}
	return last, nil
}
