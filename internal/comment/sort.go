package comment

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"

	"board/internal/fault"
	"board/internal/sqldb"
)

// Sorts of an article's v2 comments (SPEC §3.13). Oldest is the tree order of the path (store_v2.go). Newest and
// top are flat: every comment of the article, replies as well as roots, each with its path, so that a client can
// still say what it answers. Each flat order walks an index of its own, in its order from its start, so that page 1
// and every infinite-scroll page read pageSize entries however long the thread is, and an offset page skips its
// offset in the index alone, as the tree order does.

// Sort is an order of an article's v2 comments.
type Sort string

const (
	// Oldest is tree order: each comment right after its parent, siblings oldest first (the default).
	Oldest Sort = "oldest"
	// Newest is flat, newest first: comment id descending.
	Newest Sort = "newest"
	// Top is flat, most liked first, newest first among equals: (like count, comment id) descending.
	Top Sort = "top"
)

// parseSort reads a sort parameter; "" (none given) is Oldest.
func parseSort(v string) (Sort, error) {
	switch s := Sort(v); s {
	case "":
		return Oldest, nil
	case Oldest, Newest, Top:
		return s, nil
	}
	return "", errInvalidSort
}

var errInvalidSort = fault.Invalidf("INVALID_SORT", "sort must be oldest, newest or top")

// Index names of the flat orders (migration 006). SQLite's index names are the database's, hence the v2 in them.
const (
	byNewest = "idx_v2_article_id_comment_id"
	byTop    = "idx_v2_article_id_like_count_comment_id"
)

// flatOrder is a flat order of an article's v2 comments: the index that serves it, and the columns it orders by,
// each descending, ending with comment_id, which makes the order total.
type flatOrder struct {
	index string
	keys  []string
}

var flatOrders = map[Sort]flatOrder{
	Newest: {index: byNewest, keys: []string{"comment_id"}},
	Top:    {index: byTop, keys: []string{"like_count", "comment_id"}},
}

// flat returns the flat order sort names; Oldest is not one (its cursor is a path).
func flat(sort Sort) (flatOrder, error) {
	o, ok := flatOrders[sort]
	if !ok {
		return flatOrder{}, fault.Invalidf("INVALID_SORT", "sort %q is not a flat order: newest or top", sort)
	}
	return o, nil
}

// orderBy is the order's ORDER BY clause, its columns qualified with prefix ("" or "c.").
func (o flatOrder) orderBy(prefix string) string {
	cols := make([]string, len(o.keys))
	for i, k := range o.keys {
		cols[i] = prefix + k + " DESC"
	}
	return strings.Join(cols, ", ")
}

// span is a condition on an article's comments that a flat order's index serves as one range, with its arguments.
type span struct {
	cond string
	args []any
}

// after is the article's comments after last in the order (all of them when last is nil), as spans that follow one
// another in the order. Newest: comment_id < last's. Top: the rest of last's like count (like_count = x AND
// comment_id < y), then every smaller count (like_count < x). One condition (like_count, comment_id) < (x, y) would
// do on MariaDB in the OR form of sqldb.DB.After, but not on SQLite: there comment_id is the rowid, and its planner
// takes a row value ending in the rowid as a range on like_count alone, reading the whole of x's group up to the
// cursor (86 ms with the cursor near the end of a group of 100,000, where the spans take 0.06 ms). The two spans
// serve both engines alike.
func (o flatOrder) after(articleID int64, last *Comment) []span {
	switch {
	case last == nil:
		return []span{{"article_id = ?", []any{articleID}}}
	case len(o.keys) == 1:
		return []span{{"article_id = ? AND comment_id < ?", []any{articleID, last.ID}}}
	}
	return []span{{"article_id = ? AND like_count = ? AND comment_id < ?", []any{articleID, last.LikeCount, last.ID}},
		{"article_id = ? AND like_count < ?", []any{articleID, last.LikeCount}}}
}

// pageQuery is the query of one offset page in the order: it skips the offset walking the index alone (the index
// holds comment_id) and joins only the page's rows.
func (o flatOrder) pageQuery(db *sqldb.DB, articleID, offset, limit int64) (string, []any) {
	return `SELECT c.comment_id, c.content, c.article_id, c.writer_id, c.path, c.deleted, c.created_at, c.content_html,
			c.content_text, c.version, c.modified_at, c.like_count
		FROM (SELECT comment_id FROM comment_v2` + db.ForceIndex(o.index) + `
			WHERE article_id = ? ORDER BY ` + o.orderBy("") + ` LIMIT ? OFFSET ?) page
		JOIN comment_v2 c ON c.comment_id = page.comment_id
		ORDER BY ` + o.orderBy("c."), []any{articleID, limit, offset}
}

