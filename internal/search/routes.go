package search

import (
	"log/slog"
	"net/http"

	"board/internal/apijson"
	"board/internal/fault"
	"board/internal/httpio"
)

// Routes returns the whole HTTP API of the search service (SPEC §3.10).
func Routes(svc *Service, logger *slog.Logger) *http.ServeMux {
	h := handlers{svc: svc}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/search", httpio.Handle(logger, h.search))
	return mux
}

type resultJSON struct {
	Type      Type         `json:"type"`
	ArticleID apijson.ID   `json:"articleId"`
	CommentID *apijson.ID  `json:"commentId,omitempty"`
	BoardID   apijson.ID   `json:"boardId"`
	Title     string       `json:"title"`
	Fragment  string       `json:"fragment"`
	WriterID  apijson.ID   `json:"writerId"`
	CreatedAt apijson.Time `json:"createdAt"`
}

type pageJSON struct {
	Results []resultJSON `json:"results"`
	Count   int64        `json:"count"`
}

type handlers struct {
	svc *Service
}

func (h handlers) search(w http.ResponseWriter, r *http.Request) error {
	req, err := parseRequest(r)
	if err != nil {
		return err
	}
	page, err := h.svc.Search(r.Context(), req)
	if err != nil {
		return err
	}
	out := pageJSON{Results: make([]resultJSON, len(page.Hits)), Count: page.Count}
	for i, res := range page.Hits {
		out.Results[i] = resultJSON{Type: res.Type, ArticleID: apijson.ID(res.ArticleID), BoardID: apijson.ID(res.BoardID),
			Title: res.Title, Fragment: res.Fragment, WriterID: apijson.ID(res.WriterID), CreatedAt: apijson.Time(res.CreatedAt)}
		if res.Type == TypeComment {
			id := apijson.ID(res.CommentID)
			out.Results[i].CommentID = &id
		}
	}
	httpio.Write(w, http.StatusOK, out)
	return nil
}

func parseRequest(r *http.Request) (Request, error) {
	q := r.URL.Query()
	req := Request{Q: q.Get("q")}
	var err error
	if req.BoardID, err = httpio.OptionalQueryID(r, "boardId"); err != nil {
		return Request{}, err
	}
	if req.WriterID, err = httpio.OptionalQueryID(r, "writerId"); err != nil {
		return Request{}, err
	}
	switch t := Type(q.Get("type")); t {
	case "", TypeArticle, TypeComment:
		req.Type = t
	default:
		return Request{}, fault.Invalidf("INVALID_TYPE", "type must be article or comment")
	}
	switch q.Get("sort") {
	case "", "relevance":
	case "newest":
		req.Newest = true
	default:
		return Request{}, fault.Invalidf("INVALID_SORT", "sort must be relevance or newest")
	}
	if req.Page, req.PageSize, err = httpio.PageQuery(r); err != nil {
		return Request{}, err
	}
	return req, nil
}
