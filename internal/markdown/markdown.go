// Package markdown renders what writers post (SPEC §3.12): CommonMark with GitHub's tables, strikethrough, autolinks
// and task lists (goldmark), reduced by an allow-list sanitizer (bluemonday) to HTML that can be put in a page as it
// is. It runs once, when a post is written; the HTML and the plain text are stored beside the source, and reads
// never render (docs/markdown.md).
//
// What the HTML may hold:
//   - raw HTML in the source is never passed through: it shows as the text it was typed as, escaped, and the
//     sanitizer would drop what escaped that; no script, style, event handler, iframe, svg or form survives;
//   - links to http, https and mailto URLs, or relative ones; external links (any with a scheme, or starting with
//     "//") carry rel="nofollow ugc noopener";
//   - images only from the board's media service: a relative URL of one key under /media/. Any other image
//     becomes a plain link to its URL, so a post cannot make its readers' browsers fetch from elsewhere;
//   - task-list checkboxes, always disabled, labelled "done" or "to do".
//
// Line breaks inside a paragraph stay soft (a newline in the HTML, as CommonMark has it); the web shows them as
// breaks with white-space: pre-wrap on paragraphs, as forums do.
package markdown

import (
	"bufio"
	"bytes"
	"html"
	"regexp"
	"strings"
	"sync"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Rendered is a post's source rendered: HTML to show as it is, and the plain text for excerpts, search and
// notifications.
type Rendered struct {
	HTML string
	Text string
}

// externalRel is the rel of every link that leaves the board.
const externalRel = "nofollow ugc noopener"

// mediaURL matches the URL of one key of the board's media service (GET /media/{key}), the only images a post may
// show: one path segment, no dot segment.
var mediaURL = regexp.MustCompile(`^/media/[A-Za-z0-9][A-Za-z0-9._-]*$`)

var (
	md = goldmark.New(
		// extension.GFM; table cells are rendered by alignedTableCells.
		goldmark.WithExtensions(extension.Linkify, extension.Strikethrough, extension.TaskList, extension.Table),
		goldmark.WithParserOptions(parser.WithInlineParsers(util.Prioritized(mentionParser{}, 500)),
			parser.WithASTTransformers(util.Prioritized(linkRules{}, 100))),
		// The renderer's unsafe mode stays off: links and images with javascript:, vbscript:, file: or data: URLs
		// lose their URL. Raw HTML shows as the text it was typed as (rawHTMLAsText); task-list checkboxes say what
		// they are (labelledCheckBoxes). Priority 0 goes before goldmark's own renderers for the same nodes.
		goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(rawHTMLAsText{}, 0),
			util.Prioritized(labelledCheckBoxes{}, 0), util.Prioritized(alignedTableCells{}, 0),
			util.Prioritized(mentionLinks{}, 0))),
	)
	policy = newPolicy()
)

// newPolicy is the allow-list: the elements and attributes goldmark writes for the syntax above, nothing else.
func newPolicy() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements("p", "br", "hr", "em", "strong", "del", "code", "pre", "blockquote", "ul", "ol", "li",
		"h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td")
	p.AllowAttrs("start").Matching(bluemonday.Integer).OnElements("ol")
	p.AllowAttrs("align").Matching(regexp.MustCompile(`^(left|center|right)$`)).OnElements("th", "td")
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^language-[A-Za-z0-9_+#.-]+$`)).OnElements("code")
	p.AllowAttrs("href").OnElements("a")
	p.AllowAttrs("rel").Matching(regexp.MustCompile("^" + externalRel + "$")).OnElements("a")
	p.AllowAttrs("title").OnElements("a", "img")
	p.AllowAttrs("src").Matching(mediaURL).OnElements("img")
	p.AllowAttrs("alt").OnElements("img")
	p.AllowAttrs("type").Matching(regexp.MustCompile(`^checkbox$`)).OnElements("input")
	p.AllowAttrs("checked", "disabled").Matching(regexp.MustCompile(`^(|checked|disabled)$`)).OnElements("input")
	p.AllowAttrs("aria-label").Matching(regexp.MustCompile("^(" + doneLabel + "|" + toDoLabel + ")$")).OnElements("input")
	p.AllowURLSchemes("http", "https", "mailto")
	p.AllowRelativeURLs(true)
	p.RequireParseableURLs(true)
	return p
}

// renderBuffers are what one Render writes into and throws away; pooled, since a render of a long post would
// otherwise allocate them afresh each time, about a quarter of its garbage.
type renderBuffers struct {
	goldmark  bytes.Buffer  // goldmark's HTML, before sanitizing
	writer    *bufio.Writer // goldmark's renderer writes through it; given none, it would allocate its own
	sanitized bytes.Buffer
	text      bytes.Buffer
}

var renderBufferPool = sync.Pool{New: func() any {
	b := new(renderBuffers)
	b.writer = bufio.NewWriter(&b.goldmark)
	return b
}}

// maxPooledBuffer is the largest buffer put back in the pool: a huge post should not keep its memory alive.
const maxPooledBuffer = 64 << 10

