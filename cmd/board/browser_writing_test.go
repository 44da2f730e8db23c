package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserWriting is issue 38's test of record, writing as on any forum: a writer types a post with bold, a list,
// a table and a code block, pastes a picture into it, and publishes; the article shows them rendered and the picture
// loaded from the site. She rewords the post and a comment of hers, and each says "edited", linking to a history
// whose diff has the old and the new words. Nothing is half-stored: the picture comes back through the site whole,
// with its ETag and long caching, and the article service keeps the source, the rendering and the revision. With
// BOARD_WEB_SCREENSHOTS set it photographs the editor, the article, a comment's edit form and the history for
// docs/web.md.
func TestBrowserWriting(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	shots := os.Getenv(screenshotsEnv)
	b := newTab(t, "writer", p.urls["web"])
	if shots != "" {
		b.do("the screen", chromedp.EmulateViewport(1280, 900))
	}
	b.signUpWith("wren")
	b.openOK("/boards/1/write")

	b.fill("title", "#title", "Our orchard in October")
	// Typed a block at a time, each a step of its own: a long text typed in one step can outlast a step's time on a
	// busy machine.
	b.fill("text", "#content", "**Bold** news first: the harvest is in. We picked\n\n")
	for _, block := range []string{"- apples\n- pears\n- quinces\n\n", "| tree | crates |\n|---|---|\n| apple | 12 |\n| pear | 5 |\n\n",
		"The cider press log:\n\n```\npress --batch 3 --crates 17\n```\n\n", "The orchard this morning:\n\n"} {
		b.do("type on", chromedp.SendKeys(chromedp.CSS("#content"), block))
	}
	picture := orchardPNG(t)
	b.pasteImage("#content", "orchard.png", "image/png", picture)
	b.waitFor("the pasted image's Markdown", `document.querySelector("#content").value.includes("![orchard](/media/")`)
	source := eval[string](b, `document.querySelector("#content").value`)
	found := imageInMarkdown.FindStringSubmatch(source)
	if found == nil {
		b.fatalf("the text is %q, want the pasted image's Markdown", source)
	}
	imageURL := found[2]
	b.checkPage("the editor with a pasted image")
	if shots != "" { // the text whole, as a writer dragging the field's corner would see it
		b.do("stretch the text field", chromedp.Evaluate[chromedp.Void](`(() => { const area = document.querySelector("#content");
			area.style.height = area.scrollHeight + 8 + "px"; area.blur(); })()`))
		shoot(t, b, filepath.Join(shots, "editor-desktop.png"))
	}

	articleURL, articleID := b.publish()
	b.checkPage("an article in Markdown with a picture")
	expect(b, "bold", b.text("#article-content strong"), "Bold")
	expect(b, "list items", b.count("#article-content ul li"), 3)
	expect(b, "table cells", b.count("#article-content td"), 4)
	expect(b, "the code block", b.text("#article-content pre code"), "press --batch 3 --crates 17")
	expect(b, "the picture's address", b.attr("#article-content img", "src"), imageURL)
	expect(b, "the picture's alt text", b.attr("#article-content img", "alt"), "orchard")
	b.waitFor("the picture loaded", `(() => { const i = document.querySelector("#article-content img");
		return i.complete && i.naturalWidth === `+strconv.Itoa(orchardWidth)+`; })()`)
	if shots != "" {
		shoot(t, b, filepath.Join(shots, "markdown-desktop.png"))
	}

	// What was stored: the picture whole through the site, cacheable for good; the article's source and rendering.
	checkServedImage(t, p.urls["web"]+imageURL, picture)
	stored := articleJSON(t, p, articleID)
	if stored.Content != source || !strings.Contains(stored.ContentHTML, `<img src="`+imageURL+`"`) {
		t.Errorf("the article service holds content %q and contentHtml %q, want the source typed and its picture", stored.Content, stored.ContentHTML)
	}

	b.followOK("open the edit form", "a#edit")
	expect(b, "the edit form holds the source", eval[string](b, `document.querySelector("#content").value`), source)
	// She selects a word and types another over it.
	b.do("select pears", chromedp.Evaluate[chromedp.Void](`(() => { const area = document.querySelector("#content");
		const at = area.value.indexOf("- pears") + 2; area.focus(); area.setSelectionRange(at, at + 5); })()`))
	b.do("type plums", chromedp.KeyEvent("plums"))
	expect(b, "the edited text", eval[string](b, `document.querySelector("#content").value`), strings.Replace(source, "- pears", "- plums", 1))
	if status := b.follow("save the edit", "#article-form button[type=submit]"); status != http.StatusOK {
		b.fatalf("status %d after saving, want 200", status)
	}
	b.reloadUntil("the edit shows, marked edited", articleURL,
		`document.querySelector("#article-content ul li:nth-child(2)")?.textContent === "plums" && document.querySelector("a#article-edited")`)
	expect(b, "the picture after the edit", b.attr("#article-content img", "src"), imageURL)
	b.followOK("open the article's history", "a#article-edited")
	expect(b, "the history's address", b.path(), articleURL+"/revisions")
	b.checkPage("an article's history")
	expect(b, "edits listed", b.count("ol.edits li.edit"), 1)
	expect(b, "the old word", b.text("li#r-1 del.diff-del"), "[removed: pears]")
	expect(b, "the new word", b.text("li#r-1 ins.diff-ins"), "[added: plums]")
	if shots != "" {
		shoot(t, b, filepath.Join(shots, "history-desktop.png"))
	}
	if revisions := articleRevisions(t, p, articleID); len(revisions) != 1 || revisions[0].Content != source {
		t.Errorf("the article's revisions are %+v, want the source before the edit", revisions)
	}

	b.openOK(articleURL)
	b.fill("write a comment", "#comment-content", "The pears were *sweet* this year.")
	if status := b.follow("post the comment", "#comment-form button"); status != http.StatusOK {
		b.fatalf("status %d after commenting, want 200", status)
	}
	comment := strings.TrimPrefix(b.waitComment("the comment shows", "The pears were sweet this year.").ID, "c-")
	item := "li#c-" + comment
	expect(b, "edited marks before the edit", b.count(item+" a.comment-edited"), 0)
	b.typeCommentEdit(comment, "The plums were *sweet* this year.")
	if shots != "" {
		shoot(t, b, filepath.Join(shots, "comment-edit-desktop.png"))
	}
	b.followOK("save the comment's edit", item+" form.edit-comment button[type=submit]")
	expect(b, "the comment after the edit", b.text(item+" .comment-content"), "The plums were sweet this year.")
	expect(b, "its emphasis", b.text(item+" .comment-content em"), "sweet")
	b.followOK("open the comment's history", item+" a.comment-edited")
	expect(b, "the comment history's address", b.path(), articleURL+"/comments/"+comment+"/revisions")
	expect(b, "the comment's edits listed", b.count("ol.edits li.edit"), 1)
	expect(b, "the comment's old word", b.text("li#r-1 del.diff-del"), "[removed: pears]")
	expect(b, "the comment's new word", b.text("li#r-1 ins.diff-ins"), "[added: plums]")
}