// scrollQuery is the query of the first limit comments of a span in the order.
func (o flatOrder) scrollQuery(db *sqldb.DB, sp span, limit int64) (string, []any) {
	return "SELECT " + readV2 + " FROM comment_v2" + db.ForceIndex(o.index) + " WHERE " + sp.cond + " ORDER BY " +
		o.orderBy("") + " LIMIT ?", append(slices.Clone(sp.args), limit)
}

// countQuery is the query that counts the comments of a span, stopping at limit.
func (o flatOrder) countQuery(db *sqldb.DB, sp span, limit int64) (string, []any) {
	return "SELECT COUNT(*) FROM (SELECT comment_id FROM comment_v2" + db.ForceIndex(o.index) + " WHERE " + sp.cond +
		" LIMIT ?) capped", append(slices.Clone(sp.args), limit)
}

// PageFlat returns one page of an article's v2 comments in a flat order.
func (s *Store) PageFlat(ctx context.Context, articleID int64, sort Sort, offset, limit int64) ([]Comment, error) {
	o, err := flat(sort)
	if err != nil {
		return nil, err
	}
	query, args := o.pageQuery(s.db, articleID, offset, limit)
	return list(ctx, s.db, scanV2, query, args...)
}

// CountAfterFlat counts an article's v2 comments after c in a flat order (all of them when c is nil), stopping at
// limit.
func (s *Store) CountAfterFlat(ctx context.Context, articleID int64, sort Sort, c *Comment, limit int64) (int64, error) {
	o, err := flat(sort)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, sp := range o.after(articleID, c) {
		query, args := o.countQuery(s.db, sp, limit-total)
		var n int64
		if err := s.db.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
			return 0, err
		}
		if total += n; total == limit {
			break
		}
	}
	return total, nil
}

// ScrollFlat returns up to limit v2 comments of an article after last (nil: from the first) in a flat order. A
// cursor of top reads its spans one after the other, the second only when the first ends before the page does.
func (s *Store) ScrollFlat(ctx context.Context, articleID int64, sort Sort, limit int64, last *Comment) ([]Comment, error) {
	o, err := flat(sort)
	if err != nil {
		return nil, err
	}
	out := []Comment{}
	for _, sp := range o.after(articleID, last) {
		query, args := o.scrollQuery(s.db, sp, limit-int64(len(out)))
		cs, err := list(ctx, s.db, scanV2, query, args...)
		if err != nil {
			return nil, err
		}
		if out = append(out, cs...); int64(len(out)) == limit {
			break
		}
	}
	return out, nil
}

// likeCountOf returns the like count of v2 comment id of an article, where a top scroll continues after it.
func (s *Store) likeCountOf(ctx context.Context, articleID, id int64) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, "SELECT like_count FROM comment_v2 WHERE article_id = ? AND comment_id = ?", articleID, id).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fault.NotFoundf("COMMENT_NOT_FOUND", "lastCommentId %d is not a comment of article %d (removed since?): "+
			"scroll again from the first page", id, articleID)
	}
	return n, err
}

// ListFlat returns page (from 1) of an article's v2 comments in a flat sort (Newest or Top), pageSize of them, and
// the capped count, as ListV2 does in tree order.
func (s *Service) ListFlat(ctx context.Context, articleID int64, sort Sort, page, pageSize int64) (Page, error) {
	return s.list(ctx, func(ctx context.Context, articleID, offset, limit int64) ([]Comment, error) {
		return s.store.PageFlat(ctx, articleID, sort, offset, limit)
	}, func(ctx context.Context, articleID int64, after *Comment, limit int64) (int64, error) {
		return s.store.CountAfterFlat(ctx, articleID, sort, after, limit)
	}, articleID, page, pageSize)
}

// ScrollFlat returns the next pageSize v2 comments of an article in a flat sort (Newest or Top) after comment lastID
// (0: from the first). Newest continues below lastID, which may have been removed since. Top continues after
// lastID's (like count, id), its count as it is now: a comment removed since is COMMENT_NOT_FOUND, since where it
// stood is unknown. While counts change, a ranking read in pages can show a comment twice or miss one that moved
// past the cursor, as any live ranking does.
func (s *Service) ScrollFlat(ctx context.Context, articleID int64, sort Sort, pageSize, lastID int64) ([]Comment, error) {
	var last *Comment
	if lastID != 0 {
		last = &Comment{ID: lastID}
		if sort == Top {
			var err error
			if last.LikeCount, err = s.store.likeCountOf(ctx, articleID, lastID); err != nil {
				return nil, err
			}
		}
	}
	comments, err := s.store.ScrollFlat(ctx, articleID, sort, pageSize, last)
	if err == nil {
		err = s.store.withModeration(ctx, articleID, comments)
	}
	return comments, err
}
