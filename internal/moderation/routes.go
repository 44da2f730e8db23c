package moderation

import (
	"context"
	"embed"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/idempotency"
	"board/internal/outbox"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the moderation schema, its outbox and its Idempotency-Keys.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	if err := idempotency.Migrate(ctx, db); err != nil {
		return err
	}
	return sqldb.Migrate(ctx, db, "moderation", migrations)
}

// Routes returns the whole HTTP API of the moderation service (SPEC §3.9).
//
// Who may call what. Every write acts for the principal that httpio.Guard put in the request's context, and fails
// closed (401) without one. Any signed-in user reports; every other write, and the queue (GET /v1/reports), is for
// moderators only (403 FORBIDDEN otherwise). The queue is a read that needs a token: the Guard verifies a token that
// a read carries, and the handler asks for its principal like a write's. A user's ban and the moderation log are
// public; the log never names reporters. A handler checks its input (400) first, then the principal (401, 403).
//
// Retries. POST /v1/reports takes an Idempotency-Key, checked with the input (400 INVALID_IDEMPOTENCY_KEY): a
// retry gets the first answer and files nothing, the same key with another body is 409 IDEMPOTENCY_KEY_REUSED
// (internal/idempotency, docs/idempotency.md).
func Routes(svc *Service, logger *slog.Logger) *http.ServeMux {
	h := handlers{svc: svc}
	mux := http.NewServeMux()
	handle := func(pattern string, fn httpio.HandlerFunc) { mux.Handle(pattern, httpio.Handle(logger, fn)) }
	handle("POST /v1/reports", h.report)
	handle("GET /v1/reports", h.queue)
	handle("POST /v1/reports/resolutions", h.resolve)
	handle("PUT /v1/articles/{articleId}/lock", h.articleFlag((*Service).Lock, true))
	handle("DELETE /v1/articles/{articleId}/lock", h.articleFlag((*Service).Lock, false))
	handle("PUT /v1/articles/{articleId}/pin", h.articleFlag((*Service).Pin, true))
	handle("DELETE /v1/articles/{articleId}/pin", h.articleFlag((*Service).Pin, false))
	handle("PUT /v1/bans/{userId}", h.ban)
	handle("DELETE /v1/bans/{userId}", h.unban)
	handle("GET /v1/bans/{userId}", h.getBan)
	handle("GET /v1/modlog", h.log)
	return mux
}

type handlers struct {
	svc *Service
}

// moderator returns the acting moderator: 401 without a principal, 403 for anyone but a moderator.
func moderator(ctx context.Context) (int64, error) {
	p, err := auth.Acting(ctx)
	if err != nil {
		return 0, err
	}
	if p.Role != auth.RoleModerator {
		return 0, fault.Forbiddenf("only moderators may do this")
	}
	return p.UserID, nil
}

// Wire forms.
type reportJSON struct {
	ReportID   apijson.ID   `json:"reportId"`
	TargetType TargetType   `json:"targetType"`
	TargetID   apijson.ID   `json:"targetId"`
	ArticleID  apijson.ID   `json:"articleId"`
	ReporterID apijson.ID   `json:"reporterId"`
	Reason     Reason       `json:"reason"`
	Text       string       `json:"text"`
	CreatedAt  apijson.Time `json:"createdAt"`
}

type queuedJSON struct {
	TargetType      TargetType       `json:"targetType"`
	TargetID        apijson.ID       `json:"targetId"`
	BoardID         apijson.ID       `json:"boardId"`
	ArticleID       apijson.ID       `json:"articleId"`
	Excerpt         string           `json:"excerpt"`
	WriterID        apijson.ID       `json:"writerId"`
	ReportCount     int64            `json:"reportCount"`
	Reasons         map[Reason]int64 `json:"reasons"`
	FirstReportedAt apijson.Time     `json:"firstReportedAt"`
	Hidden          event.Hidden     `json:"hidden"`
}

type articleStateJSON struct {
	ArticleID         apijson.ID   `json:"articleId"`
	BoardID           apijson.ID   `json:"boardId"`
	WriterID          apijson.ID   `json:"writerId"`
	Hidden            event.Hidden `json:"hidden"`
	RemovedReason     string       `json:"removedReason"`
	Locked            bool         `json:"locked"`
	Pinned            bool         `json:"pinned"`
	ModerationVersion int64        `json:"moderationVersion"`
}

type banJSON struct {
	UserID      apijson.ID    `json:"userId"`
	Reason      string        `json:"reason"`
	Until       *apijson.Time `json:"until"`
	ModeratorID apijson.ID    `json:"moderatorId"`
	CreatedAt   apijson.Time  `json:"createdAt"`
}

