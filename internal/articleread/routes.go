package articleread

import (
	"log/slog"
	"net/http"
	"strconv"

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

// Answers are spliced from the articles' stored wire form (ArticleRead.appendJSON), never encoded by reflection:
// they read as encoding/json would write them, which routes_test checks.

// appendArticles appends as as a JSON array.
func appendArticles(dst []byte, as []ArticleRead) []byte {
	dst = append(dst, '[')
	for i, a := range as {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = a.appendJSON(dst)
	}
	return append(dst, ']')
}

// writeOK answers 200 with body and the newline httpio.Write ends its answers with.
func writeOK(w http.ResponseWriter, body []byte) {
	httpio.WriteRaw(w, http.StatusOK, append(body, '\n'))
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
	writeOK(w, a.appendJSON(make([]byte, 0, len(a.Article)+96)))
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
	body := append(make([]byte, 0, 1024*len(p.Articles)+64), `{"articles":`...)
	body = appendArticles(body, p.Articles)
	body = append(body, `,"articleCount":`...)
	body = strconv.AppendInt(body, p.Count, 10)
	writeOK(w, append(body, '}'))
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
	writeOK(w, appendArticles(make([]byte, 0, 1024*len(as)+2), as))
	return nil
}
