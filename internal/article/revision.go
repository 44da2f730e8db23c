package article

import (
	"context"
	"database/sql"
	"net/http"
	"time"

	"board/internal/httpio"
	"board/internal/revision"
)

// Revisions (SPEC §3.12, internal/revision): every update keeps the title and content it replaces in
// article_revision, on the article's board's shard, in the update's transaction; a delete takes them with it.

// keepRevision stores old's title and content as the revision its update by editor at now replaces.
func (s *Store) keepRevision(ctx context.Context, tx *sql.Tx, old Article, editor revision.Editor, now time.Time) error {
	r := editor.Kept(old.Version, old.WriterID, old.Title, old.Content, now)
	_, err := tx.ExecContext(ctx, `INSERT INTO article_revision (article_id, revision, board_id, editor_id, title, content,
			created_at, moderator) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		old.ID, r.Number, old.BoardID, r.EditorID, r.Title, r.Content, r.CreatedAt, r.Moderator)
	return err
}

// deleteRevisions removes a deleted article's revisions, in its delete's transaction.
func deleteRevisions(ctx context.Context, tx *sql.Tx, a Article) error {
	_, err := tx.ExecContext(ctx, "DELETE FROM article_revision WHERE board_id = ? AND article_id = ?", a.BoardID, a.ID)
	return err
}

// Revisions returns a page of an article's revisions on board boardID, newest first.
func (s *Store) Revisions(ctx context.Context, boardID, articleID int64, page revision.Page) ([]revision.Revision, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT revision, editor_id, title, content, created_at, moderator FROM article_revision
		WHERE board_id = ? AND article_id = ? AND revision < ? ORDER BY revision DESC LIMIT ?`,
		boardID, articleID, page.Cursor(), page.PageSize)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []revision.Revision{}
	for rows.Next() {
		var r revision.Revision
		if err := rows.Scan(&r.Number, &r.EditorID, &r.Title, &r.Content, &r.CreatedAt, &r.Moderator); err != nil {
			return nil, err
		}
		r.CreatedAt = r.CreatedAt.UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// Revisions returns an article, with its moderation state, and a page of its revisions, newest first.
func (s *Service) Revisions(ctx context.Context, id int64, page revision.Page) (Article, []revision.Revision, error) {
	a, err := s.Get(ctx, id)
	if err != nil {
		return Article{}, nil, err
	}
	rs, err := s.store.Revisions(ctx, a.BoardID, id, page)
	return a, rs, err
}

// revisions answers GET /v1/articles/{articleId}/revisions. A hidden article's revisions show their title and
// content only to whom the article shows them.
func (h handlers) revisions(w http.ResponseWriter, r *http.Request) error {
	id, err := httpio.PathID(r, "articleId")
	if err != nil {
		return err
	}
	page, err := revision.ReadPage(r)
	if err != nil {
		return err
	}
	a, rs, err := h.svc.Revisions(r.Context(), id, page)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, revision.Wire(rs, toJSON(r, a).Content != a.Content))
	return nil
}
