package article

import (
	"log/slog"
	"net/http"
	"strconv"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/boardpage"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/idempotency"
)

// Routes returns the whole HTTP API of the article service (SPEC §3.1).
//
// Versions. GET /v1/articles/{articleId} and GET /v1/articles/boards/{boardId}/count answer with an ETag holding the
// version of what they return, as a quoted decimal (ETag: "7"): the article's version (its events' articleVersion:
// 1 at create, +1 per update), and the board count row's version (its events' boardArticleCountVersion; "0" for a
// board that never had an article). The value and its version are read together, so a consumer that rebuilds its
// model from these answers can keep ignoring any event whose version is not newer (see internal/event).
//
// Who may write (SPEC §2.1). Every write acts for the principal that httpio.Guard put in the request's context
// from its access token, and fails closed (401) without one. POST writes as that user: a writerId in the body may
// be left out, and one naming anybody else is 403. PUT and DELETE are for the article's writer or a moderator (403
// otherwise). A handler checks in this order: its input (400), the principal (401, 403 for a writerId), the
// article (404), the ownership (403), then writes; so a bad request is a 400 whoever sends it, and a missing
// article a 404 before anyone's rights to it are weighed. Reads are public.
//
// Moderation (SPEC §3.9). Articles carry their moderation state (hidden, removedReason, locked, pinned; left out
// while zero), which the service keeps from the moderation topic (Service.Handlers). A hidden article reads as a
// placeholder title, no content and its removedReason to everyone but its writer and moderators, whom a read with an
// access token shows the real title and content too. Its writer may still update it; it stays hidden.
//
// Retries. POST /v1/articles takes an Idempotency-Key, checked with the input (400 INVALID_IDEMPOTENCY_KEY): a
// retry gets the first answer and writes nothing, the same key with another body is 409 IDEMPOTENCY_KEY_REUSED
// (internal/idempotency, docs/idempotency.md).
func Routes(svc *Service, logger *slog.Logger) *http.ServeMux {
	h := handlers{svc: svc}
	mux := http.NewServeMux()
	handle := func(pattern string, fn httpio.HandlerFunc) { mux.Handle(pattern, httpio.Handle(logger, fn)) }
	handle("POST /v1/articles", h.create)
	handle("GET /v1/articles/{articleId}", h.get)
	handle("PUT /v1/articles/{articleId}", h.update)
	handle("DELETE /v1/articles/{articleId}", h.delete)
	handle("GET /v1/articles/{articleId}/revisions", h.revisions)
	handle("GET /v1/articles", h.list)
	handle("GET /v1/articles/infinite-scroll", h.scroll)
	handle("GET /v1/articles/boards/{boardId}/count", h.boardCount)
	handle("GET /v1/articles/boards", h.boards)
	handle("GET "+ExportPath, h.export)
	return mux
}

// articleJSON is the wire form of an Article. The moderation fields are left out while zero.
type articleJSON struct {
	ArticleID     apijson.ID   `json:"articleId"`
	Title         string       `json:"title"`
	Content       string       `json:"content"`
	ContentHTML   string       `json:"contentHtml"`
	ContentText   string       `json:"contentText"`
	BoardID       apijson.ID   `json:"boardId"`
	WriterID      apijson.ID   `json:"writerId"`
	CreatedAt     apijson.Time `json:"createdAt"`
	ModifiedAt    apijson.Time `json:"modifiedAt"`
	Hidden        event.Hidden `json:"hidden,omitempty"`
	RemovedReason string       `json:"removedReason,omitempty"`
	Locked        bool         `json:"locked,omitempty"`
	Pinned        bool         `json:"pinned,omitempty"`
}

// Titles shown in place of a hidden article's.
const (
	removedTitle = "[removed]"
	pendingTitle = "[hidden pending review]"
)

// toJSON is the wire form of a as the request's principal may see it: a hidden article shows its title and content
// to its writer and to moderators only; anyone else (anonymous readers included) gets a placeholder title, no
// content, and the reason it is hidden.
func toJSON(r *http.Request, a Article) articleJSON {
	if a.Hidden != event.Visible {
		if p, ok := auth.FromContext(r.Context()); !ok || (p.UserID != a.WriterID && p.Role != auth.RoleModerator) {
			a.Title, a.Content, a.ContentHTML, a.ContentText = removedTitle, "", "", ""
			if a.Hidden == event.Pending {
				a.Title = pendingTitle
			}
		}
	}
	return wire(a)
}

