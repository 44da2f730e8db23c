package user

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/fault"
	"board/internal/httpio"
)

// OpenRoutes are the user service's writes that need no access token, each with the name of the per-client-address
// rate limit it is held to (brute force of sign-in, mass sign-up, floods of reset mails and of guessed links).
var OpenRoutes = map[string]string{
	"POST /v1/users":                       "sign-up",
	"POST /v1/tokens":                      "sign-in",
	"POST /v1/password-resets":             "password-reset",
	"POST /v1/password-resets/{token}":     "password-reset",
	"POST /v1/email-verifications/{token}": "email-verification",
}

// UnbannedRoutes are the writes a banned user may still make (httpio.Guard.Unbanned): a ban stops them writing on the
// site, not keeping their account safe (a password, an address, their sessions) or leaving it.
var UnbannedRoutes = map[string]bool{
	"DELETE /v1/users/me":          true,
	"PUT /v1/users/me/password":    true,
	"PUT /v1/users/me/email":       true,
	"DELETE /v1/users/me/sessions": true,
}

// JWKSPath is where the public signing keys are served.
const JWKSPath = "/.well-known/jwks.json"

// Routes returns the whole HTTP API of the user service (SPEC §3.7).
func Routes(svc *Service, logger *slog.Logger) *http.ServeMux {
	h := handlers{svc: svc}
	mux := http.NewServeMux()
	handle := func(pattern string, fn httpio.HandlerFunc) { mux.Handle(pattern, httpio.Handle(logger, fn)) }
	handle("POST /v1/users", h.signUp)
	handle("POST /v1/tokens", h.signIn)
	handle("GET /v1/users/{userId}", h.get)
	handle("GET /v1/users", h.getMany)
	handle("GET "+JWKSPath, h.jwks)
	handle("PUT /v1/blocks/{userId}", h.block)
	handle("DELETE /v1/blocks/{userId}", h.unblock)
	handle("GET /v1/blocks", h.blocks)
	handle("GET /v1/users/me", h.me)
	handle("PUT /v1/users/me/email", h.changeEmail)
	handle("POST /v1/email-verifications/{token}", h.verifyEmail)
	handle("PUT /v1/users/me/password", h.changePassword)
	handle("DELETE /v1/users/me/sessions", h.endSessions)
	handle("POST /v1/password-resets", h.requestReset)
	handle("POST /v1/password-resets/{token}", h.resetPassword)
	handle("DELETE /v1/users/me", h.deleteMe)
	handle("GET "+ExportPath, h.export)
	handle("GET /v1/oidc/{provider}/start", h.oidcStart)
	handle("GET /v1/oidc/{provider}/callback", h.oidcCallback)
	handle("POST /v1/oidc/{provider}/link", h.oidcLink)
	handle("DELETE /v1/users/me/identities/{provider}", h.unlinkIdentity)
	return mux
}

type userJSON struct {
	UserID    apijson.ID   `json:"userId"`
	Username  string       `json:"username"`
	Role      string       `json:"role"`
	CreatedAt apijson.Time `json:"createdAt"`
	Deleted   bool         `json:"deleted,omitempty"`
}

// toJSON is a user's wire form; a deleted account's name reads as DeletedName.
func toJSON(u User) userJSON {
	if u.Deleted {
		u.Username = DeletedName
	}
	return userJSON{apijson.ID(u.ID), u.Username, string(u.Role), apijson.Time(u.CreatedAt), u.Deleted}
}

type handlers struct {
	svc *Service
}

