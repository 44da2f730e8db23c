// Package bleveindex is the embedded engine of search: a bleve index (scorch) on disk under the data directory, one
// full index per instance.
//
// Documents are built field by field (no reflection over a mapping): a "text" field, analyzed with board's analyzer,
// that holds the title and content of a live document only (a hidden or deleted one cannot match a query because
// its words are not indexed at all); keyword fields for the filters; "created" with doc values for sorting by
// newest; and the whole document, encoded, in one stored field that Get and Search read back. The mapping declares
// the same fields, so that bleve's own tools read the index as it is.
//
// A batch is durable when Put returns: scorch's default (safe) batches wait for the segment to be persisted.
package bleveindex

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"
	bolterrors "go.etcd.io/bbolt/errors"

	"board/internal/search"
)

// Field names.
const (
	fieldText    = "text"
	fieldType    = "type"
	fieldArticle = "article"
	fieldBoard   = "board"
	fieldWriter  = "writer"
	fieldCreated = "created"
	fieldSource  = "src"
)

// lockTimeout bounds the wait for an index another process holds.
const lockTimeout = 5 * time.Second

// currentFile names, in the engine's directory, the current index.
const currentFile = "current"

// validName is what an index name may be: it is a directory name.
var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Engine keeps its indexes as directories under one directory.
type Engine struct {
	dir string
}

// New returns the engine whose indexes live under dir.
func New(dir string) *Engine { return &Engine{dir: dir} }

// Open opens the named index, creating it if it does not exist.
func (e *Engine) Open(_ context.Context, name string) (search.Indexer, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("bleve index name %q: want 1-64 letters, digits, - or _", name)
	}
	path := filepath.Join(e.dir, name)
	// An index open in another process (another board on the same --data-dir) is locked: fail, do not wait forever.
	config := map[string]any{"bolt_timeout": lockTimeout.String()}
	idx, err := bleve.OpenUsing(path, config)
	if errors.Is(err, bleve.ErrorIndexPathDoesNotExist) {
		if err := os.MkdirAll(e.dir, 0o755); err != nil {
			return nil, err
		}
		idx, err = bleve.NewUsing(path, newMapping(), scorch.Name, scorch.Name, config)
	}
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open bleve index %s: another process has it open (give each search instance its own --data-dir)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open bleve index %s: %w", path, err)
	}
	analyzer := idx.Mapping().AnalyzerNamed(search.AnalyzerName)
	if analyzer == nil {
		_ = idx.Close()
		return nil, fmt.Errorf("open bleve index %s: no analyzer %s", path, search.AnalyzerName)
	}
	ix := &Index{idx: idx, analyzer: analyzer, close: sync.OnceValue(idx.Close)}
	newest, err := idx.GetInternal(newestKey)
	if err != nil {
		_ = idx.Close()
		return nil, fmt.Errorf("open bleve index %s: %w", path, err)
	}
	if len(newest) == 8 {
		ix.newest.Store(int64(binary.BigEndian.Uint64(newest)))
	}
	return ix, nil
}

