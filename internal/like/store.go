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

// Migrate creates or upgrades the like schema (the likes of articles and of comments, and the record of comments,
// see Comments), its outbox, its record of which articles exist and its Idempotency-Keys.
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

// Store keeps likes and like counts of articles and of comments in SQL and writes an event to the outbox with every
// change. Every query carries article_id, the shard key of every table (a comment's likes are keyed by its article;
// see target).
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
//
// Comments. A comment's likes follow the same rules, code and lock order, with their own tables: the transaction
// requires the comment's article and then the comment itself (Comments.require, shared too), then takes the
// comment's count row and its likes.
type Store struct {
	db       *sqldb.DB
	ob       *outbox.Outbox
	articles *existence.Registry
	comments *Comments
}

// NewStore returns a store over db, whose schema Migrate has prepared, writing events to ob and refusing writes on
// articles that articles does not know as live, and on comments that comments does not know as live.
func NewStore(db *sqldb.DB, ob *outbox.Outbox, articles *existence.Registry, comments *Comments) *Store {
	return &Store{db: db, ob: ob, articles: articles, comments: comments}
}

// target is what likes are of: an article (comment 0), or a comment of article. Every statement about it names
// article, the shard key of the tables.
type target struct{ article, comment int64 }

// tables are the SQL names and events of one kind of target.
type tables struct {
	likes, counts, likeID string
	key                   string // the condition naming one target's rows, with target.args
	columns               string // of a like row, in Like's order (scanLike)
	liked, unliked        event.Type
}

var (
	articleTables = tables{likes: "article_like", counts: "article_like_count", likeID: "article_like_id",
		key: "article_id = ?", columns: "article_like_id, article_id, user_id, created_at",
		liked: event.ArticleLiked, unliked: event.ArticleUnliked}
	commentTables = tables{likes: "comment_like", counts: "comment_like_count", likeID: "comment_like_id",
		key: "article_id = ? AND comment_id = ?", columns: "comment_like_id, article_id, comment_id, user_id, created_at",
		liked: event.CommentLiked, unliked: event.CommentUnliked}
)

// String names t in messages: "article 1" or "comment 2".
func (t target) String() string {
	if t.comment != 0 {
		return fmt.Sprintf("comment %d", t.comment)
	}
	return fmt.Sprintf("article %d", t.article)
}

func (t target) tables() tables {
	if t.comment != 0 {
		return commentTables
	}
	return articleTables
}

// args are the arguments of tables().key.
func (t target) args(more ...any) []any {
	if t.comment != 0 {
		return append([]any{t.article, t.comment}, more...)
	}
	return append([]any{t.article}, more...)
}

// require, the first statement of every write on t, holds its article (and comment) live until the transaction
// ends (see existence.Registry.Require and Comments.require).
func (s *Store) require(ctx context.Context, tx *sql.Tx, t target) error {
	if err := s.articles.Require(ctx, tx, t.article); err != nil || t.comment == 0 {
		return err
	}
	return s.comments.require(ctx, tx, t.article, t.comment)
}

var (
	// errNoCount says the target has no count row yet: it was never liked.
	errNoCount = errors.New("no like count row")
	// errVersionConflict says an optimistic update found the count changed since it was read.
	errVersionConflict = errors.New("like count changed since it was read")
)

// likeCount is a target's count row as a transaction leaves it.
type likeCount struct{ likes, version int64 }

// change is one like or unlike in a batch. An unlike names only its target and user. key records a like's answer
// for its Idempotency-Key (nil for none).
type change struct {
	like   Like
	unlike bool
	key    *idempotency.Write
}

