package articleread

import (
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"board/internal/boardpage"
	"board/internal/fault"
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

// appendArticles appends as as a JSON array, each article in the form view appends.
func appendArticles(dst []byte, as []ArticleRead, view func(a ArticleRead, dst []byte) []byte) []byte {
	dst = append(dst, '[')
	for i, a := range as {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = view(a, dst)
	}
	return append(dst, ']')
}

// answer builds a 200 answer in a buffer of the pool and sends it with the newline httpio.Write ends its answers
// with: pages of 30 articles are tens of kilobytes, which a new buffer per request would make the collector's.
func answer(w http.ResponseWriter, build func(dst []byte) []byte) {
	buf := buffers.Get().(*[]byte)
	body := append(build((*buf)[:0]), '\n')
	httpio.WriteRaw(w, http.StatusOK, body)
	if cap(body) <= maxPooledBuffer {
		*buf = body
		buffers.Put(buf)
	}
}

// maxPooledBuffer keeps the rare huge answer (a page of long articles) from staying in the pool.
const maxPooledBuffer = 256 << 10

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

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
	answer(w, a.appendJSON)
	return nil
}

// listView reads a list's ?view=: "full" (the default) answers each article as SPEC §3.6 does, "summary" without
// its content, contentHtml and contentText but with an excerpt, for pages that list titles: a quarter of the bytes
// to write and to decode.
func listView(r *http.Request) (func(a ArticleRead, dst []byte) []byte, error) {
	switch r.URL.Query().Get("view") {
	case "", "full":
		return ArticleRead.appendJSON, nil
	case "summary":
		return ArticleRead.appendSummaryJSON, nil
	}
	return nil, fault.Invalidf("INVALID_VIEW", `query parameter view must be "full" or "summary"`)
}

func (h handlers) list(w http.ResponseWriter, r *http.Request) error {
	q, err := boardpage.ReadPage(r)
	if err != nil {
		return err
	}
	view, err := listView(r)
	if err != nil {
		return err
	}
	sort, err := ParseSort(r.URL.Query().Get("sort"))
	if err != nil {
		return err
	}
	p, err := h.svc.ListBy(r.Context(), q.BoardID, sort, q.Page, q.PageSize)
	if err != nil {
		return err
	}
	answer(w, func(dst []byte) []byte {
		dst = appendArticles(append(dst, `{"articles":`...), p.Articles, view)
		dst = strconv.AppendInt(append(dst, `,"articleCount":`...), p.Count, 10)
		return append(dst, '}')
	})
	return nil
}

func (h handlers) scroll(w http.ResponseWriter, r *http.Request) error {
	q, err := boardpage.ReadScroll(r)
	if err != nil {
		return err
	}
	view, err := listView(r)
	if err != nil {
		return err
	}
	sort, err := ParseSort(r.URL.Query().Get("sort"))
	if err != nil {
		return err
	}
	as, err := h.svc.ScrollBy(r.Context(), q.BoardID, sort, q.PageSize, q.LastArticleID)
	if err != nil {
		return err
	}
	answer(w, func(dst []byte) []byte { return appendArticles(dst, as, view) })
	return nil
}
