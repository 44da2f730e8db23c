package markdown

import (
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

func TestRenderSyntax(t *testing.T) {
	for _, tc := range []struct{ name, source, wantHTML, wantText string }{
		{"paragraph keeps its soft break", "line one\nline two", "<p>line one\nline two</p>", "line one\nline two"},
		{"emphasis and strikethrough", "**bold** *it* ~~gone~~", "<p><strong>bold</strong> <em>it</em> <del>gone</del></p>", "bold it gone"},
		{"heading", "## 제목", "<h2>제목</h2>", "제목"},
		{"internal link has no rel", "[a](/articles/1)", `<p><a href="/articles/1">a</a></p>`, "a"},
		{"external link", `[e](https://example.com/x "t")`, `<p><a href="https://example.com/x" title="t" rel="nofollow ugc noopener">e</a></p>`, "e"},
		{"protocol-relative link is external", "[e](//example.com)", `<p><a href="//example.com" rel="nofollow ugc noopener">e</a></p>`, "e"},
		{"autolink", "<https://example.com>", `<p><a href="https://example.com" rel="nofollow ugc noopener">https://example.com</a></p>`, "https://example.com"},
		{"bare www autolink", "see www.example.com", `<p>see <a href="http://www.example.com" rel="nofollow ugc noopener">www.example.com</a></p>`, "see www.example.com"},
		{"email autolink", "<a@b.co>", `<p><a href="mailto:a@b.co">a@b.co</a></p>`, "a@b.co"},
		{"task list is disabled", "- [x] done\n- [ ] todo", "<ul>\n<li><input type=\"checkbox\" disabled=\"\" checked=\"\" aria-label=\"done\"> done</li>\n<li><input type=\"checkbox\" disabled=\"\" aria-label=\"to do\"> todo</li>\n</ul>", "done\ntodo"},
		{"table with alignment", "| a | b |\n|:-|-:|\n| 1 | 2 |",
			"<table>\n<thead>\n<tr>\n<th align=\"left\">a</th>\n<th align=\"right\">b</th>\n</tr>\n</thead>\n<tbody>\n<tr>\n<td align=\"left\">1</td>\n<td align=\"right\">2</td>\n</tr>\n</tbody>\n</table>",
			"a b\n1 2"},
		{"code block", "```go\nx := \"<b>\"\n```", "<pre><code class=\"language-go\">x := &#34;&lt;b&gt;&#34;\n</code></pre>", "x := \"<b>\""},
		{"media image stays", "![cat](/media/abc123.png)", `<p><img src="/media/abc123.png" alt="cat"></p>`, "cat"},
		{"other image becomes a link", "![cat](https://example.com/cat.png)", `<p><a href="https://example.com/cat.png" rel="nofollow ugc noopener">cat</a></p>`, "cat"},
		{"image without alt becomes a link to its URL", "![](https://example.com/cat.png)", `<p><a href="https://example.com/cat.png" rel="nofollow ugc noopener">https://example.com/cat.png</a></p>`, "https://example.com/cat.png"},
		{"media path with a dot segment is not media", "![x](/media/../etc)", `<p><a href="/media/../etc">x</a></p>`, "x"},
		{"entities decode in the text", "a &amp; b &lt; c", "<p>a &amp; b &lt; c</p>", "a & b < c"},
		{"block quote and ordered list", "> q\n\n3. x", "<blockquote>\n<p>q</p>\n</blockquote>\n<ol start=\"3\">\n<li>x</li>\n</ol>", "q\nx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Render(tc.source)
			if strings.TrimSpace(got.HTML) != tc.wantHTML {
				t.Errorf("HTML of %q\n got %q\nwant %q", tc.source, got.HTML, tc.wantHTML)
			}
			if got.Text != tc.wantText {
				t.Errorf("Text of %q = %q, want %q", tc.source, got.Text, tc.wantText)
			}
		})
	}
}

func TestLegacyIsEscapedTextInOneParagraph(t *testing.T) {
	got := Legacy("a <b>\n  **not bold** & \"q\"")
	if want := "<p>a &lt;b&gt;\n  **not bold** &amp; &#34;q&#34;</p>"; got.HTML != want {
		t.Errorf("HTML = %q, want %q", got.HTML, want)
	}
	if got.Text != "a <b>\n  **not bold** & \"q\"" {
		t.Errorf("Text = %q, want the content", got.Text)
	}
	if Sanitize(got.HTML) != got.HTML {
		t.Errorf("the sanitizer changes a legacy post's HTML %q", got.HTML)
	}
}

