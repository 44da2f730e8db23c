package notification

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"

	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// Fan-out. A post (a new article or comment, or an edit that adds mentions) tells many people at once: its article's
// watchers, or its board's, and the names it mentions, besides the writers it answers. Each person is told once per
// post, of the highest kind they may be told of (recipient.kinds), under the post's dedupe key. The people are
// written in batches of FanoutBatch inboxes per transaction, each batch taking its inbox rows in user-id order
// (two batches that share users cannot deadlock), with multi-row statements, FanoutWorkers batches at once. On
// Vitess a batch is one inbox: its transaction stays on the user's shard. A delivery that runs again (after a
// crash midway) finds the dedupe keys of what it wrote and writes only the rest.

// recipient is a person a post may tell, and the kinds it may tell them of, highest first.
type recipient struct {
	user  int64
	kinds []Kind
}

// recipients gathers a post's recipients: each kind's users, the actor left out.
type recipients struct {
	actor  int64
	byUser map[int64][]Kind
}

func newRecipients(actor int64) *recipients {
	return &recipients{actor: actor, byUser: map[int64][]Kind{}}
}

func (r *recipients) add(k Kind, users ...int64) {
	for _, u := range users {
		if u > 0 && u != r.actor && !slices.Contains(r.byUser[u], k) {
			r.byUser[u] = append(r.byUser[u], k)
		}
	}
}

// list returns the recipients in user-id order, each one's kinds highest first.
func (r *recipients) list() []recipient {
	out := make([]recipient, 0, len(r.byUser))
	for u, kinds := range r.byUser {
		slices.SortFunc(kinds, func(a, b Kind) int { return b.priority() - a.priority() })
		out = append(out, recipient{u, kinds})
	}
	slices.SortFunc(out, func(a, b recipient) int { return cmpInt(a.user, b.user) })
	return out
}

