package existence

import (
	"context"
	"database/sql"
	"time"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
)

// Handlers are the registry's handlers of the article topic, for the service's own consumer group.
func (r *Registry) Handlers() map[event.Type]kafka.Handler {
	return map[event.Type]kafka.Handler{
		event.ArticleCreated: r.applyLive, event.ArticleUpdated: r.applyLive, event.ArticleDeleted: r.applyDeleted,
	}
}

func articleOf(env event.Envelope) (id, version int64, err error) {
	p, err := event.Payload[event.Article](env)
	if err != nil {
		return 0, 0, err
	}
	if p.ArticleID <= 0 {
		return 0, 0, fault.Invalidf("INVALID_ARTICLE_ID", "%s without a valid articleId", env.Type)
	}
	return int64(p.ArticleID), p.ArticleVersion, nil
}

// applyLive records an article as live at the event's version, unless it is deleted: an ARTICLE_CREATED that
// arrives after its ARTICLE_DELETED changes nothing.
func (r *Registry) applyLive(ctx context.Context, env event.Envelope) error {
	id, version, err := articleOf(env)
	if err != nil {
		return err
	}
	if _, err := r.db.ExecContext(ctx, "INSERT INTO article_existence (article_id, deleted, article_version) VALUES (?, FALSE, ?)"+
		r.db.OnConflictUpdate("article_id", "article_version = CASE WHEN deleted OR article_version >= ? THEN article_version ELSE ? END"),
		id, version, version, version); err != nil {
		return err
	}
	r.memo.forgetMissing(id) // a 404 remembered before the article existed; a deleted mark stays
	return nil
}

// applyDeleted records an article as deleted for good and, the first time, queues the purge of its rows here.
func (r *Registry) applyDeleted(ctx context.Context, env event.Envelope) error {
	id, version, err := articleOf(env)
	if err != nil {
		return err
	}
	queued := false
	err = r.db.Transact(ctx, func(tx *sql.Tx) error {
		queued = false
		// The row is created first, so that the locking read below locks a row and not a gap (two such gap locks
		// would deadlock each other's inserts on MySQL). An upsert that changes nothing sets a column other than the
		// key to itself: Vitess refuses any update of a shard key column (VT12001).
		if _, err := tx.ExecContext(ctx, "INSERT INTO article_existence (article_id, deleted, article_version) VALUES (?, FALSE, 0)"+
			r.db.OnConflictUpdate("article_id", "deleted = deleted"), id); err != nil {
			return err
		}
		var deleted bool
		if err := tx.QueryRowContext(ctx, "SELECT deleted FROM article_existence WHERE article_id = ?"+r.db.ForUpdate(), id).
			Scan(&deleted); err != nil || deleted {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE article_existence SET deleted = TRUE, article_version = CASE WHEN article_version < ? THEN ? ELSE article_version END WHERE article_id = ?",
			version, version, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO article_purge (article_id, queued_at) VALUES (?, ?)"+
			r.db.OnConflictUpdate("article_id", "queued_at = queued_at"), id, r.cfg.Now().UTC().Truncate(time.Millisecond)); err != nil {
			return err
		}
		queued = true
		return nil
	})
	if err != nil {
		return err
	}
	r.memo.put(id, stateDeleted, r.cfg.Now().Add(deletedTTL))
	if queued {
		select {
		case r.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
	return nil
}