// apply makes changes, all of one target, with strategy in one transaction, in their order, as if each had a
// transaction of its own: each like stores its row and each unlike removes one, each moves the count by one and
// bumps its version by one, and each writes its event (ARTICLE_LIKED, COMMENT_UNLIKED, ...) with the count and
// version it left. It returns each change's own outcome, nil or a fault: ALREADY_LIKED for a like of a user who likes
// the target already (before or earlier in the batch), LIKE_NOT_FOUND for an unlike of one who does not. A failed
// change writes nothing; the others commit all the same. err is the transaction's: when it is not nil nothing was
// written, and it may be errVersionConflict (the optimistic strategy lost a race) or existence.ErrUnknown, after
// which the caller may try again.
func (s *Store) apply(ctx context.Context, strategy Strategy, t target, changes []change) (outcomes []error, err error) {
	outcomes, err = s.applyOnce(ctx, strategy, t, changes)
	if errors.Is(err, errNoCount) {
		if !anyLike(changes) {
			outcomes = make([]error, len(changes))
			for i, c := range changes {
				outcomes[i] = notLiked(t, c.like.UserID) // never liked by anyone
			}
			return outcomes, nil
		}
		if err := s.ensureCount(ctx, t); err != nil {
			return nil, err
		}
		outcomes, err = s.applyOnce(ctx, strategy, t, changes)
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

func (s *Store) applyOnce(ctx context.Context, strategy Strategy, t target, changes []change) (outcomes []error, err error) {
	err = s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := s.require(ctx, tx, t); err != nil {
			return err
		}
		outcomes, err = s.applyIn(ctx, tx, emit, strategy, t, changes)
		return err
	})
	return outcomes, err
}

// applyIn is apply's work on t within tx, after require: what one target's changes write, in a transaction that may
// carry other targets' too (a departing user's likes, see leaving.go).
func (s *Store) applyIn(ctx context.Context, tx *sql.Tx, emit outbox.Emit, strategy Strategy, t target, changes []change) ([]error, error) {
	tb := t.tables()
	// The count first (see Store): every writer of the target's likes holds its row from here on, so what is read
	// of them next is what they are, and stays so until this transaction ends.
	asked := asIfAllSucceed(changes)
	base, err := s.lockCount(ctx, tx, strategy, t, asked)
	if err != nil {
		return nil, err
	}
	liked, err := s.likesOf(ctx, tx, t, changes)
	if err != nil {
		return nil, err
	}
	p := plan(t, base, changes, liked)
	if err := s.writeCount(ctx, tx, strategy, t, base, asked, p.count); err != nil {
		return nil, err
	}
	if len(p.removed) > 0 {
		// By primary key, and by article_id, the shard key, only behind Vitess (see sqldb.RouteBy).
		route, routeArgs := s.db.RouteBy("article_id", t.article)
		in, args := sqldb.In(tb.likeID, p.removed)
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+tb.likes+" WHERE "+route+in, append(routeArgs, args...)...); err != nil {
			return nil, err
		}
	}
	if len(p.added) > 0 {
		// After the deletes: a user who unliked and liked again in one batch has a new row with the same key.
		var args []any
		for _, l := range p.added {
			args = append(args, l.values()...)
		}
		row := "(?" + strings.Repeat(", ?", len(p.added[0].values())-1) + ")"
		values := strings.Repeat(", "+row, len(p.added))[2:]
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+tb.likes+" ("+tb.columns+") VALUES "+values, args...); err != nil {
			return nil, err
		}
	}
	for _, e := range p.events {
		if err := emit(e.typ, t.article, payload(e.like, e.count)); err != nil {
			return nil, err
		}
	}
	// Only a like made records its key: one that failed (ALREADY_LIKED) wrote nothing, and a retry of a like whose
	// key was recorded meanwhile, by this batch or an earlier one, is answered from the record instead.
	for i, c := range changes {
		if p.outcomes[i] != nil || c.key == nil {
			continue
		}
		if err := c.key.Claim(ctx, tx, t.article); err != nil {
			return nil, err
		}
		if err := c.key.Record(ctx, tx, toJSON(c.like)); err != nil {
			return nil, err
		}
	}
	return p.outcomes, nil
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

// lockCount takes the target's count row the way strategy does, and returns it as it was before this transaction.
// It comes right after require (see Store).
func (s *Store) lockCount(ctx context.Context, tx *sql.Tx, strategy Strategy, t target, asked likeCount) (likeCount, error) {
	switch strategy {
	case PessimisticLock1:
		// One atomic statement: the engine reads, adds and writes under the row lock it takes. It adds the batch as if
		// every change succeeds; writeCount takes back those that do not.
		res, err := tx.ExecContext(ctx, "UPDATE "+t.tables().counts+" SET like_count = like_count + ?, version = version + ? WHERE "+t.tables().key,
			append([]any{asked.likes, asked.version}, t.args()...)...)
		if err := updated(res, err, errNoCount); err != nil {
			return likeCount{}, err
		}
		c, err := readCount(ctx, tx, t, "")
		return likeCount{c.likes - asked.likes, c.version - asked.version}, err
	case PessimisticLock2:
		// Lock the row while reading it; writeCount writes what was computed from it. On SQLite, ForUpdate is empty:
		// there the transaction began with BEGIN IMMEDIATE on the database's only writer connection, so it holds the
		// database's write lock from its first statement and no other write can come between the read and the
		// update — the same guarantee as the row lock, at database rather than row scope.
		return readCount(ctx, tx, t, s.db.ForUpdate())
	case OptimisticLock:
		// Read without a lock; writeCount writes only if nobody changed the row since.
		return readCount(ctx, tx, t, "")
	}
	return likeCount{}, fmt.Errorf("unknown like strategy %q", strategy)
}

