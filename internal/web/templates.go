package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"time"
)

//go:embed templates/*.html
var templateFiles embed.FS

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

var templateFuncs = template.FuncMap{
	"asset": assetURL,
	// iso is a time as a <time datetime>: the script shows it in the reader's locale and time zone.
	"iso": func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") },
	// utc is the text of a <time> before the script runs, or without it.
	"utc":      func(t time.Time) string { return t.UTC().Format("2 Jan 2006 15:04 UTC") },
	"day":      func(t time.Time) string { return t.Format("Monday, 2 January 2006") },
	"dateOnly": func(t time.Time) string { return t.Format(time.DateOnly) },
	"plural": func(n int64, one, many string) string {
		if n == 1 {
			return one
		}
		return many
	},
}

// pageTemplates are the pages by file name, each parsed with the layout and the shared parts.
var pageTemplates = func() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, page := range []string{"home.html", "board.html", "scroll.html", "article.html", "write.html", "hot.html",
		"signin.html", "signup.html", "comment.html", "error.html"} {
		out[page] = template.Must(template.New(page).Funcs(templateFuncs).ParseFS(templateFiles,
			"templates/layout.html", "templates/parts.html", "templates/"+page))
	}
	return out
}()
