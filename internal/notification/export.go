package notification

import (
	"context"
	"net/http"

	"board/internal/auth"
	"board/internal/httpio"
)

// ExportPaths are the routes of a user's exports, served as streams (their own deadline).
var ExportPaths = []string{"/v1/exports/bookmarks", "/v1/exports/notifications", "/v1/exports/watches"}

// exportPage is how many rows one read of an export takes: an export holds one page in memory, whatever its size.
const exportPage = 1000

// Exports (accounts contract): GET /v1/exports/{bookmarks,notifications,watches} answer the caller's rows, newest
// first, as one JSON array streamed a keyset page at a time. Every bookmark is there, its target gone or not.

func (h handlers) exportBookmarks(w http.ResponseWriter, r *http.Request) error {
	return export(w, r, func(ctx context.Context, user, before int64) ([]bookmarkJSON, int64, error) {
		if before <= 0 {
			before = 1<<63 - 1
		}
		bs, err := h.svc.bookmarks(ctx, "WHERE user_id = ? AND bookmark_id < ? ORDER BY bookmark_id DESC LIMIT ?", user, before, exportPage)
		out := make([]bookmarkJSON, len(bs))
		for i, b := range bs {
			out[i] = toBookmarkJSON(b)
		}
		if len(bs) > 0 {
			before = bs[len(bs)-1].ID
		}
		return out, before, err
	})
}

func (h handlers) exportNotifications(w http.ResponseWriter, r *http.Request) error {
	// By notification id, which never changes, not by seq, which a like joining its group raises: paged by seq, a
	// group raised above the cursor mid-export would be left out.
	return export(w, r, func(ctx context.Context, user, before int64) ([]notificationJSON, int64, error) {
		if before <= 0 {
			before = 1<<63 - 1
		}
		ns, err := h.svc.query(ctx, "SELECT "+columns+" FROM notification WHERE user_id = ? AND notification_id < ? ORDER BY notification_id DESC LIMIT ?",
			user, before, exportPage)
		out := make([]notificationJSON, len(ns))
		for i, n := range ns {
			out[i] = toJSON(n)
		}
		if len(ns) > 0 {
			before = ns[len(ns)-1].ID
		}
		return out, before, err
	})
}

func (h handlers) exportWatches(w http.ResponseWriter, r *http.Request) error {
	return export(w, r, func(ctx context.Context, user, before int64) ([]watchJSON, int64, error) {
		ws, err := h.svc.Watches(ctx, user, before, exportPage)
		out := make([]watchJSON, len(ws))
		for i, watch := range ws {
			out[i] = watchToJSON(watch)
		}
		if len(ws) > 0 {
			before = ws[len(ws)-1].id
		}
		return out, before, err
	})
}

// export streams the caller's rows as a JSON array, page by page: page returns the rows after cursor before (0: the
// newest) and the cursor of the next page. A read that fails once the array has begun cuts the answer short
// (httpio.ArrayWriter.Abort).
func export[T any](w http.ResponseWriter, r *http.Request, page func(ctx context.Context, user, before int64) ([]T, int64, error)) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	out, ctx, cancel := httpio.NewArrayWriter(w, r, httpio.ExportTimeout)
	defer cancel()
	var before int64
	for {
		rows, next, err := page(ctx, p.UserID, before)
		if err != nil {
			return out.Abort(err)
		}
		for _, row := range rows {
			if err := out.Add(row); err != nil {
				return out.Abort(err)
			}
		}
		if len(rows) < exportPage {
			return out.End()
		}
		if err := out.Flush(); err != nil {
			return out.Abort(err)
		}
		before = next
	}
}
