package comment

import (
	"context"
	"math"
	"net/http"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/httpio"
)

// ExportPath is where a user's own comments are exported, streamed (SPEC §3.14).
const ExportPath = "/v1/exports/comments"

// exportPage is how many comments one read of an export holds from each version's table: its memory, whatever the
// writer's number.
const exportPage = 1000

// exportJSON is an exported comment: a v1 comment has its parentCommentId, a v2 comment its path.
type exportJSON struct {
	CommentID       apijson.ID   `json:"commentId"`
	ArticleID       apijson.ID   `json:"articleId"`
	ParentCommentID apijson.ID   `json:"parentCommentId,omitempty"`
	Path            string       `json:"path,omitempty"`
	Content         string       `json:"content"`
	CreatedAt       apijson.Time `json:"createdAt"`
	ModifiedAt      apijson.Time `json:"modifiedAt"`
}

// export answers GET /v1/exports/comments: the caller's comments of both versions that are not deleted, newest first,
// as one JSON array streamed a page at a time. A read that fails once the array has begun cuts the answer short
// (httpio.ArrayWriter.Abort).
func (h handlers) export(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	out, ctx, cancel := httpio.NewArrayWriter(w, r, httpio.ExportTimeout)
	defer cancel()
	var pagers []*pager
	for _, t := range h.svc.store.tables() {
		pagers = append(pagers, &pager{store: h.svc.store, t: t, writer: p.UserID})
	}
	for n := 1; ; n++ {
		// The newest of the tables' next comments goes first: a merge of two newest-first lists.
		var next *pager
		for _, pg := range pagers {
			if err := pg.fill(ctx); err != nil {
				return out.Abort(err)
			}
			if len(pg.rows) > 0 && (next == nil || pg.rows[0].ID > next.rows[0].ID) {
				next = pg
			}
		}
		if next == nil {
			return out.End()
		}
		c := next.rows[0]
		next.rows = next.rows[1:]
		e := exportJSON{CommentID: apijson.ID(c.ID), ArticleID: apijson.ID(c.ArticleID), Path: c.Path, Content: c.Content,
			CreatedAt: apijson.Time(c.CreatedAt), ModifiedAt: apijson.Time(c.ModifiedAt)}
		if c.Path == "" {
			e.ParentCommentID = apijson.ID(c.ParentID)
		}
		if err := out.Add(e); err != nil {
			return out.Abort(err)
		}
		if n%exportPage == 0 {
			if err := out.Flush(); err != nil {
				return out.Abort(err)
			}
		}
	}
}

// pager reads one table's comments of a writer newest first, a page at a time.
type pager struct {
	store  *Store
	t      written
	writer int64
	rows   []Comment // read and not yet taken
	before int64     // the last id read; 0 before the first page
	done   bool      // the last page is read
}

// fill reads the next page when the last one is used up.
func (p *pager) fill(ctx context.Context) error {
	if len(p.rows) > 0 || p.done {
		return nil
	}
	rows, err := list(ctx, p.store.db, p.t.scan, "SELECT "+p.t.read+" FROM "+p.t.table+p.store.db.ForceIndex(p.t.byWriter)+
		" WHERE writer_id = ? AND comment_id < ? AND deleted = FALSE ORDER BY comment_id DESC LIMIT ?",
		p.writer, cursor(p.before), exportPage)
	if err != nil {
		return err
	}
	p.rows, p.done = rows, len(rows) < exportPage
	if len(rows) > 0 {
		p.before = rows[len(rows)-1].ID
	}
	return nil
}

// cursor maps "no cursor" (0) to an id above every issued one, so one query shape serves both cases.
func cursor(beforeID int64) int64 {
	if beforeID == 0 {
		return math.MaxInt64
	}
	return beforeID
}
