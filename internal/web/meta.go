package web

import (
	"strings"
	"unicode/utf8"
)

// siteDescription describes the pages that have no summary of their own.
const siteDescription = "board: a bulletin board of articles and the discussions under them, in boards by topic."

// summaryRunes is about what search engines show of a description.
const summaryRunes = 160

func (l layout) description() string {
	if l.Description != "" {
		return l.Description
	}
	return siteDescription
}

func (l layout) kind() string {
	if l.Kind != "" {
		return l.Kind
	}
	return "website"
}

// summary is the start of a text as a page's description: its whitespace (line breaks, runs of spaces) made single
// spaces, and cut at a word boundary before summaryRunes with an ellipsis when longer.
func summary(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(text) <= summaryRunes {
		return text
	}
	runes := []rune(text)[:summaryRunes-1]
	cut := string(runes)
	if i := strings.LastIndexByte(cut, ' '); i > summaryRunes/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,.;:") + "…"
}
