package search

import (
	"context"
	"slices"
	"sync"
	"time"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
)

// Updater keeps one index up to date with the article, comment and moderation topics. Its handlers only stage the
// changes of a batch of records in memory (where the next record of the batch sees them); Flush writes them to the
// index in one durable batch, and the consumer commits the batch's offsets only after that (kafka.ConsumerConfig.
// Flush). One fsync per batch of records instead of one per record, and a crash loses only records whose offsets
// were not committed, which are delivered again.
//
// Every change is idempotent and tolerates any order of delivery: an article's changes are ordered by its
// articleVersion, a comment's by its commentVersion (1 as created, +1 per edit), moderation by its moderationVersion, each kept in
// the document; a deleted document stays as a tombstone that refuses anything older. A moderation event may arrive
// before its article or comment: it is kept, unsearchable, until the document arrives. A comment may arrive before
// its article: it is searchable at once, with board 0 until its article's first event fills the board in.
//
// An index that cannot be read or written is a dependency that is down: the handlers say so (fault.Unavailable),
// and the consumer waits on the record instead of dead-lettering it.
type Updater struct {
	ix Indexer

	mu     sync.Mutex
	staged map[string]Doc
}

// NewUpdater returns an Updater of ix.
func NewUpdater(ix Indexer) *Updater { return &Updater{ix: ix, staged: map[string]Doc{}} }

// Handlers are the handlers of the events the index follows.
func (u *Updater) Handlers() map[event.Type]kafka.Handler {
	return map[event.Type]kafka.Handler{
		event.ArticleCreated:   u.articleWritten,
		event.ArticleUpdated:   u.articleWritten,
		event.ArticleDeleted:   u.articleDeleted,
		event.CommentCreated:   u.commentWritten,
		event.CommentUpdated:   u.commentWritten,
		event.CommentDeleted:   u.commentDeleted,
		event.ArticleModerated: u.articleModerated,
		event.CommentModerated: u.commentModerated,
	}
}

// Flush writes what the handlers staged to the index, durably.
func (u *Updater) Flush(ctx context.Context) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.staged) == 0 {
		return nil
	}
	docs := make([]Doc, 0, len(u.staged))
	for _, d := range u.staged {
		docs = append(docs, d)
	}
	if err := u.ix.Put(ctx, docs); err != nil {
		return indexDown(err)
	}
	clear(u.staged)
	return nil
}

// get returns the documents of keys as staged, else as the index holds them.
func (u *Updater) get(ctx context.Context, keys ...string) (map[string]Doc, error) {
	out := make(map[string]Doc, len(keys))
	var missing []string
	for _, k := range keys {
		if d, ok := u.staged[k]; ok {
			out[k] = d
		} else {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		found, err := u.ix.Get(ctx, missing)
		if err != nil {
			return nil, indexDown(err)
		}
		for k, d := range found {
			out[k] = d
		}
	}
	return out, nil
}

// comments returns an article's comments, staged or indexed.
func (u *Updater) comments(ctx context.Context, articleID int64) ([]Doc, error) {
	indexed, err := u.ix.Comments(ctx, articleID)
	if err != nil {
		return nil, indexDown(err)
	}
	byKey := map[string]Doc{}
	for _, d := range indexed {
		byKey[d.Key()] = d
	}
	for k, d := range u.staged {
		if d.Type == TypeComment && d.ArticleID == articleID {
			byKey[k] = d
		}
	}
	out := make([]Doc, 0, len(byKey))
	for _, d := range byKey {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Doc) int { return int(a.CommentID - b.CommentID) })
	return out, nil
}

// indexDown makes an index error what it is to the consumer: a dependency that is down, to wait for.
func indexDown(err error) error {
	return fault.Unavailablef(err, "SEARCH_INDEX_UNAVAILABLE", "the search index: %v", err)
}

func (u *Updater) stage(docs ...Doc) {
	for _, d := range docs {
		u.staged[d.Key()] = d
	}
}

func (u *Updater) articleWritten(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Article](env)
	if err != nil {
		return err
	}
	if p.ArticleID <= 0 || p.BoardID <= 0 {
		return fault.Invalidf("INVALID_ARTICLE", "%s without a valid articleId and boardId", env.Type)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	key := ArticleKey(int64(p.ArticleID))
	found, err := u.get(ctx, key)
	if err != nil {
		return err
	}
	cur, known := found[key]
	if known && (cur.Deleted || cur.Version > p.ArticleVersion) {
		return nil
	}
	d := Doc{Type: TypeArticle, ArticleID: int64(p.ArticleID), BoardID: int64(p.BoardID), WriterID: int64(p.WriterID),
		Title: p.Title, Content: p.Text(), CreatedAt: time.Time(p.CreatedAt), Version: p.ArticleVersion,
		Moderation: cur.Moderation, Hidden: cur.Hidden}
	u.stage(d)
	if known && cur.Version > 0 {
		return nil
	}
	// The article's first event: comments that came before it learn its board.
	comments, err := u.comments(ctx, d.ArticleID)
	if err != nil {
		return err
	}
	for _, c := range comments {
		if c.BoardID == 0 {
			c.BoardID = d.BoardID
			u.stage(c)
		}
	}
	return nil
}

