package bleveindex

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/collector"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"

	"board/internal/search"
)

// A query does work in proportion to its page, not to its matches: a word that half the index holds must not make
// every search of it score or sort half the index.
//
//   - Newest first, a query whose rarest word is frequent walks the day field from the newest day back, a span at a
//     time (1 day, 4, 16, ... 4,096, aligned), each the widest whose documents should hold about what is still
//     wanted at the share of matches seen so far, and stops at the first span that completes the page and the
//     capped count. Spans do not overlap and every document
//     of a span is newer than every document of the spans after it, so the page is exactly the whole index's.
//   - By relevance, a query whose rarest word is frequent first ranks only the documents where one of its words
//     weighs most (the impact field, fields.go), widening level by level. Every other document matches each word
//     with an impact below its level's threshold, so its score is below qnorm·Σ idf²·θ (bleve's tf-idf, see bound):
//     once the page's last hit scores above that bound, the page is exactly what scoring every match gives. When no
//     level gets there, every match is scored, as bleve does.
//
// A word held by few documents is searched whole at once: its documents bound the cost.

// wholeBelow is how many times the matches a page needs a query's rarest word may be held by for the query to be
// searched whole, without spans or impact levels.
const wholeBelow = 8

// wholeUpTo is how many documents a relevance search's rarest word may be held by for it to be ranked whole at once:
// scoring a few thousand matches costs less than a walk of impact levels.
const wholeUpTo = 2000

// boundMargin keeps float rounding from ever making a pruned page differ from a full one: a page is final only when
// its last score clears the bound by this factor.
const boundMargin = 1 + 1e-9

// Search answers q with live documents.
func (ix *Index) Search(ctx context.Context, q search.Query) (search.Result, error) {
	if len(q.Terms) == 0 || q.Limit <= 0 {
		return search.Result{}, nil
	}
	p, err := ix.plan(ctx, q)
	if err != nil {
		return search.Result{}, err
	}
	defer p.close()
	need := q.Offset + q.Limit
	var hits bsearch.DocumentMatchCollection
	var count int
	if q.Newest {
		hits, count, err = p.newest(ctx, need)
	} else {
		hits, count, err = p.relevant(ctx, need)
	}
	if err != nil {
		return search.Result{}, err
	}
	hits = hits[min(q.Offset, len(hits)):min(need, len(hits))]
	docs, err := p.load(ctx, hits)
	if err != nil {
		return search.Result{}, err
	}
	return search.Result{Docs: docs, Count: min(count, q.CountLimit)}, nil
}

// plan is a search with what the index says of its words.
type plan struct {
	ix      *Index
	q       search.Query
	must    []query.Query     // the words, scored
	filters []query.Query     // the filters, as conjuncts that do not score
	docs    uint64            // documents in the index, as bleve's idf counts them
	held    []uint64          // documents that hold each word
	reader  index.IndexReader // the snapshot the query runs on: its counts, searches and documents
}

func (ix *Index) plan(ctx context.Context, q search.Query) (*plan, error) {
	p := &plan{ix: ix, q: q}
	for _, t := range q.Terms {
		p.must = append(p.must, term(fieldText, t))
	}
	if q.BoardID != 0 {
		p.filters = append(p.filters, unscored(term(fieldBoard, strconv.FormatInt(q.BoardID, 10))))
	}
	if q.WriterID != 0 {
		p.filters = append(p.filters, unscored(term(fieldWriter, strconv.FormatInt(q.WriterID, 10))))
	}
	if q.Type != "" {
		p.filters = append(p.filters, unscored(term(fieldType, string(q.Type))))
	}
	var err error
	if p.reader, err = ix.reader(); err != nil {
		return nil, err
	}
	if p.docs, err = p.reader.DocCount(); err != nil {
		p.close()
		return nil, err
	}
	for _, t := range q.Terms {
		n, err := p.count(ctx, fieldText, t)
		if err != nil {
			p.close()
			return nil, err
		}
		p.held = append(p.held, n)
	}
	return p, nil
}

// count returns how many documents hold a term in a field (deleted ones the index has not yet dropped included).
func (p *plan) count(ctx context.Context, field, t string) (uint64, error) {
	tfr, err := p.reader.TermFieldReader(ctx, []byte(t), field, false, false, false)
	if err != nil {
		return 0, err
	}
	defer tfr.Close()
	return tfr.Count(), nil
}

func (p *plan) close() { _ = p.reader.Close() }

// rarest returns how many documents hold the rarest word (deleted ones the index has not yet dropped included).
func (p *plan) rarest() uint64 {
	if !p.ix.prunes {
		return 0 // every search whole
	}
	return slices.Min(p.held)
}

