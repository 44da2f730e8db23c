package comment

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"time"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/markdown"
	"board/internal/outbox"
	"board/internal/revision"
)

// Edits (SPEC §3.12). A comment is edited by its writer or a moderator (the HTTP layer checks who), in one
// transaction that takes the writes' locks in their order (package comment): the article's existence row, so a
// comment of a deleted article is ARTICLE_NOT_FOUND; the count row; then the comment, so a comment marked deleted is
// 409 COMMENT_DELETED. A locked article's comments are edited by moderators only (403 LOCKED). The transaction keeps
// the content it replaces in comment_revision (internal/revision), bumps the comment's version, sets its
// modified_at and records COMMENT_UPDATED with the new content. An edit to the content the comment has already
// changes nothing (a retried PUT keeps no second revision). Deletes and the purge take the revisions with them.

var (
	errLockedEdit = &fault.Error{Kind: fault.Forbidden, Code: "LOCKED", Message: "this article is locked: its comments cannot be edited"}
	errDeleted    = fault.Conflictf("COMMENT_DELETED", "a deleted comment cannot be edited")
)

// edited fills in when c was last edited from its modified_at (NULL: never), and makes c's times UTC.
func edited(c Comment, modified sql.NullTime) Comment {
	c.CreatedAt = c.CreatedAt.UTC()
	c.ModifiedAt = c.CreatedAt
	if modified.Valid {
		c.ModifiedAt = modified.Time.UTC()
	}
	return c
}

// Update replaces the content of v1 comment id, as the principal of ctx, and returns it with its moderation state.
func (s *Service) Update(ctx context.Context, id int64, content string) (Comment, error) {
	return s.update(ctx, "comment", readV1, scanV1, id, content)
}

// UpdateV2 replaces the content of v2 comment id, as the principal of ctx, and returns it with its moderation state.
func (s *Service) UpdateV2(ctx context.Context, id int64, content string) (Comment, error) {
	return s.update(ctx, "comment_v2", readV2, scanV2, id, content)
}

func (s *Service) update(ctx context.Context, table, read string, scan func(row interface{ Scan(...any) error }) (Comment, error),
	id int64, content string) (Comment, error) {
	articleID, err := s.store.articleOf(ctx, table, id)
	if err != nil {
		return Comment{}, err
	}
	e := edit{table: table, read: read, scan: scan, id: id, content: content, rendered: markdown.Render(content), at: apijson.Millis(s.now()),
		editor: revision.EditorOf(ctx), passLock: mayPassLock(ctx)}
	var c Comment
	err = s.store.articles.Write(ctx, articleID, func() error {
		c, err = s.store.Update(ctx, articleID, e)
		return err
	})
	return s.store.withModerationOne(ctx, c, err)
}

// edit is one edit of a comment of table, read with read and scanned with scan.
type edit struct {
	table, read string
	scan        func(row interface{ Scan(...any) error }) (Comment, error)
	id          int64
	content     string
	rendered    markdown.Rendered // content rendered, before the transaction
	at          time.Time
	editor      revision.Editor
	passLock    bool // the editor may edit on a locked article
}

// Update applies e to a comment of article articleID (read before the transaction, articleOf) and returns the
// comment as stored. The transaction starts with Require, so it runs through the registry's Write.
func (s *Store) Update(ctx context.Context, articleID int64, e edit) (Comment, error) {
	var c Comment
	err := s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := s.articles.Require(ctx, tx, articleID); err != nil {
			return err
		}
		count, err := s.lockCount(ctx, tx, articleID)
		if err != nil {
			return err
		}
		if !e.passLock {
			if err := s.checkUnlocked(ctx, tx, articleID); errors.Is(err, errLocked) {
				return errLockedEdit
			} else if err != nil {
				return err
			}
		}
		c, err = e.scan(tx.QueryRowContext(ctx, "SELECT "+e.read+" FROM "+e.table+" WHERE comment_id = ?"+s.db.ForUpdate(), e.id))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return notFound(e.id)
		case err != nil:
			return err
		case c.Deleted:
			return errDeleted
		case c.Content == e.content:
			return nil
		}
		r := e.editor.Kept(c.Version, c.WriterID, "", c.Content, e.at)
		if _, err := tx.ExecContext(ctx, `INSERT INTO comment_revision (comment_id, revision, article_id, editor_id, content,
				created_at, moderator) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			c.ID, r.Number, c.ArticleID, r.EditorID, r.Content, r.CreatedAt, r.Moderator); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE `+e.table+` SET content = ?, content_html = ?, content_text = ?, version = version + 1,
				modified_at = ? WHERE comment_id = ?`,
			e.content, e.rendered.HTML, e.rendered.Text, e.at, c.ID); err != nil {
			return err
		}
		c.Content, c.ContentHTML, c.ContentText, c.Version, c.ModifiedAt = e.content, e.rendered.HTML, e.rendered.Text, c.Version+1, e.at
		return emit(event.CommentUpdated, c.ArticleID, payload(c, count))
	})
	return c, err
}

