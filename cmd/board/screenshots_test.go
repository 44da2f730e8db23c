package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"board/internal/polltest"
)

// screenshotsEnv names the directory TestWebScreenshots writes the documentation's screenshots to.
const screenshotsEnv = "BOARD_WEB_SCREENSHOTS"

// TestWebScreenshots makes the screenshots of docs/web.md and the README: a site with a few people, articles, a
// thread, likes and views, photographed on a desktop and a phone, a search, alice's notifications, and a page with
// article-read down. TestWebScreenshotsModeration, TestBrowserCommentHistory and TestBrowserWriting make the others:
//
//	BOARD_WEB_SCREENSHOTS=$PWD/docs/screenshots go test ./cmd/board -count=1 \
//		-run 'TestWebScreenshots|TestBrowserCommentHistory|TestBrowserWriting'
func TestWebScreenshots(t *testing.T) {
	t.Parallel()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		t.Skip("set " + screenshotsEnv + "=docs/screenshots to write the documentation's screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startProgram(t, append(testFlags(t, t.TempDir()), "--hot-article-time-zone", "UTC"))
	featured := seedSite(t, p)
	waitForSearch(t, p, "outbox", 2)
	waitForInbox(t, p)

	// A second site whose article-read is nowhere: nothing listens on the port it is told.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	down := startProgram(t, append(testFlags(t, t.TempDir()), "--article-read-origin", "http://"+ln.Addr().String()))

	for _, screen := range []struct {
		name     string
		viewport chromedp.Action[chromedp.Void]
	}{
		{"desktop", chromedp.EmulateViewport(1280, 900)},
		{"mobile", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch)},
	} {
		b := newTab(t, "alice-"+screen.name, p.urls["web"])
		b.do("the screen", screen.viewport)
		b.openOK("/signin")
		b.fill("username", "#username", "alice")
		b.fill("password", "#password", "alice-password")
		b.followOK("sign in", "#signin button[type=submit]")
		for _, page := range []struct{ name, path string }{
			{"home", "/"}, {"board", "/boards/1"}, {"article", "/articles/" + featured}, {"hot", "/hot"}, {"write", "/boards/1/write"},
			{"search", "/search?q=outbox"}, {"notifications", "/notifications"},
		} {
			b.openOK(page.path)
			shoot(t, b, filepath.Join(dir, page.name+"-"+screen.name+".png"))
		}

		d := newTab(t, "down-"+screen.name, down.urls["web"])
		d.do("the screen", screen.viewport)
		if status := d.open("/boards/1"); status != http.StatusServiceUnavailable {
			d.fatalf("with article-read down, the board page answered %d, want 503", status)
		}
		shoot(t, d, filepath.Join(dir, "unavailable-"+screen.name+".png"))
	}
}

