// Package boardpage is a board's articles a page at a time, as both the article service (SPEC §3.1) and
// article-read (SPEC §3.6) serve them:
//
//	GET /v1/articles?boardId=&page=&pageSize=                          {articles, articleCount}
//	GET /v1/articles/infinite-scroll?boardId=&pageSize=&lastArticleId= [articles]
//
// It reads and checks the parameters of both (ReadPage, ReadScroll), and writes them for a client (Query); it holds
// the rule of the capped count that a page's links need (CountLimit); and Page is the offset page's answer. The two
// services build their answers from different stores, but through this package they take the same requests, refuse
// the same bad ones with the same errors, and answer in the same shape. Services never import each other, so the
// part they share lives here.
package boardpage

import (
	"net/http"
	"net/url"
	"strconv"

	"board/internal/httpio"
)

// pageLinks is how many page links a list page shows; the capped count looks that far ahead.
const pageLinks = 10

// CountLimit is how far the count of page (from 1) of pageSize articles goes: to the end of the block of pageLinks
// pages that holds the page, plus one to tell whether there are more. A page's articleCount is the board's article
// count capped at this, never a full count (SPEC §3.1).
func CountLimit(page, pageSize int64) int64 {
	return ((page-1)/pageLinks+1)*pageSize*pageLinks + 1
}

// PageRequest asks for page Page (from 1) of a board, PageSize articles newest first.
type PageRequest struct {
	BoardID, Page, PageSize int64
}

// ReadPage reads and checks the parameters of GET /v1/articles: boardId (required), page (default 1) and pageSize
// (default httpio.DefaultPageSize, at most httpio.MaxPageSize).
func ReadPage(r *http.Request) (PageRequest, error) {
	boardID, err := httpio.QueryID(r, "boardId")
	if err != nil {
		return PageRequest{}, err
	}
	page, pageSize, err := httpio.PageQuery(r)
	if err != nil {
		return PageRequest{}, err
	}
	return PageRequest{BoardID: boardID, Page: page, PageSize: pageSize}, nil
}

// Query is p as the query of a GET /v1/articles.
func (p PageRequest) Query() url.Values {
	return url.Values{"boardId": {strconv.FormatInt(p.BoardID, 10)}, "page": {strconv.FormatInt(p.Page, 10)},
		"pageSize": {strconv.FormatInt(p.PageSize, 10)}}
}

// Page is the answer to GET /v1/articles: a page's articles, A being a service's JSON form of an article, and the
// capped count (CountLimit) that the page's links need.
type Page[A any] struct {
	Articles     []A   `json:"articles"`
	ArticleCount int64 `json:"articleCount"`
}

// ScrollRequest asks for the PageSize articles of a board older than LastArticleID (0: from the newest), newest
// first.
type ScrollRequest struct {
	BoardID, PageSize, LastArticleID int64
}

// ReadScroll reads and checks the parameters of GET /v1/articles/infinite-scroll: boardId (required), pageSize (as
// for a page) and lastArticleId (optional).
func ReadScroll(r *http.Request) (ScrollRequest, error) {
	boardID, err := httpio.QueryID(r, "boardId")
	if err != nil {
		return ScrollRequest{}, err
	}
	pageSize, err := httpio.PageSizeQuery(r)
	if err != nil {
		return ScrollRequest{}, err
	}
	lastID, err := httpio.OptionalQueryID(r, "lastArticleId")
	if err != nil {
		return ScrollRequest{}, err
	}
	return ScrollRequest{BoardID: boardID, PageSize: pageSize, LastArticleID: lastID}, nil
}

// Query is s as the query of a GET /v1/articles/infinite-scroll.
func (s ScrollRequest) Query() url.Values {
	q := url.Values{"boardId": {strconv.FormatInt(s.BoardID, 10)}, "pageSize": {strconv.FormatInt(s.PageSize, 10)}}
	if s.LastArticleID != 0 {
		q.Set("lastArticleId", strconv.FormatInt(s.LastArticleID, 10))
	}
	return q
}
