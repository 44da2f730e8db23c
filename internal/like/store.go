package like

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/existence"
	"board/internal/fault"
	"board/internal/outbox"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the like schema, its outbox and its record of which articles exist.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	if err := existence.Migrate(ctx, db); err != nil {
		return err
	}
	return sqldb.Migrate(ctx, db, "like", migrations)
}

// Store keeps likes and per-article like counts in SQL and writes an event to the outbox with every change. Every
// query carries article_id, the shard key of both tables.
//
// Existence. Every like and unlike transaction, and the one that creates an article's count row, begins with
// articles.Require: the article's row in article_existence, read under a shared lock, must say it is live, and
// recording its delete waits until the transaction ends. So a like either commits before the delete, and the purge
// that the delete queues removes it, or it sees the delete and is refused.
//
// Lock order. Every like and unlike transaction, whatever its strategy, takes the article's existence row (shared),
// then changes the article's count row, then touches article_like; a purge batch takes the same locks in the same
// order. On MySQL changing the count takes its row lock (the optimistic strategy's versioned UPDATE takes it too),
// so the transactions of one article queue on that one lock and never hold a lock another of them waits for: they
// cannot deadlock each other, however many run at once. (Inserting the like first can: a transaction holding a like
// row, or a gap lock next to a deleted one, would wait for the count while the count's holder waits for that like
// row.) The shared existence lock comes before and is shared by all of them; only recording the delete takes it
// exclusively, and that transaction holds no other lock of this service. The count's row lock also makes two
// concurrent likes by one user meet in order, so the second reliably finds the first's row and gets a duplicate-key error. A
// duplicate rolls the count back with the rest of the transaction.
type Store struct {
	db       *sqldb.DB
	ob       *outbox.Outbox
	articles *existence.Registry
}

// NewStore returns a store over db, whose schema Migrate has prepared, writing events to ob and refusing writes on
// articles that articles does not know as live.
func NewStore(db *sqldb.DB, ob *outbox.Outbox, articles *existence.Registry) *Store {
	return &Store{db: db, ob: ob, articles: articles}
}

var (
	// errNoCount says the article has no count row yet: it was never liked.
	errNoCount = errors.New("article has no like count row")
	// errVersionConflict says an optimistic update found the count changed since it was read.
	errVersionConflict = errors.New("like count changed since it was read")
)

// likeCount is an article's count row as a transaction leaves it.
type likeCount struct{ likes, version int64 }

// Like stores l and counts it with strategy, recording ARTICLE_LIKED, in one transaction. It returns
// errVersionConflict when the optimistic strategy lost a race, and existence.ErrUnknown for an article not known
// here yet (nothing is written either way; the caller may retry).
func (s *Store) Like(ctx context.Context, strategy Strategy, l Like) error {
	err := s.like(ctx, strategy, l)
	if errors.Is(err, errNoCount) {
		if err := s.ensureCount(ctx, l.ArticleID); err != nil {
			return err
		}
		err = s.like(ctx, strategy, l)
	}
	return err
}

func (s *Store) like(ctx context.Context, strategy Strategy, l Like) error {
	return s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := s.articles.Require(ctx, tx, l.ArticleID); err != nil {
			return err
		}
		count, err := s.changeCount(ctx, tx, strategy, l.ArticleID, +1)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO article_like (article_like_id, article_id, user_id, created_at) VALUES (?, ?, ?, ?)",
			l.ID, l.ArticleID, l.UserID, l.CreatedAt); err != nil {
			if sqldb.IsDuplicate(err) {
				return fault.Conflictf("ALREADY_LIKED", "user %d has already liked article %d", l.UserID, l.ArticleID)
			}
			return err
		}
		return emit(event.ArticleLiked, l.ArticleID, payload(l, count))
	})
}

// ensureCount creates an article's count row, at zero, unless it exists. It commits on its own, before the first
// like's transaction, so that every like and unlike transaction finds the row there to lock: none of them inserts
// it, so none takes the gap and insert locks that concurrent first likes of an article would deadlock on. It
// requires the article too: a count row created after the purge of a deleted article would outlive it.
func (s *Store) ensureCount(ctx context.Context, articleID int64) error {
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		if err := s.articles.Require(ctx, tx, articleID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO article_like_count (article_id, like_count, version) VALUES (?, 0, 0)"+
			s.db.OnConflictUpdate("article_id", "like_count = like_count"), articleID)
		return err
	})
}

// Unlike removes a user's like of an article and uncounts it with strategy, recording ARTICLE_UNLIKED with the
// removed like, in one transaction. Like Like, it may return errVersionConflict or existence.ErrUnknown.
func (s *Store) Unlike(ctx context.Context, strategy Strategy, articleID, userID int64) error {
	err := s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := s.articles.Require(ctx, tx, articleID); err != nil {
			return err
		}
		count, err := s.changeCount(ctx, tx, strategy, articleID, -1)
		if err != nil {
			return err
		}
		l, err := scanLike(tx.QueryRowContext(ctx, "SELECT "+columns+" FROM article_like WHERE article_id = ? AND user_id = ?"+
			s.db.ForUpdate(), articleID, userID))
		if errors.Is(err, sql.ErrNoRows) {
			return notLiked(articleID, userID) // rolls the count back
		}
		if err != nil {
			return err
		}
		// article_id, the shard key, keeps the statement on this transaction's shard behind Vitess.
		if _, err := tx.ExecContext(ctx, "DELETE FROM article_like WHERE article_id = ? AND article_like_id = ?", articleID, l.ID); err != nil {
			return err
		}
		return emit(event.ArticleUnliked, articleID, payload(l, count))
	})
	if errors.Is(err, errNoCount) {
		return notLiked(articleID, userID) // never liked by anyone
	}
	return err
}

