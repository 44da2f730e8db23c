package like

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/existence"
	"board/internal/fault"
	"board/internal/idempotency"
	"board/internal/outbox"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the like schema, its outbox, its record of which articles exist and its
// Idempotency-Keys.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	if err := idempotency.Migrate(ctx, db); err != nil {
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
// concurrent likes by one user meet in order, so the second reliably finds the first's row and is a duplicate.
//
// Batches. A transaction carries a batch of one article's likes and unlikes (apply): concurrent requests for a hot
// article share one transaction instead of queueing on its count row one by one (docs/likes.md).
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

// change is one like or unlike in a batch. An unlike names only its article and user. key records a like's answer
// for its Idempotency-Key (nil for none).
type change struct {
	like   Like
	unlike bool
	key    *idempotency.Write
}

// apply makes changes, all of one article, with strategy in one transaction, in their order, as if each had a
// transaction of its own: each like stores its row and each unlike removes one, each moves the count by one and
// bumps its version by one, and each writes its ARTICLE_LIKED or ARTICLE_UNLIKED with the count and version it left.
// It returns each change's own outcome, nil or a fault: ALREADY_LIKED for a like of a user who likes the article
// already (before or earlier in the batch), LIKE_NOT_FOUND for an unlike of one who does not. A failed change
// writes nothing; the others commit all the same. err is the transaction's: when it is not nil nothing was written,
// and it may be errVersionConflict (the optimistic strategy lost a race) or existence.ErrUnknown, after which the
// caller may try again.
func (s *Store) apply(ctx context.Context, strategy Strategy, articleID int64, changes []change) (outcomes []error, err error) {
	outcomes, err = s.applyOnce(ctx, strategy, articleID, changes)
	if errors.Is(err, errNoCount) {
		if !anyLike(changes) {
			outcomes = make([]error, len(changes))
			for i, c := range changes {
				outcomes[i] = notLiked(articleID, c.like.UserID) // never liked by anyone
			}
			return outcomes, nil
		}
		if err := s.ensureCount(ctx, articleID); err != nil {
			return nil, err
		}
		outcomes, err = s.applyOnce(ctx, strategy, articleID, changes)
	}
	return outcomes, err
}

func anyLike(changes []change) bool {
	for _, c := range changes {
		if !c.unlike {
			return true
		}
	}
	return false
}

func (s *Store) applyOnce(ctx context.Context, strategy Strategy, articleID int64, changes []change) (outcomes []error, err error) {
	err = s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := s.articles.Require(ctx, tx, articleID); err != nil {
			return err
		}
		// The count first (see Store): every writer of the article's likes holds its row from here on, so what is read
		// of them next is what they are, and stays so until this transaction ends.
		asked := asIfAllSucceed(changes)
		base, err := s.lockCount(ctx, tx, strategy, articleID, asked)
		if err != nil {
			return err
		}
		liked, err := s.likesOf(ctx, tx, articleID, changes)
		if err != nil {
			return err
		}
		p := plan(articleID, base, changes, liked)
		if err := s.writeCount(ctx, tx, strategy, articleID, base, asked, p.count); err != nil {
			return err
		}
		if len(p.removed) > 0 {
			// By primary key, and by article_id, the shard key, only behind Vitess (see sqldb.RouteBy).
			route, routeArgs := s.db.RouteBy("article_id", articleID)
			in, args := sqldb.In("article_like_id", p.removed)
			if _, err := tx.ExecContext(ctx, "DELETE FROM article_like WHERE "+route+in, append(routeArgs, args...)...); err != nil {
				return err
			}
		}
		if len(p.added) > 0 {
			// After the deletes: a user who unliked and liked again in one batch has a new row with the same key.
			values, args := strings.Repeat(", (?, ?, ?, ?)", len(p.added))[2:], make([]any, 0, 4*len(p.added))
			for _, l := range p.added {
				args = append(args, l.ID, l.ArticleID, l.UserID, l.CreatedAt)
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO article_like (article_like_id, article_id, user_id, created_at) VALUES "+values,
				args...); err != nil {
				return err
			}
		}
		for _, e := range p.events {
			if err := emit(e.typ, articleID, payload(e.like, e.count)); err != nil {
				return err
			}
		}
		// Only a like made records its key: one that failed (ALREADY_LIKED) wrote nothing, and a retry of a like whose
		// key was recorded meanwhile, by this batch or an earlier one, is answered from the record instead.
		for i, c := range changes {
			if p.outcomes[i] != nil || c.key == nil {
				continue
			}
			if err := c.key.Claim(ctx, tx, articleID); err != nil {
				return err
			}
			if err := c.key.Record(ctx, tx, toJSON(c.like)); err != nil {
				return err
			}
		}
		outcomes = p.outcomes
		return nil
	})
	return outcomes, err
}

// asIfAllSucceed is the change to the count that changes make when every one of them succeeds.
func asIfAllSucceed(changes []change) likeCount {
	c := likeCount{version: int64(len(changes))}
	for _, ch := range changes {
		if ch.unlike {
			c.likes--
		} else {
			c.likes++
		}
	}
	return c
}

