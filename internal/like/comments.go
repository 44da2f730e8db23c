package like

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/existence"
	"board/internal/fault"
	"board/internal/kafka"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// Comments is the like service's record of which comments exist, and of each one's article, in the table
// comment_existence: what internal/existence is for articles, fed the same way. A like of a comment names only the
// comment, while its transaction must name the article (the shard key of every row it writes, the outbox's
// included) and hold the comment live until it commits.
//
// The service's consumer applies the comment topic (Handlers): COMMENT_CREATED records a comment live, COMMENT_DELETED
// records it deleted for good (a soft-deleted comment, kept in its thread for its replies, is deleted here too: it can
// no longer be liked). A comment not heard of yet (its event still on the way) is looked up once at the comment
// service, with a deadline, at most existence.DefaultMaxLookups at a time, concurrent lookups of one id collapsed into
// one, and recorded. A comment's article never changes, so which article a comment is on is remembered in memory.
type Comments struct {
	db      *sqldb.DB
	origin  string // base URL of the comment service
	client  *http.Client
	timeout time.Duration
	now     func() time.Time
	lookups chan struct{} // a slot per lookup in flight
	flight  singleflight.Group

	mu       sync.Mutex
	articles map[int64]int64     // comment -> article, bounded by maxRemembered
	missing  map[int64]time.Time // comment -> until when the comment service's 404 stands, bounded likewise
}

// maxRemembered bounds the comments whose article Comments remembers, and those it remembers missing; past it, it
// forgets them all and reads again.
const maxRemembered = 100_000

// missingTTL is how long a comment the comment service did not have is answered as missing without asking again: a
// client asking for made-up ids then costs the comment service one lookup per id a minute, not one per request. A
// comment is committed before its id is given out, so a real one is never missing when first asked for.
const missingTTL = time.Minute

// NewComments returns the record of comments in db (prepared by Migrate), looking unknown ones up at the comment
// service at origin; now is the clock (nil for time.Now).
func NewComments(db *sqldb.DB, origin string, now func() time.Time) *Comments {
	if now == nil {
		now = time.Now
	}
	return &Comments{db: db, origin: strings.TrimSuffix(origin, "/"), timeout: existence.DefaultLookupTimeout, now: now,
		client:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: existence.DefaultMaxLookups, IdleConnTimeout: time.Minute}},
		lookups: make(chan struct{}, existence.DefaultMaxLookups), articles: map[int64]int64{}, missing: map[int64]time.Time{}}
}

// CommentNotFound is the error of a like or unlike of a comment that does not exist, or is deleted (404).
func CommentNotFound(commentID int64) error {
	return fault.NotFoundf("COMMENT_NOT_FOUND", "comment %d does not exist", commentID)
}

// Handlers are the record's handlers of the comment topic, for the like service's consumer group.
func (c *Comments) Handlers() map[event.Type]kafka.Handler {
	return map[event.Type]kafka.Handler{event.CommentCreated: c.applyCreated, event.CommentDeleted: c.applyDeleted}
}

func commentOf(env event.Envelope) (commentID, articleID int64, err error) {
	p, err := event.Payload[event.Comment](env)
	if err != nil {
		return 0, 0, err
	}
	if p.CommentID <= 0 || p.ArticleID <= 0 {
		return 0, 0, fault.Invalidf("INVALID_COMMENT_ID", "%s without a valid commentId and articleId", env.Type)
	}
	return int64(p.CommentID), int64(p.ArticleID), nil
}

// applyCreated records a comment as live unless it has a row: a COMMENT_CREATED after its COMMENT_DELETED changes
// nothing.
func (c *Comments) applyCreated(ctx context.Context, env event.Envelope) error {
	commentID, articleID, err := commentOf(env)
	if err != nil {
		return err
	}
	return c.record(ctx, commentID, articleID, false)
}

// applyDeleted records a comment as deleted for good. Its likes stay, as its thread keeps a soft-deleted comment;
// they go with its article's (Store.Purge). The row is updated under its exclusive lock, which waits for every like
// transaction that holds it shared; a comment never heard of gets a deleted row.
func (c *Comments) applyDeleted(ctx context.Context, env event.Envelope) error {
	commentID, articleID, err := commentOf(env)
	if err != nil {
		return err
	}
	// An UPDATE, else an INSERT, rather than an upsert: behind Vitess the row owns its comment_id's lookup row, which
	// vtgate writes with a plain INSERT. A row inserted between the two (by its COMMENT_CREATED or a lookup) is
	// updated by the second round.
	for range 2 {
		res, err := c.db.ExecContext(ctx, "UPDATE comment_existence SET deleted = TRUE WHERE article_id = ? AND comment_id = ?",
			articleID, commentID)
		if err := updated(res, err, errNoComment); !errors.Is(err, errNoComment) {
			return err
		}
		if err := c.insert(ctx, commentID, articleID, true); !sqldb.IsDuplicate(err) {
			return err
		}
	}
	return fmt.Errorf("comment %d: neither updated nor inserted as deleted", commentID)
}

// errNoComment says an UPDATE found no row of the comment.
var errNoComment = errors.New("comment not recorded")