// newest returns the query's first need matches, newest first, and how many match, counted up to the count limit
// at least.
func (p *plan) newest(ctx context.Context, need int) (bsearch.DocumentMatchCollection, int, error) {
	if p.rarest() <= wholeBelow*uint64(max(need, p.q.CountLimit)) {
		hits, total, err := p.search(ctx, nil, need, byNewest)
		return hits, int(total), err
	}
	var hits bsearch.DocumentMatchCollection
	count := 0
	// The share of documents that match, first guessed from the rarest word, then as the spans walked show it (a
	// match more than seen, so that a span without any still widens the next).
	share := float64(p.rarest()) / float64(max(p.docs, 1))
	var walked uint64
	cursor := day(p.ix.newest.Load())
	for cursor >= 0 {
		wanted := float64(max(need-len(hits), p.q.CountLimit-count))
		level, docs := 0, uint64(0)
		for l := dayLevels - 1; l >= 0; l-- {
			if (cursor+1)%(1<<(2*l)) != 0 {
				continue // a span must end at the cursor
			}
			n, err := p.count(ctx, fieldDay, span(l, cursor))
			if err != nil {
				return nil, 0, err
			}
			if level, docs = l, n; float64(n)*share <= 2*wanted {
				break // the widest span that should not hold much more than is wanted
			}
		}
		found, total, err := p.search(ctx, []query.Query{unscored(term(fieldDay, span(level, cursor)))}, max(0, need-len(hits)), byNewest)
		if err != nil {
			return nil, 0, err
		}
		hits = append(hits, found...)
		count += int(total)
		if len(hits) >= need && count >= p.q.CountLimit {
			return hits, count, nil
		}
		if walked += docs; walked > 0 {
			share = min(share, float64(count+1)/float64(walked))
		}
		cursor -= 1 << (2 * level)
	}
	// Whatever was created before 1970, at once.
	older := query.NewTermRangeInclusiveQuery(createdTerm(math.MinInt64), createdTerm((cursor+1)*msPerDay), &inclusive, &exclusive)
	older.SetField(fieldCreated)
	found, total, err := p.search(ctx, []query.Query{unscored(older)}, max(0, need-len(hits)), byNewest)
	return append(hits, found...), count + int(total), err
}

var inclusive, exclusive = true, false

// relevant returns the query's first need matches by relevance, newer first among equals, and how many match,
// counted up to the count limit at least.
func (p *plan) relevant(ctx context.Context, need int) (bsearch.DocumentMatchCollection, int, error) {
	if p.rarest() > max(wholeBelow*uint64(need), wholeUpTo) {
		hits, ok, err := p.relevantByImpact(ctx, need)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			// The count, from the newest matches: the cheapest way to count up to the limit.
			_, count, err := p.newest(ctx, 0)
			return hits, count, err
		}
	}
	hits, total, err := p.ranked(ctx, nil, need)
	return hits, int(total), err
}

// relevantByImpact ranks the documents where a word weighs most, level by level, and returns the first need and
// true once their last outscores every document left out; false when no level does, or when the levels would walk
// more documents than ranking every match.
func (p *plan) relevantByImpact(ctx context.Context, need int) (bsearch.DocumentMatchCollection, bool, error) {
	// levels[i] is the lowest impact level of word i among the candidates (-1: none yet); held[i] how many documents
	// hold word i at those levels.
	levels := make([]int, len(p.q.Terms))
	held := make([]uint64, len(p.q.Terms))
	lower := func(i int) (bool, error) {
		if levels[i] == len(impactLevels)-1 {
			return false, nil
		}
		n, err := p.count(ctx, fieldImpact, impactTerm(p.q.Terms[i], levels[i]+1))
		levels[i]++
		held[i] += n
		return true, err
	}
	// Each word starts at the highest level at which enough documents hold it for a page.
	for i := range levels {
		levels[i] = -1
		for held[i] < uint64(need) {
			if more, err := lower(i); err != nil || !more {
				if err != nil {
					return nil, false, err
				}
				break
			}
		}
	}
	for {
		var candidates []query.Query
		var postings uint64
		for i, t := range p.q.Terms {
			for k := 0; k <= levels[i]; k++ {
				candidates = append(candidates, unscored(term(fieldImpact, impactTerm(t, k))))
			}
			postings += held[i]
		}
		if postings > p.rarest()/2 {
			return nil, false, nil // ranking every match walks fewer documents than the levels would
		}
		hits, _, err := p.ranked(ctx, []query.Query{unscored(query.NewDisjunctionQuery(candidates))}, need)
		if err != nil {
			return nil, false, err
		}
		if len(hits) >= need && hits[need-1].Score > p.bound(levels)*boundMargin {
			return hits, true, nil
		}
		// Lower the word whose next level adds the fewest documents, past levels that hold none.
		best, bestHeld := -1, uint64(0)
		for i := range levels {
			if levels[i] == len(impactLevels)-1 {
				continue
			}
			n, err := p.count(ctx, fieldImpact, impactTerm(p.q.Terms[i], levels[i]+1))
			if err != nil {
				return nil, false, err
			}
			if best < 0 || n < bestHeld {
				best, bestHeld = i, n
			}
		}
		if best < 0 {
			return nil, false, nil
		}
		before := held[best]
		for held[best] == before {
			if more, err := lower(best); err != nil || !more {
				if err != nil {
					return nil, false, err
				}
				break
			}
		}
	}
}

