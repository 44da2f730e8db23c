package app

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"board/internal/httpio"
	"board/internal/web"
)

// buildWeb builds the pages, which call the other services over HTTP like any client.
func buildWeb(_ context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	origin := func(name, listen string) string { return r.origin(e, name, listen) }
	warnUnbelievedWeb(e, origin("user", e.Config.UserAddr))
	svc := web.New(web.Config{
		Origins: web.Origins{ArticleRead: origin("article-read", e.Config.ArticleReadAddr), HotArticle: origin("hot-article", e.Config.HotArticleAddr),
			Article: origin("article", e.Config.ArticleAddr), Comment: origin("comment", e.Config.CommentAddr), Like: origin("like", e.Config.LikeAddr),
			View: origin("view", e.Config.ViewAddr), User: origin("user", e.Config.UserAddr),
			Moderation: origin("moderation", e.Config.ModerationAddr), Search: origin("search", e.Config.SearchAddr),
			Notification: origin("notification", e.Config.NotificationAddr), Media: origin("media", e.Config.MediaAddr)},
		Boards:        e.Config.Boards,
		Tokens:        newVerifier(e, r),
		Sessions:      e.Standing,
		Location:      e.Config.HotArticleTimeZone,
		ClientAddr:    clientAddr(e.Config.ClientIPHeader, e.Config.TrustedProxies),
		SecureCookies: e.Config.SecureCookies,
		Logger:        e.Logger,
	})
	return svc.Routes(), []httpio.Check{{Name: "article-read", Ping: svc.Ready}}, nil
}

// warnUnbelievedWeb says at start when a user service configured as this process is would not believe the browser
// addresses the web passes on in X-Forwarded-For: every browser would then share the web's own sign-in budget, and
// one could lock the others out. A user origin named by host name is not checked.
func warnUnbelievedWeb(e *Engines, userOrigin string) {
	u, err := url.Parse(userOrigin)
	if err != nil {
		return
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return
	}
	trusted := slices.ContainsFunc(e.Config.TrustedProxies, func(p netip.Prefix) bool { return p.Contains(ip.Unmap()) })
	if !strings.EqualFold(e.Config.ClientIPHeader, "X-Forwarded-For") || !trusted {
		e.Logger.Warn("the user service will not believe the browser addresses the web passes on, so every browser shares the web's sign-in and sign-up limits; "+
			"give the user service --client-ip-header X-Forwarded-For and the web's address in --trusted-proxies", "user_origin", userOrigin)
	}
}
