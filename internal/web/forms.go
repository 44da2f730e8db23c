package web

import (
	"crypto/rand"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/a-h/templ"

	"board/internal/apijson"
	"board/internal/fault"
)

// maxFormBytes bounds a form's body: the largest, an article, is 100 + 3000 characters.
const maxFormBytes = 64 << 10

// form parses r's form, bounded; a form too large is a 413 page.
func form(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			return &fault.Error{Kind: fault.TooLarge, Code: "FORM_TOO_LARGE", Message: "The form is too long to send."}
		}
		return &fault.Error{Kind: fault.Invalid, Code: "BAD_FORM", Message: "The form could not be read."}
	}
	return nil
}

type accountPage struct {
	layout
	Next     string
	Username string
	Error    string
	// Providers are the identity providers to sign in with (Config.OIDCProviders).
	Providers []string
}

func (s *Service) signInForm(w http.ResponseWriter, r *http.Request) error {
	next := localPath(r.URL.Query().Get("next"))
	if v := s.reader(w, r); v != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	data := accountPage{layout: s.layout(r, "Sign in"), Next: next, Providers: s.cfg.OIDCProviders}
	if r.URL.Query().Get("expired") != "" {
		data.Notice = "Your session has ended. Please sign in again."
	}
	return s.render(w, r, http.StatusOK, signInView(data))
}

// signIn asks the user service for a token and keeps it in the session cookie until it expires. The browser's
// address goes along, for the per-address limit on attempts.
func (s *Service) signIn(w http.ResponseWriter, r *http.Request) error {
	if err := form(w, r); err != nil {
		return err
	}
	data := accountPage{layout: s.layout(r, "Sign in"), Next: localPath(r.PostFormValue("next")),
		Username: strings.TrimSpace(r.PostFormValue("username")), Providers: s.cfg.OIDCProviders}
	tok, err := s.api.signIn(r.Context(), data.Username, r.PostFormValue("password"), s.cfg.ClientAddr(r))
	if status, msg := formFailure(err, "Wrong username or password."); msg != "" {
		data.Error = msg
		return s.render(w, r, status, signInView(data))
	}
	if err != nil {
		return err
	}
	s.setSession(w, r, tok.AccessToken, tok.ExpiresAt)
	http.Redirect(w, r, data.Next, http.StatusSeeOther)
	return nil
}

// formFailure turns a service's answer to a form into the message shown above the form, with the page's status:
// input it refused, wrong credentials, a name taken, too many attempts, a ban, a locked article. Anything else is
// "" (an error page).
func formFailure(err error, unauthorized string) (int, string) {
	var se *serviceError
	if !errors.As(err, &se) {
		return 0, ""
	}
	if msg := refusal(se); msg != "" {
		return se.status, msg
	}
	switch se.status {
	case http.StatusBadRequest, http.StatusConflict:
		return se.status, se.message
	case http.StatusUnauthorized:
		return se.status, unauthorized
	case http.StatusTooManyRequests:
		return se.status, "Too many attempts. Please wait " + seconds(se.retryAfter) + " and try again."
	}
	return 0, ""
}

// refusal is what a reader is told of a write moderation refused: a ban (SPEC §3.9: with its reason and end) or
// a locked article. "" for any other answer.
func refusal(se *serviceError) string {
	switch {
	case se.status != http.StatusForbidden:
		return ""
	case se.ban != nil:
		return bannedMessage(se.ban)
	case se.code == codeLocked:
		return "This article is locked: it takes no new comments."
	}
	return ""
}

func (s *Service) signUpForm(w http.ResponseWriter, r *http.Request) error {
	next := localPath(r.URL.Query().Get("next"))
	if v := s.reader(w, r); v != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	return s.render(w, r, http.StatusOK, signUpView(accountPage{layout: s.layout(r, "Sign up"), Next: next}))
}

