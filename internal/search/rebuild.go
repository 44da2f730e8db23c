package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"board/internal/apijson"
	"board/internal/event"
)

// Sources are where a rebuild reads every article and comment: the APIs of the services that own them, with a
// moderator's token so that hidden ones come with their text (the index keeps it for a restore).
type Sources struct {
	Article, Comment string // base URLs
	Token            string
	Client           *http.Client
}

// Progress is told how many articles a rebuild has to index, once it knows (the boards' counts), and how many it has
// indexed.
type Progress interface {
	SetTotal(n int64)
	Add(n int64)
}

// rebuildPage is how many articles, or comments, one API call asks for.
const rebuildPage = 100

// callTimeout bounds each API call of a rebuild.
const callTimeout = 30 * time.Second

// Rebuild puts every article and comment the services hold into ix, board by board and, within a board, a page of
// articles at a time (the article service's infinite scroll, on its (board_id, article_id) index) with their
// comments (the comment service's infinite scrolls, on its (article_id, ...) indexes), one batch per page. What
// changes while it runs is left to the index's consumer, whose group starts where the article and comment topics
// ended before the rebuild began, and at the start of the moderation topic: every change made after that point is
// applied again, in order, after the snapshot.
// It returns how many articles and comments it indexed.
func Rebuild(ctx context.Context, src Sources, ix Indexer, progress Progress) (articles, comments int64, err error) {
	var boards []struct {
		BoardID      apijson.ID
		ArticleCount int64
	}
	if err := src.get(ctx, src.Article+"/v1/articles/boards", nil, &boards); err != nil {
		return 0, 0, err
	}
	var total int64
	for _, b := range boards {
		total += b.ArticleCount
	}
	progress.SetTotal(total)
	var done int64             // articles indexed
	var commented atomic.Int64 // comments indexed
	for _, b := range boards {
		var last int64
		for {
			q := url.Values{"boardId": {strconv.FormatInt(int64(b.BoardID), 10)}, "pageSize": {strconv.Itoa(rebuildPage)}}
			if last != 0 {
				q.Set("lastArticleId", strconv.FormatInt(last, 10))
			}
			var page []articleJSON
			if err := src.get(ctx, src.Article+"/v1/articles/infinite-scroll", q, &page); err != nil {
				return done, commented.Load(), err
			}
			if len(page) == 0 {
				break
			}
			docs, err := src.articlePage(ctx, page, &commented)
			if err != nil {
				return done, commented.Load(), err
			}
			if err := ix.Put(ctx, docs); err != nil {
				return done, commented.Load(), err
			}
			done += int64(len(page))
			progress.Add(int64(len(page)))
			last = int64(page[len(page)-1].ArticleID)
			if len(page) < rebuildPage {
				break
			}
		}
	}
	return done, commented.Load(), nil
}

// articleJSON and commentJSON are what a rebuild reads of the services' answers: ContentText is the plain text
// the documents hold.
type articleJSON struct {
	ArticleID, BoardID, WriterID apijson.ID
	Title, ContentText           string
	CreatedAt                    apijson.Time
	Hidden                       event.Hidden
}

type commentJSON struct {
	CommentID, ArticleID, WriterID, ParentCommentID apijson.ID
	Path, ContentText                               string
	Deleted                                         bool
	CreatedAt                                       apijson.Time
	Hidden                                          event.Hidden
}

// articlePage returns the documents of a page of articles and of their comments, read eight articles at a time.
// comments counts the comments.
func (src Sources) articlePage(ctx context.Context, articles []articleJSON, comments *atomic.Int64) ([]Doc, error) {
	byArticle := make([][]Doc, len(articles))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, a := range articles {
		g.Go(func() (err error) {
			byArticle[i], err = src.comments(gctx, int64(a.ArticleID), int64(a.BoardID))
			comments.Add(int64(len(byArticle[i])))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var docs []Doc
	for i, a := range articles {
		// Version 0: older than any event of the article, which the consumer then applies over it in order.
		docs = append(docs, Doc{Type: TypeArticle, ArticleID: int64(a.ArticleID), BoardID: int64(a.BoardID),
			WriterID: int64(a.WriterID), Title: a.Title, Content: a.ContentText, CreatedAt: time.Time(a.CreatedAt),
			Hidden: a.Hidden != event.Visible})
		docs = append(docs, byArticle[i]...)
	}
	return docs, nil
}

// comments returns the live comments of an article, of both comment APIs (v1 two-depth, v2 paths).
func (src Sources) comments(ctx context.Context, articleID, boardID int64) ([]Doc, error) {
	var docs []Doc
	add := func(cs []commentJSON) {
		for _, c := range cs {
			if !c.Deleted {
				docs = append(docs, Doc{Type: TypeComment, CommentID: int64(c.CommentID), ArticleID: articleID, BoardID: boardID,
					WriterID: int64(c.WriterID), Content: c.ContentText, CreatedAt: time.Time(c.CreatedAt),
					Version: commentCreatedVersion, Hidden: c.Hidden != event.Visible})
			}
		}
	}
	article := strconv.FormatInt(articleID, 10)
	for lastPath := ""; ; {
		q := url.Values{"articleId": {article}, "pageSize": {strconv.Itoa(rebuildPage)}}
		if lastPath != "" {
			q.Set("lastPath", lastPath)
		}
		var cs []commentJSON
		if err := src.get(ctx, src.Comment+"/v2/comments/infinite-scroll", q, &cs); err != nil {
			return nil, err
		}
		add(cs)
		if len(cs) < rebuildPage {
			break
		}
		lastPath = cs[len(cs)-1].Path
	}
	for lastParent, last := int64(0), int64(0); ; {
		q := url.Values{"articleId": {article}, "pageSize": {strconv.Itoa(rebuildPage)}}
		if last != 0 {
			q.Set("lastParentCommentId", strconv.FormatInt(lastParent, 10))
			q.Set("lastCommentId", strconv.FormatInt(last, 10))
		}
		var cs []commentJSON
		if err := src.get(ctx, src.Comment+"/v1/comments/infinite-scroll", q, &cs); err != nil {
			return nil, err
		}
		add(cs)
		if len(cs) < rebuildPage {
			break
		}
		lastParent, last = int64(cs[len(cs)-1].ParentCommentID), int64(cs[len(cs)-1].CommentID)
	}
	return docs, nil
}

// get reads a JSON answer, within callTimeout.
func (src Sources) get(ctx context.Context, u string, q url.Values, out any) error {
	if q != nil {
		u += "?" + q.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if src.Token != "" {
		req.Header.Set("Authorization", "Bearer "+src.Token)
	}
	resp, err := src.Client.Do(req)
	if err != nil {
		return fmt.Errorf("rebuild: GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("rebuild: GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("rebuild: GET %s: %s: %s", u, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return errors.Join(fmt.Errorf("rebuild: GET %s: the answer", u), err)
	}
	return nil
}
