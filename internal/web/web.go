// Package web serves the site's pages for people (SPEC §3.8): server-rendered HTML made from the other services'
// APIs, called over HTTP like any client. Reads go through article-read and hot-article, writes through the
// producers, accounts through the user service. It imports none of them.
//
// Every page works without JavaScript; a few lines of embedded script send likes without a reload, ask before a
// delete, load more articles as the reader scrolls, and show dates in the reader's locale. Nothing is loaded from anywhere
// else, and the Content-Security-Policy allows nothing else.
package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a-h/templ"

	"board/internal/auth"
	"board/internal/fault"
	"board/internal/httpio"
)

// Board is one board of the site: its id in the services and its name on the pages.
type Board struct {
	ID   int64
	Name string
}

// DefaultBoards are the boards of a site configured with none.
var DefaultBoards = []Board{{1, "General"}, {2, "Questions"}, {3, "Showcase"}}

// ParseBoards reads boards written as "1=General,2=Questions".
func ParseBoards(s string) ([]Board, error) {
	var boards []Board
	seen := map[int64]bool{}
	for part := range strings.SplitSeq(s, ",") {
		idText, name, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.ParseInt(strings.TrimSpace(idText), 10, 64)
		name = strings.TrimSpace(name)
		if !ok || err != nil || n <= 0 || name == "" {
			return nil, fmt.Errorf("want boards such as 1=General,2=Questions, not %q", part)
		}
		if seen[n] {
			return nil, fmt.Errorf("board %d is named twice", n)
		}
		seen[n] = true
		boards = append(boards, Board{ID: n, Name: name})
	}
	if len(boards) == 0 {
		return nil, errors.New("at least one board is needed")
	}
	return boards, nil
}

// Config is what the pages are made from.
type Config struct {
	Origins Origins
	Boards  []Board
	// Tokens verifies the access token in a reader's session cookie, with the user service's public keys.
	Tokens *auth.Verifier
	// Sessions, when not nil, tells the sessions that have ended (a password changed, the account deleted): their
	// cookie is cleared and the reader is signed out.
	Sessions httpio.Sessions
	// Location is the time zone of hot-article's calendar days, so that "today" means the same day to both.
	Location *time.Location
	// ClientAddr names a request's client, as the services' rate limits know it (nil: the connection's address).
	ClientAddr func(*http.Request) string
	// SecureCookies marks the session cookie Secure on every answer, for a site whose TLS a proxy in front ends;
	// without it, only answers over TLS mark it.
	SecureCookies bool
	// OIDCProviders names the identity providers the user service signs in with, for the sign-in page's buttons.
	OIDCProviders []string
	Client        *http.Client
	Logger        *slog.Logger
	Now           func() time.Time
}

// Page sizes: a board page and a scroll chunk hold 20 articles, an article page up to 100 comments.
const (
	articlesPerPage = 20
	commentsPerPage = 100
)

// Service serves the pages.
type Service struct {
	cfg    Config
	api    *backend
	names  *names
	cache  *pageCache
	boards map[int64]Board
	// viewsInFlight holds a token for each view being counted behind its page.
	viewsInFlight chan struct{}
	views         *recentViews
	// likedLately remembers the comments a reader liked or unliked here lately, whose counts may not show it yet.
	likedLately *recentViews
	// bellResting is until when (Unix nanoseconds) the notification service is not asked for what a page shows beside
	// its content (the bell's count, a watch, bookmarks), after one such ask failed.
	bellResting atomic.Int64
	// blocksResting is the same for the reader's blocks, asked of the user service.
	blocksResting atomic.Int64
	bells         bells
	blockSets     blockSets
}

// maxViewsInFlight bounds the views being counted at once (see countView).
const maxViewsInFlight = 256