// signUp creates the account and signs in with it.
func (s *Service) signUp(w http.ResponseWriter, r *http.Request) error {
	if err := form(w, r); err != nil {
		return err
	}
	data := accountPage{layout: s.layout(r, "Sign up"), Next: localPath(r.PostFormValue("next")),
		Username: strings.TrimSpace(r.PostFormValue("username"))}
	password := r.PostFormValue("password")
	err := s.api.signUp(r.Context(), data.Username, password, s.cfg.ClientAddr(r))
	if status, msg := formFailure(err, ""); msg != "" {
		if status == http.StatusConflict {
			msg = "That username is taken. Please choose another."
		}
		data.Error = msg
		return s.render(w, r, status, signUpView(data))
	}
	if err != nil {
		return err
	}
	tok, err := s.api.signIn(r.Context(), data.Username, password, s.cfg.ClientAddr(r))
	if err != nil {
		// The account exists; only the sign-in failed (a limit, a service gone): say so, and where to go on.
		http.Redirect(w, r, "/signin?notice=created", http.StatusSeeOther)
		return nil
	}
	s.setSession(w, r, tok.AccessToken, tok.ExpiresAt)
	to := data.Next
	if to == "/" {
		to = "/?notice=welcome"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

// signOut forgets the session. The token itself stays valid until it expires (tokens are not revocable, SPEC
// §2.1), but this browser no longer holds it.
func (s *Service) signOut(w http.ResponseWriter, r *http.Request) error {
	s.clearSession(w, r)
	// The browser empties its HTTP cache of the site (on HTTPS and localhost), so that no signed-in page is shown
	// from it again. Chromium keeps its back/forward cache all the same: app.js reloads a page brought back from it.
	w.Header().Set("Clear-Site-Data", `"cache"`)
	http.Redirect(w, r, "/?notice=signedout", http.StatusSeeOther)
	return nil
}

// formState is what a form shows above its fields when it comes back unsent: the service's reason, or that the
// session ended (with where to sign in again, in another tab, so that the text here is kept).
type formState struct {
	Error        string
	SessionEnded bool
	SignIn       string
	// Key is the Idempotency-Key the form comes back with: the one it was sent with, so that sending it again after an
	// answer that never came (a 503) cannot write twice; "" for a fresh one (see keyField).
	Key string
}

// formKeyField names the hidden field that carries a form's Idempotency-Key (keyField), which the pages forward to
// the service as the header: a form sent twice (a double click, a reload that posts again) writes once.
const formKeyField = "idempotencyKey"

// codeKeyReused is a service's answer to a key sent before with another request.
const codeKeyReused = "IDEMPOTENCY_KEY_REUSED"

// hasCode reports whether err is a service's answer with code.
func hasCode(err error, code string) bool {
	se, ok := errors.AsType[*serviceError](err)
	return ok && se.code == code
}

// formKey is the key of a form: key, the one it was sent with, or a fresh random one.
func formKey(key string) string {
	if key != "" {
		return key
	}
	return rand.Text()
}

// formText is a field of a form as the services take it: browsers send a textarea's line breaks as CRLF, which
// would count twice against the length the form's maxlength allows.
func formText(r *http.Request, name string) string {
	return strings.ReplaceAll(r.PostFormValue(name), "\r\n", "\n")
}

// keepText shows the form of page (made once st is filled in) again, with the reader's text in it, when err is something the reader can act on:
// input the service refused, too many tries, a service not answering, or a session that ended (err nil: there was
// no session). Any other error is returned, for an error page.
func (s *Service) keepText(w http.ResponseWriter, r *http.Request, page func() templ.Component, st *formState, err error) error {
	status := statusOf(err)
	st.Key = r.PostFormValue(formKeyField)
	switch {
	case hasCode(err, codeKeyReused):
		// The form was sent before with other text, and that was written: this text goes with a key of its own.
		status, st.Key = http.StatusConflict, ""
		st.Error = "This form was sent before with other text, which was posted. To post this text too, send it again."
	case err == nil || status == http.StatusUnauthorized:
		s.clearSession(w, r)
		status, st.SessionEnded, st.SignIn = http.StatusUnauthorized, true, "/signin?next="+returnPath(r)
	case unavailable(err):
		// The write may have been made with no answer in time; the form's key makes sending it again safe.
		status, st.Error = http.StatusServiceUnavailable, "Part of the site is not answering right now, so this may not have been posted. Please send it again in a few seconds: it is posted once, however often it is sent."
	default:
		if status, st.Error = formFailure(err, ""); st.Error == "" {
			return err
		}
	}
	return s.render(w, r, status, page())
}

// textForm reads a form that carries the reader's text, and who sends it: nil when no session does, which keepText
// answers with the text kept.
func (s *Service) textForm(w http.ResponseWriter, r *http.Request) (*viewer, error) {
	if err := form(w, r); err != nil {
		return nil, err
	}
	v, err := s.viewer(w, r)
	if err != nil {
		return nil, &serviceError{service: "user", err: err}
	}
	return v, nil
}

type writePage struct {
	layout
	formState
	Board          Board
	ArticleID      int64 // 0 for a new article
	Title, Content string
}

func (s *Service) writeForm(w http.ResponseWriter, r *http.Request) error {
	b, err := s.boardOf(r)
	if err != nil {
		return err
	}
	v, ok, err := s.signedIn(w, r)
	if !ok {
		return err
	}
	return s.render(w, r, http.StatusOK, writeView(writePage{layout: s.pageLayout(r, v, "Write in "+b.Name), Board: b}))
}

func (s *Service) write(w http.ResponseWriter, r *http.Request) error {
	b, err := s.boardOf(r)
	if err != nil {
		return err
	}
	v, err := s.textForm(w, r)
	if err != nil {
		return err
	}
	data := writePage{layout: s.pageLayout(r, v, "Write in "+b.Name), Board: b, Title: formText(r, "title"), Content: formText(r, "content")}
	if v == nil {
		return s.keepText(w, r, func() templ.Component { return writeView(data) }, &data.formState, nil)
	}
	a, err := s.api.createArticle(r.Context(), v, articleInput{Title: data.Title, Content: data.Content, BoardID: id(b.ID)},
		r.PostFormValue(formKeyField))
	if err != nil {
		return s.keepText(w, r, func() templ.Component { return writeView(data) }, &data.formState, err)
	}
	http.Redirect(w, r, "/articles/"+id(a.ArticleID), http.StatusSeeOther)
	return nil
}

// articleAction reads a form that acts on the path's article as the signed-in reader. ok is false when there is
// nothing to act on: err says why, or, with err nil, the reader was sent to sign in.
func (s *Service) articleAction(w http.ResponseWriter, r *http.Request) (articleID int64, v *viewer, ok bool, err error) {
	if articleID, err = articleIDOf(r); err != nil {
		return 0, nil, false, err
	}
	if v, ok, err = s.signedIn(w, r); !ok {
		return 0, nil, false, err
	}
	if err = form(w, r); err != nil {
		return 0, nil, false, err
	}
	return articleID, v, true, nil
}

// articleIDOf reads the path's {articleId}; an id that cannot exist is a missing article.
func articleIDOf(r *http.Request) (int64, error) {
	n, err := apijson.Parse(r.PathValue("articleId"))
	if err != nil {
		return 0, fault.NotFoundf("NO_ARTICLE", "There is no such article.")
	}
	return n, nil
}

// editForm shows the article as the article service has it (not the read model, which may lag a write), to its
// writer or a moderator only.
func (s *Service) editForm(w http.ResponseWriter, r *http.Request) error {
	articleID, err := articleIDOf(r)
	if err != nil {
		return err
	}
	v, ok, err := s.signedIn(w, r)
	if !ok {
		return err
	}
	a, err := s.api.articleSource(r.Context(), v, articleID)
	if err != nil {
		return err
	}
	if !v.Owns(a.WriterID) {
		return fault.Forbiddenf("Only its writer or a moderator may edit this article.")
	}
	return s.render(w, r, http.StatusOK, writeView(writePage{layout: s.pageLayout(r, v, "Edit "+a.Title),
		Board: s.boardNamed(a.BoardID), ArticleID: articleID, Title: a.Title, Content: a.Content}))
}

func (s *Service) edit(w http.ResponseWriter, r *http.Request) error {
	articleID, err := articleIDOf(r)
	if err != nil {
		return err
	}
	v, err := s.textForm(w, r)
	if err != nil {
		return err
	}
	data := writePage{layout: s.pageLayout(r, v, "Edit"), ArticleID: articleID, Title: formText(r, "title"), Content: formText(r, "content")}
	if v == nil {
		return s.keepText(w, r, func() templ.Component { return writeView(data) }, &data.formState, nil)
	}
	a, err := s.api.updateArticle(r.Context(), v, articleID, articleInput{Title: data.Title, Content: data.Content})
	if err != nil {
		return s.keepText(w, r, func() templ.Component { return writeView(data) }, &data.formState, err)
	}
	// The page names the edit's time, so that it shows the edit even before the read model has it.
	http.Redirect(w, r, "/articles/"+id(articleID)+"?since="+strconv.FormatInt(a.ModifiedAt.UnixMilli(), 10), http.StatusSeeOther)
	return nil
}

func (s *Service) deleteArticle(w http.ResponseWriter, r *http.Request) error {
	articleID, v, ok, err := s.articleAction(w, r)
	if !ok {
		return err
	}
	// Not found is done: a second click of the button, or a second tab.
	if err := s.api.deleteArticle(r.Context(), v, articleID); err != nil && statusOf(err) != http.StatusNotFound {
		return err
	}
	to := "/"
	// The form names the article's board, for where to go next; only a board of the site is believed.
	if n, err := apijson.Parse(r.PostFormValue("boardId")); err == nil {
		if _, ok := s.boards[n]; ok {
			to = "/boards/" + id(n)
		}
	}
	http.Redirect(w, r, to+"?notice=deleted", http.StatusSeeOther)
	return nil
}

type commentFormPage struct {
	layout
	formState
	ArticleID         int64
	ParentPath, CPage string
	Sort              string // the thread's order the form was in ("": the tree)
	Content           string
}

// postComment writes a comment, or a reply when the form names its parent's path, and goes back to it, on the
// comment page the form was on. A comment that could not be sent comes back in a form of its own.
func (s *Service) postComment(w http.ResponseWriter, r *http.Request) error {
	articleID, err := articleIDOf(r)
	if err != nil {
		return err
	}
	v, err := s.textForm(w, r)
	if err != nil {
		return err
	}
	data := commentFormPage{layout: s.pageLayout(r, v, "Your comment"), ArticleID: articleID,
		ParentPath: r.PostFormValue("parentPath"), Content: formText(r, "content")}
	if cpage, err := strconv.ParseInt(r.PostFormValue("cpage"), 10, 64); err == nil && cpage > 1 && cpage <= maxPage {
		data.CPage = id(cpage)
	}
	for _, o := range threadSorts[1:] {
		if o.Value == r.PostFormValue("sort") {
			data.Sort = o.Value
		}
	}
	if v == nil {
		return s.keepText(w, r, func() templ.Component { return commentFormView(data) }, &data.formState, nil)
	}
	c, err := s.api.createComment(r.Context(), v, articleID, data.ParentPath, data.Content, r.PostFormValue(formKeyField))
	if err != nil {
		return s.keepText(w, r, func() templ.Component { return commentFormView(data) }, &data.formState, err)
	}
	http.Redirect(w, r, commentBack(data)+"#c-"+id(c.CommentID), http.StatusSeeOther)
	return nil
}

func (s *Service) deleteComment(w http.ResponseWriter, r *http.Request) error {
	commentID, err := apijson.Parse(r.PathValue("commentId"))
	if err != nil {
		return fault.NotFoundf("NO_COMMENT", "There is no such comment.")
	}
	articleID, v, ok, err := s.articleAction(w, r)
	if !ok {
		return err
	}
	if err := s.api.deleteComment(r.Context(), v, commentID); err != nil && statusOf(err) != http.StatusNotFound {
		return err
	}
	http.Redirect(w, r, "/articles/"+id(articleID)+"#comments", http.StatusSeeOther)
	return nil
}

// like likes or unlikes. A script's request (X-Fragment) gets the new button and the like service's own count back;
// a plain form goes back to the article.
func (s *Service) like(like bool) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		articleID, v, ok, err := s.articleAction(w, r)
		if !ok {
			return err
		}
		if err := s.api.setLiked(r.Context(), v, articleID, like, r.PostFormValue(formKeyField)); err != nil {
			return err
		}
		if r.Header.Get("X-Fragment") == "" {
			http.Redirect(w, r, "/articles/"+id(articleID)+"#like", http.StatusSeeOther)
			return nil
		}
		n, err := s.api.likeCount(r.Context(), articleID)
		if err != nil {
			return err
		}
		return s.renderFragment(w, r, likeView(likeBox{ArticleID: articleID, SignedIn: true, Liked: like, Count: n}))
	}
}
