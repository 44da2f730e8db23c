package comment

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"board/internal/event"
	"board/internal/existence"
	"board/internal/fault"
	"board/internal/outbox"
)

// leavingBatch bounds the comments one page of a leaving writer's deletion reads, and so the comments one
// transaction deletes: a bounded transaction, however many comments the writer has.
const leavingBatch = 500

// leavingPageTimeout bounds one page's work: a hung database stalls the handler (retried by the consumer), not for
// good.
const leavingPageTimeout = 30 * time.Second

// written is one comment table as a writer's export and deletion see it.
type written struct {
	table    string
	byWriter string // the index of the table's comments by writer, newest first (migration 007)
	scan     func(row interface{ Scan(...any) error }) (Comment, error)
	read     string // the columns scan reads
	// del deletes one comment as its writer's delete would, within a transaction that passed Require.
	del func(ctx context.Context, tx *sql.Tx, emit outbox.Emit, articleID, id int64) error
}

func (s *Store) tables() []written {
	return []written{
		{table: "comment", byWriter: "idx_writer_id_comment_id", scan: scanV1, read: readV1, del: s.deleteV1},
		{table: "comment_v2", byWriter: "idx_v2_writer_id_comment_id", scan: scanV2, read: readV2, del: s.deleteV2},
	}
}

// applyUserDeleted handles USER_DELETED: content "remove" deletes every comment of the user, as the user's own
// deletes would (one with replies stays as a deleted comment), events and all; "keep" keeps them (the user service
// names them as a deleted user's). A redelivery deletes what is left.
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

// DeleteWrittenBy deletes every comment of writer, of both versions, newest first, in pages of leavingBatch
// (deleteWrittenPage).
func (s *Store) DeleteWrittenBy(ctx context.Context, writer int64) error {
	for _, t := range s.tables() {
		for before := int64(0); ; {
			pageCtx, cancel := context.WithTimeout(ctx, leavingPageTimeout)
			next, err := s.deleteWrittenPage(pageCtx, t, writer, before)
			cancel()
			if err != nil {
				return err
			}
			if next == 0 {
				break
			}
			before = next
		}
	}
	return nil
}

// deleteWrittenPage deletes the next page of writer's comments of t older than before (0: from the newest) that are
// not deleted already, and returns where the next page starts, or 0 after the last. It deletes them as the writer's
// deletes would, each writing its COMMENT_DELETED in the transaction that deletes it, so that no reader sees half of
// it, in one transaction for the page (at most leavingBatch comments) that takes their articles in ascending order:
// every other write locks one article, and two such pages lock in one order, so no lock cycle can form. Behind
// Vitess, whose transactions keep to one shard, each article's comments have a transaction of their own. The comments
// of an article deleted meanwhile are left to its purge.
func (s *Store) deleteWrittenPage(ctx context.Context, t written, writer, before int64) (int64, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT comment_id, article_id FROM "+t.table+s.db.ForceIndex(t.byWriter)+
		" WHERE writer_id = ? AND comment_id < ? AND deleted = FALSE ORDER BY comment_id DESC LIMIT ?",
		writer, cursor(before), leavingBatch)
	if err != nil {
		return 0, err
	}
	ids := map[int64][]int64{} // by article, newest first: replies before what they reply to
	var last int64
	n := 0
	for rows.Next() {
		var id, article int64
		if err := rows.Scan(&id, &article); err != nil {
			rows.Close()
			return 0, err
		}
		ids[article] = append(ids[article], id)
		last, n = id, n+1
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	articles := slices.Sorted(maps.Keys(ids))
	groups := [][]int64{articles}
	if s.db.Vitess() {
		groups = groups[:0]
		for _, a := range articles {
			groups = append(groups, []int64{a})
		}
	}
	for _, group := range groups {
		var unknown []int64
		err := s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
			unknown = unknown[:0]
			for _, article := range group {
				switch err := s.articles.Require(ctx, tx, article); {
				case errors.Is(err, existence.ErrUnknown):
					unknown = append(unknown, article)
					continue
				case fault.KindOf(err) == fault.NotFound:
					continue // deleted: its purge takes its comments
				case err != nil:
					return err
				}
				if err := s.deleteOf(ctx, tx, emit, t, article, ids[article]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("delete the comments of user %d: %w", writer, err)
		}
		// Articles not known here yet: each looked up at the article service, then in a transaction of its own.
		for _, article := range unknown {
			err := s.articles.Write(ctx, article, func() error {
				return s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
					if err := s.articles.Require(ctx, tx, article); err != nil {
						return err
					}
					return s.deleteOf(ctx, tx, emit, t, article, ids[article])
				})
			})
			if err != nil && fault.KindOf(err) != fault.NotFound { // NotFound: the article is deleted
				return 0, fmt.Errorf("delete the comments of user %d on article %d: %w", writer, article, err)
			}
		}
	}
	if n < leavingBatch {
		return 0, nil
	}
	return last, nil
}

// deleteOf deletes comments of t on article within tx, after Require, skipping those gone meanwhile (by their
// writer's delete, or as a deleted ancestor of one deleted before).
func (s *Store) deleteOf(ctx context.Context, tx *sql.Tx, emit outbox.Emit, t written, article int64, ids []int64) error {
	for _, id := range ids {
		if err := t.del(ctx, tx, emit, article, id); err != nil && fault.KindOf(err) != fault.NotFound {
			return err
		}
	}
	return nil
}