// New returns the service.
func New(cfg Config) *Service {
	if cfg.Client == nil {
		// A connection kept per page in flight to each service: past the idle pool, every call would open a new one.
		// Uncompressed: the services answer over a fast network, where compressing costs both ends more CPU than the
		// bytes it saves are worth (the pages are compressed for the browser).
		cfg.Client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute,
			DisableCompression: true}}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if len(cfg.Boards) == 0 {
		cfg.Boards = DefaultBoards
	}
	if cfg.ClientAddr == nil {
		cfg.ClientAddr = httpio.RemoteHost
	}
	api := &backend{origins: cfg.Origins, client: cfg.Client}
	s := &Service{cfg: cfg, api: api, names: newNames(api, cfg.Logger), cache: newPageCache(cfg.Now), boards: map[int64]Board{},
		viewsInFlight: make(chan struct{}, maxViewsInFlight), views: newRecentViews(cfg.Now), likedLately: newRecentViews(cfg.Now), bells: bells{counts: map[int64]*unreadCount{}},
		blockSets: blockSets{sets: map[int64]blockSet{}}}
	for _, b := range cfg.Boards {
		s.boards[b.ID] = b
	}
	return s
}

// Ready checks that the pages can be made: that article-read, which every board and article page reads, answers.
// The other services are not checked: a page goes on without hot articles, comments or names.
func (s *Service) Ready(ctx context.Context) error {
	return s.api.do(ctx, call{service: "article-read", method: http.MethodGet, url: s.cfg.Origins.ArticleRead + "/healthz"}, nil)
}

