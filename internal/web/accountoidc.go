package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"slices"

	"board/internal/fault"
)

// Sign-in with an OpenID Connect provider. The user service runs the flow (PKCE, state, nonce, the ID token's checks)
// and keeps its state; the web starts it, sends the browser to the provider, and takes the provider's answer back to
// the user service. The flow's state is also kept in a cookie of this site, so that only the browser that started a
// sign-in can finish it: a callback address sent to someone else's browser signs no one in there.

// oidcCookie holds the state of the sign-in a browser started, for its callback to match.
const oidcCookie = "board_oidc"

// oidcCookieAge bounds how long a sign-in at the provider may take.
const oidcCookieAge = 10 * 60

// oidcStarted is the user service's start of a sign-in: where to send the browser, and the flow's state, which the
// user service gives as a cookie for the browser (stateCookie) and wants back with the callback.
type oidcStarted struct {
	AuthorizationURL string `json:"authorizationUrl"`
	State            string `json:"-"`
}

// stateCookie is the user service's cookie that carries a sign-in's state.
const stateCookie = "board_oidc_state"

// oidcSignedIn is the user service's end of a sign-in: a session's token, and whether the account was made or
// connected by it.
type oidcSignedIn struct {
	tokenReply
	Created bool `json:"created"`
	Linked  bool `json:"linked"`
}

// oidcStart starts a sign-in with the provider.
func (b *backend) oidcStart(ctx context.Context, provider, client string) (oidcStarted, error) {
	return b.oidcBegin(ctx, call{service: "user", method: http.MethodGet, url: b.origins.User + "/v1/oidc/" + url.PathEscape(provider) + "/start",
		client: client})
}

// oidcLink starts a linking of the provider's account to v's, confirmed with their password (nil for an account
// without one, which the provider is asked to sign in again instead).
func (b *backend) oidcLink(ctx context.Context, provider string, v *viewer, password *string, client string) (oidcStarted, error) {
	return b.oidcBegin(ctx, call{service: "user", method: http.MethodPost, url: b.origins.User + "/v1/oidc/" + url.PathEscape(provider) + "/link",
		body: map[string]*string{"password": password}, token: v.token, client: client})
}

// unlinkIdentity removes v's identity at the provider.
func (b *backend) unlinkIdentity(ctx context.Context, provider string, v *viewer) error {
	return b.do(ctx, call{service: "user", method: http.MethodDelete, url: b.origins.User + "/v1/users/me/identities/" + url.PathEscape(provider),
		token: v.token}, nil)
}

// oidcBegin sends c, a start or a link, and reads where to send the browser and the state the user service binds
// to it.
func (b *backend) oidcBegin(ctx context.Context, c call) (oidcStarted, error) {
	var (
		out    oidcStarted
		header http.Header
	)
	c.header = &header
	err := b.do(ctx, c, &out)
	for _, c := range (&http.Response{Header: header}).Cookies() {
		if c.Name == stateCookie {
			out.State = c.Value
		}
	}
	return out, err
}

// oidcCallback finishes the sign-in whose state the browser held.
func (b *backend) oidcCallback(ctx context.Context, provider string, query url.Values, client string) (oidcSignedIn, error) {
	var out oidcSignedIn
	err := b.do(ctx, call{service: "user", method: http.MethodGet, url: b.origins.User + "/v1/oidc/" + url.PathEscape(provider) + "/callback?" + query.Encode(),
		client: client, cookie: (&http.Cookie{Name: stateCookie, Value: query.Get("state")}).String()}, &out)
	return out, tokenIn(out.tokenReply, err)
}

// oidcProvider is the path's {provider}, if the site has it configured.
func (s *Service) oidcProvider(r *http.Request) (string, error) {
	p := r.PathValue("provider")
	if !slices.Contains(s.cfg.OIDCProviders, p) {
		return "", fault.NotFoundf("NO_PROVIDER", "This site does not sign in with that provider.")
	}
	return p, nil
}

// oidcStart sends the browser to the provider to sign in with it (or sign up, the first time). It is a link, not a
// form: the pages' form-action 'self' would stop a form's redirect to the provider. Started from another site, it
// does no harm: only this browser can finish the sign-in (the state cookie), and only as whom the reader signs in
// as at the provider.
func (s *Service) oidcStart(w http.ResponseWriter, r *http.Request) error {
	provider, err := s.oidcProvider(r)
	if err != nil {
		return err
	}
	started, err := s.api.oidcStart(r.Context(), provider, s.cfg.ClientAddr(r))
	if err != nil {
		return err
	}
	to, err := s.bindOIDC(w, r, provider, started)
	if err != nil {
		return err
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

// bindOIDC keeps the state of a sign-in or linking begun in this browser's cookie and returns the provider's address
// to send it to.
func (s *Service) bindOIDC(w http.ResponseWriter, r *http.Request, provider string, started oidcStarted) (string, error) {
	to, err := url.Parse(started.AuthorizationURL)
	if err != nil || (to.Scheme != "https" && to.Scheme != "http") || to.Host == "" || started.State == "" {
		return "", &serviceError{service: "user", status: http.StatusBadGateway, err: errInvalidStart}
	}
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: started.State, Path: "/oidc/" + provider + "/", MaxAge: oidcCookieAge,
		HttpOnly: true, Secure: s.cfg.SecureCookies || r.TLS != nil, SameSite: http.SameSiteLaxMode})
	return to.String(), nil
}

