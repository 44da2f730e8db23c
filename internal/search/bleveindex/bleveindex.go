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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
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
	"golang.org/x/sync/errgroup"

	"board/internal/search"
)

// Field names.
const (
	fieldText    = "text"
	fieldImpact  = "impact" // fields.go
	fieldDay     = "day"    // fields.go
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
		if err == nil {
			err = idx.SetInternal(formatKey, []byte(format))
		}
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
	f, err := idx.GetInternal(formatKey)
	if err != nil {
		_ = idx.Close()
		return nil, fmt.Errorf("open bleve index %s: %w", path, err)
	}
	ix.prunes = string(f) == format
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
	created := bleve.NewKeywordFieldMapping()
	created.Store, created.IncludeTermVectors, created.IncludeInAll, created.DocValues = false, false, false, true
	src := bleve.NewTextFieldMapping()
	src.Index, src.Store, src.IncludeInAll, src.DocValues = false, true, false, false
	doc := bleve.NewDocumentStaticMapping()
	doc.AddFieldMappingsAt(fieldText, text)
	for _, f := range []string{fieldType, fieldArticle, fieldBoard, fieldWriter, fieldImpact, fieldDay} {
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
	// prunes says whether the index has the fields that let a search skip work (fields.go): an index made before
	// them has not, and is searched whole, exactly and slowly, until a rebuild replaces it.
	prunes bool
}

// formatKey holds, in the index's internal storage, the format its documents are built in; format is this one's.
var formatKey = []byte("board_format")

const format = "2"

// newestKey holds Index.newest in the index's internal storage.
var newestKey = []byte("board_newest")

// build makes the bleve document of d.
func (ix *Index) build(d search.Doc) (*document.Document, error) {
	src := encode(d)
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
		tokens := ix.analyzer.Analyze([]byte(text))
		doc.AddField(document.NewTextFieldCustom(fieldText, nil, []byte(text), index.IndexField, analyzed(tokens)))
		if impacts := impactTokens(tokens); len(impacts) > 0 {
			doc.AddField(document.NewTextFieldCustom(fieldImpact, nil, nil, index.IndexField, analyzed(impacts)))
		}
	}
	created := d.CreatedAt.UnixMilli()
	doc.AddField(document.NewTextFieldCustom(fieldDay, nil, nil, index.IndexField, analyzed(dayTokens(created))))
	// One term, not a numeric field's 16: a sort decompresses the chunk of doc values of each document it reads,
	// and the numeric field's made that most of a search's time. (Uncompressed doc values, which bleve offers,
	// read back wrong once segments merge: TestEqualScoresNewestFirst.)
	doc.AddField(document.NewTextFieldCustom(fieldCreated, nil, []byte(createdTerm(created)),
		index.IndexField|index.DocValues, nil))
	doc.AddField(document.NewTextFieldCustom(fieldSource, nil, src, index.StoreField, nil))
	return doc, nil
}

// buildAll builds the documents of docs on every core: analysis is most of the work of indexing.
func (ix *Index) buildAll(docs []search.Doc) ([]*document.Document, error) {
	out := make([]*document.Document, len(docs))
	var g errgroup.Group
	workers := min(runtime.GOMAXPROCS(0), len(docs))
	for w := range workers {
		g.Go(func() error {
			for i := w; i < len(docs); i += workers {
				doc, err := ix.build(docs[i])
				if err != nil {
					return err
				}
				out[i] = doc
			}
			return nil
		})
	}
	return out, g.Wait()
}

// Get reads the stored documents of keys.
func (ix *Index) Get(ctx context.Context, keys []string) (map[string]search.Doc, error) {
	r, err := ix.reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return read(ctx, r, keys)
}

// reader returns a snapshot of the index, which the caller closes.
func (ix *Index) reader() (index.IndexReader, error) {
	adv, err := ix.idx.Advanced()
	if err != nil {
		return nil, err
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, err
	}
	if s, ok := r.(*scorch.IndexSnapshot); ok && s == nil { // what a closed index gives
		return nil, bleve.ErrorIndexClosed
	}
	return r, nil
}

// read reads the stored documents of keys from one snapshot of the index.
func read(ctx context.Context, r index.IndexReader, keys []string) (map[string]search.Doc, error) {
	out := make(map[string]search.Doc, len(keys))
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, err := r.Document(k)
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
	built, err := ix.buildAll(docs)
	if err != nil {
		return err
	}
	b := ix.idx.NewBatch()
	newest := ix.newest.Load()
	for i, doc := range built {
		if err := b.IndexAdvanced(doc); err != nil {
			return err
		}
		newest = max(newest, docs[i].CreatedAt.UnixMilli())
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