// Routes returns the site's routes, behind the cross-origin check and the security headers. Every route is a
// page or an asset: a path it does not know is the site's own 404 page.
func (s *Service) Routes() *http.ServeMux {
	pages := http.NewServeMux()
	handle := func(pattern string, h func(w http.ResponseWriter, r *http.Request) error) {
		pages.Handle(pattern, s.page(h))
	}
	// The pages most read, signed out alike for everyone, are shared for a moment (see pageCache).
	shared := func(pattern string, h func(w http.ResponseWriter, r *http.Request) error) {
		pages.Handle(pattern, s.cache.shared(s.page(h)))
	}
	handle("GET /{$}", s.home)
	shared("GET /boards/{boardId}", s.board)
	handle("GET /boards/{boardId}/scroll", s.scroll)
	handle("GET /boards/{boardId}/write", s.writeForm)
	handle("POST /boards/{boardId}/write", s.write)
	shared("GET /articles/{articleId}", s.article)
	handle("GET /articles/{articleId}/edit", s.editForm)
	handle("POST /articles/{articleId}/edit", s.edit)
	handle("POST /articles/{articleId}/delete", s.deleteArticle)
	handle("POST /articles/{articleId}/comments", s.postComment)
	handle("POST /articles/{articleId}/comments/{commentId}/delete", s.deleteComment)
	handle("POST /articles/{articleId}/comments/{commentId}/edit", s.editComment)
	handle("GET /articles/{articleId}/revisions", s.articleRevisions)
	handle("GET /articles/{articleId}/comments/{commentId}/revisions", s.commentRevisions)
	handle("POST /articles/{articleId}/like", s.like(true))
	handle("POST /articles/{articleId}/unlike", s.like(false))
	handle("POST /articles/{articleId}/report", s.reportContent)
	handle("POST /articles/{articleId}/lock", s.articleFlag("lock", true))
	handle("POST /articles/{articleId}/unlock", s.articleFlag("lock", false))
	handle("POST /articles/{articleId}/pin", s.articleFlag("pin", true))
	handle("POST /articles/{articleId}/unpin", s.articleFlag("pin", false))
	handle("GET /moderation/reports", s.queue)
	handle("POST /moderation/reports/resolve", s.resolve)
	handle("GET /users/{userId}", s.userProfile)
	handle("POST /users/{userId}/block", s.block(true))
	handle("POST /users/{userId}/unblock", s.block(false))
	handle("GET /u/{name}", s.mention)
	// Not a page: the names the script offers as a mention is typed.
	pages.Handle("GET /usernames", http.HandlerFunc(s.usernames))
	handle("POST /articles/{articleId}/comments/{commentId}/like", s.commentLike(true))
	handle("POST /articles/{articleId}/comments/{commentId}/unlike", s.commentLike(false))
	handle("POST /users/{userId}/ban", s.banUser)
	handle("POST /users/{userId}/unban", s.unbanUser)
	handle("GET /modlog", s.modlog)
	handle("GET /hot", s.hot)
	handle("GET /search", s.search)
	handle("GET /signin", s.signInForm)
	handle("POST /signin", s.signIn)
	handle("GET /signup", s.signUpForm)
	handle("POST /signup", s.signUp)
	handle("POST /signout", s.signOut)
	handle("GET /account", s.account)
	handle("POST /account/email", s.changeEmail)
	handle("POST /account/password", s.changePassword)
	handle("POST /account/sessions", s.endSessions)
	handle("POST /account/delete", s.deleteAccount)
	handle("GET "+exportPath, s.exportData)
	handle("GET /forgot-password", s.forgotForm)
	handle("POST /forgot-password", s.askReset)
	handle("GET /reset-password/{token}", s.resetForm)
	handle("POST /reset-password/{token}", s.resetPassword)
	handle("GET /verify-email/{token}", s.verifyForm)
	handle("POST /verify-email/{token}", s.verifyEmail)
	handle("GET /oidc/{provider}/start", s.oidcStart)
	handle("POST /account/providers/{provider}/connect", s.connectProvider)
	handle("POST /account/providers/{provider}/disconnect", s.disconnectProvider)
	handle("GET /oidc/{provider}/callback", s.oidcCallback)
	if s.cfg.Origins.Notification != "" {
		handle("GET /notifications", s.inbox)
		handle("POST /notifications/{notificationId}/read", s.markRead)
		handle("POST /notifications/read-all", s.markAllRead)
		handle("POST /notifications/preferences", s.savePreferences)
		handle("POST /account/notification-email", s.setEmailPreference)
		handle("GET /unsubscribe/{token}", s.unsubscribeForm)
		handle("POST /unsubscribe/{token}", s.unsubscribe)
		handle("POST /articles/{articleId}/watch", s.setWatch("article"))
		handle("POST /boards/{boardId}/watch", s.setWatch("board"))
		handle("POST /articles/{articleId}/bookmark", s.setBookmark("article", true))
		handle("POST /articles/{articleId}/unbookmark", s.setBookmark("article", false))
		handle("POST /articles/{articleId}/comments/{commentId}/bookmark", s.setBookmark("comment", true))
		handle("POST /articles/{articleId}/comments/{commentId}/unbookmark", s.setBookmark("comment", false))
		handle("GET /bookmarks", s.bookmarksList)
		handle("POST /bookmarks/remove", s.removeBookmark)
		// Not a page: an event stream, for as long as the reader stays (see stream).
		pages.Handle("GET /notifications/stream", http.HandlerFunc(s.stream))
	}
	s.mediaRoutes(pages)
	handle("/", func(w http.ResponseWriter, r *http.Request) error {
		return fault.NotFoundf("NOT_FOUND", "There is no page at this address.")
	})
	pages.Handle("GET /static/{file}", http.HandlerFunc(serveAsset))

	csrf := http.NewCrossOriginProtection()
	// A mail client's one-click unsubscribe (RFC 8058) comes from no page of this site; the link's token is its
	// authority, and it does nothing else.
	csrf.AddInsecureBypassPattern("POST /unsubscribe/{token}")
	csrf.SetDenyHandler(s.page(func(w http.ResponseWriter, r *http.Request) error {
		return fault.Forbiddenf("This form was sent from another site, so it was not accepted. Go back, reload the page and try again.")
	}))
	mux := http.NewServeMux()
	mux.Handle("/", securityHeaders(csrf.Handler(pages)))
	return mux
}