// Render renders a post's Markdown source. It never fails: whatever the source, the HTML is sanitized.
func Render(source string) Rendered {
	src := []byte(source)
	doc := md.Parser().Parse(text.NewReader(src))
	bufs := renderBufferPool.Get().(*renderBuffers)
	defer func() {
		if bufs.goldmark.Cap() <= maxPooledBuffer && bufs.sanitized.Cap() <= maxPooledBuffer && bufs.text.Cap() <= maxPooledBuffer {
			renderBufferPool.Put(bufs)
		}
	}()
	bufs.goldmark.Reset()
	bufs.writer.Reset(&bufs.goldmark)
	// goldmark's renderer fails only when its writer does, and a bytes.Buffer does not; nor does the sanitizer fail
	// on HTML read from memory. Either way, show the text instead.
	if err := md.Renderer().Render(bufs.writer, src, doc); err != nil {
		return Legacy(source)
	}
	bufs.sanitized.Reset()
	if err := policy.SanitizeReaderToWriter(bytes.NewReader(bufs.goldmark.Bytes()), &bufs.sanitized); err != nil {
		return Legacy(source)
	}
	return Rendered{HTML: bufs.sanitized.String(), Text: plainText(doc, src, &bufs.text)}
}

// Sanitize reduces HTML to the allow-list of Render, for checks that a stored HTML is what Render would keep.
func Sanitize(h string) string { return policy.Sanitize(h) }

// Legacy is a post written before Markdown, shown as it always was: its text escaped, in one paragraph whose line
// breaks and spaces the page keeps (white-space: pre-wrap). Its plain text is its content.
func Legacy(content string) Rendered {
	return Rendered{HTML: "<p>" + html.EscapeString(content) + "</p>", Text: content}
}

// rawHTMLAsText renders raw HTML in the source as text, escaped: a writer who types "<b>" or "<script>" sees it
// as typed, as on the plain-text board before, rather than have it vanish.
type rawHTMLAsText struct{}

func (rawHTMLAsText) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindRawHTML, func(w util.BufWriter, source []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			segments := n.(*ast.RawHTML).Segments
			for i := range segments.Len() {
				segment := segments.At(i)
				_, _ = w.Write(util.EscapeHTML(segment.Value(source)))
			}
		}
		return ast.WalkSkipChildren, nil
	})
	reg.Register(ast.KindHTMLBlock, func(w util.BufWriter, source []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		block := n.(*ast.HTMLBlock)
		var text []byte
		for i := range block.Lines().Len() {
			line := block.Lines().At(i)
			text = append(text, line.Value(source)...)
		}
		if block.HasClosure() {
			text = append(text, block.ClosureLine.Value(source)...)
		}
		_, _ = w.WriteString("<p>")
		_, _ = w.Write(util.EscapeHTML(bytes.TrimRight(text, "\n")))
		_, _ = w.WriteString("</p>\n")
		return ast.WalkContinue, nil
	})
}

// Labels of task-list checkboxes: a field without a label is lost on a screen reader.
const (
	doneLabel   = "done"
	toDoLabel   = "to do"
	checkBoxTag = `<input type="checkbox" disabled=""`
)

// labelledCheckBoxes renders a task list's checkboxes disabled and labelled.
type labelledCheckBoxes struct{}

func (labelledCheckBoxes) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(extast.KindTaskCheckBox, func(w util.BufWriter, _ []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		if n.(*extast.TaskCheckBox).IsChecked {
			_, _ = w.WriteString(checkBoxTag + ` checked="" aria-label="` + doneLabel + `"> `)
		} else {
			_, _ = w.WriteString(checkBoxTag + ` aria-label="` + toDoLabel + `"> `)
		}
		return ast.WalkContinue, nil
	})
}

// alignedTableCells renders table cells with their alignment as an attribute, as goldmark's
// extension.TableCellAlignAttribute does (the sanitizer allows no style), without the two fmt.Fprintf a cell costs
// there: a tenth of goldmark's rendering of a post with a table. The parser reads no attributes, so cells have none
// to write.
type alignedTableCells struct{}

func (alignedTableCells) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(extast.KindTableCell, func(w util.BufWriter, _ []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		tag := "td"
		if n.Parent().Kind() == extast.KindTableHeader {
			tag = "th"
		}
		if !entering {
			_, _ = w.WriteString("</")
			_, _ = w.WriteString(tag)
			_, _ = w.WriteString(">\n")
			return ast.WalkContinue, nil
		}
		_ = w.WriteByte('<')
		_, _ = w.WriteString(tag)
		if align := n.(*extast.TableCell).Alignment; align != extast.AlignNone {
			_, _ = w.WriteString(` align="`)
			_, _ = w.WriteString(align.String())
			_ = w.WriteByte('"')
		}
		_ = w.WriteByte('>')
		return ast.WalkContinue, nil
	})
}

// linkRules is the AST transformer that marks external links, turns images from outside the media service into
// links, and mentions inside a link's text into text.
type linkRules struct{}

