package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"board/internal/httpio"
)

// Origins are the base URLs of the services the pages are made from: reads through article-read and hot-article,
// writes through the producers, accounts through the user service, reports, bans and the log through moderation,
// searches through search, the reader's notifications through notification ("": a site without notifications,
// whose pages show no bell).
type Origins struct {
	ArticleRead, HotArticle, Article, Comment, Like, View, User, Moderation, Search, Notification, Media string
}

// callTimeout bounds one backend call, within the page's own deadline: a page of two calls in parallel waits for
// the slower, and a hung service costs a reader at most this before the friendly 503.
const (
	callTimeout  = 3 * time.Second
	maxReplySize = 4 << 20
)

// backend calls the other services over HTTP, as any client of their APIs would.
type backend struct {
	origins Origins
	client  *http.Client
}

// serviceError is a service's answer other than success: its status and its {code, message}. A service that could
// not be reached has status 0.
type serviceError struct {
	service string
	status  int
	code    string
	message string
	// retryAfter is a 429's Retry-After, in seconds.
	retryAfter int
	// ban is what a 403 BANNED says of the ban: its reason and its end (nil: for good).
	ban *banInfo
	err error
}

// banInfo is a ban as a 403 BANNED body carries it.
type banInfo struct {
	Reason string     `json:"reason"`
	Until  *time.Time `json:"until"`
}

func (e *serviceError) Error() string {
	if e.status == 0 {
		return fmt.Sprintf("%s service unreachable: %v", e.service, e.err)
	}
	return fmt.Sprintf("%s service answered %d %s: %s", e.service, e.status, e.code, e.message)
}

func (e *serviceError) Unwrap() error { return e.err }

// statusOf returns the status a service answered with, 0 when it could not be reached or err is no service error.
func statusOf(err error) int {
	var se *serviceError
	if errors.As(err, &se) {
		return se.status
	}
	return 0
}

// call is one request of a page to a service.
type call struct {
	service string // for messages: "article-read"
	method  string
	url     string
	body    any
	token   string // the reader's access token, for writes
	client  string // the browser's address, for the user service's per-address limits
	// key is the write's Idempotency-Key, from its form (see formKey): a form sent twice writes once.
	key string
	// cookie is a Cookie header to send, and header where to keep the answer's headers: for the sign-in with a
	// provider, whose state the user service binds to a cookie (see oidcStart).
	cookie string
	header *http.Header
}