// orchardWidth and orchardHeight are the size of orchardPNG's picture.
const orchardWidth, orchardHeight = 480, 270

// orchardPNG draws a small landscape, a sky over a green hill under a sun, for a post to show: a real picture, large
// enough to see in the screenshots.
func orchardPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, orchardWidth, orchardHeight))
	for y := range orchardHeight {
		for x := range orchardWidth {
			dx, dy := x-360, y-70
			hill := float64(y) > 180-40*float64(x)/orchardWidth+float64((x-240)*(x-240))/2500
			switch {
			case dx*dx+dy*dy < 900:
				img.Set(x, y, color.NRGBA{250, 210, 80, 255})
			case hill:
				img.Set(x, y, color.NRGBA{60, byte(140 + y/6), 70, 255})
			default:
				img.Set(x, y, color.NRGBA{byte(120 + y/3), byte(170 + y/4), 235, 255})
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// checkServedImage fetches an uploaded image through url and checks it is the bytes uploaded, named by their hash
// and cached for good, and that a revalidation is answered without them.
func checkServedImage(t *testing.T, url string, want []byte) {
	t.Helper()
	sum := sha256.Sum256(want)
	etag := `"` + hex.EncodeToString(sum[:]) + `"`
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
		t.Fatalf("GET %s: %d, %d bytes of %d (%v)", url, resp.StatusCode, len(got), len(want), err)
	}
	if e := resp.Header.Get("ETag"); e != etag {
		t.Errorf("GET %s: ETag %s, want %s", url, e, etag)
	}
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=31536000") || !strings.Contains(cc, "immutable") {
		t.Errorf("GET %s: Cache-Control %q, want a year, immutable", url, cc)
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("GET %s with its ETag: %d, want 304", url, resp.StatusCode)
	}
}

// storedArticle is an article as the article service answers it.
type storedArticle struct {
	Content     string `json:"content"`
	ContentHTML string `json:"contentHtml"`
}

func articleJSON(t *testing.T, p *program, id string) storedArticle {
	t.Helper()
	a := sendAs(t, "", "GET", p.urls["article"]+"/v1/articles/"+id, nil)
	var out storedArticle
	if a.status != http.StatusOK || json.Unmarshal(a.body, &out) != nil {
		t.Fatalf("GET article %s: %d %s", id, a.status, a.body)
	}
	return out
}

func articleRevisions(t *testing.T, p *program, id string) []storedArticle {
	t.Helper()
	a := sendAs(t, "", "GET", p.urls["article"]+"/v1/articles/"+id+"/revisions", nil)
	var out []storedArticle
	if a.status != http.StatusOK || json.Unmarshal(a.body, &out) != nil {
		t.Fatalf("GET article %s's revisions: %d %s", id, a.status, a.body)
	}
	return out
}
