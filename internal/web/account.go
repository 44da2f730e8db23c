package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"board/internal/fault"
)

// Accounts (SPEC §3.14): the account page, and the pages that mails link to (verify an address, reset a password,
// stop notification mails). Every call goes to the user service, but the notification e-mail's, which goes to the
// notification service.

// account is the signed-in user's own account, as GET /v1/users/me answers it.
type account struct {
	UserID       int64      `json:"userId,string"`
	Username     string     `json:"username"`
	CreatedAt    time.Time  `json:"createdAt"`
	Email        *string    `json:"email"`
	PendingEmail *string    `json:"pendingEmail"`
	HasPassword  bool       `json:"hasPassword"`
	Identities   []identity `json:"identities"`
}

// identity is an account of an identity provider connected to this one.
type identity struct {
	Provider string    `json:"provider"`
	Email    string    `json:"email"`
	LinkedAt time.Time `json:"linkedAt"`
}

// VerifiedEmail is the account's verified address, "" for none.
func (a account) VerifiedEmail() string {
	if a.Email == nil {
		return ""
	}
	return *a.Email
}

// Pending is the address waiting for its verification link, "" for none.
func (a account) Pending() string {
	if a.PendingEmail == nil {
		return ""
	}
	return *a.PendingEmail
}

func (b *backend) me(ctx context.Context, v *viewer) (account, error) {
	var a account
	err := b.do(ctx, call{service: "user", method: http.MethodGet, url: b.origins.User + "/v1/users/me", token: v.token}, &a)
	return a, err
}

func (b *backend) changeEmail(ctx context.Context, v *viewer, email, password string) error {
	in := map[string]string{"email": email, "password": password}
	return b.do(ctx, call{service: "user", method: http.MethodPut, url: b.origins.User + "/v1/users/me/email", body: in, token: v.token}, nil)
}

// changePassword answers a new token: the user service ends every earlier one.
func (b *backend) changePassword(ctx context.Context, v *viewer, current, next string) (tokenReply, error) {
	var t tokenReply
	in := map[string]string{"current": current, "new": next}
	err := b.do(ctx, call{service: "user", method: http.MethodPut, url: b.origins.User + "/v1/users/me/password", body: in, token: v.token}, &t)
	return t, tokenIn(t, err)
}

// endSessions ends every session of the account and answers a new token for this one.
func (b *backend) endSessions(ctx context.Context, v *viewer) (tokenReply, error) {
	var t tokenReply
	err := b.do(ctx, call{service: "user", method: http.MethodDelete, url: b.origins.User + "/v1/users/me/sessions", token: v.token}, &t)
	return t, tokenIn(t, err)
}

// tokenIn is err, or an error when a successful answer carries no token.
func tokenIn(t tokenReply, err error) error {
	if err == nil && t.AccessToken == "" {
		return &serviceError{service: "user", status: http.StatusBadGateway, err: errors.New("a token answer without a token")}
	}
	return err
}

func (b *backend) deleteAccount(ctx context.Context, v *viewer, password, content string) error {
	in := map[string]string{"password": password, "content": content}
	return b.do(ctx, call{service: "user", method: http.MethodDelete, url: b.origins.User + "/v1/users/me", body: in, token: v.token}, nil)
}

// askReset asks for a reset link to be mailed to email; the answer is the same whether or not an account has it.
func (b *backend) askReset(ctx context.Context, email, client string) error {
	return b.do(ctx, call{service: "user", method: http.MethodPost, url: b.origins.User + "/v1/password-resets",
		body: map[string]string{"email": email}, client: client}, nil)
}

func (b *backend) resetPassword(ctx context.Context, token, next, client string) error {
	return b.do(ctx, call{service: "user", method: http.MethodPost, url: b.origins.User + "/v1/password-resets/" + url.PathEscape(token),
		body: map[string]string{"new": next}, client: client}, nil)
}

// verifyEmail uses a verification link's token and answers the address it verified.
func (b *backend) verifyEmail(ctx context.Context, token, client string) (string, error) {
	var out struct {
		Email string `json:"email"`
	}
	err := b.do(ctx, call{service: "user", method: http.MethodPost, url: b.origins.User + "/v1/email-verifications/" + url.PathEscape(token),
		client: client}, &out)
	return out.Email, err
}

