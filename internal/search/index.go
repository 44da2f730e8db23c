package search

import (
	"context"
	"strconv"
	"time"
)

// Type is what a document is: an article or a comment.
type Type string

// The types of documents.
const (
	TypeArticle Type = "article"
	TypeComment Type = "comment"
)

// State is whether a document can be found.
type State string

// The states of a document. Only a live document matches a query. A hidden one keeps its text in the index, stored
// but not searchable, so that a moderator's restore brings it back without calling the article service; a deleted
// one is a tombstone without text, which keeps a late or replayed event from bringing it back.
const (
	Live    State = "live"
	Hidden  State = "hidden"
	Deleted State = "deleted"
)

// Doc is an article or a comment as the index keeps it.
type Doc struct {
	Type      Type
	ArticleID int64
	CommentID int64 // comments only
	// BoardID is the article's board; 0 for a comment whose article the index has not seen yet (comment events do
	// not carry the board: the article's event fills it in).
	BoardID   int64
	WriterID  int64
	Title     string // articles only
	Content   string
	CreatedAt time.Time
	// Version orders the changes of the document itself: an article's articleVersion, a comment's commentVersion
	// (1 as created, +1 per edit). A deleted document (Deleted) refuses any change of its own.
	Version int64
	// Moderation is the version of the last moderation event applied; Hidden says whether it hid the document.
	Moderation int64
	Hidden     bool
	Deleted    bool
}

// State is whether the document can be found.
func (d Doc) State() State {
	switch {
	case d.Deleted:
		return Deleted
	case d.Hidden:
		return Hidden
	default:
		return Live
	}
}

// Key names the document in the index: "a" and the article id, or "c" and the comment id.
func (d Doc) Key() string {
	if d.Type == TypeComment {
		return CommentKey(d.CommentID)
	}
	return ArticleKey(d.ArticleID)
}

// ArticleKey is the key of an article's document.
func ArticleKey(id int64) string { return "a" + strconv.FormatInt(id, 10) }

// CommentKey is the key of a comment's document.
func CommentKey(id int64) string { return "c" + strconv.FormatInt(id, 10) }

// Query is a search: the documents that hold every term, narrowed by the filters that are set.
type Query struct {
	Terms    []string // analyzed (Terms), distinct; a document must hold all of them
	BoardID  int64    // 0: any board
	WriterID int64    // 0: any writer
	Type     Type     // "": both
	Newest   bool     // newest first; otherwise by relevance, newest first among equals
	Offset   int
	Limit    int
	// CountLimit bounds the count: the engines stop counting there (the answer's count is min(matches, CountLimit)).
	CountLimit int
}

// Result is a page of live documents and how many match, counted up to the query's CountLimit.
type Result struct {
	Docs  []Doc
	Count int
}

// Indexer is a search engine's index of articles and comments. Every engine passes the same suite
// (searchtest.Run): what one finds, the others find.
type Indexer interface {
	// Get returns the documents the index holds under keys, in any state; a key it lacks is absent from the map.
	Get(ctx context.Context, keys []string) (map[string]Doc, error)
	// Put writes docs, each replacing the document of its key, as one batch that is durable when Put returns: a
	// crash loses all of it or none.
	Put(ctx context.Context, docs []Doc) error
	// Comments returns the documents of an article's comments, in any state.
	Comments(ctx context.Context, articleID int64) ([]Doc, error)
	// Search answers a query with live documents only.
	Search(ctx context.Context, q Query) (Result, error)
	// Close releases the index; the documents stay where the engine keeps them.
	Close() error
}

// Engine keeps the indexes of one search engine, each under a name. One is current: the one the service answers
// from and keeps up to date. A rebuild fills a new one while the current one goes on answering, then makes it
// current and drops the old one. An index's name is also its consumer group's, so a new index consumes the topics
// on its own from where its rebuild began, and a restart resumes the current one where it stopped.
type Engine interface {
	// Open opens the named index, creating it empty if it does not exist.
	Open(ctx context.Context, name string) (Indexer, error)
	// Current returns the name of the current index; "" when there is none yet.
	Current(ctx context.Context) (string, error)
	// SetCurrent makes the named index current, durably.
	SetCurrent(ctx context.Context, name string) error
	// Drop deletes the named index and its documents; it must not be open.
	Drop(ctx context.Context, name string) error
	// List returns the names of the indexes the engine keeps, in any order.
	List(ctx context.Context) ([]string, error)
}

// Merge returns the document that two writes of the same document, each made from its own read of it, agree on:
// the article or comment as of the higher Version, the moderation as of the higher Moderation, deleted if either is,
// and a board if either knows it. An engine whose index several instances write at once (the SQL engine, shared)
// merges what it is given with what it holds, so that no instance's change is lost to another's older read. For
// writes made one after the other from what the first wrote, it returns next.
func Merge(cur, next Doc) Doc {
	out := next
	if cur.Version > next.Version {
		out.WriterID, out.Title, out.Content, out.CreatedAt, out.Version = cur.WriterID, cur.Title, cur.Content, cur.CreatedAt, cur.Version
		if cur.BoardID != 0 {
			out.BoardID = cur.BoardID
		}
	}
	if out.BoardID == 0 {
		out.BoardID = cur.BoardID
	}
	if cur.Moderation > next.Moderation {
		out.Moderation, out.Hidden = cur.Moderation, cur.Hidden
	}
	if cur.Deleted || next.Deleted {
		out.Deleted, out.Title, out.Content = true, "", ""
	}
	return out
}
