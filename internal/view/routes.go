package view

import (
	"log/slog"
	"net/http"

	"board/internal/auth"
	"board/internal/httpio"
)

// Routes returns the whole HTTP API of the view service (SPEC §3.4). Counts are plain JSON numbers.
//
// Who may view (SPEC §2.1). A view is counted only for a signed-in reader, as the subject of their access token:
// the {userId} of POST's path must be the principal that httpio.Guard put in the request's context (403 otherwise,
// moderators included), and a request without one is 401 and counts nothing. The handler checks its path (400),
// then that (401, 403), then counts, so no other user's dedupe lock is ever taken. Signed-out readers' views are not
// counted (see "Who counts" in the package doc). GET of a count is public.
func Routes(svc *Service, logger *slog.Logger) *http.ServeMux {
	h := handlers{svc: svc}
	mux := http.NewServeMux()
	handle := func(pattern string, fn httpio.HandlerFunc) { mux.Handle(pattern, httpio.Handle(logger, fn)) }
	handle("POST /v1/article-views/articles/{articleId}/users/{userId}", h.view)
	handle("GET /v1/article-views/articles/{articleId}/count", h.count)
	return mux
}

type handlers struct {
	svc *Service
}

func (h handlers) view(w http.ResponseWriter, r *http.Request) error {
	articleID, err := httpio.PathID(r, "articleId")
	if err != nil {
		return err
	}
	userID, err := httpio.PathID(r, "userId")
	if err != nil {
		return err
	}
	if err := auth.ActAs(r.Context(), userID); err != nil {
		return err
	}
	n, err := h.svc.View(r.Context(), articleID, userID)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, n)
	return nil
}

func (h handlers) count(w http.ResponseWriter, r *http.Request) error {
	articleID, err := httpio.PathID(r, "articleId")
	if err != nil {
		return err
	}
	n, err := h.svc.Count(r.Context(), articleID)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, n)
	return nil
}
