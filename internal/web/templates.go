package web

// The pages are templ templates (*.templ), compiled to Go (*_templ.go, committed) by the templ of go.mod's tools.
//go:generate go tool templ generate

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"time"
)

//go:embed static
var staticFiles embed.FS

// assets are the embedded static files by name, with the hash that versions their address: a file is cached for a
// year, and a new build's file has a new address.
var assets = func() map[string]asset {
	out := map[string]asset{}
	entries, err := fs.ReadDir(staticFiles, "static")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		body, err := staticFiles.ReadFile("static/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(body)
		out[e.Name()] = asset{body: body, version: hex.EncodeToString(sum[:6]), contentType: mime.TypeByExtension(path.Ext(e.Name()))}
	}
	return out
}()

type asset struct {
	body        []byte
	version     string
	contentType string
}

func assetURL(name string) string {
	a, ok := assets[name]
	if !ok {
		panic("no asset " + name) // a template names a file that is not embedded: caught by the tests of every page
	}
	return "/static/" + name + "?v=" + a.version
}

func serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := assets[r.PathValue("file")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	h.Set("ETag", `"`+a.version+`"`)
	if r.URL.Query().Get("v") == a.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	if r.Header.Get("If-None-Match") == `"`+a.version+`"` {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method != http.MethodHead {
		_, _ = w.Write(a.body)
	}
}

// The addresses of the embedded script, style sheet and icon, which every page names.
var (
	scriptURL = assetURL("app.js")
	styleURL  = assetURL("style.css")
	iconURL   = assetURL("icon.svg")
)

// iso is a time as a <time datetime>: the script shows it in the reader's locale and time zone.
func iso(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// utc is the text of a <time> before the script runs, or without it.
func utc(t time.Time) string { return t.UTC().Format("2 Jan 2006 15:04 UTC") }

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// nextQuery is the query of a sign-in link that comes back to here ("" for no page).
func nextQuery(here string) string {
	if here == "" {
		return ""
	}
	return "?next=" + url.QueryEscape(here)
}

func likeAction(liked bool) string {
	if liked {
		return "/unlike"
	}
	return "/like"
}

func writeAction(p writePage) string {
	if p.ArticleID != 0 {
		return "/articles/" + id(p.ArticleID) + "/edit"
	}
	return "/boards/" + id(p.Board.ID) + "/write"
}

func writeCancel(p writePage) string {
	if p.ArticleID != 0 {
		return "/articles/" + id(p.ArticleID)
	}
	return "/boards/" + id(p.Board.ID)
}

// commentBack is the article page a comment's form came from: its comment page, in its order.
func commentBack(p commentFormPage) string {
	q := url.Values{}
	if p.Sort != "" {
		q.Set("sort", p.Sort)
	}
	if p.CPage != "" {
		q.Set("cpage", p.CPage)
	}
	if len(q) == 0 {
		return "/articles/" + id(p.ArticleID)
	}
	return "/articles/" + id(p.ArticleID) + "?" + q.Encode()
}

// flagAction is the path of the form that turns an article's lock or pin ("lock", "pin") to the other state.
func flagAction(flag string, on bool) string {
	if on {
		return "/un" + flag
	}
	return "/" + flag
}

// bellLabel is what the bell says to a screen reader.
func bellLabel(l layout) string {
	if l.UnreadKnown && l.Unread > 0 {
		return "Notifications, " + strconv.FormatInt(l.Unread, 10) + " unread"
	}
	return "Notifications"
}

// commentClass is a comment's class: its depth in the tree, or the first level for all in a flat order.
func commentClass(p articlePage, c commentView) string {
	if p.Flat() {
		return "comment depth-1 flat"
	}
	return "comment depth-" + strconv.Itoa(c.Depth)
}