// Current returns the name in the current file; "" when there is none.
func (e *Engine) Current(context.Context) (string, error) {
	b, err := os.ReadFile(filepath.Join(e.dir, currentFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return string(b), err
}

// SetCurrent writes the current file atomically: a crash leaves the old name or the new, never half of one.
func (e *Engine) SetCurrent(_ context.Context, name string) error {
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(e.dir, currentFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(name); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(e.dir, currentFile)); err != nil {
		return err
	}
	d, err := os.Open(e.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Drop removes the named index's directory.
func (e *Engine) Drop(_ context.Context, name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("bleve index name %q: want 1-64 letters, digits, - or _", name)
	}
	return os.RemoveAll(filepath.Join(e.dir, name))
}

// List returns the names of the index directories.
func (e *Engine) List(context.Context) ([]string, error) {
	entries, err := os.ReadDir(e.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, en := range entries {
		if en.IsDir() && validName.MatchString(en.Name()) {
			names = append(names, en.Name())
		}
	}
	return names, nil
}

// newMapping declares the fields documents are built with (see the package doc).
func newMapping() mapping.IndexMapping {
	text := bleve.NewTextFieldMapping()
	text.Analyzer, text.Store, text.IncludeTermVectors, text.IncludeInAll, text.DocValues = search.AnalyzerName, false, false, false, false
	kw := bleve.NewKeywordFieldMapping()
	kw.Store, kw.IncludeTermVectors, kw.IncludeInAll, kw.DocValues = false, false, false, false
	created := bleve.NewNumericFieldMapping()
	created.Store, created.IncludeInAll, created.DocValues = false, false, true
	src := bleve.NewTextFieldMapping()
	src.Index, src.Store, src.IncludeInAll, src.DocValues = false, true, false, false
	doc := bleve.NewDocumentStaticMapping()
	doc.AddFieldMappingsAt(fieldText, text)
	for _, f := range []string{fieldType, fieldArticle, fieldBoard, fieldWriter} {
		doc.AddFieldMappingsAt(f, kw)
	}
	doc.AddFieldMappingsAt(fieldCreated, created)
	doc.AddFieldMappingsAt(fieldSource, src)
	m := bleve.NewIndexMapping()
	m.DefaultMapping = doc
	m.DefaultAnalyzer = search.AnalyzerName
	m.StoreDynamic, m.IndexDynamic, m.DocValuesDynamic = false, false, false
	return m
}

// Index is one bleve index.
type Index struct {
	idx      bleve.Index
	analyzer analysis.Analyzer // board's, for the text field
	close    func() error      // idx.Close once: bleve panics on a second close
	// newest is the creation time, in Unix ms, of the newest document put, where Search's windows end; kept in the
	// index under newestKey, in the batch that raises it.
	newest atomic.Int64
}

// newestKey holds Index.newest in the index's internal storage.
var newestKey = []byte("board_newest")

// source is a document as its stored field keeps it.
type source struct {
	Type       search.Type `json:"t"`
	ArticleID  int64       `json:"a"`
	CommentID  int64       `json:"c,omitempty"`
	BoardID    int64       `json:"b"`
	WriterID   int64       `json:"w"`
	Title      string      `json:"ti,omitempty"`
	Content    string      `json:"co,omitempty"`
	CreatedAt  int64       `json:"cr"` // Unix ms
	Version    int64       `json:"v"`
	Moderation int64       `json:"m,omitempty"`
	Hidden     bool        `json:"h,omitempty"`
	Deleted    bool        `json:"d,omitempty"`
}

func encode(d search.Doc) ([]byte, error) {
	return json.Marshal(source{Type: d.Type, ArticleID: d.ArticleID, CommentID: d.CommentID, BoardID: d.BoardID,
		WriterID: d.WriterID, Title: d.Title, Content: d.Content, CreatedAt: d.CreatedAt.UnixMilli(), Version: d.Version,
		Moderation: d.Moderation, Hidden: d.Hidden, Deleted: d.Deleted})
}

func decode(b []byte) (search.Doc, error) {
	var s source
	if err := json.Unmarshal(b, &s); err != nil {
		return search.Doc{}, fmt.Errorf("bleve index: stored document: %w", err)
	}
	return search.Doc{Type: s.Type, ArticleID: s.ArticleID, CommentID: s.CommentID, BoardID: s.BoardID,
		WriterID: s.WriterID, Title: s.Title, Content: s.Content, CreatedAt: time.UnixMilli(s.CreatedAt).UTC(),
		Version: s.Version, Moderation: s.Moderation, Hidden: s.Hidden, Deleted: s.Deleted}, nil
}

// build makes the bleve document of d.
func (ix *Index) build(d search.Doc) (*document.Document, error) {
	src, err := encode(d)
	if err != nil {
		return nil, err
	}
	doc := document.NewDocument(d.Key())
	keyword := func(name string, v string) {
		doc.AddField(document.NewTextFieldCustom(name, nil, []byte(v), index.IndexField, nil))
	}
	keyword(fieldType, string(d.Type))
	keyword(fieldArticle, strconv.FormatInt(d.ArticleID, 10))
	keyword(fieldBoard, strconv.FormatInt(d.BoardID, 10))
	keyword(fieldWriter, strconv.FormatInt(d.WriterID, 10))
	if d.State() == search.Live {
		text := d.Content
		if d.Title != "" {
			text = d.Title + "\n" + d.Content
		}
		doc.AddField(document.NewTextFieldCustom(fieldText, nil, []byte(text), index.IndexField, ix.analyzer))
	}
	doc.AddField(document.NewNumericFieldWithIndexingOptions(fieldCreated, nil, float64(d.CreatedAt.UnixMilli()),
		index.IndexField|index.DocValues))
	doc.AddField(document.NewTextFieldCustom(fieldSource, nil, src, index.StoreField, nil))
	return doc, nil
}

// Get reads the stored documents of keys.
func (ix *Index) Get(ctx context.Context, keys []string) (map[string]search.Doc, error) {
	out := make(map[string]search.Doc, len(keys))
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, err := ix.idx.Document(k)
		if err != nil {
			return nil, fmt.Errorf("bleve index: get %s: %w", k, err)
		}
		if d == nil {
			continue
		}
		var src []byte
		d.VisitFields(func(f index.Field) {
			if f.Name() == fieldSource {
				src = f.Value()
			}
		})
		if src == nil {
			continue
		}
		doc, err := decode(src)
		if err != nil {
			return nil, err
		}
		out[k] = doc
	}
	return out, nil
}

// Put indexes docs in one batch and returns once it is persisted.
func (ix *Index) Put(ctx context.Context, docs []search.Doc) error {
	b := ix.idx.NewBatch()
	newest := ix.newest.Load()
	for _, d := range docs {
		doc, err := ix.build(d)
		if err != nil {
			return err
		}
		if err := b.IndexAdvanced(doc); err != nil {
			return err
		}
		newest = max(newest, d.CreatedAt.UnixMilli())
	}
	raised := newest > ix.newest.Load()
	if raised {
		b.SetInternal(newestKey, binary.BigEndian.AppendUint64(nil, uint64(newest)))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ix.idx.Batch(b); err != nil {
		return err
	}
	for cur := ix.newest.Load(); newest > cur; cur = ix.newest.Load() {
		if ix.newest.CompareAndSwap(cur, newest) { // another Put may have raised it meanwhile
			break
		}
	}
	return nil
}

// Comments finds every comment of an article, whatever its state.
func (ix *Index) Comments(ctx context.Context, articleID int64) ([]search.Doc, error) {
	// The article's own document holds the field too: filtering it out here is cheaper than intersecting with every
	// comment of the index.
	q := term(fieldArticle, strconv.FormatInt(articleID, 10))
	const page = 1000
	var out []search.Doc
	for from := 0; ; from += page {
		req := bleve.NewSearchRequestOptions(q, page, from, false)
		req.Fields = []string{fieldSource}
		req.SortBy([]string{"_id"})
		req.Score = "none"
		res, err := ix.idx.SearchInContext(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("bleve index: comments of %d: %w", articleID, err)
		}
		docs, err := hitDocs(res.Hits)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			if d.Type == search.TypeComment {
				out = append(out, d)
			}
		}
		if len(res.Hits) < page {
			return out, nil
		}
	}
}

// Search answers q with live documents.
func (ix *Index) Search(ctx context.Context, q search.Query) (search.Result, error) {
	if len(q.Terms) == 0 {
		return search.Result{}, nil
	}
	terms := make([]query.Query, len(q.Terms))
	for i, t := range q.Terms {
		terms[i] = term(fieldText, t)
	}
	var filters []query.Query
	if q.BoardID != 0 {
		filters = append(filters, term(fieldBoard, strconv.FormatInt(q.BoardID, 10)))
	}
	if q.WriterID != 0 {
		filters = append(filters, term(fieldWriter, strconv.FormatInt(q.WriterID, 10)))
	}
	if q.Type != "" {
		filters = append(filters, term(fieldType, string(q.Type)))
	}
	need := uint64(max(q.Offset+q.Limit, q.CountLimit))
	if !q.Newest {
		need = max(need, minRanked)
	}
	res, err := ix.newestFirst(ctx, terms, filters, q, need)
	if err != nil {
		return search.Result{}, err
	}
	docs, err := hitDocs(res.Hits)
	if err != nil {
		return search.Result{}, err
	}
	return search.Result{Docs: docs, Count: int(min(res.Total, uint64(q.CountLimit)))}, nil
}

// newestFirst answers q from the narrowest window of creation time that holds need matches, or from the whole index
// when the rarest term is rare enough to rank all its documents, or no window holds enough.
func (ix *Index) newestFirst(ctx context.Context, terms, filters []query.Query, q search.Query, need uint64) (*bleve.SearchResult, error) {
	rarest, err := ix.rarest(ctx, q.Terms)
	if err != nil {
		return nil, err
	}
	if rarest > windowsAbove*need {
		newest := ix.newest.Load()
		for _, window := range windows {
			since := float64(newest - window.Milliseconds())
			// A conjunct, not a filter: the conjunction walks the window's documents, the fewer, and looks each up in
			// the terms' postings. Boost 0: the window does not change the scores.
			r := query.NewNumericRangeInclusiveQuery(&since, nil, &inclusive, nil)
			r.SetField(fieldCreated)
			r.SetBoost(0)
			res, err := ix.search(ctx, append(slices.Clone(terms), r), filters, q)
			if err != nil || res.Total >= need {
				return res, err
			}
		}
	}
	return ix.search(ctx, terms, filters, q)
}

// rarest returns how many documents hold the rarest of terms (deleted ones included: an estimate).
func (ix *Index) rarest(ctx context.Context, terms []string) (uint64, error) {
	adv, err := ix.idx.Advanced()
	if err != nil {
		return 0, err
	}
	r, err := adv.Reader()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	rarest := uint64(math.MaxUint64)
	for _, t := range terms {
		tfr, err := r.TermFieldReader(ctx, []byte(t), fieldText, false, false, false)
		if err != nil {
			return 0, err
		}
		rarest = min(rarest, tfr.Count())
		if err := tfr.Close(); err != nil {
			return 0, err
		}
	}
	return rarest, nil
}

// A query whose rarest term is frequent looks at the newest documents first: it searches the matches created within
// a window that ends at the newest document, widening the window until it holds enough for the page and the capped
// count (and, for relevance, at least minRanked to rank), and the whole index last. A frequent word's matches are so
// never all scored and sorted, only a recent window's; a word held by at most windowsAbove times what is needed is
// searched whole at once, at a cost its few documents bound. Relevance is so the ranking of the newest minRanked or
// more matches, which is what a forum's reader looks for.
var windows = []time.Duration{24 * time.Hour, 8 * 24 * time.Hour, 64 * 24 * time.Hour, 512 * 24 * time.Hour}

// windowsAbove is how many times the matches a query needs its rarest term must be held by for Search to narrow it.
const windowsAbove = 8

// minRanked is how many matches, the newest, a relevance search ranks at the least.
const minRanked = 500

var inclusive = true

// search runs one bleve search of the conjunction of must, narrowed by filters (which do not score).
func (ix *Index) search(ctx context.Context, must, filters []query.Query, q search.Query) (*bleve.SearchResult, error) {
	var qq query.Query = query.NewConjunctionQuery(must)
	if len(must) == 1 {
		qq = must[0]
	}
	if len(filters) > 0 {
		b := query.NewBooleanQuery([]query.Query{qq}, nil, nil)
		b.AddFilter(query.NewConjunctionQuery(filters))
		qq = b
	}
	req := bleve.NewSearchRequestOptions(qq, q.Limit, q.Offset, false)
	req.Fields = []string{fieldSource}
	if q.Newest {
		req.SortBy([]string{"-" + fieldCreated})
		req.Score = "none"
	} else {
		req.SortBy([]string{"-_score", "-" + fieldCreated})
	}
	res, err := ix.idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("bleve index: search: %w", err)
	}
	return res, nil
}

func term(field, value string) *query.TermQuery {
	t := query.NewTermQuery(value)
	t.SetField(field)
	return t
}

func hitDocs(hits bsearch.DocumentMatchCollection) ([]search.Doc, error) {
	docs := make([]search.Doc, 0, len(hits))
	for _, h := range hits {
		src, _ := h.Fields[fieldSource].(string)
		d, err := decode([]byte(src))
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// Close closes the index; closing it again does nothing.
func (ix *Index) Close() error { return ix.close() }