func (u *Updater) articleDeleted(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Article](env)
	if err != nil {
		return err
	}
	if p.ArticleID <= 0 {
		return fault.Invalidf("INVALID_ARTICLE", "%s without a valid articleId", env.Type)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.stage(Doc{Type: TypeArticle, ArticleID: int64(p.ArticleID), BoardID: int64(p.BoardID), WriterID: int64(p.WriterID),
		CreatedAt: time.Time(p.CreatedAt), Version: p.ArticleVersion, Deleted: true})
	// Its comments go with it (the comment service deletes them without an event each).
	comments, err := u.comments(ctx, int64(p.ArticleID))
	if err != nil {
		return err
	}
	for _, c := range comments {
		if !c.Deleted {
			u.stage(tombstone(c))
		}
	}
	return nil
}

// tombstone is what is kept of a deleted document: it refuses every later change of the document's own.
func tombstone(d Doc) Doc {
	d.Title, d.Content, d.Deleted = "", "", true
	return d
}

// commentCreatedVersion is a comment's commentVersion as created; each edit adds one.
const commentCreatedVersion = 1

// commentWritten indexes a comment as COMMENT_CREATED or COMMENT_UPDATED carries it, unless the document is as new
// or newer, or deleted. An edit may arrive before the comment's create: it carries the whole comment, and the create
// is then older.
func (u *Updater) commentWritten(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Comment](env)
	if err != nil {
		return err
	}
	if p.CommentID <= 0 || p.ArticleID <= 0 {
		return fault.Invalidf("INVALID_COMMENT", "%s without a valid commentId and articleId", env.Type)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	key, articleKey := CommentKey(int64(p.CommentID)), ArticleKey(int64(p.ArticleID))
	found, err := u.get(ctx, key, articleKey)
	if err != nil {
		return err
	}
	version := max(p.CommentVersion, commentCreatedVersion) // events from before edits carry none
	cur := found[key]
	if cur.Deleted || cur.Version >= version {
		return nil
	}
	d := Doc{Type: TypeComment, CommentID: int64(p.CommentID), ArticleID: int64(p.ArticleID), BoardID: cur.BoardID,
		WriterID: int64(p.WriterID), Content: p.Text(), CreatedAt: time.Time(p.CreatedAt),
		Version: version, Moderation: cur.Moderation, Hidden: cur.Hidden}
	if a, ok := found[articleKey]; ok {
		d.BoardID = a.BoardID
		if a.Deleted { // deleted with its article before its own event arrived
			d = tombstone(d)
		}
	}
	u.stage(d)
	return nil
}

func (u *Updater) commentDeleted(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Comment](env)
	if err != nil {
		return err
	}
	if p.CommentID <= 0 || p.ArticleID <= 0 {
		return fault.Invalidf("INVALID_COMMENT", "%s without a valid commentId and articleId", env.Type)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	key := CommentKey(int64(p.CommentID))
	found, err := u.get(ctx, key)
	if err != nil {
		return err
	}
	cur, known := found[key]
	if !known {
		cur = Doc{Type: TypeComment, CommentID: int64(p.CommentID), ArticleID: int64(p.ArticleID),
			WriterID: int64(p.WriterID), CreatedAt: time.Time(p.CreatedAt)}
	}
	if !cur.Deleted {
		u.stage(tombstone(cur))
	}
	return nil
}

func (u *Updater) articleModerated(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.ArticleModeration](env)
	if err != nil {
		return err
	}
	if p.ArticleID <= 0 {
		return fault.Invalidf("INVALID_ARTICLE", "%s without a valid articleId", env.Type)
	}
	return u.moderate(ctx, ArticleKey(int64(p.ArticleID)),
		Doc{Type: TypeArticle, ArticleID: int64(p.ArticleID), BoardID: int64(p.BoardID), WriterID: int64(p.WriterID)},
		p.ModerationVersion, p.Hidden != event.Visible)
}

func (u *Updater) commentModerated(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.CommentModeration](env)
	if err != nil {
		return err
	}
	if p.CommentID <= 0 || p.ArticleID <= 0 {
		return fault.Invalidf("INVALID_COMMENT", "%s without a valid commentId and articleId", env.Type)
	}
	return u.moderate(ctx, CommentKey(int64(p.CommentID)),
		Doc{Type: TypeComment, CommentID: int64(p.CommentID), ArticleID: int64(p.ArticleID), BoardID: int64(p.BoardID),
			WriterID: int64(p.WriterID)},
		p.ModerationVersion, p.Hidden != event.Visible)
}

// moderate hides or restores the document of key; unknown is what to keep if the document's own event has not
// arrived yet.
func (u *Updater) moderate(ctx context.Context, key string, unknown Doc, version int64, hidden bool) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	found, err := u.get(ctx, key)
	if err != nil {
		return err
	}
	cur, known := found[key]
	if !known {
		cur = unknown
	}
	if known && cur.Moderation >= version {
		return nil
	}
	cur.Moderation, cur.Hidden = version, hidden
	u.stage(cur)
	return nil
}