// do sends c and decodes a successful JSON answer into out (unless out is nil). Every call counts toward the page's
// Server-Timing.
func (b *backend) do(ctx context.Context, c call, out any) error {
	defer countCall(ctx, time.Now())
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := c.request(ctx)
	if err != nil {
		return err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return &serviceError{service: c.service, err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReplySize))
	if err != nil {
		return &serviceError{service: c.service, err: err}
	}
	if resp.StatusCode >= 300 {
		return answerError(c.service, resp, raw)
	}
	if c.header != nil {
		*c.header = resp.Header
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	// json v2 decodes a page of articles in under half the time of encoding/json, which scans it twice.
	if err := jsonv2.Unmarshal(raw, out); err != nil {
		return &serviceError{service: c.service, status: http.StatusBadGateway, err: fmt.Errorf("%s %s: %w", c.method, c.url, err)}
	}
	return nil
}

// request is c as an HTTP request, with the headers every call carries.
func (c call) request(ctx context.Context) (*http.Request, error) {
	var body io.Reader
	if c.body != nil {
		raw, err := json.Marshal(c.body)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, c.url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.client != "" {
		req.Header.Set("X-Forwarded-For", c.client)
	}
	if c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}
	if c.cookie != "" {
		req.Header.Set("Cookie", c.cookie)
	}
	if id := httpio.RequestID(ctx); id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	return req, nil
}

// answerError is a service's answer other than success, from its status and its {code, message} body raw.
func answerError(service string, resp *http.Response, raw []byte) *serviceError {
	se := &serviceError{service: service, status: resp.StatusCode}
	var e struct {
		Code, Message string
		banInfo
	}
	if json.Unmarshal(raw, &e) == nil {
		se.code, se.message = e.Code, e.Message
		if e.Code == codeBanned {
			se.ban = &e.banInfo
		}
	}
	se.retryAfter, _ = strconv.Atoi(resp.Header.Get("Retry-After"))
	return se
}

// The shapes the pages read, as the services write them (SPEC §3): ids as strings, times in RFC 3339.

type articleRead struct {
	ArticleID           int64     `json:"articleId,string"`
	Title               string    `json:"title"`
	Content             string    `json:"content"`
	ContentHTML         string    `json:"contentHtml"` // rendered and sanitized when written: shown as it is
	ContentText         string    `json:"contentText"` // the plain text, for the page's description
	BoardID             int64     `json:"boardId,string"`
	WriterID            int64     `json:"writerId,string"`
	CreatedAt           time.Time `json:"createdAt"`
	ModifiedAt          time.Time `json:"modifiedAt"`
	ArticleCommentCount int64     `json:"articleCommentCount"`
	ArticleLikeCount    int64     `json:"articleLikeCount"`
	ArticleViewCount    int64     `json:"articleViewCount"`
	// What moderation made of it (SPEC §3.9): Hidden is "", "pending" (hidden by reports until a moderator looks)
	// or "removed", with RemovedReason shown in its place; a locked article takes no new comments; a pinned one
	// comes first on its board.
	Hidden        string `json:"hidden"`
	RemovedReason string `json:"removedReason"`
	Locked        bool   `json:"locked"`
	Pinned        bool   `json:"pinned"`
}

type articleListPage struct {
	Articles     []articleRead `json:"articles"`
	ArticleCount int64         `json:"articleCount"`
}

type comment struct {
	CommentID     int64     `json:"commentId,string"`
	Content       string    `json:"content"`
	ContentHTML   string    `json:"contentHtml"` // rendered and sanitized when written: shown as it is
	ArticleID     int64     `json:"articleId,string"`
	WriterID      int64     `json:"writerId,string"`
	Path          string    `json:"path"`
	Deleted       bool      `json:"deleted"`
	CreatedAt     time.Time `json:"createdAt"`
	ModifiedAt    time.Time `json:"modifiedAt"`
	Edited        bool      `json:"edited"`
	Hidden        string    `json:"hidden"`
	RemovedReason string    `json:"removedReason"`
	LikeCount     int64     `json:"likeCount"` // from the like service's events (SPEC §3.13)
}

type commentPage struct {
	Comments     []comment `json:"comments"`
	CommentCount int64     `json:"commentCount"`
}

type hotArticle struct {
	ArticleID    int64     `json:"articleId,string"`
	Title        string    `json:"title"`
	CreatedAt    time.Time `json:"createdAt"`
	Score        int64     `json:"score"`
	LikeCount    int64     `json:"likeCount"`
	CommentCount int64     `json:"commentCount"`
	ViewCount    int64     `json:"viewCount"`
}

type userInfo struct {
	UserID    int64     `json:"userId,string"`
	Username  string    `json:"username"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
}

// reportTarget is an article or comment in the moderators' queue, with its open reports.
type reportTarget struct {
	TargetType      string           `json:"targetType"`
	TargetID        int64            `json:"targetId,string"`
	BoardID         int64            `json:"boardId,string"`
	ArticleID       int64            `json:"articleId,string"`
	Excerpt         string           `json:"excerpt"`
	WriterID        int64            `json:"writerId,string"`
	ReportCount     int64            `json:"reportCount"`
	Reasons         map[string]int64 `json:"reasons"`
	FirstReportedAt time.Time        `json:"firstReportedAt"`
	Hidden          string           `json:"hidden"`
}

type reportQueue struct {
	Targets []reportTarget `json:"targets"`
	Count   int64          `json:"count"`
}

// ban is a user's ban; Until is nil for a ban for good.
type ban struct {
	UserID      int64      `json:"userId,string"`
	Reason      string     `json:"reason"`
	Until       *time.Time `json:"until"`
	ModeratorID int64      `json:"moderatorId,string"`
	CreatedAt   time.Time  `json:"createdAt"`
}

// logEntry is one moderator action in the public log.
type logEntry struct {
	Action      string    `json:"action"`
	TargetType  string    `json:"targetType"`
	TargetID    int64     `json:"targetId,string"`
	ArticleID   int64     `json:"articleId,string"` // the target's article; 0 for a user
	ModeratorID int64     `json:"moderatorId,string"`
	Reason      string    `json:"reason"`
	CreatedAt   time.Time `json:"createdAt"`
}

type tokenReply struct {
	AccessToken string    `json:"accessToken"`
	ExpiresAt   time.Time `json:"expiresAt"`
}

// callCounter counts a page's backend calls and the time they took, for its Server-Timing header and the log.
type callCounter struct {
	calls   atomic.Int64
	elapsed atomic.Int64 // nanoseconds, summed over calls (parallel calls overlap)
}

type callCounterKey struct{}

func withCallCounter(ctx context.Context) (context.Context, *callCounter) {
	c := &callCounter{}
	return context.WithValue(ctx, callCounterKey{}, c), c
}

func countCall(ctx context.Context, start time.Time) {
	if c, ok := ctx.Value(callCounterKey{}).(*callCounter); ok {
		c.calls.Add(1)
		c.elapsed.Add(int64(time.Since(start)))
	}
}