// changeCount adds delta to an article's like count the way strategy does, and returns the row as this transaction
// leaves it. It comes right after Require in every like and unlike transaction (see Store).
func (s *Store) changeCount(ctx context.Context, tx *sql.Tx, strategy Strategy, articleID, delta int64) (likeCount, error) {
	switch strategy {
	case PessimisticLock1:
		// One atomic statement: the engine reads, adds and writes under the row lock it takes.
		res, err := tx.ExecContext(ctx, "UPDATE article_like_count SET like_count = like_count + ?, version = version + 1 WHERE article_id = ?",
			delta, articleID)
		if err := updated(res, err, errNoCount); err != nil {
			return likeCount{}, err
		}
		return readCount(ctx, tx, articleID, "")
	case PessimisticLock2:
		// Lock the row while reading it, then write what was computed from it. On SQLite, ForUpdate is empty: there
		// the transaction began with BEGIN IMMEDIATE on the database's only writer connection, so it holds the
		// database's write lock from its first statement and no other write can come between the read and the
		// update — the same guarantee as the row lock, at database rather than row scope.
		c, err := readCount(ctx, tx, articleID, s.db.ForUpdate())
		if err != nil {
			return likeCount{}, err
		}
		c = likeCount{c.likes + delta, c.version + 1}
		_, err = tx.ExecContext(ctx, "UPDATE article_like_count SET like_count = ?, version = ? WHERE article_id = ?",
			c.likes, c.version, articleID)
		return c, err
	case OptimisticLock:
		// Read without a lock, then write only if nobody changed the row since. On MySQL the UPDATE waits for a
		// concurrent writer's lock and then matches no row, because the version moved on; under MariaDB's snapshot
		// isolation (the default from 11.8) it fails instead, and that is the same conflict. On SQLite it always
		// matches: the read already ran under the database's write lock (see PessimisticLock2).
		c, err := readCount(ctx, tx, articleID, "")
		if err != nil {
			return likeCount{}, err
		}
		next := likeCount{c.likes + delta, c.version + 1}
		res, err := tx.ExecContext(ctx, "UPDATE article_like_count SET like_count = ?, version = ? WHERE article_id = ? AND version = ?",
			next.likes, next.version, articleID, c.version)
		if sqldb.IsStaleRead(err) {
			return likeCount{}, errVersionConflict
		}
		return next, updated(res, err, errVersionConflict)
	}
	return likeCount{}, fmt.Errorf("unknown like strategy %q", strategy)
}

// updated turns an UPDATE that matched no row into none. (MySQL connections count matched rows, not changed ones;
// see sqldb.OpenMySQL.)
func updated(res sql.Result, err, none error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return none
	}
	return nil
}

func readCount(ctx context.Context, tx *sql.Tx, articleID int64, lock string) (likeCount, error) {
	var c likeCount
	err := tx.QueryRowContext(ctx, "SELECT like_count, version FROM article_like_count WHERE article_id = ?"+lock, articleID).
		Scan(&c.likes, &c.version)
	if errors.Is(err, sql.ErrNoRows) {
		return likeCount{}, errNoCount
	}
	return c, err
}

func payload(l Like, c likeCount) event.Like {
	return event.Like{ArticleLikeID: apijson.ID(l.ID), ArticleID: apijson.ID(l.ArticleID), UserID: apijson.ID(l.UserID),
		CreatedAt: apijson.Time(l.CreatedAt), ArticleLikeCount: c.likes, ArticleLikeCountVersion: c.version}
}

const columns = "article_like_id, article_id, user_id, created_at"

// Get returns a user's like of an article.
func (s *Store) Get(ctx context.Context, articleID, userID int64) (Like, error) {
	l, err := scanLike(s.db.QueryRowContext(ctx, "SELECT "+columns+" FROM article_like WHERE article_id = ? AND user_id = ?",
		articleID, userID))
	if errors.Is(err, sql.ErrNoRows) {
		return Like{}, notLiked(articleID, userID)
	}
	return l, err
}

// Count returns an article's like count and the version of its count row: the articleLikeCountVersion of the
// article's latest like event. Both come from one read of the row, so they agree; an article never liked has
// neither (0, 0), whether or not ensureCount has created its row yet.
func (s *Store) Count(ctx context.Context, articleID int64) (count, version int64, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT like_count, version FROM article_like_count WHERE article_id = ?", articleID).
		Scan(&count, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	return count, version, err
}

func scanLike(row interface{ Scan(...any) error }) (Like, error) {
	var l Like
	err := row.Scan(&l.ID, &l.ArticleID, &l.UserID, &l.CreatedAt)
	l.CreatedAt = l.CreatedAt.UTC()
	return l, err
}

func notLiked(articleID, userID int64) error {
	return fault.NotFoundf("LIKE_NOT_FOUND", "user %d has not liked article %d", userID, articleID)
}
