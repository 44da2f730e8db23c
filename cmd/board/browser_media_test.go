package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/chromedp/chromedp"
)

// imageInMarkdown finds the images the editor inserted.
var imageInMarkdown = regexp.MustCompile(`!\[([^\]]*)\]\((/media/[0-9a-f]{64}\.png)\)`)

// pasteImage pastes an image file into the field sel at the end of its text, as a clipboard holding a copied file
// gives it: a paste event whose DataTransfer carries the file.
func (b *tab) pasteImage(sel, name, mimeType string, data []byte) {
	b.t.Helper()
	b.do("paste "+name, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const bytes = Uint8Array.from(atob(%s), (c) => c.charCodeAt(0));
		const dt = new DataTransfer();
		dt.items.add(new File([bytes], %s, { type: %s }));
		const area = document.querySelector(%s);
		area.focus();
		area.setSelectionRange(area.value.length, area.value.length);
		area.dispatchEvent(new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true }));
	})()`, js(base64.StdEncoding.EncodeToString(data)), js(name), js(mimeType), js(sel))))
}

// The editor takes an image pasted into it and one picked with its button: each is uploaded through the site, its
// Markdown put into the text, and the image served back through the site; the article is then published with them.
func TestBrowserEditorUploadsImages(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	b := newTab(t, "editor", p.urls["web"])
	b.signUpWith("ulla")
	b.openOK("/boards/1/write")
	b.fill("title", "#title", "Two pictures")
	b.fill("text", "#content", "Look: ")

	pasted := testPNG(t, 7)
	b.pasteImage("#content", "pasted.png", "image/png", pasted)
	b.waitFor("the pasted image's Markdown", `document.querySelector("#content").value.includes("![pasted](/media/")`)

	picked := testPNG(t, 8)
	file := filepath.Join(t.TempDir(), "picked.png")
	if err := os.WriteFile(file, picked, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := b.count("#article-form .upload-button"); n != 1 {
		b.fatalf("%d Add image buttons on the write form, want 1", n)
	}
	b.do("pick an image", chromedp.SetUploadFiles(chromedp.CSS("#article-form input[type=file]"), []string{file}))
	b.waitFor("the picked image's Markdown", `document.querySelector("#content").value.includes("![picked](/media/")`)

	text := eval[string](b, `document.querySelector("#content").value`)
	found := imageInMarkdown.FindAllStringSubmatch(text, -1)
	if len(found) != 2 || found[0][1] != "pasted" || found[1][1] != "picked" {
		b.fatalf("the text is %q, want a pasted then a picked image", text)
	}
	for i, want := range [][]byte{pasted, picked} {
		resp, err := http.Get(p.urls["web"] + found[i][2])
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		_, _ = got.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got.Bytes(), want) || resp.Header.Get("Cache-Control") == "" {
			b.fatalf("%s through the site: %d, %d bytes", found[i][2], resp.StatusCode, got.Len())
		}
	}
	b.publish()
}
