package notification

import (
	"context"
	"embed"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/outbox"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the notification schema.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	if err := sqldb.Migrate(ctx, db, "notification", migrations); err != nil {
		return err
	}
	return outbox.Migrate(ctx, db) // the mails it asks for
}

// StreamPath is the path of the stream, which stays open: the server must not hold it to the request deadline.
const StreamPath = "/v1/notifications/stream"

// Routes returns the whole HTTP API of the notification service (SPEC §3.11). Every route but the mails' unsubscribe
// link (OpenRoutes) is for a signed-in user (401 without a token) and acts on that user's own inbox only: no route
// names another user, and a notification of someone else's is not found in the caller's.
func Routes(svc *Service, logger *slog.Logger) *http.ServeMux {
	h := handlers{svc: svc}
	mux := http.NewServeMux()
	handle := func(pattern string, fn httpio.HandlerFunc) { mux.Handle(pattern, httpio.Handle(logger, fn)) }
	handle("GET /v1/notifications", h.list)
	handle("GET /v1/notifications/unread-count", h.unreadCount)
	handle("POST /v1/notifications/{notificationId}/read", h.markRead)
	handle("POST /v1/notifications/read-all", h.markAllRead)
	handle("GET "+StreamPath, h.stream)
	handle("GET /v1/notification-preferences", h.preferences)
	handle("PUT /v1/notification-preferences", h.setPreferences)
	handle("PUT /v1/bookmarks/{targetType}/{targetId}", h.putBookmark)
	handle("DELETE /v1/bookmarks/{targetType}/{targetId}", h.deleteBookmark)
	handle("GET /v1/bookmarks/{targetType}/{targetId}", h.getBookmark)
	handle("GET /v1/bookmarks", h.listBookmarks)
	handle("PUT /v1/watches/{targetType}/{targetId}", h.putWatch)
	handle("DELETE /v1/watches/{targetType}/{targetId}", h.deleteWatch)
	handle("GET /v1/watches/{targetType}/{targetId}", h.getWatch)
	handle("GET /v1/watches", h.listWatches)
	handle("GET "+ExportPaths[0], h.exportBookmarks)
	handle("GET "+ExportPaths[1], h.exportNotifications)
	handle("GET "+ExportPaths[2], h.exportWatches)
	handle(unsubscribeRoute, h.unsubscribe)
	return mux
}

type handlers struct {
	svc *Service
}

// Wire forms.
type notificationJSON struct {
	NotificationID apijson.ID   `json:"notificationId"`
	Kind           Kind         `json:"kind"`
	ArticleID      apijson.ID   `json:"articleId,omitempty"`
	ArticleTitle   string       `json:"articleTitle,omitempty"`
	CommentID      apijson.ID   `json:"commentId,omitempty"`
	ActorIDs       []apijson.ID `json:"actorIds"`
	ActorCount     int64        `json:"actorCount"`
	Action         string       `json:"action,omitempty"`
	Reason         string       `json:"reason,omitempty"`
	Read           bool         `json:"read"`
	CreatedAt      apijson.Time `json:"createdAt"`
	UpdatedAt      apijson.Time `json:"updatedAt"`
}

func toJSON(n Notification) notificationJSON {
	actors := make([]apijson.ID, len(n.ActorIDs))
	for i, id := range n.ActorIDs {
		actors[i] = apijson.ID(id)
	}
	return notificationJSON{apijson.ID(n.ID), n.Kind, apijson.ID(n.ArticleID), n.ArticleTitle, apijson.ID(n.CommentID),
		actors, n.ActorCount, n.Action, n.Reason, n.Read, apijson.Time(n.CreatedAt), apijson.Time(n.UpdatedAt)}
}

type pageJSON struct {
	Notifications []notificationJSON `json:"notifications"`
	NextCursor    string             `json:"nextCursor"`
}

func (h handlers) list(w http.ResponseWriter, r *http.Request) error {
	pageSize, err := httpio.QueryInt(r, "pageSize", 20, 1, 100)
	if err != nil {
		return err
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	before, err := parseCursor(r.URL.Query().Get("cursor"), p.UserID)
	if err != nil {
		return err
	}
	// One more than asked says whether a next page exists.
	ns, err := h.svc.List(r.Context(), p.UserID, before, int(pageSize)+1)
	if err != nil {
		return err
	}
	out := pageJSON{Notifications: make([]notificationJSON, 0, len(ns))}
	if len(ns) > int(pageSize) {
		ns = ns[:pageSize]
		out.NextCursor = cursor(p.UserID, ns[len(ns)-1].Seq)
	}
	for _, n := range ns {
		out.Notifications = append(out.Notifications, toJSON(n))
	}
	httpio.Write(w, http.StatusOK, out)
	return nil
}

// A cursor names the sequence number a page ends at, in the inbox it was made for: one from another user's inbox,
// or from anywhere else, is refused rather than read as a place in this one.
func cursor(user, seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(user, 10) + ":" + strconv.FormatInt(seq, 10)))
}

func parseCursor(c string, user int64) (int64, error) {
	if c == "" {
		return 0, nil
	}
	invalid := fault.Invalidf("INVALID_CURSOR", "cursor must be a nextCursor of your own notifications")
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, invalid
	}
	owner, seq, ok := strings.Cut(string(raw), ":")
	if !ok || owner != strconv.FormatInt(user, 10) {
		return 0, invalid
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || n <= 0 {
		return 0, invalid
	}
	return n, nil
}

func (h handlers) unreadCount(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	n, err := h.svc.UnreadCount(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, map[string]int64{"count": n})
	return nil
}

func (h handlers) markRead(w http.ResponseWriter, r *http.Request) error {
	id, err := httpio.PathID(r, "notificationId")
	if err != nil {
		return err
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	if err := h.svc.MarkRead(r.Context(), p.UserID, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h handlers) markAllRead(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	if err := h.svc.MarkAllRead(r.Context(), p.UserID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h handlers) preferences(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	prefs, err := h.svc.Preferences(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, prefs)
	return nil
}

func (h handlers) setPreferences(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Reply        *bool `json:"reply"`
		CommentReply *bool `json:"commentReply"`
		Like         *bool `json:"like"`
		Moderation   *bool `json:"moderation"`
		// Newer than the others: a client that does not send them keeps them as they are.
		Mention   *bool   `json:"mention"`
		Watched   *bool   `json:"watched"`
		AutoWatch *bool   `json:"autoWatch"`
		Email     *string `json:"email"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	if err := httpio.Required(httpio.Has("reply", in.Reply != nil), httpio.Has("commentReply", in.CommentReply != nil),
		httpio.Has("like", in.Like != nil), httpio.Has("moderation", in.Moderation != nil)); err != nil {
		return err
	}
	if in.Email != nil && !validEmailMode(*in.Email) {
		return fault.Invalidf("INVALID_EMAIL_PREFERENCE", "email must be %q, %q or %q", EmailOff, EmailImmediate, EmailDaily)
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	prefs, err := h.svc.SetPreferences(r.Context(), p.UserID, func(prefs *Preferences) {
		prefs.Reply, prefs.CommentReply, prefs.Like, prefs.Moderation = *in.Reply, *in.CommentReply, *in.Like, *in.Moderation
		for to, from := range map[*bool]*bool{&prefs.Mention: in.Mention, &prefs.Watched: in.Watched, &prefs.AutoWatch: in.AutoWatch} {
			if from != nil {
				*to = *from
			}
		}
		if in.Email != nil {
			prefs.Email = *in.Email
		}
	})
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, prefs)
	return nil
}