// xssCorpus are sources that try to get script, style, handlers or dangerous URLs into the HTML.
var xssCorpus = []string{
	`<script>alert(1)</script>`,
	"<script>\nalert(1)\n</script>",
	`<SCRIPT SRC=//evil.example/x.js></SCRIPT>`,
	`<img src=x onerror=alert(1)>`,
	`<IMG SRC="javascript:alert('XSS');">`,
	`<svg onload=alert(1)>`,
	`<svg><script>alert(1)</script></svg>`,
	`<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>`,
	`<iframe src="https://evil.example"></iframe>`,
	`<form action="https://evil.example"><input name=x></form>`,
	`<style>body{display:none}</style>`,
	`<a href="javascript:alert(1)">x</a>`,
	`<div style="background:url(javascript:alert(1))">x</div>`,
	`<body onload=alert(1)>`,
	`<object data="javascript:alert(1)"></object>`,
	`<embed src="javascript:alert(1)">`,
	`<meta http-equiv="refresh" content="0;url=javascript:alert(1)">`,
	`<base href="javascript:alert(1)//">`,
	`<!-- <script>alert(1)</script> -->`,
	`<![CDATA[<script>alert(1)</script>]]>`,
	"[x](javascript:alert(1))",
	"[x](JaVaScRiPt:alert(1))",
	"[x](  javascript:alert(1)  )",
	"[x](javascript&#58;alert(1))",
	"[x](javascript&#x3A;alert(1))",
	"[x](&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1))",
	"[x](java\tscript:alert(1))",
	"[x](<javascript:alert(1)>)",
	"[x](vbscript:msgbox(1))",
	"[x](VBScript:msgbox(1))",
	"[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
	"[x](DATA:text/html,<script>alert(1)</script>)",
	"[x](file:///etc/passwd)",
	"![x](javascript:alert(1))",
	"![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
	"![x](data:image/png;base64,iVBORw0KGgo=)",
	"![x](/media/a.png\" onerror=\"alert(1))",
	"![x\" onerror=\"alert(1)](/media/a.png)",
	`[x](https://example.com "a\" onmouseover=\"alert(1)")`,
	"[x][ref]\n\n[ref]: javascript:alert(1)",
	"[x][ref]\n\n[ref]: <javascript:alert(1)> \"t\"",
	"[ref]\n\n[ref]: data:text/html,x",
	"<javascript:alert(1)>",
	"<JAVASCRIPT:alert(1)>",
	"<data:text/html,<script>alert(1)</script>>",
	"javascript:alert(1)",
	"www.example.com/<script>alert(1)</script>",
	"https://example.com/\"onmouseover=\"alert(1)",
	"&lt;script&gt;alert(1)&lt;/script&gt;",
	"&#60;script&#62;alert(1)&#60;/script&#62;",
	"\\<script>alert(1)\\</script>",
	"`<script>alert(1)</script>`",
	"```\n<script>alert(1)</script>\n```",
	"```html\" onclick=\"alert(1)\n<b>x</b>\n```",
	"<div>\n*not a tag*\n<script>alert(1)</script>",
	"<div\n>\n<img src=x onerror=alert(1)",
	"<scr<script>ipt>alert(1)</script>",
	"<a href='x' onclick='alert(1)'>unclosed",
	"> <script>alert(1)</script>\n> - <img src=x onerror=alert(1)>",
	"- [ ] <input type=checkbox onclick=alert(1)>",
	"| a |\n|---|\n| <script>alert(1)</script> |\n| <img src=x onerror=alert(1)> |",
	"~~<script>alert(1)</script>~~",
	"**<svg/onload=alert(1)>**",
	"<details open ontoggle=alert(1)>",
	"<a href=\"&#x6A;avascript:alert(1)\">x</a>",
	"[x](\x00javascript:alert(1))",
	"[x](\u200bjavascript:alert(1))",
	"<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\">",
	"<textarea><script>alert(1)</script></textarea>",
	"<xmp><script>alert(1)</script></xmp>",
}

func TestXSSCorpusRendersInert(t *testing.T) {
	for _, source := range xssCorpus {
		got := Render(source)
		if problem := unsafeHTML(got.HTML); problem != "" {
			t.Errorf("Render(%q) = %q: %s", source, got.HTML, problem)
		}
		if Sanitize(got.HTML) != got.HTML {
			t.Errorf("Render(%q) = %q: the sanitizer still changes it", source, got.HTML)
		}
	}
}

func TestRawHTMLShowsAsTyped(t *testing.T) {
	for _, tc := range []struct{ source, wantHTML string }{
		{"a <b>bold</b> c", "<p>a &lt;b&gt;bold&lt;/b&gt; c</p>\n"},
		{"<div class=x>\n*hi*\n</div>\n\nafter", "<p>&lt;div class=x&gt;\n*hi*\n&lt;/div&gt;</p>\n<p>after</p>\n"},
		{"Second line <script>alert(1)</script>", "<p>Second line &lt;script&gt;alert(1)&lt;/script&gt;</p>\n"},
		{"<!-- hidden -->", "<p>&lt;!-- hidden --&gt;</p>\n"},
	} {
		got := Render(tc.source)
		if got.HTML != tc.wantHTML {
			t.Errorf("Render(%q).HTML = %q, want %q", tc.source, got.HTML, tc.wantHTML)
		}
	}
	if got := Render("x <script>y</script>").Text; got != "x <script>y</script>" {
		t.Errorf("Text = %q, want the source's text as typed", got)
	}
}

