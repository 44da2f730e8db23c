package sqlindex

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"board/internal/search"
	"board/internal/sqldb"
)

// maxTermBytes is the longest term whose word is its own hex: "w" and 80 hex digits, 81 characters, within InnoDB's
// limit of 84 (innodb_ft_max_token_size). A longer term's word is "h" and the 64 hex digits of its SHA-256.
const maxTermBytes = 40

// word is the full-text word of an analyzed term (see the package doc).
func word(term string) string {
	if len(term) > maxTermBytes {
		sum := sha256.Sum256([]byte(term))
		return "h" + hex.EncodeToString(sum[:])
	}
	return "w" + hex.EncodeToString([]byte(term))
}

// documentWords returns the words of a live document's title and content, analyzed as bleve's text field is, in
// order and with repeats, separated by spaces; "" for a hidden or deleted document, which must not match.
func documentWords(d search.Doc) string {
	if d.State() != search.Live {
		return ""
	}
	text := d.Content
	if d.Title != "" {
		text = d.Title + "\n" + d.Content
	}
	var b strings.Builder
	for _, t := range search.Analyze(text) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(word(string(t.Term)))
	}
	return b.String()
}

// matchAll returns the full-text query, in the dialect's syntax, that matches the documents holding every one of
// terms: "+w.. +w.." for InnoDB's boolean mode, `"w.." AND "w.."` for FTS5. It holds words and syntax only.
func matchAll(dialect sqldb.Dialect, terms []string) string {
	words := make([]string, len(terms))
	for i, t := range terms {
		words[i] = word(t)
	}
	if dialect == sqldb.MySQL {
		return "+" + strings.Join(words, " +")
	}
	return `"` + strings.Join(words, `" AND "`) + `"`
}