// deleteRevisions removes a comment's revisions, in the transaction that deletes it or marks it deleted.
func deleteRevisions(ctx context.Context, tx *sql.Tx, c Comment) error {
	_, err := tx.ExecContext(ctx, "DELETE FROM comment_revision WHERE article_id = ? AND comment_id = ?", c.ArticleID, c.ID)
	return err
}

// Revisions returns a page of a comment's revisions, newest first.
func (s *Store) Revisions(ctx context.Context, c Comment, page revision.Page) ([]revision.Revision, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT revision, editor_id, content, created_at, moderator FROM comment_revision
		WHERE article_id = ? AND comment_id = ? AND revision < ? ORDER BY revision DESC LIMIT ?`,
		c.ArticleID, c.ID, page.Cursor(), page.PageSize)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []revision.Revision{}
	for rows.Next() {
		var r revision.Revision
		if err := rows.Scan(&r.Number, &r.EditorID, &r.Content, &r.CreatedAt, &r.Moderator); err != nil {
			return nil, err
		}
		r.CreatedAt = r.CreatedAt.UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// updateJSON is the body of both versions' PUT.
type updateJSON struct {
	Content *string `json:"content"`
}

func (h handlers) update(w http.ResponseWriter, r *http.Request) error {
	c, err := h.edit(w, r, h.svc.Get, h.svc.Update)
	if err == nil {
		httpio.Write(w, http.StatusOK, toV1(seenBy(r, c)))
	}
	return err
}

func (h handlers) updateV2(w http.ResponseWriter, r *http.Request) error {
	c, err := h.edit(w, r, h.svc.GetV2, h.svc.UpdateV2)
	if err == nil {
		httpio.Write(w, http.StatusOK, toV2(seenBy(r, c)))
	}
	return err
}

// edit checks and applies a PUT in the order of Routes: the input (400), the principal (401), the comment (404),
// the ownership (403), then the edit's own refusals (404 ARTICLE_NOT_FOUND, 403 LOCKED, 409 COMMENT_DELETED).
func (h handlers) edit(w http.ResponseWriter, r *http.Request, get func(context.Context, int64) (Comment, error),
	update func(context.Context, int64, string) (Comment, error)) (Comment, error) {
	id, err := httpio.PathID(r, "commentId")
	if err != nil {
		return Comment{}, err
	}
	var in updateJSON
	if err := httpio.Decode(w, r, &in); err != nil {
		return Comment{}, err
	}
	if err := httpio.Required(httpio.Has("content", in.Content != nil)); err != nil {
		return Comment{}, err
	}
	if err := validateContent(*in.Content); err != nil {
		return Comment{}, err
	}
	if err := mayChange(r, id, get); err != nil {
		return Comment{}, err
	}
	return update(r.Context(), id, *in.Content)
}

func (h handlers) revisions(w http.ResponseWriter, r *http.Request) error {
	return h.serveRevisions(w, r, h.svc.Get)
}

func (h handlers) revisionsV2(w http.ResponseWriter, r *http.Request) error {
	return h.serveRevisions(w, r, h.svc.GetV2)
}

// serveRevisions answers GET .../comments/{commentId}/revisions. A hidden comment's revisions show their content
// only to whom the comment shows it.
func (h handlers) serveRevisions(w http.ResponseWriter, r *http.Request, get func(context.Context, int64) (Comment, error)) error {
	id, err := httpio.PathID(r, "commentId")
	if err != nil {
		return err
	}
	page, err := revision.ReadPage(r)
	if err != nil {
		return err
	}
	c, err := get(r.Context(), id)
	if err != nil {
		return err
	}
	rs, err := h.svc.store.Revisions(r.Context(), c, page)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, revision.Wire(rs, seenBy(r, c).Content != c.Content))
	return nil
}
