// Package revision is the edit history of articles and comments (SPEC §3.12), as both the article and the comment
// service keep and serve it:
//
//	GET /v1/articles/{articleId}/revisions?pageSize=&beforeRevision=   [revisions], newest first
//	GET /v1/comments/{commentId}/revisions?pageSize=&beforeRevision=   (and /v2/comments/...)
//
// Every edit keeps what it replaced as one revision, in the same transaction as the edit: revision n is the source
// as version n of the post read (1 the original), the edit that replaced it was made by EditorID at CreatedAt, and
// Moderator says whether that was a moderator editing someone else's post. The post's current source is the post
// itself, not a revision. Lists are pages of at most httpio.MaxPageSize, newest first; beforeRevision is the
// cursor (the last revision number seen). Services never import each other, so the part they share lives here.
package revision

import (
	"context"
	"net/http"
	"time"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/httpio"
)

// Revision is one kept source of a post and the edit that replaced it.
type Revision struct {
	Number    int64
	EditorID  int64
	Title     string // articles only
	Content   string
	CreatedAt time.Time
	Moderator bool
}

// JSON is the wire form of a Revision.
type JSON struct {
	Revision  int64        `json:"revision"`
	EditorID  apijson.ID   `json:"editorId"`
	Title     string       `json:"title,omitempty"`
	Content   string       `json:"content"`
	CreatedAt apijson.Time `json:"createdAt"`
	Moderator bool         `json:"moderator"`
}

// Wire is the wire form of revisions; hide leaves their title and content out (a hidden post's history shows no
// more than the post).
func Wire(revisions []Revision, hide bool) []JSON {
	out := make([]JSON, len(revisions))
	for i, r := range revisions {
		out[i] = JSON{Revision: r.Number, EditorID: apijson.ID(r.EditorID), Title: r.Title, Content: r.Content,
			CreatedAt: apijson.Time(r.CreatedAt), Moderator: r.Moderator}
		if hide {
			out[i].Title, out[i].Content = "", ""
		}
	}
	return out
}

// Page asks for PageSize revisions older than Before, newest first (Before 0: from the newest).
type Page struct {
	PageSize, Before int64
}

// ReadPage reads and checks pageSize (default httpio.DefaultPageSize, 1..httpio.MaxPageSize) and beforeRevision
// (optional, positive).
func ReadPage(r *http.Request) (Page, error) {
	size, err := httpio.PageSizeQuery(r)
	if err != nil {
		return Page{}, err
	}
	before, err := httpio.QueryInt(r, "beforeRevision", 0, 1, 1<<62)
	return Page{PageSize: size, Before: before}, err
}

// Cursor is Before as a query bound: above every revision when there is no cursor.
func (p Page) Cursor() int64 {
	if p.Before == 0 {
		return 1 << 62
	}
	return p.Before
}

// Editor is who makes an edit: the principal of its request (none when writes are open, SPEC §2.1).
type Editor struct {
	UserID    int64
	Moderator bool // the editor's role
}

// EditorOf returns the editor of a request's ctx.
func EditorOf(ctx context.Context) Editor {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return Editor{}
	}
	return Editor{UserID: p.UserID, Moderator: p.Role == auth.RoleModerator}
}

// Kept is the revision that an edit by e keeps of a post that writerID wrote, number being the version it replaces:
// an edit without a principal is its writer's, and a moderator's edit is marked only on someone else's post (a
// moderator editing their own post edits as its writer).
func (e Editor) Kept(number, writerID int64, title, content string, at time.Time) Revision {
	r := Revision{Number: number, EditorID: e.UserID, Title: title, Content: content, CreatedAt: at}
	if r.EditorID == 0 {
		r.EditorID = writerID
	}
	r.Moderator = e.Moderator && r.EditorID != writerID
	return r
}
