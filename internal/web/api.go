package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The calls the pages make, one method per endpoint of SPEC §3. Reads of articles go through article-read; the
// article service is asked directly only for what must reflect a write just made (read-your-writes, the edit form).

func id(n int64) string { return strconv.FormatInt(n, 10) }

func (b *backend) articlePage(ctx context.Context, boardID, page, size int64) (articleListPage, error) {
	var p articleListPage
	q := url.Values{"boardId": {id(boardID)}, "page": {id(page)}, "pageSize": {id(size)}}
	err := b.do(ctx, call{service: "article-read", method: http.MethodGet, url: b.origins.ArticleRead + "/v1/articles?" + q.Encode()}, &p)
	return p, err
}

// articleScroll returns the size articles after the one with id after (0: from the newest).
func (b *backend) articleScroll(ctx context.Context, boardID, size, after int64) ([]articleRead, error) {
	var as []articleRead
	q := url.Values{"boardId": {id(boardID)}, "pageSize": {id(size)}}
	if after > 0 {
		q.Set("lastArticleId", id(after))
	}
	err := b.do(ctx, call{service: "article-read", method: http.MethodGet, url: b.origins.ArticleRead + "/v1/articles/infinite-scroll?" + q.Encode()}, &as)
	return as, err
}

func (b *backend) article(ctx context.Context, articleID int64) (articleRead, error) {
	var a articleRead
	err := b.do(ctx, call{service: "article-read", method: http.MethodGet, url: b.origins.ArticleRead + "/v1/articles/" + id(articleID)}, &a)
	return a, err
}

// articleSource reads an article from the article service itself: its counts are left zero.
func (b *backend) articleSource(ctx context.Context, articleID int64) (articleRead, error) {
	var a articleRead
	err := b.do(ctx, call{service: "article", method: http.MethodGet, url: b.origins.Article + "/v1/articles/" + id(articleID)}, &a)
	return a, err
}

func (b *backend) comments(ctx context.Context, articleID, page, size int64) (commentPage, error) {
	var p commentPage
	q := url.Values{"articleId": {id(articleID)}, "page": {id(page)}, "pageSize": {id(size)}}
	err := b.do(ctx, call{service: "comment", method: http.MethodGet, url: b.origins.Comment + "/v2/comments?" + q.Encode()}, &p)
	return p, err
}

func (b *backend) hot(ctx context.Context, day string) ([]hotArticle, error) {
	var hs []hotArticle
	err := b.do(ctx, call{service: "hot-article", method: http.MethodGet, url: b.origins.HotArticle + "/v1/hot-articles/articles/date/" + day}, &hs)
	return hs, err
}

// users returns the users of ids that exist (at most 100 ids).
func (b *backend) users(ctx context.Context, ids []int64) ([]userInfo, error) {
	parts := make([]string, len(ids))
	for i, n := range ids {
		parts[i] = id(n)
	}
	var us []userInfo
	err := b.do(ctx, call{service: "user", method: http.MethodGet, url: b.origins.User + "/v1/users?ids=" + strings.Join(parts, ",")}, &us)
	return us, err
}

func likePath(articleID, userID int64) string {
	return "/v1/article-likes/articles/" + id(articleID) + "/users/" + id(userID)
}

// liked says whether the user likes the article.
func (b *backend) liked(ctx context.Context, articleID, userID int64) (bool, error) {
	err := b.do(ctx, call{service: "like", method: http.MethodGet, url: b.origins.Like + likePath(articleID, userID)}, nil)
	if statusOf(err) == http.StatusNotFound {
		return false, nil
	}
	return err == nil, err
}

func (b *backend) likeCount(ctx context.Context, articleID int64) (int64, error) {
	var n int64
	err := b.do(ctx, call{service: "like", method: http.MethodGet, url: b.origins.Like + "/v1/article-likes/articles/" + id(articleID) + "/count"}, &n)
	return n, err
}

// setLiked likes or unlikes the article as v. Liking twice or unliking what is not liked is what the reader wanted
// (a second tab, a double click), not an error.
func (b *backend) setLiked(ctx context.Context, v *viewer, articleID int64, like bool) error {
	method, already := http.MethodPost, http.StatusConflict
	if !like {
		method, already = http.MethodDelete, http.StatusNotFound
	}
	err := b.do(ctx, call{service: "like", method: method, url: b.origins.Like + likePath(articleID, v.ID), token: v.token}, nil)
	if statusOf(err) == already {
		return nil
	}
	return err
}

// view counts a view of the article by v (the view service counts one per reader per 10 minutes).
func (b *backend) view(ctx context.Context, v *viewer, articleID int64) error {
	path := "/v1/article-views/articles/" + id(articleID) + "/users/" + id(v.ID)
	return b.do(ctx, call{service: "view", method: http.MethodPost, url: b.origins.View + path, token: v.token}, nil)
}

type articleInput struct {
	Title   string `json:"title"`
	Content string `json:"content"`
	BoardID string `json:"boardId,omitempty"`
}

func (b *backend) createArticle(ctx context.Context, v *viewer, in articleInput) (articleRead, error) {
	var a articleRead
	err := b.do(ctx, call{service: "article", method: http.MethodPost, url: b.origins.Article + "/v1/articles", body: in, token: v.token}, &a)
	return a, err
}

func (b *backend) updateArticle(ctx context.Context, v *viewer, articleID int64, in articleInput) (articleRead, error) {
	var a articleRead
	err := b.do(ctx, call{service: "article", method: http.MethodPut, url: b.origins.Article + "/v1/articles/" + id(articleID), body: in, token: v.token}, &a)
	return a, err
}

func (b *backend) deleteArticle(ctx context.Context, v *viewer, articleID int64) error {
	return b.do(ctx, call{service: "article", method: http.MethodDelete, url: b.origins.Article + "/v1/articles/" + id(articleID), token: v.token}, nil)
}

func (b *backend) createComment(ctx context.Context, v *viewer, articleID int64, parentPath, content string) (comment, error) {
	var c comment
	in := map[string]string{"articleId": id(articleID), "content": content}
	if parentPath != "" {
		in["parentPath"] = parentPath
	}
	err := b.do(ctx, call{service: "comment", method: http.MethodPost, url: b.origins.Comment + "/v2/comments", body: in, token: v.token}, &c)
	return c, err
}

func (b *backend) deleteComment(ctx context.Context, v *viewer, commentID int64) error {
	return b.do(ctx, call{service: "comment", method: http.MethodDelete, url: b.origins.Comment + "/v2/comments/" + id(commentID), token: v.token}, nil)
}

// signUp creates the account; client is the browser's address, which the user service's sign-up limit counts.
func (b *backend) signUp(ctx context.Context, username, password, client string) error {
	in := map[string]string{"username": username, "password": password}
	return b.do(ctx, call{service: "user", method: http.MethodPost, url: b.origins.User + "/v1/users", body: in, client: client}, nil)
}

func (b *backend) signIn(ctx context.Context, username, password, client string) (tokenReply, error) {
	var t tokenReply
	in := map[string]string{"username": username, "password": password}
	err := b.do(ctx, call{service: "user", method: http.MethodPost, url: b.origins.User + "/v1/tokens", body: in, client: client}, &t)
	if err == nil && t.AccessToken == "" {
		err = &serviceError{service: "user", status: http.StatusBadGateway, err: errors.New("a token answer without a token")}
	}
	return t, err
}