// allowedElements are the elements Render may write.
var allowedElements = map[string]bool{"p": true, "br": true, "hr": true, "em": true, "strong": true, "del": true,
	"code": true, "pre": true, "blockquote": true, "ul": true, "ol": true, "li": true, "h1": true, "h2": true,
	"h3": true, "h4": true, "h5": true, "h6": true, "table": true, "thead": true, "tbody": true, "tr": true,
	"th": true, "td": true, "a": true, "img": true, "input": true}

// unsafeHTML parses h as a browser would (inside a div) and says what in it is not inert, or "".
func unsafeHTML(h string) string {
	ctx := &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
	nodes, err := html.ParseFragment(strings.NewReader(h), ctx)
	if err != nil {
		return "does not parse: " + err.Error()
	}
	var problem string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if problem != "" {
			return
		}
		if n.Type == html.ElementNode {
			problem = unsafeElement(n)
		}
		if n.Type == html.CommentNode {
			problem = "a comment"
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	for _, n := range nodes {
		walk(n)
	}
	return problem
}

func unsafeElement(n *html.Node) string {
	if !allowedElements[n.Data] {
		return "element " + n.Data
	}
	attrs := map[string]string{}
	for _, a := range n.Attr {
		attrs[a.Key] = a.Val
		if strings.HasPrefix(strings.ToLower(a.Key), "on") || a.Key == "style" {
			return "attribute " + a.Key
		}
		if a.Key == "href" || a.Key == "src" {
			u := strings.ToLower(strings.Map(func(r rune) rune {
				if r <= ' ' || r == 0x200b {
					return -1
				}
				return r
			}, a.Val))
			for _, bad := range []string{"javascript:", "vbscript:", "data:", "file:"} {
				if strings.HasPrefix(u, bad) {
					return a.Key + " " + a.Val
				}
			}
		}
	}
	switch n.Data {
	case "img":
		if !mediaURL.MatchString(attrs["src"]) {
			return "image from " + attrs["src"]
		}
	case "input":
		if attrs["type"] != "checkbox" {
			return "input of type " + attrs["type"]
		}
		if _, ok := attrs["disabled"]; !ok {
			return "a checkbox that is not disabled"
		}
		if attrs["aria-label"] == "" {
			return "a checkbox without a label"
		}
	case "a":
		if scheme, offBoard := schemeOf(attrs["href"]); (offBoard || scheme == "http" || scheme == "https") &&
			attrs["rel"] != externalRel {
			return "an external link without rel: " + attrs["href"]
		}
	}
	return ""
}

func FuzzRenderIsSanitizedAndInert(f *testing.F) {
	for _, s := range xssCorpus {
		f.Add(s)
	}
	f.Add("# t\n\n- a\n- [x] b\n\n| a |\n|---|\n| 1 |\n\n```\ncode\n```\n![i](/media/k.png) [l](https://e.com) www.e.com")
	f.Fuzz(func(t *testing.T, source string) {
		got := Render(source)
		if again := Sanitize(got.HTML); again != got.HTML {
			t.Fatalf("Render(%q) = %q, which the sanitizer changes to %q", source, got.HTML, again)
		}
		if problem := unsafeHTML(got.HTML); problem != "" {
			t.Fatalf("Render(%q) = %q: %s", source, got.HTML, problem)
		}
	})
}

// Renders share pooled buffers; one running beside another must not see the other's HTML or text.
func TestConcurrentRendersKeepTheirOwnOutput(t *testing.T) {
	sources := []string{"# one\n\n- [x] a\n\n| a |\n|---|\n| 1 |", "two &amp; `code\nspan` <b>", strings.Repeat("long *post* ", 6000)}
	want := make([]Rendered, len(sources))
	for i, s := range sources {
		want[i] = Render(s)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for j := range 50 {
				i := (g + j) % len(sources)
				if got := Render(sources[i]); got != want[i] {
					t.Errorf("render %d of source %d = %q, want %q", j, i, got.HTML, want[i].HTML)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestTableCellsWithoutOrCenteredAlignment(t *testing.T) {
	got := Render("| a | b |\n|---|:-:|\n| 1 | 2 |").HTML
	want := "<table>\n<thead>\n<tr>\n<th>a</th>\n<th align=\"center\">b</th>\n</tr>\n</thead>\n<tbody>\n<tr>\n<td>1</td>\n<td align=\"center\">2</td>\n</tr>\n</tbody>\n</table>\n"
	if got != want {
		t.Errorf("HTML = %q, want %q", got, want)
	}
}
