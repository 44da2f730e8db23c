package like

import (
	"context"
	"net/http"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/httpio"
)

// ExportPath is the route of a user's export of their likes, served as a stream (its own deadline).
const ExportPath = "/v1/exports/likes"

// exportPage is how many likes of each kind one read of an export takes: the most an export holds in memory is two
// pages, whatever the number of likes.
const exportPage = 1000

// exportJSON is a like in the caller's export (accounts contract).
type exportJSON struct {
	TargetType string       `json:"targetType"` // article or comment
	TargetID   apijson.ID   `json:"targetId"`
	ArticleID  apijson.ID   `json:"articleId"`
	CreatedAt  apijson.Time `json:"createdAt"`
}

func toExportJSON(l Like) exportJSON {
	if l.CommentID != 0 {
		return exportJSON{"comment", apijson.ID(l.CommentID), apijson.ID(l.ArticleID), apijson.Time(l.CreatedAt)}
	}
	return exportJSON{"article", apijson.ID(l.ArticleID), apijson.ID(l.ArticleID), apijson.Time(l.CreatedAt)}
}

// likePages reads one kind of a user's likes, newest first, a page at a time.
type likePages struct {
	store  *Store
	user   int64
	tb     tables
	page   []Like
	before int64
	ended  bool
}

// head returns the newest like not yet taken, reading the next page when this one is used up; ok is false at the end.
func (p *likePages) head(ctx context.Context) (l Like, ok bool, err error) {
	if len(p.page) == 0 && !p.ended {
		if p.page, err = p.store.userLikes(ctx, p.user, p.tb, p.before, exportPage); err != nil {
			return Like{}, false, err
		}
		p.ended = len(p.page) < exportPage
		if len(p.page) > 0 {
			p.before = p.page[len(p.page)-1].ID
		}
	}
	if len(p.page) == 0 {
		return Like{}, false, nil
	}
	return p.page[0], true, nil
}

// exportLikes answers GET /v1/exports/likes: the caller's likes of articles and of comments, newest first, as one
// JSON array streamed as it is read (keyset pages of each kind, merged). An error once the array has begun cannot be
// answered any more: the connection is cut, so that the client sees a truncated body, never a short archive.
func (h handlers) exportLikes(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	out, ctx, cancel := httpio.NewArrayWriter(w, r, httpio.ExportTimeout)
	defer cancel()
	kinds := []*likePages{{store: h.svc.store, user: p.UserID, tb: articleTables}, {store: h.svc.store, user: p.UserID, tb: commentTables}}
	for n := 1; ; n++ {
		var next *likePages
		var newest Like
		for _, k := range kinds {
			l, ok, err := k.head(ctx)
			if err != nil {
				return out.Abort(err)
			}
			if ok && (next == nil || l.ID > newest.ID) {
				next, newest = k, l
			}
		}
		if next == nil {
			return out.End()
		}
		next.page = next.page[1:]
		if err := out.Add(toExportJSON(newest)); err != nil {
			return out.Abort(err)
		}
		if n%exportPage == 0 {
			if err := out.Flush(); err != nil {
				return out.Abort(err)
			}
		}
	}
}