// lockCount takes the article's count row the way strategy does, and returns it as it was before this transaction.
// It comes right after Require (see Store).
func (s *Store) lockCount(ctx context.Context, tx *sql.Tx, strategy Strategy, articleID int64, asked likeCount) (likeCount, error) {
	switch strategy {
	case PessimisticLock1:
		// One atomic statement: the engine reads, adds and writes under the row lock it takes. It adds the batch as if
		// every change succeeds; writeCount takes back those that do not.
		res, err := tx.ExecContext(ctx, "UPDATE article_like_count SET like_count = like_count + ?, version = version + ? WHERE article_id = ?",
			asked.likes, asked.version, articleID)
		if err := updated(res, err, errNoCount); err != nil {
			return likeCount{}, err
		}
		c, err := readCount(ctx, tx, articleID, "")
		return likeCount{c.likes - asked.likes, c.version - asked.version}, err
	case PessimisticLock2:
		// Lock the row while reading it; writeCount writes what was computed from it. On SQLite, ForUpdate is empty:
		// there the transaction began with BEGIN IMMEDIATE on the database's only writer connection, so it holds the
		// database's write lock from its first statement and no other write can come between the read and the
		// update — the same guarantee as the row lock, at database rather than row scope.
		return readCount(ctx, tx, articleID, s.db.ForUpdate())
	case OptimisticLock:
		// Read without a lock; writeCount writes only if nobody changed the row since.
		return readCount(ctx, tx, articleID, "")
	}
	return likeCount{}, fmt.Errorf("unknown like strategy %q", strategy)
}

// writeCount leaves the count row at count, from base as lockCount found it, the way strategy does.
func (s *Store) writeCount(ctx context.Context, tx *sql.Tx, strategy Strategy, articleID int64, base, asked, count likeCount) error {
	switch strategy {
	case PessimisticLock1:
		// Changes that failed (a duplicate like, an unlike of no like) are taken back, atomically too.
		back := likeCount{base.likes + asked.likes - count.likes, base.version + asked.version - count.version}
		if back == (likeCount{}) {
			return nil
		}
		_, err := tx.ExecContext(ctx, "UPDATE article_like_count SET like_count = like_count - ?, version = version - ? WHERE article_id = ?",
			back.likes, back.version, articleID)
		return err
	case PessimisticLock2:
		if count == base {
			return nil
		}
		_, err := tx.ExecContext(ctx, "UPDATE article_like_count SET like_count = ?, version = ? WHERE article_id = ?",
			count.likes, count.version, articleID)
		return err
	case OptimisticLock:
		if count == base {
			return nil // nothing written: the outcomes hold for the snapshot read, a moment in the article's history
		}
		// On MySQL the UPDATE waits for a concurrent writer's lock and then matches no row, because the version moved
		// on; under MariaDB's snapshot isolation (the default from 11.8) it fails instead, and that is the same
		// conflict. On SQLite it always matches: the read already ran under the database's write lock (see
		// PessimisticLock2). It comes before the likes are written, so that the row lock is taken first here too.
		res, err := tx.ExecContext(ctx, "UPDATE article_like_count SET like_count = ?, version = ? WHERE article_id = ? AND version = ?",
			count.likes, count.version, articleID, base.version)
		if sqldb.IsStaleRead(err) {
			return errVersionConflict
		}
		return updated(res, err, errVersionConflict)
	}
	return fmt.Errorf("unknown like strategy %q", strategy)
}

// likesOf returns the article's likes by the users that changes name, by user. The pessimistic strategies read them
// under the count row's lock, which every writer of these rows holds, so they are current; MySQL's snapshot for
// this plain read starts with it, after the lock. The optimistic strategy reads them in the snapshot of its count,
// and its versioned update fails if any writer came between.
func (s *Store) likesOf(ctx context.Context, tx *sql.Tx, articleID int64, changes []change) (map[int64]Like, error) {
	users := make([]int64, 0, len(changes))
	seen := make(map[int64]bool, len(changes))
	for _, c := range changes {
		if !seen[c.like.UserID] {
			seen[c.like.UserID] = true
			users = append(users, c.like.UserID)
		}
	}
	in, args := sqldb.In("user_id", users)
	rows, err := tx.QueryContext(ctx, "SELECT "+columns+" FROM article_like WHERE article_id = ? AND "+in,
		append([]any{articleID}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	liked := make(map[int64]Like, len(users))
	for rows.Next() {
		l, err := scanLike(rows)
		if err != nil {
			return nil, err
		}
		liked[l.UserID] = l
	}
	return liked, rows.Err()
}

// batchPlan is what a batch writes: the rows it adds and removes, the count it leaves, its events in order, and each
// change's outcome.
type batchPlan struct {
	added    []Like
	removed  []int64
	count    likeCount
	events   []batchEvent
	outcomes []error
}

type batchEvent struct {
	typ   event.Type
	like  Like
	count likeCount
}

// plan runs changes in order over the likes the article had (liked, by user) and its count row (base).
func plan(articleID int64, base likeCount, changes []change, liked map[int64]Like) batchPlan {
	p := batchPlan{count: base, outcomes: make([]error, len(changes))}
	stored := make(map[int64]bool, len(liked)) // users whose like is a row from before this batch
	for u := range liked {
		stored[u] = true
	}
	added := map[int64]int64{} // user -> id of the like this batch adds for them
	for i, c := range changes {
		user := c.like.UserID
		current, likes := liked[user]
		switch {
		case !c.unlike && likes:
			p.outcomes[i] = fault.Conflictf("ALREADY_LIKED", "user %d has already liked article %d", user, articleID)
		case !c.unlike:
			liked[user] = c.like
			added[user] = c.like.ID
			p.count = likeCount{p.count.likes + 1, p.count.version + 1}
			p.events = append(p.events, batchEvent{event.ArticleLiked, c.like, p.count})
		case !likes:
			p.outcomes[i] = notLiked(articleID, user)
		default:
			delete(liked, user)
			if stored[user] {
				p.removed = append(p.removed, current.ID)
				stored[user] = false
			} else {
				delete(added, user)
			}
			p.count = likeCount{p.count.likes - 1, p.count.version + 1}
			p.events = append(p.events, batchEvent{event.ArticleUnliked, current, p.count})
		}
	}
	for _, c := range changes {
		if !c.unlike && added[c.like.UserID] == c.like.ID {
			p.added = append(p.added, c.like)
		}
	}
	return p
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
