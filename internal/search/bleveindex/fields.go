package bleveindex

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"

	"github.com/blevesearch/bleve/v2/analysis"
)

// Two fields exist only so that a query does work in proportion to its page rather than to its matches: "impact"
// lets a relevance search start from the documents where a word weighs most, "day" lets a newest-first search walk
// the index a span of days at a time from the newest. Both are made from what the document's own analysis gives,
// and neither is ever scored.

// analyzed is an analyzer that returns tokens analyzed once already: a document's text is analyzed once, in build,
// and the text field and the impact field are both made from that analysis.
type analyzed analysis.TokenStream

func (a analyzed) Analyze([]byte) analysis.TokenStream { return analysis.TokenStream(a) }

// impactLevels are the impact thresholds, highest first: θ_k = 2^(-k/4). A word whose impact in a document is at
// least θ_k and below θ_(k-1) is indexed in the impact field as "word k". Each word of a document is one term
// whatever the levels, so fine levels cost the index nothing, and let a search take the documents of a frequent word
// in small steps.
var impactLevels = func() []float64 {
	levels := make([]float64, 15) // down to 0.088: a word once in a document of 128 words, twice in one of 256
	for k := range levels {
		levels[k] = math.Pow(2, -float64(k)/4)
	}
	return levels
}()

// impact is the part of a word's score in a document that depends on the document, as bleve's tf-idf computes it:
// the square root of the word's frequency times the field's norm, 1/√length, which the index keeps as a float32.
func impact(freq, length int) float64 {
	return math.Sqrt(float64(freq)) * float64(float32(1/math.Sqrt(float64(length))))
}

// impactLevel returns the level of an impact, and false when it is below the lowest.
func impactLevel(imp float64) (int, bool) {
	for k, theta := range impactLevels {
		if imp >= theta {
			return k, true
		}
	}
	return 0, false
}

// impactTerm is the impact field's term of a word at a level.
func impactTerm(word string, level int) string { return word + " " + strconv.Itoa(level) }

// impactTokens returns the impact field's tokens of a text analyzed as tokens.
func impactTokens(tokens analysis.TokenStream) analysis.TokenStream {
	freq := make(map[string]int, len(tokens))
	for _, t := range tokens {
		freq[string(t.Term)]++
	}
	var out analysis.TokenStream
	for word, f := range freq {
		if level, ok := impactLevel(impact(f, len(tokens))); ok {
			out = append(out, &analysis.Token{Term: []byte(impactTerm(word, level)), Position: len(out) + 1, Type: analysis.AlphaNumeric})
		}
	}
	return out
}

// dayLevels is how many spans of days the day field indexes: level L is a span of 4^L days, aligned, from 1 day to
// 4,096.
const dayLevels = 7

const msPerDay = 24 * 60 * 60 * 1000

// day returns the day of a creation time in Unix ms (days before 1970 are negative).
func day(createdMs int64) int64 {
	d := createdMs / msPerDay
	if createdMs < 0 && createdMs%msPerDay != 0 {
		d--
	}
	return d
}

// span returns the day field's term of the span at level that holds a day.
func span(level int, day int64) string {
	return strconv.Itoa(level) + ":" + strconv.FormatInt(day>>(2*level), 10) // >> floors negative days too
}

// dayTokens returns the day field's tokens of a creation time: the span of each level that holds its day.
func dayTokens(createdMs int64) analysis.TokenStream {
	d := day(createdMs)
	out := make(analysis.TokenStream, dayLevels)
	for level := range out {
		out[level] = &analysis.Token{Term: []byte(span(level, d)), Position: level + 1, Type: analysis.AlphaNumeric}
	}
	return out
}

// createdTerm is the created field's term of a creation time in Unix ms: 16 hex digits, in the order of the times
// (the sign bit flipped), for a sort of bytes and a range of terms.
func createdTerm(createdMs int64) string {
	return hex.EncodeToString(binary.BigEndian.AppendUint64(nil, uint64(createdMs)^(1<<63)))
}
