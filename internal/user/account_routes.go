package user

import (
	"net/http"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/httpio"
)

// The account's own routes (SPEC §3.14): e-mail, password, sessions.

type identityJSON struct {
	Provider string       `json:"provider"`
	Email    *string      `json:"email"`
	LinkedAt apijson.Time `json:"linkedAt"`
}

type accountJSON struct {
	userJSON
	Email        *string        `json:"email"`
	PendingEmail *string        `json:"pendingEmail"`
	HasPassword  bool           `json:"hasPassword"`
	Identities   []identityJSON `json:"identities"`
	Deleted      bool           `json:"deleted,omitempty"`
}

// orNull is s, or JSON null for "".
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// me answers GET /v1/users/me: the caller's own account. A read, but of the user's own: 401 without a token.
func (h handlers) me(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	a, err := h.svc.Account(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	out := accountJSON{userJSON: toJSON(a.User), Email: orNull(a.Email), PendingEmail: orNull(a.PendingEmail),
		HasPassword: a.HasPassword, Identities: make([]identityJSON, len(a.Identities)), Deleted: a.Deleted}
	for i, id := range a.Identities {
		out.Identities[i] = identityJSON{id.Provider, orNull(id.Email), apijson.Time(id.LinkedAt)}
	}
	w.Header().Set("Cache-Control", "no-store")
	httpio.Write(w, http.StatusOK, out)
	return nil
}

// accepted answers 202 {}: the one answer of the requests that must not tell whether an address has an account.
func accepted(w http.ResponseWriter) {
	httpio.Write(w, http.StatusAccepted, struct{}{})
}

// changeEmail answers PUT /v1/users/me/email {email, password}.
func (h handlers) changeEmail(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	var in struct {
		Email    *string `json:"email"`
		Password *string `json:"password"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	if err := httpio.Required(httpio.Has("email", in.Email != nil), httpio.Has("password", in.Password != nil)); err != nil {
		return err
	}
	if err := h.svc.RequestEmailChange(r.Context(), p.UserID, *in.Email, *in.Password); err != nil {
		return err
	}
	accepted(w)
	return nil
}

// verifyEmail answers POST /v1/email-verifications/{token}: no access token, the link is the proof.
func (h handlers) verifyEmail(w http.ResponseWriter, r *http.Request) error {
	userID, email, err := h.svc.VerifyEmail(r.Context(), r.PathValue("token"))
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, struct {
		UserID apijson.ID `json:"userId"`
		Email  string     `json:"email"`
	}{apijson.ID(userID), email})
	return nil
}

// changePassword answers PUT /v1/users/me/password {current, new} with a token at the new epoch.
func (h handlers) changePassword(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	var in struct {
		Current *string `json:"current"`
		New     *string `json:"new"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	if err := httpio.Required(httpio.Has("current", in.Current != nil), httpio.Has("new", in.New != nil)); err != nil {
		return err
	}
	t, err := h.svc.ChangePassword(r.Context(), p.UserID, *in.Current, *in.New)
	if err != nil {
		return err
	}
	writeToken(w, t)
	return nil
}

// endSessions answers DELETE /v1/users/me/sessions with a token at the new epoch.
func (h handlers) endSessions(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	t, err := h.svc.EndSessions(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	writeToken(w, t)
	return nil
}

// requestReset answers POST /v1/password-resets {email}: 202 whether or not the address has an account.
func (h handlers) requestReset(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Email *string `json:"email"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	if err := httpio.Required(httpio.Has("email", in.Email != nil)); err != nil {
		return err
	}
	if err := h.svc.RequestPasswordReset(r.Context(), *in.Email); err != nil {
		return err
	}
	accepted(w)
	return nil
}

// resetPassword answers POST /v1/password-resets/{token} {new}: 204.
func (h handlers) resetPassword(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		New *string `json:"new"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	if err := httpio.Required(httpio.Has("new", in.New != nil)); err != nil {
		return err
	}
	if err := h.svc.ResetPassword(r.Context(), r.PathValue("token"), *in.New); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
