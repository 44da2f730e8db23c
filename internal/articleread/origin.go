package articleread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"board/internal/apijson"
	"board/internal/boardpage"
	"board/internal/event"
	"board/internal/fault"
)

// Origins are the base URLs of the services the read model is rebuilt from when Redis does not hold it.
type Origins struct {
	Article, Comment, Like, View string
}

// Origin defaults: a call is one attempt within attemptTimeout, repeated once after a short jittered pause when it
// failed in a way another attempt may fix (no answer, 5xx).
const (
	attemptTimeout = 2 * time.Second
	maxAttempts    = 2
	retryPause     = 50 * time.Millisecond
	maxOriginBody  = 4 << 20
)

// origins calls the origin services over HTTP.
type origins struct {
	base   Origins
	client *http.Client
}

func newOrigins(base Origins, client *http.Client) *origins {
	if client == nil {
		// Uncompressed: the services answer over a fast network, where compressing costs both ends more CPU than the
		// bytes it saves are worth.
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute, DisableCompression: true}}
	}
	return &origins{base: base, client: client}
}

// errNotFound is an origin's 404.
var errNotFound = errors.New("not found at the origin")

// get calls GET base+path and decodes the JSON answer into out; it returns the answer's version (its ETag, a quoted
// decimal; -1 when absent). A 404 is errNotFound; an origin that cannot answer is an Unavailable fault.
func (o *origins) get(ctx context.Context, service, base, path string, out any) (version int64, err error) {
	for attempt := 1; ; attempt++ {
		var retry bool
		version, retry, err = o.attempt(ctx, base+path, out)
		if err == nil || !retry || attempt == maxAttempts || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryPause/2 + rand.N(retryPause)):
		}
	}
	if err != nil && !errors.Is(err, errNotFound) {
		return 0, fault.Unavailablef(err, "ORIGIN_UNAVAILABLE", "the %s service cannot answer; try again later", service)
	}
	return version, err
}

// getFound is get for an endpoint that always has an answer (a count, a page): a 404 there means a wrong origin
// address, which is the origin being unavailable.
func (o *origins) getFound(ctx context.Context, service, base, path string, out any) (int64, error) {
	version, err := o.get(ctx, service, base, path, out)
	if errors.Is(err, errNotFound) {
		return 0, fault.Unavailablef(err, "ORIGIN_UNAVAILABLE", "the %s service does not know %s; check its address", service, path)
	}
	return version, err
}

// attempt is one call; retry says whether another attempt may succeed.
func (o *origins) attempt(ctx context.Context, rawURL string, out any) (version int64, retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return 0, true, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOriginBody))
	switch {
	case err != nil:
		return 0, true, fmt.Errorf("GET %s: %w", rawURL, err)
	case resp.StatusCode == http.StatusNotFound:
		return 0, false, errNotFound
	case resp.StatusCode >= 500:
		return 0, true, fmt.Errorf("GET %s: %s", rawURL, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return 0, false, fmt.Errorf("GET %s: %s: %s", rawURL, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return 0, false, fmt.Errorf("GET %s: %w", rawURL, err)
	}
	version = -1
	if etag := resp.Header.Get("ETag"); etag != "" {
		if version, err = strconv.ParseInt(strings.Trim(etag, `"`), 10, 64); err != nil {
			return 0, false, fmt.Errorf("GET %s: ETag %q is not a version", rawURL, etag)
		}
	}
	return version, false, nil
}

// Article is an article as the article service writes it.
type Article struct {
	ArticleID apijson.ID `json:"articleId"`
	Title     string     `json:"title"`
	Content   string     `json:"content"`
	// ContentHTML and ContentText are the content as the article service rendered it when it was written: reads
	// never render.
	ContentHTML string       `json:"contentHtml"`
	ContentText string       `json:"contentText"`
	BoardID     apijson.ID   `json:"boardId"`
	WriterID    apijson.ID   `json:"writerId"`
	CreatedAt   apijson.Time `json:"createdAt"`
	ModifiedAt  apijson.Time `json:"modifiedAt"`
}

// Moderation is an article's moderation state (SPEC §3.9), as answers carry it after the article's fields.
type Moderation struct {
	// Hidden is "" (shown), "pending" (hidden by reports, pending review) or "removed" (by a moderator); a hidden
	// article is answered with a placeholder title, no content and RemovedReason.
	Hidden        event.Hidden `json:"hidden"`
	RemovedReason string       `json:"removedReason"`
	Locked        bool         `json:"locked"`
	Pinned        bool         `json:"pinned"`
	// Version is the moderation version the state is at (not on the wire).
	Version int64 `json:"-"`
}

// originArticle is an article as the article service answers it: the article, its moderation state, and the
// version of that state when the service tells it (0 when it does not, older than any event).
type originArticle struct {
	Article
	Moderation
	ModerationVersion int64 `json:"moderationVersion"`
}

// moderation is the article's moderation state with its version.
func (a originArticle) moderation() Moderation {
	m := a.Moderation
	m.Version = a.ModerationVersion
	return m
}

// versioned is a value and the version of the row it was read from.
type versioned[T any] struct {
	Value   T
	Version int64
}

func (o *origins) article(ctx context.Context, id int64) (versioned[originArticle], error) {
	var a originArticle
	v, err := o.get(ctx, "article", o.base.Article, "/v1/articles/"+strconv.FormatInt(id, 10), &a)
	return versioned[originArticle]{a, v}, err
}

func (o *origins) commentCount(ctx context.Context, articleID int64) (versioned[int64], error) {
	var n int64
	v, err := o.getFound(ctx, "comment", o.base.Comment, "/v2/comments/articles/"+strconv.FormatInt(articleID, 10)+"/count", &n)
	return versioned[int64]{n, v}, err
}

func (o *origins) likeCount(ctx context.Context, articleID int64) (versioned[int64], error) {
	var n int64
	v, err := o.getFound(ctx, "like", o.base.Like, "/v1/article-likes/articles/"+strconv.FormatInt(articleID, 10)+"/count", &n)
	return versioned[int64]{n, v}, err
}

func (o *origins) viewCount(ctx context.Context, articleID int64) (int64, error) {
	var n int64
	_, err := o.getFound(ctx, "view", o.base.View, "/v1/article-views/articles/"+strconv.FormatInt(articleID, 10)+"/count", &n)
	return n, err
}

func (o *origins) boardCount(ctx context.Context, boardID int64) (versioned[int64], error) {
	var n int64
	v, err := o.getFound(ctx, "article", o.base.Article, "/v1/articles/boards/"+strconv.FormatInt(boardID, 10)+"/count", &n)
	return versioned[int64]{n, v}, err
}

// page is an offset page of the article service.
type page = boardpage.Page[originArticle]

func (o *origins) page(ctx context.Context, boardID, pageNo, pageSize int64) (page, error) {
	var p page
	q := boardpage.PageRequest{BoardID: boardID, Page: pageNo, PageSize: pageSize}.Query()
	_, err := o.getFound(ctx, "article", o.base.Article, "/v1/articles?"+q.Encode(), &p)
	return p, err
}

func (o *origins) scroll(ctx context.Context, boardID, pageSize, lastID int64) ([]originArticle, error) {
	var as []originArticle
	q := boardpage.ScrollRequest{BoardID: boardID, PageSize: pageSize, LastArticleID: lastID}.Query()
	_, err := o.getFound(ctx, "article", o.base.Article, "/v1/articles/infinite-scroll?"+q.Encode(), &as)
	return as, err
}
