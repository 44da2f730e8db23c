package article

import (
	"context"
	"net/http"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/httpio"
)

// ExportPath is where a user's own articles are exported, streamed (SPEC §3.14).
const ExportPath = "/v1/exports/articles"

// exportPage is how many articles one read of an export holds: its memory, whatever the writer's number.
const exportPage = 1000

// byWriter names the index of a writer's articles, newest first (migration 006).
const byWriter = "idx_writer_id_article_id"

type exportJSON struct {
	ArticleID  apijson.ID   `json:"articleId"`
	BoardID    apijson.ID   `json:"boardId"`
	Title      string       `json:"title"`
	Content    string       `json:"content"`
	CreatedAt  apijson.Time `json:"createdAt"`
	ModifiedAt apijson.Time `json:"modifiedAt"`
}

// export answers GET /v1/exports/articles: the caller's articles, newest first, as one JSON array streamed a page
// at a time. Hidden ones are in it: they are the caller's. A read that fails once the array has begun cuts the
// answer short (httpio.ArrayWriter.Abort).
func (h handlers) export(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	out, ctx, cancel := httpio.NewArrayWriter(w, r, httpio.ExportTimeout)
	defer cancel()
	var before int64
	for {
		page, err := h.svc.store.WrittenBy(ctx, p.UserID, before, exportPage)
		if err != nil {
			return out.Abort(err)
		}
		for _, a := range page {
			if err := out.Add(exportJSON{apijson.ID(a.ID), apijson.ID(a.BoardID), a.Title, a.Content,
				apijson.Time(a.CreatedAt), apijson.Time(a.ModifiedAt)}); err != nil {
				return out.Abort(err)
			}
		}
		if len(page) < exportPage {
			return out.End()
		}
		before = page[len(page)-1].ID
		if err := out.Flush(); err != nil {
			return out.Abort(err)
		}
	}
}

// WrittenBy returns up to limit of writer's articles older than before (from the newest when before is 0), newest
// first.
func (s *Store) WrittenBy(ctx context.Context, writer, before int64, limit int) ([]Article, error) {
	return s.list(ctx, "SELECT "+columns+" FROM article"+s.db.ForceIndex(byWriter)+
		" WHERE writer_id = ? AND article_id < ? ORDER BY article_id DESC LIMIT ?", writer, cursor(before), limit)
}