type logJSON struct {
	Action      string       `json:"action"`
	TargetType  TargetType   `json:"targetType"`
	TargetID    apijson.ID   `json:"targetId"`
	ArticleID   apijson.ID   `json:"articleId,omitempty"` // the target's article, to link to it; none for a user
	ModeratorID apijson.ID   `json:"moderatorId"`
	Reason      string       `json:"reason"`
	CreatedAt   apijson.Time `json:"createdAt"`
	// Reports are the reports a resolution closed, shown to moderators only.
	Reports []loggedReportJSON `json:"reports,omitempty"`
}

type loggedReportJSON struct {
	ReporterID apijson.ID `json:"reporterId"`
	Reason     Reason     `json:"reason"`
	Text       string     `json:"text"`
}

// target reads and checks the targetType and targetId of a body.
func target(typ *string, id *apijson.ID) (TargetType, int64, error) {
	if err := httpio.Required(httpio.Has("targetType", typ != nil), httpio.Has("targetId", id != nil)); err != nil {
		return "", 0, err
	}
	t, err := ParseTargetType(*typ)
	if err != nil {
		return "", 0, err
	}
	if *id <= 0 {
		return "", 0, fault.Invalidf("INVALID_TARGET_ID", "targetId must be positive")
	}
	return t, int64(*id), nil
}

func (h handlers) report(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		TargetType *string     `json:"targetType"`
		TargetID   *apijson.ID `json:"targetId"`
		Reason     *string     `json:"reason"`
		Text       *string     `json:"text"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	typ, id, err := target(in.TargetType, in.TargetID)
	if err != nil {
		return err
	}
	if err := httpio.Required(httpio.Has("reason", in.Reason != nil)); err != nil {
		return err
	}
	reason, err := ParseReason(*in.Reason)
	if err != nil {
		return err
	}
	var text string
	if in.Text != nil {
		text = strings.TrimSpace(*in.Text)
	}
	if err := CheckText("text", text); err != nil {
		return err
	}
	if reason == Other && text == "" {
		return fault.Invalidf("MISSING_TEXT", "a report for reason other needs a text saying what is wrong")
	}
	key, err := idempotency.FromRequest(r, in)
	if err != nil {
		return err
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	return h.svc.keys.Serve(w, r, p.UserID, key, http.StatusCreated, func(k *idempotency.Write) (any, error) {
		rep, err := h.svc.report(r.Context(), p.UserID, typ, id, reason, text, k)
		return toReportJSON(rep), err
	})
}

func toReportJSON(rep Report) reportJSON {
	return reportJSON{apijson.ID(rep.ID), rep.TargetType, apijson.ID(rep.TargetID), apijson.ID(rep.ArticleID),
		apijson.ID(rep.ReporterID), rep.Reason, rep.Text, apijson.Time(rep.CreatedAt)}
}

func (h handlers) queue(w http.ResponseWriter, r *http.Request) error {
	page, pageSize, err := httpio.PageQuery(r)
	if err != nil {
		return err
	}
	if _, err := moderator(r.Context()); err != nil {
		return err
	}
	qs, count, err := h.svc.Queue(r.Context(), page, pageSize)
	if err != nil {
		return err
	}
	out := struct {
		Targets []queuedJSON `json:"targets"`
		Count   int64        `json:"count"`
	}{Targets: make([]queuedJSON, len(qs)), Count: count}
	for i, q := range qs {
		out.Targets[i] = queuedJSON{q.TargetType, apijson.ID(q.TargetID), apijson.ID(q.BoardID), apijson.ID(q.ArticleID), q.Excerpt,
			apijson.ID(q.WriterID), q.ReportCount, q.Reasons, apijson.Time(q.FirstReportedAt), q.Hidden}
	}
	httpio.Write(w, http.StatusOK, out)
	return nil
}

// moderatorReason reads a moderator's reason: trimmed, at most MaxText characters, and required when need is.
func moderatorReason(reason *string, need bool) (string, error) {
	var s string
	if reason != nil {
		s = strings.TrimSpace(*reason)
	}
	if s == "" && need {
		return "", fault.Invalidf("MISSING_REASON", "a reason is required; it is shown to the user")
	}
	return s, CheckText("reason", s)
}

func (h handlers) resolve(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		TargetType *string     `json:"targetType"`
		TargetID   *apijson.ID `json:"targetId"`
		Action     *string     `json:"action"`
		Reason     *string     `json:"reason"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	typ, id, err := target(in.TargetType, in.TargetID)
	if err != nil {
		return err
	}
	if err := httpio.Required(httpio.Has("action", in.Action != nil)); err != nil {
		return err
	}
	if *in.Action != Dismiss && *in.Action != Remove {
		return fault.Invalidf("INVALID_ACTION", "action must be dismiss or remove")
	}
	// A removal's reason is shown in place of the content, so it is required; a dismissal's is for the log.
	reason, err := moderatorReason(in.Reason, *in.Action == Remove)
	if err != nil {
		return err
	}
	moderatorID, err := moderator(r.Context())
	if err != nil {
		return err
	}
	n, err := h.svc.Resolve(r.Context(), moderatorID, typ, id, *in.Action, reason)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, struct {
		Resolved int64 `json:"resolved"`
	}{n})
	return nil
}