func (linkRules) Transform(doc *ast.Document, reader text.Reader, _ parser.Context) {
	var images []*ast.Image
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			markExternal(n, n.Destination)
			unlinkMentions(n)
		case *ast.AutoLink:
			if n.AutoLinkType == ast.AutoLinkURL {
				markExternal(n, n.URL(reader.Source()))
			}
		case *ast.Image:
			unlinkMentions(n)
			if !mediaURL.Match(n.Destination) {
				images = append(images, n)
			}
		}
		return ast.WalkContinue, nil
	})
	for _, img := range images {
		link := ast.NewLink()
		link.Destination, link.Title = img.Destination, img.Title
		for c := img.FirstChild(); c != nil; {
			next := c.NextSibling()
			link.AppendChild(link, c)
			c = next
		}
		if !link.HasChildren() {
			link.AppendChild(link, ast.NewString(img.Destination))
		}
		markExternal(link, link.Destination)
		img.Parent().ReplaceChild(img.Parent(), img, link)
	}
}

// markExternal sets the rel of a link that leaves the board. A link of another scheme gets none: the sanitizer
// takes its URL, and with it the link.
func markExternal(n ast.Node, destination []byte) {
	if scheme, ok := schemeOf(string(destination)); ok || scheme == "http" || scheme == "https" || scheme == "mailto" {
		n.SetAttributeString("rel", externalRel)
	}
}

// schemeOf returns a URL's scheme, lower case ("" for none), and whether the URL leaves the board without one: it
// starts with two slashes, or with what browsers read as two slashes ("/\", "\").
func schemeOf(url string) (scheme string, offBoard bool) {
	if strings.HasPrefix(url, "//") || strings.HasPrefix(url, `/\`) || strings.HasPrefix(url, `\`) {
		return "", true
	}
	end := strings.IndexAny(url, "/?#")
	if end < 0 {
		end = len(url)
	}
	if colon := strings.IndexByte(url[:end], ':'); colon >= 0 {
		return strings.ToLower(url[:colon]), false
	}
	return "", false
}

// plainText is the text of a parsed post as its HTML shows it: entities and escapes resolved, a line per block,
// table cells apart by a space, images by their alt text, raw HTML as typed. It walks the tree the HTML was
// rendered from rather than parse the HTML again, which would cost a tenth of the render. b is scratch space.
func plainText(doc ast.Node, source []byte, b *bytes.Buffer) string {
	b.Reset()
	lines := func(ls *text.Segments) {
		for i := range ls.Len() {
			line := ls.At(i)
			b.Write(line.Value(source))
		}
	}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		switch n := n.(type) {
		case *ast.Text:
			if entering {
				b.Write(resolved(n.Segment.Value(source), n.IsRaw()))
				if n.SoftLineBreak() || n.HardLineBreak() {
					b.WriteByte('\n')
				}
			}
			return ast.WalkContinue, nil
		case *ast.String:
			if entering {
				b.Write(resolved(n.Value, n.IsRaw()))
			}
			return ast.WalkContinue, nil
		case *ast.CodeSpan:
			for c := n.FirstChild(); c != nil && entering; c = c.NextSibling() {
				if t, ok := c.(*ast.Text); ok {
					writeOnOneLine(b, t.Segment.Value(source))
				}
			}
			return ast.WalkSkipChildren, nil
		case *ast.AutoLink:
			if entering {
				b.Write(n.Label(source))
			}
			return ast.WalkSkipChildren, nil
		case *ast.RawHTML:
			if entering {
				lines(n.Segments)
			}
			return ast.WalkSkipChildren, nil
		case *ast.HTMLBlock:
			if entering {
				lines(n.Lines())
				if n.HasClosure() {
					b.Write(n.ClosureLine.Value(source))
				}
			}
		case *ast.FencedCodeBlock, *ast.CodeBlock:
			if entering {
				lines(n.Lines())
			}
		case *extast.TableCell:
			if !entering {
				b.WriteByte(' ')
			}
			return ast.WalkContinue, nil
		}
		if !entering && n.Type() == ast.TypeBlock {
			b.WriteByte('\n')
		}
		return ast.WalkContinue, nil
	})
	return squeezeNewlines(b.Bytes())
}

// resolved is a text's value with its backslash escapes and character references resolved, as the HTML shows it.
// Most texts have neither, and are their value.
func resolved(v []byte, raw bool) []byte {
	if raw || !bytes.ContainsAny(v, `\&`) {
		return v
	}
	return util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(v)))
}

// writeOnOneLine writes v with its newlines as spaces, as a code span shows.
func writeOnOneLine(b *bytes.Buffer, v []byte) {
	for {
		i := bytes.IndexByte(v, '\n')
		if i < 0 {
			b.Write(v)
			return
		}
		b.Write(v[:i])
		b.WriteByte(' ')
		v = v[i+1:]
	}
}

// squeezeNewlines trims every line and drops the empty ones.
func squeezeNewlines(s []byte) string {
	var out strings.Builder
	out.Grow(len(s))
	for len(s) > 0 {
		line := s
		if i := bytes.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = nil
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if out.Len() > 0 {
				out.WriteByte('\n')
			}
			out.Write(line)
		}
	}
	return out.String()
}
