package like

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/idempotency"
)

// Routes returns the whole HTTP API of the like service (SPEC §3.3, §3.13): likes of articles under
// /v1/article-likes/articles/{articleId}, likes of comments under /v1/comment-likes/comments/{commentId}, the same
// paths, rules and answers for both. Likes and unlikes on the plain path use the service's default strategy; a
// strategy's name as a last path segment picks that one.
//
// Version. GET /v1/article-likes/articles/{articleId}/count answers with an ETag holding the version of the count it
// returns, as a quoted decimal (ETag: "7"): article_like_count.version, which is the articleLikeCountVersion its
// ARTICLE_LIKED and ARTICLE_UNLIKED events carry, whatever the strategy ("0" for an article never liked). The count
// and its version are read together (the same for a comment's count: commentLikeCountVersion), so a consumer that rebuilds its model from this answer can keep ignoring any
// event whose version is not newer (see internal/event).
//
// Who may write (SPEC §2.1). A like or unlike, on any path, is the acting user's own: the {userId} of its path must
// be the principal that httpio.Guard put in the request's context from its access token (403 otherwise, moderators
// included; 401 without a principal). A handler checks its path (400), then that (401, 403), then writes, so the
// article or comment (404) and the like (404, 409) are looked at only for the user's own. Reads are public. Liking
// one's own article or comment is allowed.
//
// Retries. A like (POST, on any path) takes an Idempotency-Key, checked with the path (400
// INVALID_IDEMPOTENCY_KEY): a retry gets the first answer, never ALREADY_LIKED, and the same key on another path is
// 409 IDEMPOTENCY_KEY_REUSED (internal/idempotency, docs/idempotency.md).
func Routes(svc *Service, logger *slog.Logger) *http.ServeMux {
	mux := http.NewServeMux()
	handle := func(pattern string, fn httpio.HandlerFunc) { mux.Handle(pattern, httpio.Handle(logger, fn)) }
	for _, h := range []handlers{{svc, articleLikes}, {svc, commentLikes}} {
		likePath := h.kind.prefix + "/users/{userId}"
		handle("GET "+likePath, h.get)
		handle("POST "+likePath, h.like(""))
		handle("DELETE "+likePath, h.unlike(""))
		for _, st := range Strategies {
			handle("POST "+likePath+"/"+string(st), h.like(st))
			handle("DELETE "+likePath+"/"+string(st), h.unlike(st))
		}
		handle("GET "+h.kind.prefix+"/count", h.count)
	}
	handle("GET "+ExportPath, handlers{svc: svc}.exportLikes)
	return mux
}

// likeJSON is the wire form of a like of an article.
type likeJSON struct {
	ArticleLikeID apijson.ID   `json:"articleLikeId"`
	ArticleID     apijson.ID   `json:"articleId"`
	UserID        apijson.ID   `json:"userId"`
	CreatedAt     apijson.Time `json:"createdAt"`
}

// commentLikeJSON is the wire form of a like of a comment.
type commentLikeJSON struct {
	CommentLikeID apijson.ID   `json:"commentLikeId"`
	CommentID     apijson.ID   `json:"commentId"`
	ArticleID     apijson.ID   `json:"articleId"`
	UserID        apijson.ID   `json:"userId"`
	CreatedAt     apijson.Time `json:"createdAt"`
}

// toJSON is the wire form of l: a likeJSON, or a commentLikeJSON for a like of a comment.
func toJSON(l Like) any {
	if l.CommentID != 0 {
		return commentLikeJSON{apijson.ID(l.ID), apijson.ID(l.CommentID), apijson.ID(l.ArticleID), apijson.ID(l.UserID),
			apijson.Time(l.CreatedAt)}
	}
	return likeJSON{apijson.ID(l.ID), apijson.ID(l.ArticleID), apijson.ID(l.UserID), apijson.Time(l.CreatedAt)}
}

// kind is what the routes of one kind of likes differ in: their paths, and how an id of their path becomes a target.
type kind struct {
	prefix  string // the paths' common start, up to the target's id
	param   string // the path parameter of the target's id
	invalid string // the code of a target id that cannot be one
	target  func(s *Service, ctx context.Context, id int64) (target, error)
}

var (
	articleLikes = kind{prefix: "/v1/article-likes/articles/{articleId}", param: "articleId", invalid: "INVALID_ARTICLE_ID",
		target: func(_ *Service, _ context.Context, id int64) (target, error) { return target{article: id}, nil }}
	commentLikes = kind{prefix: "/v1/comment-likes/comments/{commentId}", param: "commentId", invalid: "INVALID_COMMENT_ID",
		target: (*Service).commentTarget}
)

type handlers struct {
	svc  *Service
	kind kind
}

// pathIDs parses the target and user ids of a like's path.
func (h handlers) pathIDs(r *http.Request) (id, userID int64, err error) {
	if id, err = httpio.PathID(r, h.kind.param); err != nil {
		return 0, 0, err
	}
	userID, err = httpio.PathID(r, "userId")
	return id, userID, err
}

// writeIDs parses, for a write, the ids of its path and refuses those no target or user has, before they cost a
// lookup at the article or comment service.
func (h handlers) writeIDs(r *http.Request) (id, userID int64, err error) {
	if id, userID, err = h.pathIDs(r); err != nil {
		return 0, 0, err
	}
	if id == 0 {
		return 0, 0, fault.Invalidf(h.kind.invalid, "%s must be positive", h.kind.param)
	}
	if userID == 0 {
		return 0, 0, fault.Invalidf("INVALID_USER_ID", "userId must be positive")
	}
	return id, userID, nil
}

func (h handlers) like(strategy Strategy) httpio.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, userID, err := h.writeIDs(r)
		if err != nil {
			return err
		}
		key, err := idempotency.FromRequest(r, nil)
		if err != nil {
			return err
		}
		if err := auth.ActAs(r.Context(), userID); err != nil {
			return err
		}
		return h.svc.keys.Serve(w, r, userID, key, http.StatusCreated, func(k *idempotency.Write) (any, error) {
			t, err := h.kind.target(h.svc, r.Context(), id)
			if err != nil {
				return nil, err
			}
			l, err := h.svc.like(r.Context(), strategy, t, userID, k)
			return toJSON(l), err
		})
	}
}

func (h handlers) unlike(strategy Strategy) httpio.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, userID, err := h.writeIDs(r)
		if err != nil {
			return err
		}
		if err := auth.ActAs(r.Context(), userID); err != nil {
			return err
		}
		t, err := h.kind.target(h.svc, r.Context(), id)
		if err != nil {
			return err
		}
		if err := h.svc.unlike(r.Context(), strategy, t, userID); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

func (h handlers) get(w http.ResponseWriter, r *http.Request) error {
	id, userID, err := h.pathIDs(r)
	if err != nil {
		return err
	}
	t, err := h.kind.target(h.svc, r.Context(), id)
	if err != nil {
		return err
	}
	l, err := h.svc.store.get(r.Context(), t, userID)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toJSON(l))
	return nil
}

func (h handlers) count(w http.ResponseWriter, r *http.Request) error {
	id, err := httpio.PathID(r, h.kind.param)
	if err != nil {
		return err
	}
	t, err := h.kind.target(h.svc, r.Context(), id)
	if err != nil {
		return err
	}
	n, version, err := h.svc.store.count(r.Context(), t)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(version, 10)))
	httpio.Write(w, http.StatusOK, n)
	return nil
}
