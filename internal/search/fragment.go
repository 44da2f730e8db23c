package search

import (
	"html"
	"strings"
	"unicode/utf8"
)

// fragmentRunes is about how much of a text a fragment shows.
const fragmentRunes = 160

// Fragment returns the part of text around its first match of terms (or its start, when nothing matches) as
// HTML-escaped text with every match in <mark>. A match is a span of text whose analyzed term is one of terms, so
// highlights agree with what the engines matched: "liked" is marked for the query "like", and overlapping Korean
// bigrams are marked as one span.
func Fragment(text string, terms []string) string {
	want := make(map[string]bool, len(terms))
	for _, t := range terms {
		want[t] = true
	}
	var spans [][2]int // byte ranges in text, in order, merged when they touch or overlap
	for _, tok := range Analyze(text) {
		// Offsets come from the analyzer, which may compute them from a term that folding changed: mark only spans
		// that lie on character boundaries.
		if !want[string(tok.Term)] || tok.Start < 0 || tok.End > len(text) || tok.Start >= tok.End ||
			!utf8.RuneStart(text[tok.Start]) || tok.End < len(text) && !utf8.RuneStart(text[tok.End]) {
			continue
		}
		if n := len(spans); n > 0 && tok.Start <= spans[n-1][1] {
			spans[n-1][1] = max(spans[n-1][1], tok.End)
			continue
		}
		spans = append(spans, [2]int{tok.Start, tok.End})
	}
	start, end := window(text, spans)
	var b strings.Builder
	if start > 0 {
		b.WriteString("…")
	}
	at := start
	for _, s := range spans {
		if s[1] <= start || s[0] >= end {
			continue
		}
		s[0], s[1] = max(s[0], start), min(s[1], end)
		b.WriteString(html.EscapeString(text[at:s[0]]))
		b.WriteString("<mark>")
		b.WriteString(html.EscapeString(text[s[0]:s[1]]))
		b.WriteString("</mark>")
		at = s[1]
	}
	b.WriteString(html.EscapeString(text[at:end]))
	if end < len(text) {
		b.WriteString("…")
	}
	return b.String()
}

// window picks the byte range of text a fragment shows: about fragmentRunes runes that start a little before the
// first match, cut at rune boundaries (and at a space when one is near).
func window(text string, spans [][2]int) (start, end int) {
	if len(spans) > 0 {
		start = spans[0][0]
		for back := 0; back < fragmentRunes/4 && start > 0; back++ {
			_, n := utf8.DecodeLastRuneInString(text[:start])
			start -= n
		}
		if i := strings.IndexAny(text[start:spans[0][0]], " \n\t"); i >= 0 && start > 0 {
			start += i + 1
		}
	}
	end = start
	for n := 0; n < fragmentRunes && end < len(text); n++ {
		_, size := utf8.DecodeRuneInString(text[end:])
		end += size
	}
	if end < len(text) {
		if i := strings.LastIndexAny(text[start:end], " \n\t"); i > (end-start)/2 {
			end = start + i
		}
	}
	return start, end
}