// shoot saves the whole page as a PNG of 256 colours, once its script has shown the dates in the reader's locale.
func shoot(t *testing.T, b *tab, path string) {
	t.Helper()
	b.waitFor("dates shown locally", `[...document.querySelectorAll("time")].every(e => e.title)`)
	shot, err := png.Decode(bytes.NewReader(result(b, "screenshot "+path, fullPageScreenshot())))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&out, inCommonColours(shot)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// inCommonColours redraws img in its 256 most common colours, each pixel in the nearest of them: a page's few
// flat colours are nearly every pixel, the rest are the edges of its text. Its PNG is about a third of the size of
// Chromium's and looks the same; no PNG optimiser is installed here to do better.
func inCommonColours(img image.Image) *image.Paletted {
	bounds := img.Bounds()
	counts := map[color.NRGBA]int{}
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			counts[color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)]++
		}
	}
	colours := slices.SortedFunc(maps.Keys(counts), func(a, b color.NRGBA) int { return cmp.Compare(counts[b], counts[a]) })
	palette := make(color.Palette, 0, 256)
	for _, c := range colours[:min(256, len(colours))] {
		palette = append(palette, c)
	}
	out := image.NewPaletted(bounds, palette)
	nearest := map[color.NRGBA]uint8{}
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			i, ok := nearest[c]
			if !ok {
				i = uint8(palette.Index(c))
				nearest[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	return out
}

// seedSite writes what a small community would have: four people, two dozen articles on board 1, and a featured
// article with a thread five deep, a deleted comment, likes and views. It waits until the read side shows it all,
// and returns the featured article's id.
func seedSite(t *testing.T, p *program) string {
	t.Helper()
	tokens := map[string]string{}
	ids := map[string]int64{}
	for _, name := range []string{"alice", "bob", "carol", "dan"} {
		ids[name], tokens[name] = signUp(t, p, name)
	}
	titles := []struct{ writer, title string }{
		{"bob", "Welcome to the board: introduce yourself"}, {"carol", "What are you reading this week?"},
		{"dan", "Weekend hike: the ridge trail after the rain"}, {"bob", "Which keyboard do you type on?"},
		{"carol", "Recipe swap: one-pot dinners"}, {"dan", "Is it worth learning Rust after Go?"},
		{"bob", "Photos from the city marathon"}, {"carol", "Tips for a first trip to Seoul"},
		{"dan", "How do you keep notes?"}, {"bob", "Board games for two players"},
		{"carol", "The best coffee near the station"}, {"dan", "Fixing a slow laptop: what worked"},
		{"bob", "Podcast recommendations, anyone?"}, {"carol", "Balcony garden, second summer"},
		{"dan", "Learning the guitar at 40"}, {"bob", "Film club: this month's pick"},
		{"carol", "Cycling to work in winter"}, {"dan", "What is your favourite command-line tool?"},
		{"bob", "Second-hand camera lenses"}, {"carol", "Sourdough starter troubleshooting"},
		{"dan", "Remote work: how do you end the day?"}, {"bob", "Small wins this week"},
	}
	var hot []string
	for i, a := range titles {
		id := apiArticle(t, p, tokens[a.writer], 1, a.title, "Posted for the screenshots.")
		if i%4 == 0 {
			hot = append(hot, id)
		}
	}
	featured := apiArticle(t, p, tokens["alice"], 1, "Moving our board from Spring Boot to Go: notes from the migration",
		"We moved the article, comment, like and view services to Go over six weeks.\n\n"+
			"What went well: one binary, embedded engines for development, and the outbox relay just kept working.\n"+
			"What surprised us: how much of the old framework's magic we did not miss.\n\n"+
			"Questions welcome below.")

	type posted struct{ path, id string }
	comment := func(writer, content string, parent posted) posted {
		t.Helper()
		body := map[string]any{"articleId": featured, "content": content}
		if parent.path != "" {
			body["parentPath"] = parent.path
		}
		a := sendAs(t, bearer(tokens[writer]), "POST", p.urls["comment"]+"/v2/comments", body)
		var c struct{ CommentID, Path string }
		if a.status != http.StatusCreated || json.Unmarshal(a.body, &c) != nil {
			t.Fatalf("comment by %s: %d %s", writer, a.status, a.body)
		}
		return posted{c.Path, c.CommentID}
	}
	first := comment("bob", "Great write-up. How long did the outbox part take?", posted{})
	second := comment("alice", "About a week, most of it tests against a real broker.", first)
	third := comment("carol", "Did you keep the same database schema?", second)
	fourth := comment("alice", "Yes, table for table, so both could run side by side for a while.", third)
	comment("dan", "That is the part I would copy first.", fourth)
	gone := comment("dan", "Off-topic question, removed by the writer.", posted{})
	comment("carol", "Kept: replies to a deleted comment stay in the thread.", gone)
	if a := sendAs(t, bearer(tokens["dan"]), "DELETE", p.urls["comment"]+"/v2/comments/"+gone.id, nil); a.status != http.StatusNoContent {
		t.Fatalf("delete a comment: %d %s", a.status, a.body)
	}
	comment("carol", "Bookmarking this for our team.", posted{})

	// Some of the other articles get likes, comments and views too, each a little fewer than the one before.
	people := []string{"alice", "bob", "carol", "dan"}
	for i, id := range hot {
		for _, name := range people[i%2 : len(people)-i/2] {
			likeAs(t, p, tokens[name], id, ids[name])
			viewAs(t, p, tokens[name], id, ids[name])
		}
		for _, name := range people[:max(0, len(people)-i)] {
			a := sendAs(t, bearer(tokens[name]), "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": id, "content": "Thanks for posting!"})
			if a.status != http.StatusCreated {
				t.Fatalf("comment: %d %s", a.status, a.body)
			}
		}
	}
	for _, name := range people {
		if name != "alice" {
			likeAs(t, p, tokens[name], featured, ids[name])
		}
		viewAs(t, p, tokens[name], featured, ids[name])
	}
	waitForRead(t, p, featured, 3, 8)
	return featured
}