// contentSecurityPolicy lets a page use its own script, style sheet and images, and nothing else: no inline
// script or style, no frames, forms sent only here.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// page runs a page handler: it counts the backend calls the page makes for its Server-Timing header and the
// metrics, and answers an error with a friendly page.
func (s *Service) page(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, calls := withCallCounter(r.Context())
		r = r.WithContext(ctx)
		start := time.Now()
		w = &timedWriter{ResponseWriter: w, calls: calls, start: start}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler { //nolint:errorlint // a panic value, not a returned error: net/http knows it by ==
					panic(p)
				}
				s.cfg.Logger.ErrorContext(ctx, "page panicked", "path", r.URL.Path, "panic", fmt.Sprint(p))
				s.renderError(w, r, http.StatusInternalServerError, "Something went wrong", "This page failed on our side. Please try again.", 0)
			}
			s.cfg.Logger.DebugContext(ctx, "page", "route", r.Pattern, "backend_calls", calls.calls.Load(), "took", time.Since(start))
		}()
		if err := h(w, r); err != nil {
			s.fail(w, r, err)
		}
	})
}

// timedWriter sets the Server-Timing header as the answer starts: how many backend calls the page made and how
// long they took, and how long the whole page took.
type timedWriter struct {
	http.ResponseWriter
	calls *callCounter
	start time.Time
	done  bool
}