// bound is the score no document scores or exceeds whose every word weighs less than its level's threshold, in
// bleve's tf-idf: each word adds queryWeight·√tf·norm·idf, queryWeight = idf·qnorm and qnorm = 1/√(Σ idf²) (words
// have boost 1; the conjuncts that only narrow have boost 0 and add nothing), with √tf·norm the impact.
func (p *plan) bound(levels []int) float64 {
	var squares, sum float64
	for i, held := range p.held {
		idf := 1 + math.Log(float64(p.docs)/float64(held+1))
		squares += idf * idf
		sum += idf * idf * impactLevels[levels[i]]
	}
	return sum / math.Sqrt(squares)
}

// The orders of a search. Each search sorts with a copy of its own: a sort field holds the values of the document
// it is looking at.
var (
	byCreated = &bsearch.SortField{Field: fieldCreated, Desc: true, Type: bsearch.SortFieldAsString}
	byNewest  = bsearch.SortOrder{byCreated}
	// byRelevance is relevance, newer first among equals: what a page by relevance is.
	byRelevance = bsearch.SortOrder{&bsearch.SortScore{Desc: true}, byCreated}
	// byScore is relevance alone, which bleve ranks without reading a document's creation time (ranked).
	byScore = bsearch.SortOrder{&bsearch.SortScore{Desc: true}}
)

// ranked returns the first need matches by relevance, newer first among equals, narrowed by narrow, and how many
// match. A sort by score and time reads every match's time; ranked asks bleve for twice the page by score alone,
// which reads none, and orders the equals by time itself. When the page's last score is still held by the last
// match fetched, its equals may go on past it: then bleve sorts by both.
func (p *plan) ranked(ctx context.Context, narrow []query.Query, need int) (bsearch.DocumentMatchCollection, uint64, error) {
	if !p.ix.prunes {
		// An index made before keeps created as a number, 16 terms a document: bleve's sort finds the one to compare.
		return p.search(ctx, narrow, need, byRelevance)
	}
	fetch := 2 * need
	hits, total, err := p.search(ctx, narrow, fetch, byScore)
	if err != nil || need == 0 {
		return nil, total, err
	}
	if len(hits) == fetch && hits[fetch-1].Score == hits[need-1].Score {
		return p.search(ctx, narrow, need, byRelevance)
	}
	created := make(map[*bsearch.DocumentMatch]string, len(hits))
	dvr, err := p.reader.DocValueReader([]string{fieldCreated})
	if err != nil {
		return nil, 0, err
	}
	for _, h := range hits {
		if err := dvr.VisitDocValues(h.IndexInternalID, func(_ string, term []byte) { created[h] = string(term) }); err != nil {
			return nil, 0, err
		}
	}
	// Stable: matches equal in both stay in the order bleve gives equals, as its own sort by both would.
	slices.SortStableFunc(hits, func(a, b *bsearch.DocumentMatch) int {
		if a.Score != b.Score {
			return cmp.Compare(b.Score, a.Score)
		}
		return strings.Compare(created[b], created[a])
	})
	return hits[:min(need, len(hits))], total, nil
}

// search runs one search of the words and the filters, narrowed by narrow, on the plan's reader, for the first size
// matches in order; it counts every match.
func (p *plan) search(ctx context.Context, narrow []query.Query, size int, order bsearch.SortOrder) (bsearch.DocumentMatchCollection, uint64, error) {
	conjuncts := append(append(slices.Clone(p.must), p.filters...), narrow...)
	var q query.Query = query.NewConjunctionQuery(conjuncts)
	if len(conjuncts) == 1 {
		q = conjuncts[0]
	}
	options := bsearch.SearcherOptions{}
	if !order.RequiresScore() {
		options.Score = "none"
	}
	searcher, err := q.Searcher(ctx, p.reader, p.ix.idx.Mapping(), options)
	if err != nil {
		return nil, 0, fmt.Errorf("bleve index: search: %w", err)
	}
	defer searcher.Close()
	coll := collector.NewTopNCollector(size, 0, order.Copy())
	if err := coll.Collect(ctx, searcher, p.reader); err != nil {
		return nil, 0, fmt.Errorf("bleve index: search: %w", err)
	}
	return coll.Results(), coll.Total(), nil
}

// unscored makes q a conjunct that narrows a search without changing its scores: boost 0 adds nothing to a score,
// nor to the query norm. A conjunct rather than a filter, since bleve tests a filter against every match of the
// words, while a conjunction walks its rarest part and looks each of its documents up in the others.
func unscored(q query.Query) query.Query {
	q.(query.BoostableQuery).SetBoost(0)
	return q
}

// load reads the stored documents of hits, in their order, from the snapshot they were found in.
func (p *plan) load(ctx context.Context, hits bsearch.DocumentMatchCollection) ([]search.Doc, error) {
	keys := make([]string, len(hits))
	for i, h := range hits {
		keys[i] = h.ID
	}
	found, err := read(ctx, p.reader, keys)
	if err != nil {
		return nil, err
	}
	docs := make([]search.Doc, 0, len(keys))
	for _, k := range keys {
		if d, ok := found[k]; ok {
			docs = append(docs, d)
		}
	}
	return docs, nil
}