func (b *backend) unsubscribe(ctx context.Context, token, client string) error {
	return b.do(ctx, call{service: "notification", method: http.MethodPost, url: b.origins.Notification + "/v1/email-unsubscribe/" + url.PathEscape(token),
		client: client}, nil)
}

// Codes of the user service that the account pages answer in a form rather than an error page.
const (
	codeBadCredentials = "BAD_CREDENTIALS"
	codeInvalidToken   = "INVALID_TOKEN"
)

// mailToken matches what a link's token may be (the user service's are "<userId>.<43 base64url characters>"): one
// that cannot be a token is answered as a used one, asked of no service.
var mailToken = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,200}$`)

// linkToken is the path's {token}, "" when it cannot be one.
func linkToken(r *http.Request) string {
	t := r.PathValue("token")
	if !mailToken.MatchString(t) {
		return ""
	}
	return t
}

// Notification e-mail, the preference `email` of the notification service.
var emailChoices = []struct{ Value, Label, Help string }{
	{"off", "Off", "No e-mail; notifications show on the site only."},
	{"immediate", "At once", "An e-mail for each notification, as it happens."},
	{"daily", "A daily digest", "One e-mail a day with the notifications you have not read."},
}

// settingsPage is the data of the account page.
type settingsPage struct {
	layout
	Me        account
	Providers []providerState
	// Notify shows the notification e-mail's choice; NotifyUnavailable says the service could not tell it.
	Notify            bool
	NotifyUnavailable bool
	EmailPref         string
	// Problem is a form's refusal, shown in that form: its name ("email", "password", "providers", "notify",
	// "delete") and why.
	Problem  accountProblem
	NewEmail string // the address typed in the e-mail form, kept when it comes back
	Content  string // the delete form's choice, kept when it comes back
}

type accountProblem struct{ Form, Message string }

// ErrorIn is the message for form, "" when it has none.
func (p settingsPage) ErrorIn(form string) string {
	if p.Problem.Form == form {
		return p.Problem.Message
	}
	return ""
}

// providerState is a configured identity provider as the account page shows it: connected or not.
type providerState struct {
	Name     string
	Linked   bool
	Identity identity
}

func (s *Service) account(w http.ResponseWriter, r *http.Request) error {
	v, ok, err := s.signedIn(w, r)
	if !ok {
		return err
	}
	return s.renderAccount(w, r, v, http.StatusOK, settingsPage{})
}

// renderAccount shows the account page, with a form's problem when one came back; the user service's account and
// the notification service's preferences are asked at once. Without the user service there is no page; without the
// notification service, the page says its choice cannot be shown.
func (s *Service) renderAccount(w http.ResponseWriter, r *http.Request, v *viewer, status int, data settingsPage) error {
	ctx := r.Context()
	var (
		me             account
		prefs          preferences
		meErr, prefErr error
		wg             sync.WaitGroup
	)
	wg.Go(func() { me, meErr = s.api.me(ctx, v) })
	data.Notify = s.cfg.Origins.Notification != ""
	if data.Notify {
		wg.Go(func() { prefs, prefErr = s.api.preferences(ctx, v) })
	}
	wg.Wait()
	if meErr != nil {
		return meErr
	}
	if prefErr != nil {
		s.cfg.Logger.WarnContext(ctx, "notification preferences unavailable on the account page", "err", prefErr)
		data.NotifyUnavailable = true
	}
	data.EmailPref = prefs.Email
	if data.EmailPref == "" {
		data.EmailPref = "off"
	}
	data.layout, data.Me = s.pageLayout(r, v, "Your account"), me
	data.Providers = s.providerStates(me.Identities)
	return s.render(w, r, status, accountView(data))
}

// providerStates is every configured provider, connected or not, and then any connected one no longer configured.
func (s *Service) providerStates(ids []identity) []providerState {
	var out []providerState
	linked := map[string]bool{}
	for _, name := range s.cfg.OIDCProviders {
		st := providerState{Name: name}
		for _, id := range ids {
			if id.Provider == name {
				st.Linked, st.Identity, linked[name] = true, id, true
			}
		}
		out = append(out, st)
	}
	for _, id := range ids {
		if !linked[id.Provider] {
			out = append(out, providerState{Name: id.Provider, Linked: true, Identity: id})
		}
	}
	return out
}

// accountForm reads a form of the account page sent by the signed-in reader.
func (s *Service) accountForm(w http.ResponseWriter, r *http.Request) (*viewer, bool, error) {
	v, ok, err := s.signedIn(w, r)
	if !ok {
		return nil, false, err
	}
	if err := form(w, r); err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// refused is the account page again with form's problem when the service refused what the reader typed (a wrong
// password, an address or a password it does not take, too many tries); any other error is returned, for an error
// page (a session that ended goes to sign in).
func (s *Service) refused(w http.ResponseWriter, r *http.Request, v *viewer, form string, data settingsPage, err error) error {
	se, ok := errors.AsType[*serviceError](err)
	if !ok {
		return err
	}
	status, msg := se.status, ""
	switch {
	case se.code == codeBadCredentials:
		msg = "That is not your password."
	case se.status == http.StatusBadRequest || se.status == http.StatusConflict:
		msg = se.message
	case se.status == http.StatusTooManyRequests:
		msg = "Too many attempts. Please wait " + seconds(se.retryAfter) + " and try again."
	default:
		return err
	}
	data.Problem = accountProblem{Form: form, Message: msg}
	return s.renderAccount(w, r, v, status, data)
}

func (s *Service) changeEmail(w http.ResponseWriter, r *http.Request) error {
	v, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	email := strings.TrimSpace(r.PostFormValue("email"))
	if err := s.api.changeEmail(r.Context(), v, email, r.PostFormValue("password")); err != nil {
		return s.refused(w, r, v, "email", settingsPage{NewEmail: email}, err)
	}
	http.Redirect(w, r, "/account?notice=emailsent#email", http.StatusSeeOther)
	return nil
}

// changePassword sets a new password. The user service ends every earlier session, and answers a token for this one,
// which the session cookie takes: the reader stays signed in here.
func (s *Service) changePassword(w http.ResponseWriter, r *http.Request) error {
	v, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	tok, err := s.api.changePassword(r.Context(), v, r.PostFormValue("current"), r.PostFormValue("new"))
	if err != nil {
		return s.refused(w, r, v, "password", settingsPage{}, err)
	}
	s.setSession(w, r, tok.AccessToken, tok.ExpiresAt)
	http.Redirect(w, r, "/account?notice=passwordchanged#password", http.StatusSeeOther)
	return nil
}

// endSessions signs the account out everywhere but here: this session goes on with the new token.
func (s *Service) endSessions(w http.ResponseWriter, r *http.Request) error {
	v, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	tok, err := s.api.endSessions(r.Context(), v)
	if err != nil {
		return err
	}
	s.setSession(w, r, tok.AccessToken, tok.ExpiresAt)
	http.Redirect(w, r, "/account?notice=sessionsended#sessions", http.StatusSeeOther)
	return nil
}

// setEmailPreference sets how notifications come by e-mail. The notification service's PUT takes every kind at
// once, so the reader's others are read first and sent back as they are.
func (s *Service) setEmailPreference(w http.ResponseWriter, r *http.Request) error {
	v, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	choice := r.PostFormValue("email")
	known := false
	for _, c := range emailChoices {
		known = known || c.Value == choice
	}
	if !known {
		return fault.Invalidf("BAD_FORM", "Choose off, at once or a daily digest.")
	}
	prefs, err := s.api.preferences(r.Context(), v)
	if err != nil {
		return err
	}
	prefs.Email = choice
	if err := s.api.setPreferences(r.Context(), v, prefs); err != nil {
		return s.refused(w, r, v, "notify", settingsPage{}, err)
	}
	http.Redirect(w, r, "/account?notice=emailpreference#notify", http.StatusSeeOther)
	return nil
}

// deleteAccount deletes the reader's account, with their content kept (shown as a deleted user's) or removed, as
// they chose; the form asks for the password (an account with none, signed in through a provider, confirms with its
// session) and a box ticked, and the script asks once more. The reader is then signed out.
func (s *Service) deleteAccount(w http.ResponseWriter, r *http.Request) error {
	v, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	data := settingsPage{Content: r.PostFormValue("content")}
	if data.Content != "keep" && data.Content != "remove" {
		data.Problem = accountProblem{Form: "delete", Message: "Choose whether your articles and comments stay or go."}
		return s.renderAccount(w, r, v, http.StatusBadRequest, data)
	}
	if r.PostFormValue("confirm") == "" {
		data.Problem = accountProblem{Form: "delete", Message: "Tick the box to confirm that you want your account deleted."}
		return s.renderAccount(w, r, v, http.StatusBadRequest, data)
	}
	if err := s.api.deleteAccount(r.Context(), v, r.PostFormValue("password"), data.Content); err != nil {
		return s.refused(w, r, v, "delete", data, err)
	}
	s.clearSession(w, r)
	w.Header().Set("Clear-Site-Data", `"cache"`)
	http.Redirect(w, r, "/?notice=accountdeleted", http.StatusSeeOther)
	return nil
}

// The export streams from the user service to the browser as it comes, never whole in memory: its headers must come
// within callTimeout, then something at least every exportIdle, and all of it within exportTimeout.
const (
	exportIdle         = 30 * time.Second
	exportTimeout      = 10 * time.Minute
	exportWriteTimeout = 10 * time.Second
	exportBuffer       = 32 << 10
)

// exportPath is the address of the reader's data export: an answer that lasts as long as the archive streams, served
// without the pages' request deadline (its own bound it).
const exportPath = "/account/export"

// exportData passes the user service's archive of the reader's data on to the browser as a file to save. A failure
// before the archive starts is an error page; one midway aborts the answer, so that the browser reports a failed
// download rather than keeping a cut archive as if it were whole.
func (s *Service) exportData(w http.ResponseWriter, r *http.Request) error {
	v, ok, err := s.signedIn(w, r)
	if !ok {
		return err
	}
	defer countCall(r.Context(), time.Now())
	ctx, cancel := context.WithTimeout(r.Context(), exportTimeout)
	defer cancel()
	req, err := call{service: "user", method: http.MethodGet, url: s.cfg.Origins.User + "/v1/users/me/export", token: v.token}.request(ctx)
	if err != nil {
		return err
	}
	watchdog := time.AfterFunc(callTimeout, cancel)
	defer watchdog.Stop()
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return &serviceError{service: "user", err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return answerError("user", resp, raw)
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Disposition", `attachment; filename="`+exportName(v.Name, s.cfg.Now())+`"`)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, exportBuffer)
	for {
		watchdog.Reset(exportIdle)
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(exportWriteTimeout))
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil // the browser went away
			}
			_ = rc.Flush()
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			s.cfg.Logger.WarnContext(r.Context(), "the export was cut off", "err", err)
			panic(http.ErrAbortHandler)
		}
	}
}

// exportName is the archive's file name: the site, the user and the day.
func exportName(username string, now time.Time) string {
	safe := strings.Map(func(c rune) rune {
		if c < utf8.RuneSelf && (unicode.IsLetter(c) || unicode.IsDigit(c) || c == '_') {
			return c
		}
		return -1
	}, username)
	return "board-" + safe + "-" + now.UTC().Format("2006-01-02") + ".json"
}

// The pages mails link to. Their GET shows a button and changes nothing: mail scanners fetch links before people
// do, and a link used up by a scanner would be no use to its reader. The button's POST uses the token.

// linkPage is the data of the pages of a mailed link and of the forgotten password's.
type linkPage struct {
	layout
	Token string
	Email string // the forgotten password's address, kept
	Error string
	// Done says the link did what it was for; Sent, that the forgotten password's form was sent.
	Done, Sent bool
	// Invalid says the link's token is used, expired or wrong.
	Invalid bool
}

func (s *Service) forgotForm(w http.ResponseWriter, r *http.Request) error {
	return s.render(w, r, http.StatusOK, forgotView(linkPage{layout: s.pageLayout(r, s.reader(w, r), "Forgot your password?")}))
}

// askReset asks the user service to mail a reset link. The page says the same whether or not an account has the
// address, as the service does: nobody learns from it whose address is whose.
func (s *Service) askReset(w http.ResponseWriter, r *http.Request) error {
	if err := form(w, r); err != nil {
		return err
	}
	data := linkPage{layout: s.pageLayout(r, s.reader(w, r), "Forgot your password?"), Email: strings.TrimSpace(r.PostFormValue("email"))}
	err := s.api.askReset(r.Context(), data.Email, s.cfg.ClientAddr(r))
	if statusOf(err) == http.StatusTooManyRequests {
		var se *serviceError
		errors.As(err, &se)
		data.Error = "Too many attempts. Please wait " + seconds(se.retryAfter) + " and try again."
		return s.render(w, r, http.StatusTooManyRequests, forgotView(data))
	}
	if err != nil && (unavailable(err) || statusOf(err) >= 500) {
		return err
	}
	data.Sent = true
	return s.render(w, r, http.StatusOK, forgotView(data))
}

func (s *Service) resetForm(w http.ResponseWriter, r *http.Request) error {
	data := linkPage{layout: s.pageLayout(r, s.reader(w, r), "Choose a new password"), Token: linkToken(r)}
	data.Invalid = data.Token == ""
	return s.render(w, r, http.StatusOK, resetView(data))
}

// resetPassword sets the new password with the link's token; the user service ends every session of the account,
// so the reader signs in again, here with the new password.
func (s *Service) resetPassword(w http.ResponseWriter, r *http.Request) error {
	if err := form(w, r); err != nil {
		return err
	}
	data := linkPage{layout: s.pageLayout(r, s.reader(w, r), "Choose a new password"), Token: linkToken(r)}
	err := errors.New("no token")
	if data.Token != "" {
		err = s.api.resetPassword(r.Context(), data.Token, r.PostFormValue("new"), s.cfg.ClientAddr(r))
	}
	switch {
	case err == nil:
		s.clearSession(w, r)
		http.Redirect(w, r, "/signin?notice=passwordreset", http.StatusSeeOther)
		return nil
	case data.Token == "" || hasCode(err, codeInvalidToken):
		data.Invalid = true
		return s.render(w, r, http.StatusBadRequest, resetView(data))
	}
	if status, msg := formFailure(err, ""); msg != "" {
		data.Error = msg
		return s.render(w, r, status, resetView(data))
	}
	return err
}

func (s *Service) verifyForm(w http.ResponseWriter, r *http.Request) error {
	data := linkPage{layout: s.pageLayout(r, s.reader(w, r), "Verify your e-mail address"), Token: linkToken(r)}
	data.Invalid = data.Token == ""
	return s.render(w, r, http.StatusOK, verifyView(data))
}

func (s *Service) verifyEmail(w http.ResponseWriter, r *http.Request) error {
	data := linkPage{layout: s.pageLayout(r, s.reader(w, r), "Verify your e-mail address"), Token: linkToken(r)}
	if data.Token == "" {
		data.Invalid = true
		return s.render(w, r, http.StatusBadRequest, verifyView(data))
	}
	email, err := s.api.verifyEmail(r.Context(), data.Token, s.cfg.ClientAddr(r))
	switch {
	case err == nil:
		data.Done, data.Email = true, email
		return s.render(w, r, http.StatusOK, verifyView(data))
	case hasCode(err, codeInvalidToken):
		data.Invalid = true
		return s.render(w, r, http.StatusBadRequest, verifyView(data))
	}
	if status, msg := formFailure(err, ""); msg != "" {
		data.Error = msg
		return s.render(w, r, status, verifyView(data))
	}
	return err
}

func (s *Service) unsubscribeForm(w http.ResponseWriter, r *http.Request) error {
	data := linkPage{layout: s.pageLayout(r, s.reader(w, r), "Stop notification e-mails"), Token: linkToken(r)}
	data.Invalid = data.Token == ""
	return s.render(w, r, http.StatusOK, unsubscribeView(data))
}

// unsubscribe turns notification e-mail off with the link's token, which is all the authority it needs: it is also
// the one-click unsubscribe of RFC 8058, which a mail client POSTs (List-Unsubscribe=One-Click) with no session and
// from no page of this site (Routes lets it past the cross-origin check).
func (s *Service) unsubscribe(w http.ResponseWriter, r *http.Request) error {
	if err := form(w, r); err != nil {
		return err
	}
	data := linkPage{layout: s.pageLayout(r, s.reader(w, r), "Stop notification e-mails"), Token: linkToken(r)}
	err := errors.New("no token")
	if data.Token != "" {
		err = s.api.unsubscribe(r.Context(), data.Token, s.cfg.ClientAddr(r))
	}
	switch {
	case err == nil:
		data.Done = true
		return s.render(w, r, http.StatusOK, unsubscribeView(data))
	case data.Token == "" || statusOf(err) == http.StatusBadRequest || statusOf(err) == http.StatusNotFound:
		data.Invalid = true
		return s.render(w, r, http.StatusBadRequest, unsubscribeView(data))
	}
	return err
}

// providerLabel is a provider's name as a button says it: "github" is "Github".
func providerLabel(name string) string {
	first, size := utf8.DecodeRuneInString(name)
	return string(unicode.ToUpper(first)) + name[size:]
}
