package comment

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/idempotency"
)

// Routes returns the whole HTTP API of the comment service, both versions (SPEC §3.2).
//
// Version. GET /v2/comments/articles/{articleId}/count (the only count endpoint; v1 has none) answers with an ETag
// holding the version of the count it returns, as a quoted decimal (ETag: "7"): the article's comment count row's
// version, which is the articleCommentCountVersion its COMMENT_CREATED and COMMENT_DELETED events carry ("0" for an
// article that never had a comment). A soft delete leaves count and version as they were. The count and its version
// are read together, so a consumer that rebuilds its model from this answer can keep ignoring any event whose
// version is not newer (see internal/event).
//
// Who may write (SPEC §2.1). Every write acts for the principal that httpio.Guard put in the request's context
// from its access token, and fails closed (401) without one. POST writes as that user: a writerId in the body may
// be left out, and one naming anybody else is 403. PUT (edit.go) and DELETE are for the comment's writer or a
// moderator (403 otherwise); DELETE whether it removes the comment or only marks it deleted, and also for a comment already marked
// deleted, which keeps its writer (deleting it again changes nothing). A handler checks in this order: its input
// (400), the principal (401, 403 for a writerId), the comment (404), the ownership (403), then writes. Reads are
// public.
//
// Moderation (SPEC §3.9), from the moderation topic (Service.Handlers). A POST on a locked article is 403 LOCKED,
// except from a moderator. A hidden comment reads with an empty content and its hidden and removedReason to everyone
// but its writer and moderators, whom a read with an access token shows the content too.
//
// Sorts (SPEC §3.13, sort.go). GET /v2/comments and its infinite scroll take sort=oldest|newest|top (oldest, the
// tree order, when left out; anything else is 400 INVALID_SORT). Oldest scrolls after lastPath, newest and top
// after lastCommentId; the other sort's cursor is 400 INVALID_CURSOR. v1 lists keep their one order.
//
// Retries. Both versions' POST takes an Idempotency-Key, checked with the input (400 INVALID_IDEMPOTENCY_KEY): a
// retry gets the first answer and writes nothing, the same key with another body or on the other version is 409
// IDEMPOTENCY_KEY_REUSED (internal/idempotency, docs/idempotency.md).
func Routes(svc *Service, logger *slog.Logger) *http.ServeMux {
	h := handlers{svc: svc}
	mux := http.NewServeMux()
	handle := func(pattern string, fn httpio.HandlerFunc) { mux.Handle(pattern, httpio.Handle(logger, fn)) }
	handle("POST /v1/comments", h.create)
	handle("GET /v1/comments/{commentId}", h.get)
	handle("PUT /v1/comments/{commentId}", h.update)
	handle("DELETE /v1/comments/{commentId}", h.delete)
	handle("GET /v1/comments/{commentId}/revisions", h.revisions)
	handle("GET /v1/comments", h.list)
	handle("GET /v1/comments/infinite-scroll", h.scroll)

	handle("POST /v2/comments", h.createV2)
	handle("GET /v2/comments/{commentId}", h.getV2)
	handle("PUT /v2/comments/{commentId}", h.updateV2)
	handle("DELETE /v2/comments/{commentId}", h.deleteV2)
	handle("GET /v2/comments/{commentId}/revisions", h.revisionsV2)
	handle("GET /v2/comments", h.listV2)
	handle("GET /v2/comments/infinite-scroll", h.scrollV2)
	handle("GET /v2/comments/articles/{articleId}/count", h.articleCount)
	handle("GET "+ExportPath, h.export)
	return mux
}

// commentV1JSON and commentV2JSON are the wire forms of a Comment in each version.
type commentV1JSON struct {
	CommentID       apijson.ID   `json:"commentId"`
	Content         string       `json:"content"`
	ContentHTML     string       `json:"contentHtml"`
	ContentText     string       `json:"contentText"`
	ArticleID       apijson.ID   `json:"articleId"`
	WriterID        apijson.ID   `json:"writerId"`
	ParentCommentID apijson.ID   `json:"parentCommentId"`
	Deleted         bool         `json:"deleted"`
	CreatedAt       apijson.Time `json:"createdAt"`
	ModifiedAt      apijson.Time `json:"modifiedAt"`
	Edited          bool         `json:"edited"`
	LikeCount       int64        `json:"likeCount"`
	Hidden          event.Hidden `json:"hidden,omitempty"`
	RemovedReason   string       `json:"removedReason,omitempty"`
}

type commentV2JSON struct {
	CommentID     apijson.ID   `json:"commentId"`
	Content       string       `json:"content"`
	ContentHTML   string       `json:"contentHtml"`
	ContentText   string       `json:"contentText"`
	ArticleID     apijson.ID   `json:"articleId"`
	WriterID      apijson.ID   `json:"writerId"`
	Path          string       `json:"path"`
	Deleted       bool         `json:"deleted"`
	CreatedAt     apijson.Time `json:"createdAt"`
	ModifiedAt    apijson.Time `json:"modifiedAt"`
	Edited        bool         `json:"edited"`
	LikeCount     int64        `json:"likeCount"`
	Hidden        event.Hidden `json:"hidden,omitempty"`
	RemovedReason string       `json:"removedReason,omitempty"`
}