func (w *timedWriter) WriteHeader(status int) {
	if !w.done {
		w.done = true
		n := w.calls.calls.Load()
		w.Header().Set("Server-Timing", fmt.Sprintf(`backend;desc="%d calls";dur=%.2f, total;dur=%.2f`,
			n, float64(w.calls.elapsed.Load())/1e6, float64(time.Since(w.start))/1e6))
	}
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets a page that streams (the export) flush and set deadlines through http.ResponseController.
func (w *timedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *timedWriter) Write(b []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// fail answers err with a page a reader can act on. The services' messages are written for people; a service
// that cannot answer is a 503 that says to try again, never a blank page or its raw answer.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, err error) {
	var se *serviceError
	if fe, ok := fault.As(err); ok && !errors.As(err, &se) {
		status := map[fault.Kind]int{fault.NotFound: http.StatusNotFound, fault.Forbidden: http.StatusForbidden,
			fault.Invalid: http.StatusBadRequest, fault.TooLarge: http.StatusRequestEntityTooLarge}[fe.Kind]
		if status == 0 {
			status = http.StatusInternalServerError
		}
		s.renderError(w, r, status, http.StatusText(status), fe.Message, 0)
		return
	}
	if !errors.As(err, &se) {
		s.cfg.Logger.ErrorContext(r.Context(), "page failed", "path", r.URL.Path, "err", err)
		s.renderError(w, r, http.StatusInternalServerError, "Something went wrong", "This page failed on our side. Please try again.", 0)
		return
	}
	switch {
	case unavailable(err):
		s.cfg.Logger.WarnContext(r.Context(), "a service cannot answer", "service", se.service, "path", r.URL.Path, "err", err)
		s.renderError(w, r, http.StatusServiceUnavailable, "Temporarily unavailable",
			"Part of the site ("+se.service+") is not answering right now. Please try again in a few seconds.", 5)
	case se.status == http.StatusUnauthorized:
		// The session's token expired or its key was withdrawn: sign in again and come back.
		s.clearSession(w, r)
		http.Redirect(w, r, "/signin?expired=1&next="+returnPath(r), http.StatusSeeOther)
	case refusal(se) != "":
		s.renderError(w, r, http.StatusForbidden, "Not allowed", refusal(se), 0)
	case se.status == http.StatusForbidden && se.service == "moderation" && se.message != "":
		// Moderation refuses for reasons of its own (a moderator is not banned), which its message says.
		s.renderError(w, r, http.StatusForbidden, "Not allowed", se.message, 0)
	case se.status == http.StatusForbidden:
		s.renderError(w, r, http.StatusForbidden, "Not allowed", "Only its writer or a moderator may change this.", 0)
	case se.status == http.StatusNotFound:
		s.renderError(w, r, http.StatusNotFound, "Not found", "It may have been deleted.", 0)
	case se.status == http.StatusTooManyRequests:
		s.renderError(w, r, http.StatusTooManyRequests, "Slow down",
			fmt.Sprintf("You are doing that too often. Please wait %s and try again.", seconds(se.retryAfter)), se.retryAfter)
	case se.status < 500:
		s.renderError(w, r, se.status, "That did not work", se.message, 0)
	default:
		s.cfg.Logger.ErrorContext(r.Context(), "a service failed", "service", se.service, "path", r.URL.Path, "err", err)
		s.renderError(w, r, http.StatusBadGateway, "Something went wrong", "Part of the site ("+se.service+") failed. Please try again.", 0)
	}
}

// unavailable says whether err is a service that cannot answer now: unreachable, hung, or saying so.
func unavailable(err error) bool {
	var se *serviceError
	return errors.As(err, &se) && (se.status == 0 || se.status == http.StatusServiceUnavailable || se.status == http.StatusGatewayTimeout)
}

func seconds(n int) string {
	if n <= 1 {
		return "a second"
	}
	return strconv.Itoa(n) + " seconds"
}

// returnPath is where a reader sent to sign in comes back to: the page they were on, or for a form, the page it
// was on (the Referer of this site's own forms is same-origin by the Referrer-Policy).
func returnPath(r *http.Request) string {
	p := r.URL.RequestURI()
	if r.Method != http.MethodGet {
		p = "/"
		if ref, err := urlPath(r.Referer()); err == nil {
			p = ref
		}
	}
	return url.QueryEscape(p)
}

// render writes a page, rendered whole before anything is sent so that a failing page is an error page, not half
// a page.
func (s *Service) render(w http.ResponseWriter, r *http.Request, status int, page templ.Component) error {
	buf := renderBuffers.Get().(*bytes.Buffer)
	defer putRenderBuffer(buf)
	// Rendering waits on nothing: a request whose deadline has passed still gets its page (often the error page
	// that says so), which templ would otherwise refuse to start.
	if err := page.Render(context.WithoutCancel(r.Context()), buf); err != nil {
		return fmt.Errorf("render %s: %w", r.URL.Path, err)
	}
	writeHTML(w, r, status, buf.Bytes())
	return nil
}

// renderFragment writes a part of a page, the part a script swaps in.
func (s *Service) renderFragment(w http.ResponseWriter, r *http.Request, fragment templ.Component) error {
	w.Header().Set("X-Fragment", "1")
	return s.render(w, r, http.StatusOK, fragment)
}

// renderBuffers are the buffers pages are rendered into: a page is tens of kilobytes, not worth growing anew each time.
var renderBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putRenderBuffer returns buf to the pool, unless one very long page made it too large to keep.
func putRenderBuffer(buf *bytes.Buffer) {
	if buf.Cap() > 1<<20 {
		return
	}
	buf.Reset()
	renderBuffers.Put(buf)
}

func writeHTML(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	// Pages show the reader's own session: kept by the reader's browser alone (private), which asks again before it
	// reuses one (no-cache), and which may keep the page whole for the back button (no-store would forbid that:
	// the back/forward cache). Signing out drops them (signOut, and app.js for the back/forward cache).
	h.Set("Cache-Control", "private, no-cache")
	h.Add("Vary", "Cookie")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// errorPage is the data of the friendly error page.
type errorPage struct {
	layout
	Status  int
	Heading string
	Message string
}

func (s *Service) renderError(w http.ResponseWriter, r *http.Request, status int, heading, message string, retryAfter int) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	data := errorPage{layout: s.layout(r, heading), Status: status, Heading: heading, Message: message}
	data.MainID = "error"
	data.Viewer = s.knownViewer(r)
	// The bell without its count: an error page asks no service (the script fills it in from the stream).
	data.Bell = data.Viewer != nil && s.cfg.Origins.Notification != ""
	if err := s.render(w, r, status, errorView(data)); err != nil {
		s.cfg.Logger.ErrorContext(r.Context(), "error page failed", "err", err)
		http.Error(w, heading+": "+message, status)
	}
}
