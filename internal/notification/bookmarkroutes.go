package notification

import (
	"net/http"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/fault"
	"board/internal/httpio"
)

type bookmarkJSON struct {
	TargetType BookmarkTarget `json:"targetType"`
	TargetID   apijson.ID     `json:"targetId"`
	ArticleID  apijson.ID     `json:"articleId"`
	CreatedAt  apijson.Time   `json:"createdAt"`
}

func toBookmarkJSON(b Bookmark) bookmarkJSON {
	return bookmarkJSON{b.TargetType, apijson.ID(b.TargetID), apijson.ID(b.ArticleID), apijson.Time(b.CreatedAt)}
}

// bookmarkTarget reads the path's {targetType}/{targetId} and the acting user.
func bookmarkTarget(r *http.Request) (userID int64, typ BookmarkTarget, id int64, err error) {
	if typ, err = parseBookmarkTarget(r.PathValue("targetType")); err != nil {
		return 0, "", 0, err
	}
	if id, err = httpio.PathID(r, "targetId"); err != nil {
		return 0, "", 0, err
	}
	if id <= 0 {
		return 0, "", 0, fault.Invalidf("INVALID_TARGET_ID", "targetId must be positive")
	}
	p, err := auth.Acting(r.Context())
	return p.UserID, typ, id, err
}

func (h handlers) putBookmark(w http.ResponseWriter, r *http.Request) error {
	user, typ, id, err := bookmarkTarget(r)
	if err != nil {
		return err
	}
	b, err := h.svc.AddBookmark(r.Context(), user, typ, id)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toBookmarkJSON(b))
	return nil
}

func (h handlers) deleteBookmark(w http.ResponseWriter, r *http.Request) error {
	user, typ, id, err := bookmarkTarget(r)
	if err != nil {
		return err
	}
	if err := h.svc.RemoveBookmark(r.Context(), user, typ, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h handlers) getBookmark(w http.ResponseWriter, r *http.Request) error {
	user, typ, id, err := bookmarkTarget(r)
	if err != nil {
		return err
	}
	b, err := h.svc.GetBookmark(r.Context(), user, typ, id)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toBookmarkJSON(b))
	return nil
}

func (h handlers) listBookmarks(w http.ResponseWriter, r *http.Request) error {
	pageSize, err := httpio.QueryInt(r, "pageSize", 20, 1, 100)
	if err != nil {
		return err
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	// A cursor is made as the inbox's are (see cursor), with a bookmark's id for the sequence number.
	before, err := parseCursor(r.URL.Query().Get("cursor"), p.UserID)
	if err != nil {
		return fault.Invalidf("INVALID_CURSOR", "cursor must be a nextCursor of your own bookmarks")
	}
	// One more than asked says whether a next page exists.
	bs, scannedTo, err := h.svc.Bookmarks(r.Context(), p.UserID, before, int(pageSize)+1)
	if err != nil {
		return err
	}
	type listed struct {
		bookmarkJSON
		Title   string `json:"title"`
		Excerpt string `json:"excerpt"`
	}
	out := struct {
		Bookmarks  []listed `json:"bookmarks"`
		NextCursor string   `json:"nextCursor"`
	}{Bookmarks: make([]listed, 0, len(bs))}
	switch {
	case len(bs) > int(pageSize):
		bs = bs[:pageSize]
		out.NextCursor = cursor(p.UserID, bs[len(bs)-1].ID)
	case scannedTo > 0: // a short page: the rest is read from there
		out.NextCursor = cursor(p.UserID, scannedTo)
	}
	for _, b := range bs {
		out.Bookmarks = append(out.Bookmarks, listed{toBookmarkJSON(b), b.Title, b.Excerpt})
	}
	httpio.Write(w, http.StatusOK, out)
	return nil
}
