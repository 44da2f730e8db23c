package markdown

import (
	"bytes"
	"unicode"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Mentions (SPEC §3.13): "@name", name in the username syntax ([a-z0-9_]{3,30}, any case), not preceded by a word
// character (an e-mail address is no mention), not inside code or a link, links to /u/{name}, which the web
// redirects to the user's page. No goldmark extension for it is maintained that we could judge better than these
// few lines: the ones published are parts of applications (GoToSocial's, say), not libraries.

// MaxMentions bounds the names a post notifies; the rest are ignored.
const MaxMentions = 20

// Username syntax bounds.
const (
	minName = 3
	maxName = 30
)

// MentionPath is where a mention links to, before the name.
const MentionPath = "/u/"

// kindMention is the node of a mention; its one child is the text "@name" as typed.
var kindMention = ast.NewNodeKind("Mention")

type mention struct {
	ast.BaseInline
	name []byte // lower case
}

func (m *mention) Kind() ast.NodeKind { return kindMention }

func (m *mention) Dump(source []byte, level int) {
	ast.DumpHelper(m, source, level, map[string]string{"Name": string(m.name)}, nil)
}

// mentionParser reads "@name" where the inline parser meets an "@".
type mentionParser struct{}

func (mentionParser) Trigger() []byte { return []byte{'@'} }

func (mentionParser) Parse(_ ast.Node, block text.Reader, _ parser.Context) ast.Node {
	if wordChar(block.PrecendingCharacter()) {
		return nil
	}
	line, segment := block.PeekLine()
	n := 1
	for n < len(line) && n <= maxName+1 && nameChar(line[n]) {
		n++
	}
	if size := n - 1; size < minName || size > maxName {
		return nil
	}
	block.Advance(n)
	m := &mention{name: bytes.ToLower(line[1:n])}
	m.AppendChild(m, ast.NewTextSegment(segment.WithStop(segment.Start+n)))
	return m
}

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// wordChar reports a character after which an "@" starts no mention: a letter, a digit or an underscore.
func wordChar(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// mentionLinks renders a mention as a link to the user's page, its text as typed.
type mentionLinks struct{}

func (mentionLinks) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(kindMention, func(w util.BufWriter, _ []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			_, _ = w.WriteString(`<a href="` + MentionPath)
			_, _ = w.Write(n.(*mention).name) // [a-z0-9_]: nothing to escape
			_, _ = w.WriteString(`">`)
		} else {
			_, _ = w.WriteString("</a>")
		}
		return ast.WalkContinue, nil
	})
}

// unlinkMentions turns the mentions inside a link's text back into text: a link in a link is no link.
func unlinkMentions(link ast.Node) {
	var inside []*mention
	_ = ast.Walk(link, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if m, ok := n.(*mention); ok && entering {
			inside = append(inside, m)
		}
		return ast.WalkContinue, nil
	})
	for _, m := range inside {
		m.Parent().ReplaceChild(m.Parent(), m, m.FirstChild())
	}
}

// Mentions returns the names a post's source mentions, lower case, each once, in the order they first come, at most
// MaxMentions of them.
func Mentions(source string) []string {
	src := []byte(source)
	if !bytes.ContainsRune(src, '@') {
		return nil
	}
	doc := md.Parser().Parse(text.NewReader(src))
	var names []string
	seen := map[string]bool{}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		m, ok := n.(*mention)
		if !ok || !entering {
			return ast.WalkContinue, nil
		}
		if name := string(m.name); !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
		if len(names) == MaxMentions {
			return ast.WalkStop, nil
		}
		return ast.WalkSkipChildren, nil
	})
	return names
}
