package like

import (
	"log/slog"
	"net/http"
	"strconv"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/idempotency"
)

// Routes returns the whole HTTP API of the like service (SPEC §3.3). Likes and unlikes on the plain path use the
// service's default strategy; a strategy's name as a last path segment picks that one.
//
// Version. GET /v1/article-likes/articles/{articleId}/count answers with an ETag holding the version of the count it
// returns, as a quoted decimal (ETag: "7"): article_like_count.version, which is the articleLikeCountVersion its
// ARTICLE_LIKED and ARTICLE_UNLIKED events carry, whatever the strategy ("0" for an article never liked). The count
// and its version are read together, so a consumer that rebuilds its model from this answer can keep ignoring any
// event whose version is not newer (see internal/event).
//
// Who may write (SPEC §2.1). A like or unlike, on any path, is the acting user's own: the {userId} of its path must
// be the principal that httpio.Guard put in the request's context from its access token (403 otherwise, moderators
// included; 401 without a principal). A handler checks its path (400), then that (401, 403), then writes, so the
// article (404) and the like (404, 409) are looked at only for the user's own. Reads are public.
//
// Retries. A like (POST, on any path) takes an Idempotency-Key, checked with the path (400
// INVALID_IDEMPOTENCY_KEY): a retry gets the first answer, never ALREADY_LIKED, and the same key on another path is
// 409 IDEMPOTENCY_KEY_REUSED (internal/idempotency, docs/idempotency.md).
func Routes(svc *Service, logger *slog.Logger) *http.ServeMux {
	h := handlers{svc: svc}
	mux := http.NewServeMux()
	handle := func(pattern string, fn httpio.HandlerFunc) { mux.Handle(pattern, httpio.Handle(logger, fn)) }
	const likePath = "/v1/article-likes/articles/{articleId}/users/{userId}"
	handle("GET "+likePath, h.get)
	handle("POST "+likePath, h.like(""))
	handle("DELETE "+likePath, h.unlike(""))
	for _, st := range Strategies {
		handle("POST "+likePath+"/"+string(st), h.like(st))
		handle("DELETE "+likePath+"/"+string(st), h.unlike(st))
	}
	handle("GET /v1/article-likes/articles/{articleId}/count", h.count)
	return mux
}

// likeJSON is the wire form of a Like.
type likeJSON struct {
	ArticleLikeID apijson.ID   `json:"articleLikeId"`
	ArticleID     apijson.ID   `json:"articleId"`
	UserID        apijson.ID   `json:"userId"`
	CreatedAt     apijson.Time `json:"createdAt"`
}

func toJSON(l Like) likeJSON {
	return likeJSON{apijson.ID(l.ID), apijson.ID(l.ArticleID), apijson.ID(l.UserID), apijson.Time(l.CreatedAt)}
}

type handlers struct {
	svc *Service
}

// pathIDs parses the article and user ids of a like's path.
func pathIDs(r *http.Request) (articleID, userID int64, err error) {
	if articleID, err = httpio.PathID(r, "articleId"); err != nil {
		return 0, 0, err
	}
	userID, err = httpio.PathID(r, "userId")
	return articleID, userID, err
}

// checkIDs refuses, for a write, the ids no article or user has, before they cost a lookup at the article service.
func checkIDs(articleID, userID int64) error {
	if articleID == 0 {
		return fault.Invalidf("INVALID_ARTICLE_ID", "articleId must be positive")
	}
	if userID == 0 {
		return fault.Invalidf("INVALID_USER_ID", "userId must be positive")
	}
	return nil
}

func (h handlers) like(strategy Strategy) httpio.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		articleID, userID, err := pathIDs(r)
		if err != nil {
			return err
		}
		if err := checkIDs(articleID, userID); err != nil {
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
			l, err := h.svc.like(r.Context(), strategy, articleID, userID, k)
			return toJSON(l), err
		})
	}
}

func (h handlers) unlike(strategy Strategy) httpio.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		articleID, userID, err := pathIDs(r)
		if err != nil {
			return err
		}
		if err := checkIDs(articleID, userID); err != nil {
			return err
		}
		if err := auth.ActAs(r.Context(), userID); err != nil {
			return err
		}
		if err := h.svc.Unlike(r.Context(), strategy, articleID, userID); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

func (h handlers) get(w http.ResponseWriter, r *http.Request) error {
	articleID, userID, err := pathIDs(r)
	if err != nil {
		return err
	}
	l, err := h.svc.Get(r.Context(), articleID, userID)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toJSON(l))
	return nil
}

func (h handlers) count(w http.ResponseWriter, r *http.Request) error {
	articleID, err := httpio.PathID(r, "articleId")
	if err != nil {
		return err
	}
	n, version, err := h.svc.VersionedCount(r.Context(), articleID)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(version, 10)))
	httpio.Write(w, http.StatusOK, n)
	return nil
}