// articleFlag is the handler of PUT (on) or DELETE of an article's lock or pin, made with set.
func (h handlers) articleFlag(set func(*Service, context.Context, int64, int64, bool) (ArticleState, error), on bool) httpio.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		articleID, err := positivePathID(r, "articleId")
		if err != nil {
			return err
		}
		moderatorID, err := moderator(r.Context())
		if err != nil {
			return err
		}
		st, err := set(h.svc, r.Context(), moderatorID, articleID, on)
		if err != nil {
			return err
		}
		if !on {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		httpio.Write(w, http.StatusOK, articleStateJSON{apijson.ID(st.ArticleID), apijson.ID(st.BoardID), apijson.ID(st.WriterID), st.Hidden,
			st.RemovedReason, st.Locked, st.Pinned, st.ModerationVersion})
		return nil
	}
}

// positivePathID parses an id path segment that must name something that can exist.
func positivePathID(r *http.Request, name string) (int64, error) {
	id, err := httpio.PathID(r, name)
	if err == nil && id <= 0 {
		err = fault.Invalidf("INVALID_ID", "%s must be positive", name)
	}
	return id, err
}

func (h handlers) ban(w http.ResponseWriter, r *http.Request) error {
	userID, err := positivePathID(r, "userId")
	if err != nil {
		return err
	}
	var in struct {
		Reason *string `json:"reason"`
		Until  *string `json:"until"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	reason, err := moderatorReason(in.Reason, true)
	if err != nil {
		return err
	}
	var until *time.Time
	if in.Until != nil {
		u, err := time.Parse(time.RFC3339Nano, *in.Until)
		if err != nil {
			return fault.Invalidf("BAD_UNTIL", "until must be an RFC 3339 time, e.g. 2026-01-02T03:04:05Z")
		}
		until = &u
	}
	moderatorID, err := moderator(r.Context())
	if err != nil {
		return err
	}
	b, err := h.svc.Ban(r.Context(), moderatorID, userID, reason, until)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toBanJSON(b))
	return nil
}

func toBanJSON(b Ban) banJSON {
	out := banJSON{UserID: apijson.ID(b.UserID), Reason: b.Reason, ModeratorID: apijson.ID(b.ModeratorID), CreatedAt: apijson.Time(b.CreatedAt)}
	if b.Until != nil {
		u := apijson.Time(*b.Until)
		out.Until = &u
	}
	return out
}

func (h handlers) unban(w http.ResponseWriter, r *http.Request) error {
	userID, err := positivePathID(r, "userId")
	if err != nil {
		return err
	}
	moderatorID, err := moderator(r.Context())
	if err != nil {
		return err
	}
	if err := h.svc.Unban(r.Context(), moderatorID, userID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h handlers) getBan(w http.ResponseWriter, r *http.Request) error {
	userID, err := httpio.PathID(r, "userId")
	if err != nil {
		return err
	}
	b, err := h.svc.GetBan(r.Context(), userID)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toBanJSON(b))
	return nil
}

func (h handlers) log(w http.ResponseWriter, r *http.Request) error {
	page, pageSize, err := httpio.PageQuery(r)
	if err != nil {
		return err
	}
	// Public, and complete for moderators: they also see who reported what each resolution closed.
	p, signedIn := auth.FromContext(r.Context())
	es, err := h.svc.Log(r.Context(), page, pageSize, signedIn && p.Role == auth.RoleModerator)
	if err != nil {
		return err
	}
	out := make([]logJSON, len(es))
	for i, e := range es {
		out[i] = logJSON{Action: e.Action, TargetType: e.TargetType, TargetID: apijson.ID(e.TargetID), ArticleID: apijson.ID(e.ArticleID),
			ModeratorID: apijson.ID(e.ModeratorID), Reason: e.Reason, CreatedAt: apijson.Time(e.CreatedAt)}
		for _, r := range e.Reports {
			out[i].Reports = append(out[i].Reports, loggedReportJSON{apijson.ID(r.ReporterID), r.Reason, r.Text})
		}
	}
	httpio.Write(w, http.StatusOK, out)
	return nil
}