// writeCount leaves the count row at count, from base as lockCount found it, the way strategy does.
func (s *Store) writeCount(ctx context.Context, tx *sql.Tx, strategy Strategy, t target, base, asked, count likeCount) error {
	update := "UPDATE " + t.tables().counts
	where := " WHERE " + t.tables().key
	switch strategy {
	case PessimisticLock1:
		// Changes that failed (a duplicate like, an unlike of no like) are taken back, atomically too.
		back := likeCount{base.likes + asked.likes - count.likes, base.version + asked.version - count.version}
		if back == (likeCount{}) {
			return nil
		}
		_, err := tx.ExecContext(ctx, update+" SET like_count = like_count - ?, version = version - ?"+where,
			append([]any{back.likes, back.version}, t.args()...)...)
		return err
	case PessimisticLock2:
		if count == base {
			return nil
		}
		_, err := tx.ExecContext(ctx, update+" SET like_count = ?, version = ?"+where, append([]any{count.likes, count.version}, t.args()...)...)
		return err
	case OptimisticLock:
		if count == base {
			return nil // nothing written: the outcomes hold for the snapshot read, a moment in the target's history
		}
		// On MySQL the UPDATE waits for a concurrent writer's lock and then matches no row, because the version moved
		// on; under MariaDB's snapshot isolation (the default from 11.8) it fails instead, and that is the same
		// conflict. On SQLite it always matches: the read already ran under the database's write lock (see
		// PessimisticLock2). It comes before the likes are written, so that the row lock is taken first here too.
		res, err := tx.ExecContext(ctx, update+" SET like_count = ?, version = ?"+where+" AND version = ?",
			append(append([]any{count.likes, count.version}, t.args()...), base.version)...)
		if sqldb.IsStaleRead(err) {
			return errVersionConflict
		}
		return updated(res, err, errVersionConflict)
	}
	return fmt.Errorf("unknown like strategy %q", strategy)
}