func likeAs(t *testing.T, p *program, token, article string, user int64) {
	t.Helper()
	url := fmt.Sprintf("%s/v1/article-likes/articles/%s/users/%d", p.urls["like"], article, user)
	if a := sendAs(t, bearer(token), "POST", url, nil); a.status != http.StatusCreated {
		t.Fatalf("like: %d %s", a.status, a.body)
	}
}

func viewAs(t *testing.T, p *program, token, article string, user int64) {
	t.Helper()
	url := fmt.Sprintf("%s/v1/article-views/articles/%s/users/%d", p.urls["view"], article, user)
	if a := sendAs(t, bearer(token), "POST", url, nil); a.status != http.StatusOK {
		t.Fatalf("view: %d %s", a.status, a.body)
	}
}

// waitForRead waits until article-read answers the article with its likes and comments.
func waitForRead(t *testing.T, p *program, article string, likes, comments int64) {
	t.Helper()
	polltest.Until(t, 30*time.Second, func() (bool, string) {
		a := sendAs(t, "", "GET", p.urls["article-read"]+"/v1/articles/"+article, nil)
		var got struct{ ArticleLikeCount, ArticleCommentCount int64 }
		done := a.status == http.StatusOK && json.Unmarshal(a.body, &got) == nil &&
			got.ArticleLikeCount == likes && got.ArticleCommentCount == comments
		return done, fmt.Sprintf("article-read did not catch up: %d %s", a.status, a.body)
	})
}

// waitForSearch waits until the search service finds at least n results for query: it indexes from the events.
func waitForSearch(t *testing.T, p *program, query string, n int64) {
	t.Helper()
	polltest.Until(t, 30*time.Second, func() (bool, string) {
		a := sendAs(t, "", "GET", p.urls["search"]+"/v1/search?q="+url.QueryEscape(query), nil)
		var got struct{ Count int64 }
		done := a.status == http.StatusOK && json.Unmarshal(a.body, &got) == nil && got.Count >= n
		return done, fmt.Sprintf("search did not catch up: %d %s", a.status, a.body)
	})
}

// waitForInbox waits until alice's inbox has what seedSite did to her article: comments on it, replies to her
// comments, and the three likes in one notification; then marks the oldest read, for the inbox to show both.
func waitForInbox(t *testing.T, p *program) {
	t.Helper()
	token := signIn(t, p, "alice")
	var page struct {
		Notifications []struct {
			NotificationID, Kind string
			ActorCount           int
		}
	}
	polltest.Until(t, 30*time.Second, func() (bool, string) {
		a := sendAs(t, bearer(token), "GET", p.urls["notification"]+"/v1/notifications?pageSize=100", nil)
		if a.status != http.StatusOK || json.Unmarshal(a.body, &page) != nil {
			return false, fmt.Sprintf("alice's inbox: %d %s", a.status, a.body)
		}
		kinds := map[string]int{}
		for _, n := range page.Notifications {
			kinds[n.Kind] += max(1, n.ActorCount)
		}
		return kinds["article-like"] == 3 && kinds["comment-reply"] >= 2 && kinds["article-comment"] >= 2,
			fmt.Sprintf("alice's inbox did not catch up: %s", a.body)
	})
	oldest := page.Notifications[len(page.Notifications)-1].NotificationID
	if a := sendAs(t, bearer(token), "POST", p.urls["notification"]+"/v1/notifications/"+oldest+"/read", nil); a.status != http.StatusNoContent {
		t.Fatalf("mark read: %d %s", a.status, a.body)
	}
}