// wire is the wire form of a, as it is.
func wire(a Article) articleJSON {
	return articleJSON{ArticleID: apijson.ID(a.ID), Title: a.Title, Content: a.Content, ContentHTML: a.ContentHTML,
		ContentText: a.ContentText, BoardID: apijson.ID(a.BoardID),
		WriterID: apijson.ID(a.WriterID), CreatedAt: apijson.Time(a.CreatedAt), ModifiedAt: apijson.Time(a.ModifiedAt),
		Hidden: a.Hidden, RemovedReason: a.RemovedReason, Locked: a.Locked, Pinned: a.Pinned}
}

func toJSONList(r *http.Request, as []Article) []articleJSON {
	out := make([]articleJSON, len(as))
	for i, a := range as {
		out[i] = toJSON(r, a)
	}
	return out
}

type handlers struct {
	svc *Service
}

func (h handlers) create(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Title    *string     `json:"title"`
		Content  *string     `json:"content"`
		WriterID *apijson.ID `json:"writerId"` // optional: the acting user
		BoardID  *apijson.ID `json:"boardId"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	if err := httpio.Required(httpio.Has("title", in.Title != nil), httpio.Has("content", in.Content != nil),
		httpio.Has("boardId", in.BoardID != nil)); err != nil {
		return err
	}
	var named int64
	if in.WriterID != nil {
		named = int64(*in.WriterID)
	}
	if (in.WriterID != nil && named == 0) || *in.BoardID == 0 {
		return fault.Invalidf("INVALID_ID", "writerId and boardId must be positive (writerId may be left out)")
	}
	if err := validate(*in.Title, *in.Content); err != nil {
		return err
	}
	key, err := idempotency.FromRequest(r, in)
	if err != nil {
		return err
	}
	writerID, err := auth.Writer(r.Context(), named)
	if err != nil {
		return err
	}
	return h.svc.keys.Serve(w, r, writerID, key, http.StatusCreated, func(k *idempotency.Write) (any, error) {
		a, err := h.svc.create(r.Context(), *in.Title, *in.Content, int64(*in.BoardID), writerID, k)
		return toJSON(r, a), err
	})
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
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(a.Version, 10)))
	httpio.Write(w, http.StatusOK, toJSON(r, a))
	return nil
}

func (h handlers) update(w http.ResponseWriter, r *http.Request) error {
	id, err := httpio.PathID(r, "articleId")
	if err != nil {
		return err
	}
	var in struct {
		Title   *string `json:"title"`
		Content *string `json:"content"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	if err := httpio.Required(httpio.Has("title", in.Title != nil), httpio.Has("content", in.Content != nil)); err != nil {
		return err
	}
	if err := validate(*in.Title, *in.Content); err != nil {
		return err
	}
	if err := h.mayChange(r, id); err != nil {
		return err
	}
	a, err := h.svc.Update(r.Context(), id, *in.Title, *in.Content)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toJSON(r, a))
	return nil
}

func (h handlers) delete(w http.ResponseWriter, r *http.Request) error {
	id, err := httpio.PathID(r, "articleId")
	if err != nil {
		return err
	}
	if err := h.mayChange(r, id); err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// mayChange checks that the request may update or delete article id: it has a principal (401), the article exists
// (404), and the principal is its writer or a moderator (403). The write that follows does not hold the article
// between the check and itself, and needs not: an article's writer never changes, and one deleted in between is the
// write's own 404.
func (h handlers) mayChange(r *http.Request, id int64) error {
	if _, err := auth.Acting(r.Context()); err != nil {
		return err
	}
	a, err := h.svc.Get(r.Context(), id)
	if err != nil {
		return err
	}
	return auth.MayChange(r.Context(), a.WriterID)
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
	httpio.Write(w, http.StatusOK, boardpage.Page[articleJSON]{Articles: toJSONList(r, p.Articles), ArticleCount: p.Count})
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
	httpio.Write(w, http.StatusOK, toJSONList(r, as))
	return nil
}

// boardJSON is a board that has articles, and how many.
type boardJSON struct {
	BoardID      apijson.ID `json:"boardId"`
	ArticleCount int64      `json:"articleCount"`
}

func (h handlers) boards(w http.ResponseWriter, r *http.Request) error {
	boards, err := h.svc.Boards(r.Context())
	if err != nil {
		return err
	}
	out := make([]boardJSON, len(boards))
	for i, b := range boards {
		out[i] = boardJSON{apijson.ID(b.BoardID), b.ArticleCount}
	}
	httpio.Write(w, http.StatusOK, out)
	return nil
}

func (h handlers) boardCount(w http.ResponseWriter, r *http.Request) error {
	boardID, err := httpio.PathID(r, "boardId")
	if err != nil {
		return err
	}
	n, version, err := h.svc.VersionedBoardCount(r.Context(), boardID)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(version, 10)))
	httpio.Write(w, http.StatusOK, n)
	return nil
}