func toV1(c Comment) commentV1JSON {
	return commentV1JSON{apijson.ID(c.ID), c.Content, c.ContentHTML, c.ContentText, apijson.ID(c.ArticleID), apijson.ID(c.WriterID),
		apijson.ID(c.ParentID), c.Deleted, apijson.Time(c.CreatedAt), apijson.Time(c.ModifiedAt), c.Version > 1, c.LikeCount, c.Hidden, c.RemovedReason}
}

func toV2(c Comment) commentV2JSON {
	return commentV2JSON{apijson.ID(c.ID), c.Content, c.ContentHTML, c.ContentText, apijson.ID(c.ArticleID), apijson.ID(c.WriterID),
		c.Path, c.Deleted, apijson.Time(c.CreatedAt), apijson.Time(c.ModifiedAt), c.Version > 1, c.LikeCount, c.Hidden, c.RemovedReason}
}

// seenBy is c as the request's principal may see it: a hidden comment shows its content to its writer and to
// moderators only; anyone else (anonymous readers included) gets no content, and hidden and removedReason instead.
func seenBy(r *http.Request, c Comment) Comment {
	if c.Hidden == event.Visible {
		return c
	}
	if p, ok := auth.FromContext(r.Context()); !ok || (p.UserID != c.WriterID && p.Role != auth.RoleModerator) {
		c.clearContent()
	}
	return c
}

// mapAll is the wire form of comments as the request's principal may see them.
func mapAll[T any](r *http.Request, cs []Comment, to func(Comment) T) []T {
	out := make([]T, len(cs))
	for i, c := range cs {
		out[i] = to(seenBy(r, c))
	}
	return out
}

type handlers struct {
	svc *Service
}

// newCommentJSON is the body of both versions' create requests.
type newCommentJSON struct {
	ArticleID       *apijson.ID `json:"articleId"`
	Content         *string     `json:"content"`
	WriterID        *apijson.ID `json:"writerId"`        // optional: the acting user
	ParentCommentID *apijson.ID `json:"parentCommentId"` // v1
	ParentPath      *string     `json:"parentPath"`      // v2
}

// decodeNew reads and checks the fields both versions' create requests share; named is the writerId given, 0 when
// it is left out.
func decodeNew(w http.ResponseWriter, r *http.Request) (in newCommentJSON, named int64, err error) {
	if err := httpio.Decode(w, r, &in); err != nil {
		return in, 0, err
	}
	if err := httpio.Required(httpio.Has("articleId", in.ArticleID != nil), httpio.Has("content", in.Content != nil)); err != nil {
		return in, 0, err
	}
	if in.WriterID != nil {
		named = int64(*in.WriterID)
	}
	if *in.ArticleID == 0 || (in.WriterID != nil && named == 0) {
		return in, 0, fault.Invalidf("INVALID_ID", "articleId and writerId must be positive (writerId may be left out)")
	}
	return in, named, validateContent(*in.Content)
}

func (h handlers) create(w http.ResponseWriter, r *http.Request) error {
	in, named, err := decodeNew(w, r)
	if err != nil {
		return err
	}
	var parentID int64
	if in.ParentCommentID != nil {
		if parentID = int64(*in.ParentCommentID); parentID == 0 {
			return fault.Invalidf("INVALID_PARENT_COMMENT_ID", "parentCommentId must be positive; leave it out for a root comment")
		}
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
		c, err := h.svc.create(r.Context(), int64(*in.ArticleID), writerID, parentID, *in.Content, k)
		return toV1(c), err
	})
}

func (h handlers) createV2(w http.ResponseWriter, r *http.Request) error {
	in, named, err := decodeNew(w, r)
	if err != nil {
		return err
	}
	var parentPath string
	if in.ParentPath != nil {
		parentPath = *in.ParentPath
	}
	if err := validateParentPath(parentPath); err != nil {
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
		c, err := h.svc.createV2(r.Context(), int64(*in.ArticleID), writerID, parentPath, *in.Content, k)
		return toV2(c), err
	})
}

func (h handlers) get(w http.ResponseWriter, r *http.Request) error {
	id, err := httpio.PathID(r, "commentId")
	if err != nil {
		return err
	}
	c, err := h.svc.Get(r.Context(), id)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toV1(seenBy(r, c)))
	return nil
}

func (h handlers) getV2(w http.ResponseWriter, r *http.Request) error {
	id, err := httpio.PathID(r, "commentId")
	if err != nil {
		return err
	}
	c, err := h.svc.GetV2(r.Context(), id)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toV2(seenBy(r, c)))
	return nil
}