// likesOf returns the target's likes by the users that changes name, by user. The pessimistic strategies read them
// under the count row's lock, which every writer of these rows holds, so they are current; MySQL's snapshot for
// this plain read starts with it, after the lock. The optimistic strategy reads them in the snapshot of its count,
// and its versioned update fails if any writer came between.
func (s *Store) likesOf(ctx context.Context, tx *sql.Tx, t target, changes []change) (map[int64]Like, error) {
	users := make([]int64, 0, len(changes))
	seen := make(map[int64]bool, len(changes))
	for _, c := range changes {
		if !seen[c.like.UserID] {
			seen[c.like.UserID] = true
			users = append(users, c.like.UserID)
		}
	}
	in, args := sqldb.In("user_id", users)
	tb := t.tables()
	rows, err := tx.QueryContext(ctx, "SELECT "+tb.columns+" FROM "+tb.likes+" WHERE "+tb.key+" AND "+in, t.args(args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	liked := make(map[int64]Like, len(users))
	for rows.Next() {
		l, err := scanLike(rows, t)
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

// plan runs changes in order over the likes the target had (liked, by user) and its count row (base).
func plan(t target, base likeCount, changes []change, liked map[int64]Like) batchPlan {
	tb := t.tables()
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
			p.outcomes[i] = fault.Conflictf("ALREADY_LIKED", "user %d has already liked %s", user, t)
		case !c.unlike:
			liked[user] = c.like
			added[user] = c.like.ID
			p.count = likeCount{p.count.likes + 1, p.count.version + 1}
			p.events = append(p.events, batchEvent{tb.liked, c.like, p.count})
		case !likes:
			p.outcomes[i] = notLiked(t, user)
		default:
			delete(liked, user)
			if stored[user] {
				p.removed = append(p.removed, current.ID)
				stored[user] = false
			} else {
				delete(added, user)
			}
			p.count = likeCount{p.count.likes - 1, p.count.version + 1}
			p.events = append(p.events, batchEvent{tb.unliked, current, p.count})
		}
	}
	for _, c := range changes {
		if !c.unlike && added[c.like.UserID] == c.like.ID {
			p.added = append(p.added, c.like)
		}
	}
	return p
}

// ensureCount creates a target's count row, at zero, unless it exists. It commits on its own, before the first
// like's transaction, so that every like and unlike transaction finds the row there to lock: none of them inserts
// it, so none takes the gap and insert locks that concurrent first likes would deadlock on. It requires the target
// too: a count row created after the purge of a deleted article would outlive it.
func (s *Store) ensureCount(ctx context.Context, t target) error {
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		if err := s.require(ctx, tx, t); err != nil {
			return err
		}
		if t.comment != 0 {
			_, err := tx.ExecContext(ctx, "INSERT INTO comment_like_count (comment_id, article_id, like_count, version) VALUES (?, ?, 0, 0)"+
				s.db.OnConflictUpdate("comment_id", "like_count = like_count"), t.comment, t.article)
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO article_like_count (article_id, like_count, version) VALUES (?, 0, 0)"+
			s.db.OnConflictUpdate("article_id", "like_count = like_count"), t.article)
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

func readCount(ctx context.Context, tx *sql.Tx, t target, lock string) (likeCount, error) {
	var c likeCount
	err := tx.QueryRowContext(ctx, "SELECT like_count, version FROM "+t.tables().counts+" WHERE "+t.tables().key+lock, t.args()...).
		Scan(&c.likes, &c.version)
	if errors.Is(err, sql.ErrNoRows) {
		return likeCount{}, errNoCount
	}
	return c, err
}

// payload is the event of a change: event.Like for an article's like, event.CommentLike for a comment's.
func payload(l Like, c likeCount) any {
	if l.CommentID != 0 {
		return event.CommentLike{CommentLikeID: apijson.ID(l.ID), CommentID: apijson.ID(l.CommentID), ArticleID: apijson.ID(l.ArticleID),
			UserID: apijson.ID(l.UserID), CreatedAt: apijson.Time(l.CreatedAt), CommentLikeCount: c.likes, CommentLikeCountVersion: c.version}
	}
	return event.Like{ArticleLikeID: apijson.ID(l.ID), ArticleID: apijson.ID(l.ArticleID), UserID: apijson.ID(l.UserID),
		CreatedAt: apijson.Time(l.CreatedAt), ArticleLikeCount: c.likes, ArticleLikeCountVersion: c.version}
}

// Get returns a user's like of an article.
func (s *Store) Get(ctx context.Context, articleID, userID int64) (Like, error) {
	return s.get(ctx, target{article: articleID}, userID)
}

func (s *Store) get(ctx context.Context, t target, userID int64) (Like, error) {
	tb := t.tables()
	l, err := scanLike(s.db.QueryRowContext(ctx, "SELECT "+tb.columns+" FROM "+tb.likes+" WHERE "+tb.key+" AND user_id = ?",
		t.args(userID)...), t)
	if errors.Is(err, sql.ErrNoRows) {
		return Like{}, notLiked(t, userID)
	}
	return l, err
}

// Count returns an article's like count and the version of its count row: the articleLikeCountVersion of the
// article's latest like event. Both come from one read of the row, so they agree; an article never liked has
// neither (0, 0), whether or not ensureCount has created its row yet.
func (s *Store) Count(ctx context.Context, articleID int64) (count, version int64, err error) {
	return s.count(ctx, target{article: articleID})
}

func (s *Store) count(ctx context.Context, t target) (count, version int64, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT like_count, version FROM "+t.tables().counts+" WHERE "+t.tables().key, t.args()...).
		Scan(&count, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	return count, version, err
}

// scanLike reads a like row of t's kind, its columns in tables().columns's order.
func scanLike(row interface{ Scan(...any) error }, t target) (Like, error) {
	var l Like
	var err error
	if t.comment != 0 {
		err = row.Scan(&l.ID, &l.ArticleID, &l.CommentID, &l.UserID, &l.CreatedAt)
	} else {
		err = row.Scan(&l.ID, &l.ArticleID, &l.UserID, &l.CreatedAt)
	}
	l.CreatedAt = l.CreatedAt.UTC()
	return l, err
}

func notLiked(t target, userID int64) error {
	return fault.NotFoundf("LIKE_NOT_FOUND", "user %d has not liked %s", userID, t)
}
