package hotarticle

import (
	"log/slog"
	"net/http"

	"board/internal/apijson"
	"board/internal/httpio"
)

// Routes returns the whole HTTP API of the hot-article service (SPEC §3.5).
func Routes(svc *Service, logger *slog.Logger) *http.ServeMux {
	h := handlers{svc: svc}
	mux := http.NewServeMux()
	handle := func(pattern string, fn httpio.HandlerFunc) { mux.Handle(pattern, httpio.Handle(logger, fn)) }
	handle("GET /v1/hot-articles/articles/date/{date}", h.day)
	return mux
}

// hotArticleJSON is the wire form of a HotArticle.
type hotArticleJSON struct {
	ArticleID    apijson.ID   `json:"articleId"`
	Title        string       `json:"title"`
	CreatedAt    apijson.Time `json:"createdAt"`
	Score        int64        `json:"score"`
	LikeCount    int64        `json:"likeCount"`
	CommentCount int64        `json:"commentCount"`
	ViewCount    int64        `json:"viewCount"`
}

type handlers struct {
	svc *Service
}

func (h handlers) day(w http.ResponseWriter, r *http.Request) error {
	list, err := h.svc.Day(r.Context(), r.PathValue("date"))
	if err != nil {
		return err
	}
	out := make([]hotArticleJSON, len(list))
	for i, a := range list {
		out[i] = hotArticleJSON{apijson.ID(a.ArticleID), a.Title, apijson.Time(a.CreatedAt), a.Score, a.LikeCount,
			a.CommentCount, a.ViewCount}
	}
	httpio.Write(w, http.StatusOK, out)
	return nil
}
