package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The calls the pages make, one method per endpoint of SPEC §3. Reads of articles go through article-read; the
// article service is asked directly only for what must reflect a write just made (read-your-writes, the edit form).

func id(n int64) string { return strconv.FormatInt(n, 10) }

// articlePage is a page of the board's articles in the sort ("": newest first).
func (b *backend) articlePage(ctx context.Context, boardID int64, sort string, page, size int64) (articleListPage, error) {
	var p articleListPage
	q := url.Values{"boardId": {id(boardID)}, "page": {id(page)}, "pageSize": {id(size)}, "view": {"summary"}}
	if sort != "" {
		q.Set("sort", sort)
	}
	err := b.do(ctx, call{service: "article-read", method: http.MethodGet, url: b.origins.ArticleRead + "/v1/articles?" + q.Encode()}, &p)
	return p, err
}

// articleScroll returns the size articles after the one with id after in the sort (0: from the first).
func (b *backend) articleScroll(ctx context.Context, boardID int64, sort string, size, after int64) ([]articleRead, error) {
	var as []articleRead
	q := url.Values{"boardId": {id(boardID)}, "pageSize": {id(size)}, "view": {"summary"}}
	if sort != "" {
		q.Set("sort", sort)
	}
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

// articleSource reads an article from the article service itself: its counts are left zero. With the reader's
// token, a hidden article comes whole to its writer and to moderators (SPEC §3.9).
func (b *backend) articleSource(ctx context.Context, v *viewer, articleID int64) (articleRead, error) {
	var a articleRead
	err := b.do(ctx, call{service: "article", method: http.MethodGet, url: b.origins.Article + "/v1/articles/" + id(articleID), token: v.Token()}, &a)
	return a, err
}

// comments is a page of the article's thread in the sort ("": the tree, oldest first); with the reader's token,
// hidden comments come whole to their writers and to moderators.
func (b *backend) comments(ctx context.Context, v *viewer, articleID int64, sort string, page, size int64) (commentPage, error) {
	var p commentPage
	q := url.Values{"articleId": {id(articleID)}, "page": {id(page)}, "pageSize": {id(size)}}
	if sort != "" {
		q.Set("sort", sort)
	}
	err := b.do(ctx, call{service: "comment", method: http.MethodGet, url: b.origins.Comment + "/v2/comments?" + q.Encode(), token: v.Token()}, &p)
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

// setLiked likes or unlikes the article as v, a like with its form's key. Liking twice or unliking what is not liked
// is what the reader wanted (a second tab, a double click), not an error.
func (b *backend) setLiked(ctx context.Context, v *viewer, articleID int64, like bool, key string) error {
	method, already := http.MethodPost, http.StatusConflict
	if !like {
		method, already, key = http.MethodDelete, http.StatusNotFound, "" // a DELETE takes no key
	}
	err := b.do(ctx, call{service: "like", method: method, url: b.origins.Like + likePath(articleID, v.ID), token: v.token, key: key}, nil)
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

func (b *backend) createArticle(ctx context.Context, v *viewer, in articleInput, key string) (articleRead, error) {
	var a articleRead
	err := b.do(ctx, call{service: "article", method: http.MethodPost, url: b.origins.Article + "/v1/articles", body: in, token: v.token, key: key}, &a)
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

func (b *backend) createComment(ctx context.Context, v *viewer, articleID int64, parentPath, content, key string) (comment, error) {
	var c comment
	in := map[string]string{"articleId": id(articleID), "content": content}
	if parentPath != "" {
		in["parentPath"] = parentPath
	}
	err := b.do(ctx, call{service: "comment", method: http.MethodPost, url: b.origins.Comment + "/v2/comments", body: in, token: v.token, key: key}, &c)
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

// user is one account, by id.
func (b *backend) user(ctx context.Context, userID int64) (userInfo, error) {
	var u userInfo
	err := b.do(ctx, call{service: "user", method: http.MethodGet, url: b.origins.User + "/v1/users/" + id(userID)}, &u)
	return u, err
}

// report reports an article or a comment ("article" or "comment" as targetType) to the moderators.
func (b *backend) report(ctx context.Context, v *viewer, targetType string, targetID int64, reason, text, key string) error {
	in := map[string]string{"targetType": targetType, "targetId": id(targetID), "reason": reason}
	if text != "" {
		in["text"] = text
	}
	return b.do(ctx, call{service: "moderation", method: http.MethodPost, url: b.origins.Moderation + "/v1/reports", body: in, token: v.token, key: key}, nil)
}

// reports is a page of the moderators' queue, oldest first.
func (b *backend) reports(ctx context.Context, v *viewer, page, size int64) (reportQueue, error) {
	var q reportQueue
	query := url.Values{"page": {id(page)}, "pageSize": {id(size)}}
	err := b.do(ctx, call{service: "moderation", method: http.MethodGet, url: b.origins.Moderation + "/v1/reports?" + query.Encode(), token: v.token}, &q)
	return q, err
}

// resolve closes a target's open reports: "dismiss" shows it again, "remove" hides it for reason.
func (b *backend) resolve(ctx context.Context, v *viewer, targetType string, targetID int64, action, reason string) error {
	in := map[string]string{"targetType": targetType, "targetId": id(targetID), "action": action, "reason": reason}
	return b.do(ctx, call{service: "moderation", method: http.MethodPost, url: b.origins.Moderation + "/v1/reports/resolutions", body: in, token: v.token}, nil)
}

// setArticleFlag locks or pins ("lock", "pin") the article when on, and undoes it when not.
func (b *backend) setArticleFlag(ctx context.Context, v *viewer, articleID int64, flag string, on bool) error {
	method := http.MethodPut
	if !on {
		method = http.MethodDelete
	}
	return b.do(ctx, call{service: "moderation", method: method, url: b.origins.Moderation + "/v1/articles/" + id(articleID) + "/" + flag, token: v.token}, nil)
}

// banOf is the user's ban, nil when there is none.
func (b *backend) banOf(ctx context.Context, userID int64) (*ban, error) {
	var out ban
	err := b.do(ctx, call{service: "moderation", method: http.MethodGet, url: b.origins.Moderation + "/v1/bans/" + id(userID)}, &out)
	if statusOf(err) == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// setBan bans the user until the given time, or for good when until is nil.
func (b *backend) setBan(ctx context.Context, v *viewer, userID int64, reason string, until *time.Time) error {
	in := map[string]string{"reason": reason}
	if until != nil {
		in["until"] = until.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	return b.do(ctx, call{service: "moderation", method: http.MethodPut, url: b.origins.Moderation + "/v1/bans/" + id(userID), body: in, token: v.token}, nil)
}

// unban lifts the user's ban; a user not banned is what the moderator wanted.
func (b *backend) unban(ctx context.Context, v *viewer, userID int64) error {
	err := b.do(ctx, call{service: "moderation", method: http.MethodDelete, url: b.origins.Moderation + "/v1/bans/" + id(userID), token: v.token}, nil)
	if statusOf(err) == http.StatusNotFound {
		return nil
	}
	return err
}

// modlog is a page of the moderation log, newest first. A moderator's token gets the whole log.
func (b *backend) modlog(ctx context.Context, v *viewer, page, size int64) ([]logEntry, error) {
	var out []logEntry
	query := url.Values{"page": {id(page)}, "pageSize": {id(size)}}
	err := b.do(ctx, call{service: "moderation", method: http.MethodGet, url: b.origins.Moderation + "/v1/modlog?" + query.Encode(), token: v.Token()}, &out)
	return out, err
}
