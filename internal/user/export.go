package user

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/fault"
	"board/internal/httpio"
)

// ExportPath is where a user downloads the archive of their data (SPEC §3.14).
const ExportPath = "/v1/users/me/export"

// ExportOrigins returns the base URL of the named service that owns parts of an export: "article", "comment",
// "like" or "notification". It is asked at each export: in one process, those services listen only after the user
// service is made.
type ExportOrigins func(service string) string

// Timeouts of an export, served as a stream (without the request deadline): each part's call to its service, as long
// as the service gives itself for its part, and the whole.
const (
	partTimeout   = httpio.ExportTimeout
	exportTimeout = 10 * time.Minute
)

// exportParts are the parts of the archive that other services stream, in its order: each its key and its service,
// which serves it at /v1/exports/{key}.
var exportParts = []struct{ key, service string }{
	{"articles", "article"}, {"comments", "comment"}, {"likes", "like"},
	{"bookmarks", "notification"}, {"notifications", "notification"}, {"watches", "notification"},
}

type profileJSON struct {
	UserID    apijson.ID   `json:"userId"`
	Username  string       `json:"username"`
	Role      string       `json:"role"`
	CreatedAt apijson.Time `json:"createdAt"`
	Email     *string      `json:"email"`
}

// export answers GET /v1/users/me/export: one JSON object, {"exportedAt", "profile", the parts in the order of
// ExportOrigins.parts, "blocks"}, written as it comes. The profile and the blocks are this service's; each other part
// is the owning service's export, called with the caller's own Authorization header, and its bytes are copied to the
// client as they arrive, never held whole. A failure before the first byte is an ordinary error answer (503 for a
// part's service); after it, the response is cut short (panic(http.ErrAbortHandler)): the client sees a truncated
// body, never an archive that silently lacks a part.
func (h handlers) export(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	if h.svc.cfg.Exports == nil {
		return fault.Unavailablef(errors.New("no export origins configured"), "EXPORT_UNAVAILABLE", "exports are not set up here")
	}
	ctx, cancel := context.WithTimeout(r.Context(), exportTimeout)
	defer cancel()
	// Past the server's write timeout, which is sized for ordinary answers: the archive has until its own deadline.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(exportTimeout))
	u, err := h.svc.Get(ctx, p.UserID)
	if err != nil {
		return err
	}
	var email *string
	if err := h.svc.db.QueryRowContext(ctx, "SELECT email FROM users WHERE user_id = ?", p.UserID).Scan(&email); err != nil {
		return err
	}
	blocks, err := h.svc.Blocks(ctx, p.UserID)
	if err != nil {
		return err
	}
	head, err := json.Marshal(struct {
		ExportedAt apijson.Time `json:"exportedAt"`
		Profile    profileJSON  `json:"profile"`
	}{apijson.Time(apijson.Millis(h.svc.cfg.Now())), profileJSON{apijson.ID(u.ID), u.Username, string(u.Role), apijson.Time(u.CreatedAt), email}})
	if err != nil {
		return err
	}
	tail := struct {
		Blocks []blockJSON `json:"blocks"`
	}{make([]blockJSON, len(blocks))}
	for i, b := range blocks {
		tail.Blocks[i] = toBlockJSON(b)
	}
	end, err := json.Marshal(tail)
	if err != nil {
		return err
	}
	out := &flusher{w: w, rc: http.NewResponseController(w)}
	for _, part := range exportParts {
		url := h.svc.cfg.Exports(part.service) + "/v1/exports/" + part.key
		if err := h.copyPart(ctx, out, head, part.key, url, r.Header.Get("Authorization")); err != nil {
			if !out.started {
				return err
			}
			h.svc.cfg.Logger.WarnContext(ctx, "export cut short", "user", p.UserID, "part", part.key, "err", err)
			panic(http.ErrAbortHandler)
		}
	}
	// {"blocks":[...]} goes on the archive as its last key.
	if _, err := out.Write(append([]byte{','}, end[1:]...)); err != nil {
		panic(http.ErrAbortHandler)
	}
	return nil
}

// copyPart streams one part into the archive: ,"key": and the service's answer. The archive's head goes out with the
// first part that answers, so that a service down from the start is a plain 503.
func (h handlers) copyPart(ctx context.Context, out *flusher, head []byte, key, url, authorization string) error {
	ctx, cancel := context.WithTimeout(ctx, partTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", authorization)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fault.Unavailablef(err, "EXPORT_UNAVAILABLE", "the %s of the export cannot be read now", key)
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || mt != "application/json" {
		return fault.Unavailablef(fmt.Errorf("status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type")),
			"EXPORT_UNAVAILABLE", "the %s of the export cannot be read now", key)
	}
	if !out.started {
		out.w.Header().Set("Content-Type", "application/json")
		out.w.Header().Set("Content-Disposition", `attachment; filename="board-export.json"`)
		out.w.WriteHeader(http.StatusOK)
		out.started = true
		if _, err := out.Write(head[:len(head)-1]); err != nil { // the head without its closing brace
			return err
		}
	}
	if _, err := fmt.Fprintf(out, ",%q:", key); err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		return fmt.Errorf("the %s of the export: %w", key, err)
	}
	return nil
}

// flusher sends each write on at once: a part's bytes reach the client as they arrive from its service.
type flusher struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool // the status and some of the archive are sent
}

func (f *flusher) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}
