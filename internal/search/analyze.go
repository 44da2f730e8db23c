package search

import (
	"bytes"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	unicodetokenizer "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/registry"
)

// AnalyzerName is the name of board's analyzer in bleve's registry. Every engine analyzes text with it, documents
// and queries alike, so that they all find the same documents for the same query.
//
// It splits text into words (Unicode word boundaries), splits a word that mixes Hangul with other letters, folds
// full-width forms and case, drops English stop words, cuts each run of Hangul or Han characters into overlapping
// pairs of characters (bigrams), and stems English words (Porter). Bigrams are what let a Korean word be found inside a longer word or with a particle attached
// ("게시판" in "자유게시판에"), without a dictionary: the query's bigrams must all be in the document.
const AnalyzerName = "board"

// Board's own token filters: one makes Hangul runs look like Han to the bigram filter; the other folds case.
const (
	hangulName    = "board_hangul"
	lowercaseName = "board_lowercase"
)

func init() {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(registry.RegisterTokenFilter(hangulName, func(map[string]any, *registry.Cache) (analysis.TokenFilter, error) {
		return hangulFilter{}, nil
	}))
	must(registry.RegisterTokenFilter(lowercaseName, func(map[string]any, *registry.Cache) (analysis.TokenFilter, error) {
		return lowercaseFilter{}, nil
	}))
	must(registry.RegisterAnalyzer(AnalyzerName, func(_ map[string]any, cache *registry.Cache) (analysis.Analyzer, error) {
		tokenizer, err := cache.TokenizerNamed(unicodetokenizer.Name)
		if err != nil {
			return nil, err
		}
		a := &analysis.DefaultAnalyzer{Tokenizer: tokenizer}
		// The Hangul filter runs first, on the words as the text has them: it computes its runs' offsets from the
		// term's bytes, which width and case folding may change.
		for _, name := range []string{hangulName, cjk.WidthName, lowercaseName, en.StopName, cjk.BigramName, porter.Name} {
			f, err := cache.TokenFilterNamed(name)
			if err != nil {
				return nil, err
			}
			a.TokenFilters = append(a.TokenFilters, f)
		}
		return a, nil
	}))
	var err error
	analyzer, err = registry.NewCache().AnalyzerNamed(AnalyzerName)
	must(err)
}

// analyzer is board's analyzer outside any index, for the engines that do not analyze themselves and for queries.
var analyzer analysis.Analyzer

// Analyze returns the tokens of text: each term with its byte offsets in text.
func Analyze(text string) analysis.TokenStream { return analyzer.Analyze([]byte(text)) }

// Terms returns the distinct terms of text, in their first order: what a document must hold to match a query.
func Terms(text string) []string {
	var terms []string
	seen := map[string]bool{}
	for _, t := range Analyze(text) {
		if term := string(t.Term); !seen[term] {
			seen[term] = true
			terms = append(terms, term)
		}
	}
	return terms
}

// hangulFilter splits a word that mixes Hangul with other letters ("board게시판") into its runs, and marks the
// Hangul runs Ideographic. The Unicode tokenizer takes Hangul for ordinary letters, so the bigram filter, which
// only splits Ideographic tokens, would otherwise keep a Korean word whole and a query could not find it inside a
// longer word.
type hangulFilter struct{}

func (hangulFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	out := in[:0:0]
	for _, t := range in {
		if t.Type == analysis.Ideographic || !hasHangul(t.Term) {
			out = append(out, t)
			continue
		}
		for start := 0; start < len(t.Term); {
			r, _ := utf8.DecodeRune(t.Term[start:])
			hangul := isHangul(r)
			end := start
			for end < len(t.Term) {
				r, n := utf8.DecodeRune(t.Term[end:])
				if isHangul(r) != hangul {
					break
				}
				end += n
			}
			run := &analysis.Token{Term: t.Term[start:end], Start: t.Start + start, End: t.Start + end,
				Position: t.Position, Type: t.Type, KeyWord: t.KeyWord}
			if hangul {
				run.Type = analysis.Ideographic
			}
			out = append(out, run)
			start = end
		}
	}
	return out
}

func hasHangul(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if isHangul(r) {
			return true
		}
		b = b[n:]
	}
	return false
}

func isHangul(r rune) bool { return unicode.Is(unicode.Hangul, r) }

// lowercaseFilter folds case with the standard library. bleve's own lower-case filter rewrites a term in place and
// garbles it when a letter's lower case is shorter than the letter (İ, the Kelvin sign): "İstanbul" would never be
// found.
type lowercaseFilter struct{}

func (lowercaseFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	for _, t := range in {
		t.Term = bytes.ToLower(t.Term)
	}
	return in
}
