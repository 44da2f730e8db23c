package search

import (
	"bytes"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/registry"
	porterstemmer "github.com/blevesearch/go-porterstemmer"
	"github.com/blevesearch/segment"
)

// AnalyzerName is the name of board's analyzer in bleve's registry. Every engine analyzes text with it, documents
// and queries alike, so that they all find the same documents for the same query.
//
// It splits text into words (Unicode word boundaries), splits a word that mixes Hangul with other letters, folds
// full-width forms and case, drops English stop words, cuts each run of Hangul or Han characters into overlapping
// pairs of characters (bigrams), and stems English words (Porter). Bigrams are what let a Korean word be found inside
// a longer word or with a particle attached ("게시판" in "자유게시판에"), without a dictionary: the query's bigrams
// must all be in the document.
//
// These are the steps of a chain of bleve's unicode tokenizer and its cjk_width, en stop, cjk_bigram and porter
// filters with two of board's own (see hangulRuns and lowerCase), done in one pass with the same tokens as a result
// (analyze_test.go runs both on the same texts): the analyzer is most of what indexing costs, and the chain copies
// every term at each step.
const AnalyzerName = "board"

func init() {
	err := registry.RegisterAnalyzer(AnalyzerName, func(_ map[string]any, cache *registry.Cache) (analysis.Analyzer, error) {
		stop, err := cache.TokenMapNamed(en.StopName)
		if err != nil {
			return nil, err
		}
		return &boardAnalyzer{stop: stop}, nil
	})
	if err != nil {
		panic(err)
	}
	analyzer, err = registry.NewCache().AnalyzerNamed(AnalyzerName)
	if err != nil {
		panic(err)
	}
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

type boardAnalyzer struct {
	stop analysis.TokenMap // English stop words
}

// Analyze returns the tokens of input. Terms share input's bytes where no step changed them, as the unicode
// tokenizer's do.
func (a *boardAnalyzer) Analyze(input []byte) analysis.TokenStream {
	words := tokenize(input)
	buf := make(termBuffer, 0, len(input)/4)
	kept := make(analysis.TokenStream, 0, len(words))
	add := func(t *analysis.Token) {
		t.Term = lowerCase(foldWidth(t), &buf)
		if _, stop := a.stop[string(t.Term)]; !stop {
			kept = append(kept, t)
		}
	}
	for _, t := range words {
		// The Hangul runs are cut on the words as the text has them: their offsets come from the term's bytes, which
		// width folding may change.
		runs := splitHangul(t)
		if runs == nil {
			add(t)
		}
		for _, t := range runs {
			add(t)
		}
	}
	out := bigrams(kept)
	for _, t := range out {
		t.Term = stem(t.Term, &buf)
	}
	return out
}

// termBuffer holds the terms that a step of one call changes, one after another.
type termBuffer []byte

// keep writes term into buf and returns it, capped at its end so that writing the next never changes it.
func keep[T string | []byte](buf *termBuffer, term T) []byte {
	at := len(*buf)
	*buf = append(*buf, term...)
	return (*buf)[at:len(*buf):len(*buf)]
}

// Word break classes (UAX #29) of the characters tokenize reads itself: ASCII and Hangul syllables. wbComplex is
// every other character, left to the segmenter.
type wbClass uint8

const (
	wbOther wbClass = iota
	wbLetter
	wbNumeric
	wbExtendNumLet // _
	wbMidLetter    // :
	wbMidNumLet    // . '
	wbMidNum       // , ;
	wbComplex
)

var asciiClass = func() (c [utf8.RuneSelf]wbClass) {
	for b := 'a'; b <= 'z'; b++ {
		c[b], c[b-'a'+'A'] = wbLetter, wbLetter
	}
	for b := '0'; b <= '9'; b++ {
		c[b] = wbNumeric
	}
	c['_'], c[':'], c['.'], c['\''], c[','], c[';'] = wbExtendNumLet, wbMidLetter, wbMidNumLet, wbMidNumLet, wbMidNum, wbMidNum
	return c
}()

// classAt returns the class of the character at b[i] and its length.
func classAt(b []byte, i int) (wbClass, int) {
	if c := b[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	if r, n := utf8.DecodeRune(b[i:]); isHangulSyllable(r) {
		return wbLetter, n
	}
	return wbComplex, 0
}

func isHangulSyllable(r rune) bool { return r >= 0xAC00 && r <= 0xD7A3 }

// tokenize returns the words of input as bleve's unicode tokenizer does: the segments of the Unicode word boundaries
// (github.com/blevesearch/segment) that are words, numbers or ideographs, numbered from 1. Where the text is ASCII
// and Hangul syllables it finds the boundaries itself, reading each character once (the segmenter's state machine,
// called once per segment, is most of the tokenizer's time); any other character is left to the segmenter, which
// then reads the segment that holds it.
func tokenize(input []byte) analysis.TokenStream {
	tokens := make([]analysis.Token, 0, len(input)/6+1)
	out := make(analysis.TokenStream, 0, cap(tokens))
	for at := 0; at < len(input); {
		end, typ, ok := scanSegment(input, at)
		if !ok {
			advance, seg, segType, err := segment.SegmentWords(input[at:], true)
			if err != nil || seg == nil { // where the unicode tokenizer stops
				break
			}
			end, typ = at+advance, tokenType(segType)
		}
		if typ >= 0 {
			if len(tokens) == cap(tokens) {
				tokens = make([]analysis.Token, 0, cap(tokens))
			}
			tokens = append(tokens, analysis.Token{Term: input[at:end:end], Start: at, End: end, Position: len(out) + 1,
				Type: typ})
			out = append(out, &tokens[len(tokens)-1])
		}
		at = end
	}
	return out
}

// tokenType is the unicode tokenizer's type of a segment; -1 for a segment that is no word.
func tokenType(segType int) analysis.TokenType {
	switch segType {
	case segment.None:
		return -1
	case segment.Ideo, segment.Kana:
		return analysis.Ideographic
	case segment.Number:
		return analysis.Numeric
	}
	return analysis.AlphaNumeric
}

// scanSegment returns the end of the segment at b[at:] and its type (-1: no word), as the segmenter would: ok is
// false when a character it reads is one it leaves to the segmenter. A word is the longest run of letters, digits
// and _, where a : . or ' between two letters, or a , ; . or ' between two digits, is part of the word (UAX #29 WB5
// to WB13b); a word without letters and with a digit is a number. Anything else is a segment of one character.
func scanSegment(b []byte, at int) (end int, typ analysis.TokenType, ok bool) {
	class, n := classAt(b, at)
	switch class {
	case wbComplex:
		return 0, 0, false
	case wbLetter, wbNumeric, wbExtendNumLet:
	default:
		// A segment of one character, unless what follows is a character that joins it (a combining mark).
		if at+n < len(b) {
			if next, _ := classAt(b, at+n); next == wbComplex {
				return 0, 0, false
			}
		}
		return at + n, -1, true
	}
	letters, digits := class == wbLetter, class == wbNumeric
	last := class
	end = at + n
	for end < len(b) {
		class, n := classAt(b, end)
		switch class {
		case wbLetter, wbNumeric, wbExtendNumLet:
			letters, digits = letters || class == wbLetter, digits || class == wbNumeric
			last = class
			end += n
			continue
		case wbMidLetter, wbMidNumLet, wbMidNum:
			canJoin := last == wbLetter && class != wbMidNum || last == wbNumeric && class != wbMidLetter
			if !canJoin || end+n == len(b) {
				break
			}
			next, m := classAt(b, end+n)
			if next == wbComplex {
				return 0, 0, false
			}
			if next == last && (next == wbLetter || next == wbNumeric) {
				end += n + m
				continue
			}
		case wbComplex:
			return 0, 0, false
		}
		break
	}
	if digits && !letters {
		return end, analysis.Numeric, true
	}
	return end, analysis.AlphaNumeric, true
}

// splitHangul splits a word that mixes Hangul with other letters ("board게시판") into its runs, and marks the
// Hangul runs Ideographic. The Unicode word boundaries take Hangul for ordinary letters, so the bigrams, which only
// cut Ideographic tokens, would otherwise keep a Korean word whole and a query could not find it inside a longer
// word. It returns nil when t is one run, which it marks Ideographic if Hangul.
func splitHangul(t *analysis.Token) []*analysis.Token {
	if t.Type == analysis.Ideographic {
		return nil
	}
	runs, hangul := 0, false
	for i := 0; i < len(t.Term); {
		r, n := rune(t.Term[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRune(t.Term[i:])
		}
		if h := isHangul(r); h != hangul || runs == 0 {
			runs, hangul = runs+1, h
		}
		i += n
	}
	if runs <= 1 {
		if hangul {
			t.Type = analysis.Ideographic
		}
		return nil
	}
	made := make([]analysis.Token, runs)
	out := make([]*analysis.Token, runs)
	for i, start := 0, 0; start < len(t.Term); i++ {
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
		made[i] = analysis.Token{Term: t.Term[start:end:end], Start: t.Start + start, End: t.Start + end,
			Position: t.Position, Type: t.Type, KeyWord: t.KeyWord}
		if hangul {
			made[i].Type = analysis.Ideographic
		}
		out[i] = &made[i]
		start = end
	}
	return out
}

func isHangul(r rune) bool {
	if r < 0x1100 {
		return false
	}
	return isHangulSyllable(r) || unicode.Is(unicode.Hangul, r)
}

// foldWidth folds full-width ASCII and half-width Katakana (bleve's cjk_width filter), which are characters of 3
// bytes that begin with 0xEF; it also makes the term valid UTF-8 as the filter does.
func foldWidth(t *analysis.Token) []byte {
	if bytes.IndexByte(t.Term, 0xEF) < 0 && utf8.Valid(t.Term) {
		return t.Term
	}
	return widthFilter.Filter(analysis.TokenStream{t})[0].Term
}

var widthFilter = cjk.NewCJKWidthFilter()

// lowerCase folds case with the standard library. bleve's own lower-case filter rewrites a term in place and garbles
// it when a letter's lower case is shorter than the letter (İ, the Kelvin sign): "İstanbul" would never be found. An
// ASCII term is folded into buf, if it has upper case at all.
func lowerCase(term []byte, buf *termBuffer) []byte {
	upper := false
	for _, c := range term {
		if c >= utf8.RuneSelf {
			return lowerUnicode(term)
		}
		upper = upper || 'A' <= c && c <= 'Z'
	}
	if !upper {
		return term
	}
	lower := keep(buf, term)
	for i, c := range lower {
		if 'A' <= c && c <= 'Z' {
			lower[i] = c + 'a' - 'A'
		}
	}
	return lower
}

// lowerUnicode folds a term that is not ASCII; Hangul, most of what it sees, has no case.
func lowerUnicode(term []byte) []byte {
	for i := 0; i < len(term); {
		r, n := utf8.DecodeRune(term[i:])
		if !isHangulSyllable(r) {
			return bytes.ToLower(term)
		}
		i += n
	}
	return term
}

// bigrams cuts the Ideographic tokens into overlapping pairs of characters, as bleve's cjk_bigram filter does: the
// characters of adjacent Ideographic tokens are one run, a run of one character is a token of its own, and every
// token is numbered again from 1.
func bigrams(in analysis.TokenStream) analysis.TokenStream {
	out := make(analysis.TokenStream, 0, len(in)*2)
	var made []analysis.Token
	add := func(t analysis.Token) {
		if len(made) == cap(made) {
			made = make([]analysis.Token, 0, max(16, len(in)))
		}
		t.Position = len(out) + 1
		made = append(made, t)
		out = append(out, &made[len(made)-1])
	}
	// prev is the last character of the run so far, when it is alone (a single) or the end of a pair.
	var prev analysis.Token
	inRun, single := false, false
	flush := func() {
		if inRun && single {
			add(analysis.Token{Type: analysis.Single, Term: prev.Term, Start: prev.Start, End: prev.End})
		}
		inRun = false
	}
	for _, t := range in {
		if t.Type != analysis.Ideographic {
			flush()
			t.Position = len(out) + 1
			out = append(out, t)
			continue
		}
		for i := 0; i < len(t.Term); {
			_, n := utf8.DecodeRune(t.Term[i:]) // valid UTF-8: foldWidth made it so
			ch := analysis.Token{Term: t.Term[i : i+n], Start: t.Start + i, End: t.Start + i + n}
			i += n
			if inRun && ch.Start != prev.End {
				flush()
			}
			if !inRun {
				prev, inRun, single = ch, true, true
				continue
			}
			add(analysis.Token{Type: analysis.Double, Term: pair(prev.Term, ch.Term), Start: prev.Start, End: ch.End})
			prev, single = ch, false
		}
	}
	flush()
	return out
}

// pair returns the term of two adjacent characters: a slice of the text when both are the text's own bytes.
func pair(a, b []byte) []byte {
	if len(a) > 0 && len(b) > 0 && cap(a) >= len(a)+len(b) && &a[:len(a)+1][len(a)] == &b[0] {
		return a[: len(a)+len(b) : len(a)+len(b)]
	}
	return append(append(make([]byte, 0, len(a)+len(b)), a...), b...)
}

// stem returns the Porter stem of term (bleve's porter filter). A term of one or two characters is its own stem.
// Stems are cached: text repeats its words, and the stemmer, which works on a copy of the term in runes, costs
// several map lookups. A new stem is written into buf.
func stem(term []byte, buf *termBuffer) []byte {
	if len(term) <= 2 || utf8.RuneCount(term) <= 2 {
		return term
	}
	stems.mu.RLock()
	s, ok := stems.m[string(term)]
	stems.mu.RUnlock()
	if !ok {
		s = string(porterstemmer.StemWithoutLowerCasing(bytes.Runes(term)))
		stems.mu.Lock()
		if len(stems.m) >= stemsCached {
			clear(stems.m)
		}
		stems.m[string(term)] = s
		stems.mu.Unlock()
	}
	if s == string(term) {
		return term
	}
	return keep(buf, s)
}

// stemsCached bounds the stem cache: it is emptied when it holds that many words (a few MB).
const stemsCached = 1 << 16

var stems = struct {
	mu sync.RWMutex
	m  map[string]string
}{m: make(map[string]string, stemsCached)}
