package search

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	unicodetokenizer "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/registry"
)

func TestTerms(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"I liked the boards", "like board"},
		{"자유게시판에 글을", "자유 유게 게시 시판 판에 글을"},
		{"board게시판 ok", "board 게시 시판 ok"},
		{"ＢＯＡＲＤ", "board"},
		{"가", "가"},
		{"İstanbul게시판", "istanbul 게시 시판"},
		{"\u212Aelvin", "kelvin"},
		{"the게시판", "게시 시판"},
	} {
		if want := strings.Fields(c.want); !slices.Equal(Terms(c.text), want) {
			t.Errorf("Terms(%q) = %q, want %q", c.text, Terms(c.text), want)
		}
	}
}

// The analyzer gives the tokens (terms, offsets, positions, types) of the chain of bleve's tokenizer and filters it
// stands for, on texts made to reach each of its paths: word boundaries (ASCII and Hangul read by board, anything
// else by the segmenter), Hangul runs, width and case folding, stop words, bigrams of Hangul, Han and Katakana
// across adjacent words, stems, invalid UTF-8.
func TestAnalyzerIsTheChain(t *testing.T) {
	chain := referenceChain(t)
	texts := []string{
		"", "a", "The boards' liked posts, 1,000.5 km_h e.g. U.S.A. don't 3'4 a:b 1:2 a.1 1.a a1.b 1a.b _ __ _1_ a_.b",
		"자유게시판에 글을 올렸습니다. board게시판 게시판board 게.시 가1나 가_나 가'나",
		"ＢＯＡＲＤ ｂｏａｒｄ１２ İstanbul \u212Aelvin STRASSE straße ÉCOLE école",
		"漢字한글 漢字 한글漢字 カタカナ ひらがな ｶﾞｷﾞ ﾊﾟ ｱ",
		"a\u0301b e\u0301 !\u0301x 가\u0301나 a.\u0301b 1,\u03012 \u200Dx x\u200D",
		"😀 😀a 🇰🇷 a😀b ١٢٣ 1٢ abc١ αβγ Ωmega",
		"\xff \xffa a\xff 가\xff \xed\xa0\x80 \xe2\x82 abc\xe2",
		"\r\n a\r\nb \u2028 x\u00a0y \t\v\f",
		"the and of a an 게시판the the게시판",
		"running runs ran generalizations ponies caresses relational 가나다라마바사",
		"ㄱㄴ ᄀᄁ 각ㄱ aㄱ ﾡﾢ",
	}
	alphabet := []string{"a", "Z", "q", "0", "9", "_", ":", ".", "'", ",", ";", " ", "\n", "\r", "!", "\"", "-", "가",
		"게", "시", "판", "Ｂ", "ｏ", "１", "İ", "\u212A", "漢", "字", "ｶ", "ﾞ", "カ", "ひ", "\u0301", "\u200D", "é",
		"ß", "ㄱ", "ᄀ", "😀", "١", "\xff", "\xed", "\xa0", "א", "the", "ing", "ed", "s", "\u00ad"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		var b strings.Builder
		for range r.IntN(24) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	for _, text := range texts {
		if got, want := describe(analyzer.Analyze([]byte(text))), describe(chain.Analyze([]byte(text))); got != want {
			t.Fatalf("Analyze(%q):\n got %s\nwant %s", text, got, want)
		}
	}
}

// FuzzAnalyzer compares the analyzer with the chain on any text.
func FuzzAnalyzer(f *testing.F) {
	for _, s := range []string{"I liked the boards", "자유게시판에 a.b 1,2 ＢＯ ｶﾞ 漢字한글", "a\u0301b\xff"} {
		f.Add(s)
	}
	chain := referenceChain(f)
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := describe(analyzer.Analyze([]byte(text))), describe(chain.Analyze([]byte(text))); got != want {
			t.Fatalf("Analyze(%q):\n got %s\nwant %s", text, got, want)
		}
	})
}

func describe(ts analysis.TokenStream) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "[%q %d-%d #%d t%d k%v] ", t.Term, t.Start, t.End, t.Position, t.Type, t.KeyWord)
	}
	return b.String()
}

// referenceChain is the analyzer as a chain of bleve's tokenizer and filters with board's Hangul and case filters as
// they were written first, one step at a time.
func referenceChain(t testing.TB) analysis.Analyzer {
	cache := registry.NewCache()
	tokenizer, err := cache.TokenizerNamed(unicodetokenizer.Name)
	if err != nil {
		t.Fatal(err)
	}
	a := &analysis.DefaultAnalyzer{Tokenizer: tokenizer}
	for _, name := range []string{"", cjk.WidthName, "", en.StopName, cjk.BigramName, porter.Name} {
		if name == "" {
			a.TokenFilters = append(a.TokenFilters, nil)
			continue
		}
		f, err := cache.TokenFilterNamed(name)
		if err != nil {
			t.Fatal(err)
		}
		a.TokenFilters = append(a.TokenFilters, f)
	}
	a.TokenFilters[0], a.TokenFilters[2] = refHangulFilter{}, refLowercaseFilter{}
	return a
}

type refHangulFilter struct{}

func (refHangulFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	out := in[:0:0]
	for _, t := range in {
		if t.Type == analysis.Ideographic || !refHasHangul(t.Term) {
			out = append(out, t)
			continue
		}
		for start := 0; start < len(t.Term); {
			r, _ := utf8.DecodeRune(t.Term[start:])
			hangul := unicode.Is(unicode.Hangul, r)
			end := start
			for end < len(t.Term) {
				r, n := utf8.DecodeRune(t.Term[end:])
				if unicode.Is(unicode.Hangul, r) != hangul {
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

func refHasHangul(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if unicode.Is(unicode.Hangul, r) {
			return true
		}
		b = b[n:]
	}
	return false
}

type refLowercaseFilter struct{}

func (refLowercaseFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	for _, t := range in {
		t.Term = bytes.ToLower(t.Term)
	}
	return in
}

// BenchmarkAnalyze compares the analyzer with the chain it stands for.
func BenchmarkAnalyze(b *testing.B) {
	text := []byte(strings.Repeat("The boards' liked posts were running late, 1,000.5 km away. ", 10) +
		strings.Repeat("자유게시판에 글을 올렸습니다. 오늘 날씨가 좋아요. ", 10))
	for _, a := range []struct {
		name     string
		analyzer analysis.Analyzer
	}{{"board", analyzer}, {"chain", referenceChain(b)}} {
		b.Run(a.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				a.analyzer.Analyze(bytes.Clone(text))
			}
		})
	}
}