// connectProvider links the provider's account to the signed-in reader's: a form of the account page, with the
// password (a linked identity signs in for good, so the session alone must not link one; an account without a
// password is asked to sign in at the provider again instead). The answer is a page that goes on to the provider
// (a refresh and a link): a form's redirect there would be stopped by the pages' form-action 'self'.
func (s *Service) connectProvider(w http.ResponseWriter, r *http.Request) error {
	provider, err := s.oidcProvider(r)
	if err != nil {
		return err
	}
	v, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	var password *string
	if r.PostForm.Has("password") {
		p := r.PostFormValue("password")
		password = &p
	}
	started, err := s.api.oidcLink(r.Context(), provider, v, password, s.cfg.ClientAddr(r))
	if err != nil {
		return s.refused(w, r, v, "providers", settingsPage{}, err)
	}
	to, err := s.bindOIDC(w, r, provider, started)
	if err != nil {
		return err
	}
	w.Header().Set("Refresh", "0; url="+to)
	return s.render(w, r, http.StatusOK, oidcContinueView(oidcPage{layout: s.pageLayout(r, v, "Connect "+providerLabel(provider)),
		Provider: provider, Continue: to}))
}

// disconnectProvider removes the reader's identity at the provider; the user service refuses to remove the last way
// to sign in (409 LAST_SIGN_IN), which the account page says.
func (s *Service) disconnectProvider(w http.ResponseWriter, r *http.Request) error {
	provider := r.PathValue("provider")
	v, ok, err := s.accountForm(w, r)
	if !ok {
		return err
	}
	err = s.api.unlinkIdentity(r.Context(), provider, v)
	if statusOf(err) == http.StatusNotFound {
		err = nil // removed already: a second click, or a second tab
	}
	if err != nil {
		return s.refused(w, r, v, "providers", settingsPage{}, err)
	}
	http.Redirect(w, r, "/account?notice=disconnected#providers", http.StatusSeeOther)
	return nil
}

var errInvalidStart = errors.New("the user service's start of a sign-in has no address or state")

// oidcCallback takes the provider's answer to the user service, if this browser started the sign-in, and keeps the
// session it gives as signing in does.
func (s *Service) oidcCallback(w http.ResponseWriter, r *http.Request) error {
	provider, err := s.oidcProvider(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: "/oidc/" + provider + "/", MaxAge: -1,
		HttpOnly: true, Secure: s.cfg.SecureCookies || r.TLS != nil, SameSite: http.SameSiteLaxMode})
	data := oidcPage{layout: s.layout(r, "Sign in with "+providerLabel(provider)), Provider: provider}
	if q.Get("error") != "" {
		// The provider's own refusal (the reader said no, or it would not sign them in): its words, as text.
		data.Message = providerLabel(provider) + " did not sign you in"
		if d := q.Get("error_description"); d != "" {
			data.Message += ": " + d
		} else {
			data.Message += " (" + q.Get("error") + ")."
		}
		return s.render(w, r, http.StatusBadRequest, oidcErrorView(data))
	}
	c, err := r.Cookie(oidcCookie)
	if err != nil || q.Get("state") == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(q.Get("state"))) != 1 {
		data.Message = "This sign-in was not started in this browser, or it took too long. Please start it again."
		return s.render(w, r, http.StatusBadRequest, oidcErrorView(data))
	}
	done, err := s.api.oidcCallback(r.Context(), provider, url.Values{"code": {q.Get("code")}, "state": {q.Get("state")}}, s.cfg.ClientAddr(r))
	if se, ok := errors.AsType[*serviceError](err); ok && se.status >= 400 && se.status < 500 && se.status != http.StatusTooManyRequests {
		data.Message = se.message
		if data.Message == "" {
			data.Message = "The sign-in could not be completed."
		}
		return s.render(w, r, se.status, oidcErrorView(data))
	}
	if err != nil {
		return err
	}
	s.setSession(w, r, done.AccessToken, done.ExpiresAt)
	switch {
	case done.Linked:
		http.Redirect(w, r, "/account?notice=connected#providers", http.StatusSeeOther)
	case done.Created:
		http.Redirect(w, r, "/?notice=welcome", http.StatusSeeOther)
	default:
		http.Redirect(w, r, "/?notice=signedin", http.StatusSeeOther)
	}
	return nil
}

// oidcPage is a sign-in with a provider that did not end signed in (why), or a linking on its way to the provider.
type oidcPage struct {
	layout
	Provider string
	Message  string
	Continue string // the provider's address, for a linking's page that goes on there
}

// oidcStartPath is where a button starts a sign-in with the provider.
func oidcStartPath(provider string) string { return "/oidc/" + url.PathEscape(provider) + "/start" }
