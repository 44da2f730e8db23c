package user

import (
	"net/http"
	"strings"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/httpio"
)

// oidcStart answers GET /v1/oidc/{provider}/start: a 302 to the provider's authorization URL, or with Accept:
// application/json 200 {authorizationUrl} (for the web, which proxies it and forwards the cookie). Both set the
// state cookie that binds the sign-in to this browser. It only signs in: a token on it is ignored, as linking an
// identity to an account takes its password again (oidcLink).
func (h handlers) oidcStart(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.allowOIDC(r); err != nil {
		return err
	}
	st, err := h.svc.StartOIDC(r.Context(), r.PathValue("provider"))
	if err != nil {
		return err
	}
	writeStart(w, r, st)
	return nil
}

// oidcLink answers POST /v1/oidc/{provider}/link {password} (token required): as start does, for a linking of the
// identity to the signed-in account. An account without a password sends no password.
func (h handlers) oidcLink(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.allowOIDC(r); err != nil {
		return err
	}
	var in struct {
		Password *string `json:"password"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	st, err := h.svc.LinkOIDC(r.Context(), r.PathValue("provider"), p, in.Password)
	if err != nil {
		return err
	}
	writeStart(w, r, st)
	return nil
}

// writeStart sets the state cookie and sends the browser to the provider (or, to JSON, tells where).
func writeStart(w http.ResponseWriter, r *http.Request, st OIDCStart) {
	// SameSite Lax: the cookie comes along on the provider's top-level redirect back, and on no cross-site POST.
	http.SetCookie(w, &http.Cookie{Name: OIDCStateCookie, Value: st.State, Path: "/", MaxAge: int(OIDCStateTTL.Seconds()),
		HttpOnly: true, Secure: st.Secure, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		httpio.Write(w, http.StatusOK, struct {
			AuthorizationURL string `json:"authorizationUrl"`
		}{st.AuthorizationURL})
		return
	}
	http.Redirect(w, r, st.AuthorizationURL, http.StatusFound)
}

// unlinkIdentity answers DELETE /v1/users/me/identities/{provider} (token required): 204, the caller's identity at
// the provider removed.
func (h handlers) unlinkIdentity(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	if err := h.svc.UnlinkIdentity(r.Context(), p.UserID, r.PathValue("provider")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// oidcCallback answers GET /v1/oidc/{provider}/callback?code&state (the provider's redirect, forwarded by the web
// with the browser's state cookie): the access token of the user signed in, and whether the sign-in made the user
// or linked the identity to an account. The state cookie is spent either way.
func (h handlers) oidcCallback(w http.ResponseWriter, r *http.Request) error {
	var cookie string
	if c, err := r.Cookie(OIDCStateCookie); err == nil {
		cookie = c.Value
	}
	http.SetCookie(w, &http.Cookie{Name: OIDCStateCookie, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	if err := h.svc.allowOIDC(r); err != nil {
		return err
	}
	out, err := h.svc.FinishOIDC(r.Context(), r.PathValue("provider"), r.URL.Query(), cookie)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, struct {
		AccessToken string       `json:"accessToken"`
		TokenType   string       `json:"tokenType"`
		ExpiresAt   apijson.Time `json:"expiresAt"`
		UserID      apijson.ID   `json:"userId"`
		Created     bool         `json:"created"`
		Linked      bool         `json:"linked"`
	}{out.AccessToken, "Bearer", apijson.Time(out.ExpiresAt), apijson.ID(out.UserID), out.Created, out.Linked})
	return nil
}