// credentials reads {username, password}.
func credentials(w http.ResponseWriter, r *http.Request) (username, password string, err error) {
	var in struct {
		Username *string `json:"username"`
		Password *string `json:"password"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return "", "", err
	}
	if err := httpio.Required(httpio.Has("username", in.Username != nil), httpio.Has("password", in.Password != nil)); err != nil {
		return "", "", err
	}
	return *in.Username, *in.Password, nil
}

func (h handlers) signUp(w http.ResponseWriter, r *http.Request) error {
	username, password, err := credentials(w, r)
	if err != nil {
		return err
	}
	u, err := h.svc.SignUp(r.Context(), username, password)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusCreated, toJSON(u))
	return nil
}

func (h handlers) signIn(w http.ResponseWriter, r *http.Request) error {
	username, password, err := credentials(w, r)
	if err != nil {
		return err
	}
	t, err := h.svc.SignIn(r.Context(), username, password)
	if err != nil {
		return err
	}
	writeToken(w, t)
	return nil
}

// writeToken answers 200 with an access token.
func writeToken(w http.ResponseWriter, t Token) {
	w.Header().Set("Cache-Control", "no-store") // RFC 6749 §5.1: no cache keeps a token
	httpio.Write(w, http.StatusOK, struct {
		AccessToken string       `json:"accessToken"`
		TokenType   string       `json:"tokenType"`
		ExpiresAt   apijson.Time `json:"expiresAt"`
	}{t.AccessToken, "Bearer", apijson.Time(t.ExpiresAt)})
}

func (h handlers) get(w http.ResponseWriter, r *http.Request) error {
	id, err := httpio.PathID(r, "userId")
	if err != nil {
		return err
	}
	u, err := h.svc.Get(r.Context(), id)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toJSON(u))
	return nil
}

// jwks serves the published public keys. Caches may keep the set for Activation − Reload (5 s by default): a rotated
// key is in every instance's set within Reload of its creation and signs from Activation on, so a cached copy has it
// by then too.
func (h handlers) jwks(w http.ResponseWriter, r *http.Request) error {
	maxAge := int((h.svc.cfg.Activation - h.svc.cfg.Reload).Seconds())
	w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(maxAge))
	httpio.Write(w, http.StatusOK, h.svc.keys.JWKS())
	return nil
}

// getMany answers GET /v1/users with one of: ids=1,2,3, the users of those ids that exist, in that order;
// usernames=a,b, the same by username (at most MaxBatch of either); prefix=ab&limit=8, the users whose username
// starts with the prefix, by username.
func (h handlers) getMany(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if q.Has("ids") && q.Has("usernames") || q.Has("prefix") && (q.Has("ids") || q.Has("usernames")) {
		return fault.Invalidf("INVALID_QUERY", "only one of the query parameters ids, usernames and prefix at once")
	}
	var users []User
	var err error
	switch {
	case q.Has("ids"):
		var ids []int64
		if ids, err = listParam(q.Get("ids"), "ids", func(p string) (int64, error) { return apijson.Parse(p) }); err == nil {
			users, err = h.svc.GetMany(r.Context(), ids)
		}
	case q.Has("usernames"):
		var names []string
		if names, err = listParam(q.Get("usernames"), "usernames", NormalizeUsername); err == nil {
			users, err = h.svc.ByUsernames(r.Context(), names)
		}
	case q.Has("prefix"):
		var limit int64
		if limit, err = httpio.QueryInt(r, "limit", 8, 1, MaxBatch); err != nil {
			return err
		}
		prefix, ok := lowerUsername(q.Get("prefix"))
		if !ok || prefix == "" || len(prefix) > MaxUsername {
			return fault.Invalidf("INVALID_PREFIX", "query parameter prefix must be 1 to %d characters of a-z, 0-9 and _", MaxUsername)
		}
		users, err = h.svc.ByPrefix(r.Context(), prefix, int(limit))
	default:
		return fault.Invalidf("MISSING_IDS", "one query parameter of ids, usernames (comma-separated) or prefix is required")
	}
	if err != nil {
		return err
	}
	out := make([]userJSON, len(users))
	for i, u := range users {
		out[i] = toJSON(u)
	}
	httpio.Write(w, http.StatusOK, out)
	return nil
}

// listParam parses a comma-separated query parameter of at most MaxBatch values, each by parse: TOO_MANY_<NAME> for
// more, INVALID_<NAME> for a value parse refuses.
func listParam[T any](raw, name string, parse func(string) (T, error)) ([]T, error) {
	code := strings.ToUpper(name)
	parts := strings.Split(raw, ",")
	if len(parts) > MaxBatch {
		return nil, fault.Invalidf("TOO_MANY_"+code, "at most %d %s at once, not %d", MaxBatch, name, len(parts))
	}
	out := make([]T, len(parts))
	for i, p := range parts {
		v, err := parse(p)
		if err != nil {
			return nil, fault.Invalidf("INVALID_"+code, "query parameter %s: %v", name, err)
		}
		out[i] = v
	}
	return out, nil
}

type blockJSON struct {
	UserID    apijson.ID   `json:"userId"`
	Username  string       `json:"username"`
	CreatedAt apijson.Time `json:"createdAt"`
}

func toBlockJSON(b Block) blockJSON {
	return blockJSON{apijson.ID(b.UserID), b.Username, apijson.Time(b.CreatedAt)}
}

// block answers PUT /v1/blocks/{userId}: the acting user blocks userId.
func (h handlers) block(w http.ResponseWriter, r *http.Request) error {
	other, err := httpio.PathID(r, "userId")
	if err != nil {
		return err
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	b, err := h.svc.Block(r.Context(), p.UserID, other)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, toBlockJSON(b))
	return nil
}

func (h handlers) unblock(w http.ResponseWriter, r *http.Request) error {
	other, err := httpio.PathID(r, "userId")
	if err != nil {
		return err
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	if err := h.svc.Unblock(r.Context(), p.UserID, other); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// blocks answers GET /v1/blocks: the acting user's blocks, newest first. A read, but of the user's own: 401 without
// a token.
func (h handlers) blocks(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	bs, err := h.svc.Blocks(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	out := struct {
		Blocks []blockJSON `json:"blocks"`
	}{make([]blockJSON, len(bs))}
	for i, b := range bs {
		out.Blocks[i] = toBlockJSON(b)
	}
	httpio.Write(w, http.StatusOK, out)
	return nil
}