func (r *recipients) users() []int64 {
	out := make([]int64, 0, len(r.byUser))
	for u := range r.byUser {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// post is what a delivery tells of: the notification (its Kind is chosen per person), its dedupe key, and for
// watched-article the board whose watchers it tells.
type post struct {
	key   string
	n     Notification
	board int64
}

// deliver tells each recipient of the post, in batches; it returns once every batch is committed, and announces
// the inboxes it changed to the streams.
func (s *Service) deliver(ctx context.Context, p post, rs []recipient) error {
	rs = slices.DeleteFunc(rs, func(r recipient) bool { return s.deleted(r.user) })
	return s.inBatches(ctx, len(rs), func(ctx context.Context, lo, hi int) ([]int64, error) {
		return s.deliverBatch(ctx, p, rs[lo:hi])
	})
}

// inBatches runs batch over [0, n) in ranges of FanoutBatch, FanoutWorkers at once, announces the users each
// changed, and returns the first error (after every batch started has ended).
func (s *Service) inBatches(ctx context.Context, n int, batch func(ctx context.Context, lo, hi int) ([]int64, error)) error {
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	size := s.cfg.FanoutBatch
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(s.cfg.FanoutWorkers, (n+size-1)/size) {
		wg.Go(func() {
			for lo := range next {
				changed, err := batch(ctx, lo, min(lo+size, n))
				s.publishAll(changed)
				if err != nil {
					cancel(err)
				}
			}
		})
	}
	for lo := 0; lo < n && ctx.Err() == nil; lo += size {
		next <- lo
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// existing is a notification an inbox has under a post's dedupe key already.
type existing struct {
	id   int64
	kind Kind
	read bool
}

// deliverBatch tells a batch of recipients (in user-id order) of the post in one transaction; it returns the users
// whose inbox changed.
func (s *Service) deliverBatch(ctx context.Context, p post, rs []recipient) (changed []int64, err error) {
	users := make([]int64, len(rs))
	for i, r := range rs {
		users[i] = r.user
	}
	actor := int64(0)
	if len(p.n.ActorIDs) > 0 {
		actor = p.n.ActorIDs[0]
	}
	err = s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		changed = changed[:0]
		got, err := s.readForDelivery(ctx, tx, p, users)
		if err != nil {
			return err
		}

		var added []int64
		var fresh []told
		var rows []string
		var values []any
		for _, r := range rs {
			d, ok := got[r.user]
			if !ok {
				return errors.New("notification: an inbox row made is not there")
			}
			in := d.inbox
			if d.articleLevel == LevelMuted || s.blocks(r.user, actor) {
				continue
			}
			kind := Kind("")
			for _, k := range r.kinds {
				if in.prefs.wants(k) && (k != WatchedComment || d.articleLevel == LevelWatching) && (k != WatchedArticle || d.boardLevel == LevelWatching) {
					kind = k
					break
				}
			}
			if kind == "" {
				continue
			}
			if e := d.told; e.id != 0 {
				// Told of the post already: only an unread notification of a lower kind becomes this one.
				if e.read || kind.priority() <= e.kind.priority() {
					continue
				}
				if _, err := tx.ExecContext(ctx, "UPDATE notification SET kind = ?, seq = ?, updated_at = ? WHERE user_id = ? AND notification_id = ?",
					string(kind), in.seq+1, millis(p.n.UpdatedAt), r.user, e.id); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, "UPDATE inbox SET seq = seq + 1 WHERE user_id = ?", r.user); err != nil {
					return err
				}
				changed = append(changed, r.user)
				continue
			}
			id, err := s.ids.Next()
			if err != nil {
				return snowflake.Unavailable(err)
			}
			n := p.n
			rows = append(rows, "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', FALSE, ?, ?)")
			values = append(values, r.user, id, in.seq+1, string(kind), p.key, n.ArticleID, n.ArticleTitle, n.CommentID,
				formatActors(n.ActorIDs), len(n.ActorIDs), millis(n.CreatedAt), millis(n.UpdatedAt))
			added = append(added, r.user)
			fresh = append(fresh, told{r.user, kind, in.prefs.Email})
		}
		if len(added) == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO notification (user_id, notification_id, seq, kind, dedupe_key, article_id,
			article_title, comment_id, actor_ids, actor_count, action, reason, is_read, created_at, updated_at) VALUES `+
			strings.Join(rows, ", "), values...); err != nil {
			return err
		}
		// Each new notification is its inbox's next number and one more unread.
		cond, condArgs := sqldb.In("user_id", added)
		if _, err := tx.ExecContext(ctx, "UPDATE inbox SET seq = seq + 1, unread = unread + 1 WHERE "+cond, condArgs...); err != nil {
			return err
		}
		changed = append(changed, added...)
		return s.mailNew(ctx, tx, emit, p.n, fresh)
	})
	if err != nil {
		return nil, err
	}
	return changed, nil
}

// delivery is what a delivery reads of one recipient, under the lock of the inbox row.
type delivery struct {
	inbox
	articleLevel, boardLevel string   // the user's watches of the post's article and board, "" for none
	told                     existing // the user's notification of the post, id 0 for none
}

// readForDelivery takes the users' inbox rows (making the missing ones: a watch makes its user's, so few are), and
// then reads what decides for each: the watches of the post's article and board, and a notification of the post
// already there. Only the inbox rows are locked: every change to a user's notifications takes that row first, so
// the read after it sees them all, and locking the reads' rows too would take gap locks (where there is no
// notification of the post yet) that two batches' inserts into neighbouring gaps then deadlock on.
func (s *Service) readForDelivery(ctx context.Context, tx *sql.Tx, p post, users []int64) (map[int64]delivery, error) {
	inboxes, err := s.lockInboxes(ctx, tx, users)
	if err != nil {
		return nil, err
	}
	if len(inboxes) < len(users) {
		var missing []int64
		for _, u := range users {
			if inboxes[u] == nil {
				missing = append(missing, u)
			}
		}
		// Not an upsert that sets user_id: vtgate refuses any that touches the vindex column.
		if _, err := tx.ExecContext(ctx, s.insertIgnore()+" inbox (user_id) VALUES (?)"+strings.Repeat(", (?)", len(missing)-1), anys(missing)...); err != nil {
			return nil, err
		}
		made, err := s.lockInboxes(ctx, tx, missing)
		if err != nil {
			return nil, err
		}
		maps.Copy(inboxes, made)
	}
	out := make(map[int64]delivery, len(users))
	for u, in := range inboxes {
		out[u] = delivery{inbox: *in}
	}
	in, args := sqldb.In("i.user_id", users)
	err = queryEach(ctx, tx, func(rows *sql.Rows) error {
		var u int64
		var article, board, kind sql.NullString
		var id sql.NullInt64
		var read sql.NullBool
		if err := rows.Scan(&u, &article, &board, &id, &kind, &read); err != nil {
			return err
		}
		d := out[u]
		d.articleLevel, d.boardLevel = article.String, board.String
		d.told = existing{id: id.Int64, kind: Kind(kind.String), read: read.Bool}
		out[u] = d
		return nil
	}, `SELECT i.user_id, wa.level, wb.level, n.notification_id, n.kind, n.is_read
		FROM inbox i
		LEFT JOIN watch wa ON wa.user_id = i.user_id AND wa.target_type = ? AND wa.target_id = ?
		LEFT JOIN watch wb ON wb.user_id = i.user_id AND wb.target_type = ? AND wb.target_id = ?
		LEFT JOIN notification n ON n.user_id = i.user_id AND n.dedupe_key = ?
		WHERE `+in, append([]any{TargetArticle, p.n.ArticleID, TargetBoard, p.board, p.key}, args...)...)
	return out, err
}

// deleted reports whether the user deleted their account.
func (s *Service) deleted(user int64) bool {
	return s.cfg.Sessions != nil && s.cfg.Sessions.Deleted(user)
}

// blocks reports whether user blocks other.
func (s *Service) blocks(user, other int64) bool {
	return s.cfg.Blocks != nil && other > 0 && s.cfg.Blocks.Blocks(user, other)
}

// lockInboxes takes the users' inbox rows (users in id order) for the transaction, and returns them by user; a user
// without one has nothing to change and is left out.
func (s *Service) lockInboxes(ctx context.Context, tx *sql.Tx, users []int64) (map[int64]*inbox, error) {
	out := map[int64]*inbox{}
	in, args := sqldb.In("user_id", users)
	err := queryEach(ctx, tx, func(rows *sql.Rows) error {
		in := &inbox{}
		if err := rows.Scan(append([]any{&in.userID, &in.seq, &in.unread}, in.prefs.fields()...)...); err != nil {
			return err
		}
		out[in.userID] = in
		return nil
	}, "SELECT user_id, seq, unread, "+prefColumns+" FROM inbox WHERE "+in+" ORDER BY user_id"+s.db.ForUpdate(), args...)
	return out, err
}

// retractAll takes back, from each user's inbox, the unread notifications that match cond (with its args), in
// batches as deliver writes them.
func (s *Service) retractAll(ctx context.Context, users []int64, cond string, args ...any) error {
	users = distinct(users, 0)
	return s.inBatches(ctx, len(users), func(ctx context.Context, lo, hi int) ([]int64, error) {
		return s.retractBatch(ctx, users[lo:hi], cond, args...)
	})
}

func (s *Service) retractBatch(ctx context.Context, users []int64, cond string, args ...any) (changed []int64, err error) {
	err = s.db.Transact(ctx, func(tx *sql.Tx) error {
		changed = changed[:0]
		inboxes, err := s.lockInboxes(ctx, tx, users)
		if err != nil || len(inboxes) == 0 {
			return err
		}
		in, inArgs := sqldb.In("user_id", users)
		where := " WHERE " + in + " AND is_read = FALSE AND " + cond
		whereArgs := append(inArgs, args...)
		// How many each inbox loses, grouped by that number: one update per group.
		byCount := map[int64][]int64{}
		if err := queryEach(ctx, tx, func(rows *sql.Rows) error {
			var u, n int64
			err := rows.Scan(&u, &n)
			byCount[n] = append(byCount[n], u)
			return err
		}, "SELECT user_id, COUNT(*) FROM notification"+where+" GROUP BY user_id", whereArgs...); err != nil {
			return err
		}
		if len(byCount) == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM notification"+where, whereArgs...); err != nil {
			return err
		}
		for n, us := range byCount {
			c, cArgs := sqldb.In("user_id", us)
			if _, err := tx.ExecContext(ctx, "UPDATE inbox SET unread = CASE WHEN unread > ? THEN unread - ? ELSE 0 END WHERE "+c,
				append([]any{n, n}, cArgs...)...); err != nil {
				return err
			}
			changed = append(changed, us...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return changed, nil
}

// queryEach runs a query in tx and calls fn on each row of its result.
func queryEach(ctx context.Context, tx *sql.Tx, fn func(*sql.Rows) error, query string, args ...any) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func anys(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