// record inserts a comment's row unless it has one: a delete recorded before stays.
func (c *Comments) record(ctx context.Context, commentID, articleID int64, deleted bool) error {
	if err := c.insert(ctx, commentID, articleID, deleted); !sqldb.IsDuplicate(err) {
		return err
	}
	return nil
}

// insert inserts a comment's row (a plain INSERT: see applyDeleted).
func (c *Comments) insert(ctx context.Context, commentID, articleID int64, deleted bool) error {
	_, err := c.db.ExecContext(ctx, "INSERT INTO comment_existence (comment_id, article_id, deleted) VALUES (?, ?, ?)",
		commentID, articleID, deleted)
	return err
}

// article returns the article of a comment this service has a row of, live or deleted (require tells them apart),
// looking an unknown one up at the comment service: CommentNotFound when it has none.
func (c *Comments) article(ctx context.Context, commentID int64) (int64, error) {
	c.mu.Lock()
	articleID, ok := c.articles[commentID]
	c.mu.Unlock()
	if ok {
		return articleID, nil
	}
	err := c.db.QueryRowContext(ctx, "SELECT article_id FROM comment_existence WHERE comment_id = ?", commentID).Scan(&articleID)
	if errors.Is(err, sql.ErrNoRows) {
		articleID, err = c.lookUp(ctx, commentID)
	}
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	if len(c.articles) >= maxRemembered {
		clear(c.articles)
	}
	c.articles[commentID] = articleID
	c.mu.Unlock()
	return articleID, nil
}

// require, in a like transaction after the article's existence.Registry.Require, checks that the comment is live
// and keeps it so until the transaction ends: the row is read under a shared lock, which recording its delete must
// wait for. By article_id too, the shard key.
func (c *Comments) require(ctx context.Context, tx *sql.Tx, articleID, commentID int64) error {
	var deleted bool
	err := tx.QueryRowContext(ctx, "SELECT deleted FROM comment_existence WHERE article_id = ? AND comment_id = ?"+c.db.ForShare(),
		articleID, commentID).Scan(&deleted)
	if errors.Is(err, sql.ErrNoRows) || err == nil && deleted {
		return CommentNotFound(commentID)
	}
	return err
}

// lookUp asks the comment service for a comment, v2 first and then v1 (each version's GET finds only its own), and
// records it. Concurrent lookups of one id share one call, which runs to its own deadline.
func (c *Comments) lookUp(ctx context.Context, commentID int64) (int64, error) {
	now := c.now()
	if snowflake.Timestamp(commentID).After(now.Add(10 * time.Second)) {
		return 0, CommentNotFound(commentID) // not issued yet by any clock within the skew: nothing to ask
	}
	c.mu.Lock()
	until, missing := c.missing[commentID]
	c.mu.Unlock()
	if missing && now.Before(until) {
		return 0, CommentNotFound(commentID)
	}
	done := c.flight.DoChan(strconv.FormatInt(commentID, 10), func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		articleID, err := c.fetch(ctx, commentID)
		if fault.KindOf(err) == fault.NotFound {
			c.mu.Lock()
			if len(c.missing) >= maxRemembered {
				clear(c.missing)
			}
			c.missing[commentID] = c.now().Add(missingTTL)
			c.mu.Unlock()
		}
		return articleID, err
	})
	select {
	case res := <-done:
		if res.Err != nil {
			return 0, res.Err
		}
		return res.Val.(int64), nil
	case <-ctx.Done():
		return 0, fault.Unavailablef(ctx.Err(), "COMMENT_SERVICE_UNAVAILABLE",
			"cannot tell whether comment %d exists in time; try again", commentID)
	}
}

// fetch is one lookup, within ctx and a free slot: it records the comment and returns its article.
func (c *Comments) fetch(ctx context.Context, commentID int64) (int64, error) {
	unavailable := func(err error) error {
		return fault.Unavailablef(err, "COMMENT_SERVICE_UNAVAILABLE",
			"the comment service cannot tell whether comment %d exists; try again", commentID)
	}
	select {
	case c.lookups <- struct{}{}:
		defer func() { <-c.lookups }()
	case <-ctx.Done():
		return 0, unavailable(fmt.Errorf("no free lookup slot: %w", ctx.Err()))
	}
	var found struct {
		ArticleID apijson.ID `json:"articleId"`
		Deleted   bool       `json:"deleted"`
	}
	for _, version := range []string{"/v2", "/v1"} {
		url := c.origin + version + "/comments/" + strconv.FormatInt(commentID, 10)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		resp, err := c.client.Do(req)
		if err != nil {
			return 0, unavailable(err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch {
		case err != nil:
			return 0, unavailable(err)
		case resp.StatusCode == http.StatusNotFound:
			continue
		case resp.StatusCode != http.StatusOK:
			return 0, unavailable(fmt.Errorf("GET %s: %s", url, resp.Status))
		}
		if err := json.Unmarshal(body, &found); err != nil {
			return 0, unavailable(fmt.Errorf("GET %s: %.200q: %w", url, body, err))
		}
		if found.ArticleID <= 0 {
			return 0, unavailable(fmt.Errorf("GET %s: no articleId in %.200q", url, body))
		}
		if err := c.record(ctx, commentID, int64(found.ArticleID), found.Deleted); err != nil {
			return 0, err
		}
		return int64(found.ArticleID), nil
	}
	return 0, CommentNotFound(commentID)
}
