package articleread

import (
	"log/slog"
	"net/http"

	"board/internal/boardpage"
	"board/internal/httpio"
)

// Routes returns the whole HTTP API of the article-read service (SPEC §3.6).
func Routes(svc *Service, logger *slog.Logger) *http.ServeMux {
	h := handlers{svc: svc}
	mux := http.NewServeMux()
	handle := func(pattern string, fn httpio.HandlerFunc) { mux.Handle(pattern, httpio.Handle(logger, fn)) }
	handle("GET /v1/articles/{articleId}", h.get)
	handle("GET /v1/articles", h.list)
	handle("GET /v1/articles/infinite-scroll", h.scroll)
	return mux
}

// articleReadJSON is the wire form of an ArticleRead: the article service's Article and the three counts.
type articleReadJSON struct {
	Article
	ArticleCommentCount int64 `json:"articleCommentCount"`
	ArticleLikeCount    int64 `json:"articleLikeCount"`
	ArticleViewCount    int64 `json:"articleViewCount"`
}

func toJSON(as []ArticleRead) []articleReadJSON {
	out := make([]articleReadJSON, len(as))
	for i, a := range as {
		out[i] = articleReadJSON{a.Article, a.CommentCount, a.LikeCount, a.ViewCount}
	}
	return out
}

type handlers struct {
	svc *Service
}

func (h handlers) get(w http.ResponseWriter, r *http.Request) error {
	id, err := httpio.PathID(r, "articleId")
	if err != nil {
		return err
	}
	a, err := h.svc.Get(r.Context(), id)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toJSON([]ArticleRead{a})[0])
	return nil
}

func (h handlers) list(w http.ResponseWriter, r *http.Request) error {
	q, err := boardpage.ReadPage(r)
	if err != nil {
		return err
	}
	p, err := h.svc.List(r.Context(), q.BoardID, q.Page, q.PageSize)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, boardpage.Page[articleReadJSON]{Articles: toJSON(p.Articles), ArticleCount: p.Count})
	return nil
}

func (h handlers) scroll(w http.ResponseWriter, r *http.Request) error {
	q, err := boardpage.ReadScroll(r)
	if err != nil {
		return err
	}
	as, err := h.svc.Scroll(r.Context(), q.BoardID, q.PageSize, q.LastArticleID)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toJSON(as))
	return nil
}