func (h handlers) delete(w http.ResponseWriter, r *http.Request) error {
	id, err := httpio.PathID(r, "commentId")
	if err != nil {
		return err
	}
	if err := mayChange(r, id, h.svc.Get); err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h handlers) deleteV2(w http.ResponseWriter, r *http.Request) error {
	id, err := httpio.PathID(r, "commentId")
	if err != nil {
		return err
	}
	if err := mayChange(r, id, h.svc.GetV2); err != nil {
		return err
	}
	if err := h.svc.DeleteV2(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// mayChange checks that the request may delete comment id, read by get: it has a principal (401), the comment
// exists (404), and the principal is its writer or a moderator (403). The delete that follows does not hold the
// comment between the check and itself, and needs not: a comment's writer never changes, and one removed in between
// is the delete's own 404.
func mayChange(r *http.Request, id int64, get func(context.Context, int64) (Comment, error)) error {
	if _, err := auth.Acting(r.Context()); err != nil {
		return err
	}
	c, err := get(r.Context(), id)
	if err != nil {
		return err
	}
	return auth.MayChange(r.Context(), c.WriterID)
}

// pageQuery reads the articleId, page and pageSize of an offset list request.
func pageQuery(r *http.Request) (articleID, page, pageSize int64, err error) {
	if articleID, err = httpio.QueryID(r, "articleId"); err != nil {
		return
	}
	page, pageSize, err = httpio.PageQuery(r)
	return
}

// pageJSON is a list response of either version.
type pageJSON[T any] struct {
	Comments     []T   `json:"comments"`
	CommentCount int64 `json:"commentCount"`
}

func (h handlers) list(w http.ResponseWriter, r *http.Request) error {
	articleID, page, pageSize, err := pageQuery(r)
	if err != nil {
		return err
	}
	p, err := h.svc.List(r.Context(), articleID, page, pageSize)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, pageJSON[commentV1JSON]{mapAll(r, p.Comments, toV1), p.Count})
	return nil
}

func (h handlers) listV2(w http.ResponseWriter, r *http.Request) error {
	articleID, page, pageSize, err := pageQuery(r)
	if err != nil {
		return err
	}
	sort, err := parseSort(r.URL.Query().Get("sort"))
	if err != nil {
		return err
	}
	var p Page
	if sort == Oldest {
		p, err = h.svc.ListV2(r.Context(), articleID, page, pageSize)
	} else {
		p, err = h.svc.ListFlat(r.Context(), articleID, sort, page, pageSize)
	}
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, pageJSON[commentV2JSON]{mapAll(r, p.Comments, toV2), p.Count})
	return nil
}

// scrollQuery reads the articleId and pageSize of an infinite-scroll request.
func scrollQuery(r *http.Request) (articleID, pageSize int64, err error) {
	if articleID, err = httpio.QueryID(r, "articleId"); err != nil {
		return
	}
	pageSize, err = httpio.PageSizeQuery(r)
	return
}

func (h handlers) scroll(w http.ResponseWriter, r *http.Request) error {
	articleID, pageSize, err := scrollQuery(r)
	if err != nil {
		return err
	}
	lastParentID, err := httpio.OptionalQueryID(r, "lastParentCommentId")
	if err != nil {
		return err
	}
	lastID, err := httpio.OptionalQueryID(r, "lastCommentId")
	if err != nil {
		return err
	}
	if (lastParentID == 0) != (lastID == 0) {
		return fault.Invalidf("INCOMPLETE_CURSOR", "give both lastParentCommentId and lastCommentId, or neither")
	}
	cs, err := h.svc.Scroll(r.Context(), articleID, pageSize, lastParentID, lastID)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, mapAll(r, cs, toV1))
	return nil
}

// scrollV2 takes the cursor of its sort: lastPath in tree order (oldest), lastCommentId in the flat orders; the
// other one is 400 INVALID_CURSOR rather than ignored.
func (h handlers) scrollV2(w http.ResponseWriter, r *http.Request) error {
	articleID, pageSize, err := scrollQuery(r)
	if err != nil {
		return err
	}
	sort, err := parseSort(r.URL.Query().Get("sort"))
	if err != nil {
		return err
	}
	lastPath := r.URL.Query().Get("lastPath")
	if lastPath != "" && !validPath(lastPath) {
		return invalidPath("INVALID_LAST_PATH", "lastPath")
	}
	lastID, err := httpio.OptionalQueryID(r, "lastCommentId")
	if err != nil {
		return err
	}
	var cs []Comment
	switch {
	case sort == Oldest && lastID != 0:
		return fault.Invalidf("INVALID_CURSOR", "sort=oldest continues after lastPath, not lastCommentId")
	case sort == Oldest:
		cs, err = h.svc.ScrollV2(r.Context(), articleID, pageSize, lastPath)
	case lastPath != "":
		return fault.Invalidf("INVALID_CURSOR", "sort=%s continues after lastCommentId, not lastPath", sort)
	default:
		cs, err = h.svc.ScrollFlat(r.Context(), articleID, sort, pageSize, lastID)
	}
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, mapAll(r, cs, toV2))
	return nil
}

func (h handlers) articleCount(w http.ResponseWriter, r *http.Request) error {
	articleID, err := httpio.PathID(r, "articleId")
	if err != nil {
		return err
	}
	n, version, err := h.svc.VersionedArticleCount(r.Context(), articleID)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(version, 10)))
	httpio.Write(w, http.StatusOK, n)
	return nil
}
