package view

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"maps"
	"slices"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/existence"
	"board/internal/fault"
	"board/internal/outbox"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the view schema (the article_view database), its outbox and its record of which
// articles exist.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	if err := existence.Migrate(ctx, db); err != nil {
		return err
	}
	return sqldb.Migrate(ctx, db, "view", migrations)
}

// Store keeps the SQL backup of each article's view count and writes ARTICLE_VIEWED with every backup. Its
// registry of articles refuses backups of deleted articles and answers the service's checks.
type Store struct {
	db       *sqldb.DB
	ob       *outbox.Outbox
	articles *existence.Registry
}

// NewStore returns a store over db, whose schema Migrate has prepared, writing events to ob, with articles the
// service's record of which articles exist (over the same db).
func NewStore(db *sqldb.DB, ob *outbox.Outbox, articles *existence.Registry) *Store {
	return &Store{db: db, ob: ob, articles: articles}
}

// Backup raises an article's backed-up count to count — inserting the row when missing, never lowering it — and
// records ARTICLE_VIEWED with count, in one transaction. The event is written even when the row already held more
// (another instance backed up a later count first): view counts only grow, so consumers keep the highest they saw
// and a lower one changes nothing. A deleted article's backup is refused with existence.NotFound; one of an article
// the registry has not heard of (counted before it kept its record) is written once a lookup finds it live.
func (s *Store) Backup(ctx context.Context, articleID, count int64) error {
	return s.articles.Write(ctx, articleID, func() error {
		return s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
			// First, so that the delete cannot be recorded, and the purge run, before this commits.
			if err := s.articles.Require(ctx, tx, articleID); err != nil {
				return err
			}
			return s.upsert(ctx, tx, emit, articleID, count)
		})
	})
}

// BackupMany is Backup for many articles in one transaction, far cheaper than one each, in ascending article order
// (so that two of them take their locks in the same order). An article it cannot back up here is skipped and
// returned with its reason: existence.NotFound for a deleted one, existence.ErrUnknown for one the registry has not
// heard of (Backup looks it up). Any other error fails them all, and nothing is written.
//
// Behind Vitess the articles' rows live on different shards, and a transaction must stay on one: there each
// article gets a transaction of its own, and an error may come after some of them committed (backing up again is
// harmless: a backup never lowers a count).
func (s *Store) BackupMany(ctx context.Context, counts map[int64]int64) (skipped map[int64]error, err error) {
	ids := slices.Sorted(maps.Keys(counts))
	if !s.db.Vitess() {
		return s.backupMany(ctx, ids, counts)
	}
	skipped = map[int64]error{}
	for _, id := range ids {
		one, err := s.backupMany(ctx, []int64{id}, counts)
		if err != nil {
			return nil, err
		}
		maps.Copy(skipped, one)
	}
	return skipped, nil
}

// backupMany backs up the counts of ids, in that order, in one transaction (see BackupMany).
func (s *Store) backupMany(ctx context.Context, ids []int64, counts map[int64]int64) (skipped map[int64]error, err error) {
	err = s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		skipped = map[int64]error{} // Transact may run this again after a deadlock
		for _, id := range ids {
			if err := s.articles.Require(ctx, tx, id); errors.Is(err, existence.ErrUnknown) || fault.KindOf(err) == fault.NotFound {
				skipped[id] = err
				continue
			} else if err != nil {
				return err
			}
			if err := s.upsert(ctx, tx, emit, id, counts[id]); err != nil {
				return err
			}
		}
		return nil
	})
	return skipped, err
}

// upsert raises an article's backed-up count to count and records its ARTICLE_VIEWED, within tx (see Backup).
func (s *Store) upsert(ctx context.Context, tx *sql.Tx, emit outbox.Emit, articleID, count int64) error {
	// One upsert rather than "update where view_count < ?, else insert": two backups of a new article would both
	// find no row to update, and the second insert would have to be dropped, losing the higher count.
	if _, err := tx.ExecContext(ctx, "INSERT INTO article_view_count (article_id, view_count) VALUES (?, ?)"+
		s.db.OnConflictUpdate("article_id", "view_count = CASE WHEN view_count < ? THEN ? ELSE view_count END"),
		articleID, count, count, count); err != nil {
		return err
	}
	return emit(event.ArticleViewed, articleID, event.View{ArticleID: apijson.ID(articleID), ArticleViewCount: count})
}

// deleteBackup deletes a purged article's backup row.
func (s *Store) deleteBackup(ctx context.Context, articleID int64) error {
	_, err := s.db.ExecContext(ctx, "DELETE FROM article_view_count WHERE article_id = ?", articleID)
	return err
}

// Count returns an article's backed-up count, 0 when it has none.
func (s *Store) Count(ctx context.Context, articleID int64) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, "SELECT view_count FROM article_view_count WHERE article_id = ?", articleID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// counts returns the backed-up counts of articleIDs; an article without a backup is missing from the map.
func (s *Store) counts(ctx context.Context, articleIDs []int64) (map[int64]int64, error) {
	in, args := sqldb.In("article_id", articleIDs)
	rows, err := s.db.QueryContext(ctx, "SELECT article_id, view_count FROM article_view_count WHERE "+in, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := make(map[int64]int64, len(articleIDs))
	for rows.Next() {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		counts[id] = n
	}
	return counts, rows.Err()
}
