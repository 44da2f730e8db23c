package user

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"board/internal/apijson"
	"board/internal/fault"
	"board/internal/httpio"
)

// OpenRoutes are the user service's writes that need no access token, each with the name of the per-client-address
// rate limit it is held to (brute force of sign-in, mass sign-up).
var OpenRoutes = map[string]string{
	"POST /v1/users":  "sign-up",
	"POST /v1/tokens": "sign-in",
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
	return mux
}

type userJSON struct {
	UserID    apijson.ID   `json:"userId"`
	Username  string       `json:"username"`
	Role      string       `json:"role"`
	CreatedAt apijson.Time `json:"createdAt"`
}

func toJSON(u User) userJSON {
	return userJSON{apijson.ID(u.ID), u.Username, string(u.Role), apijson.Time(u.CreatedAt)}
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
	w.Header().Set("Cache-Control", "no-store") // RFC 6749 §5.1: no cache keeps a token
	httpio.Write(w, http.StatusOK, struct {
		AccessToken string       `json:"accessToken"`
		TokenType   string       `json:"tokenType"`
		ExpiresAt   apijson.Time `json:"expiresAt"`
	}{t.AccessToken, "Bearer", apijson.Time(t.ExpiresAt)})
	return nil
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

// getMany answers GET /v1/users?ids=1,2,3: the users of those ids that exist, in that order (at most MaxBatch).
func (h handlers) getMany(w http.ResponseWriter, r *http.Request) error {
	raw := r.URL.Query().Get("ids")
	if raw == "" {
		return fault.Invalidf("MISSING_IDS", "query parameter ids is required: comma-separated user ids")
	}
	parts := strings.Split(raw, ",")
	if len(parts) > MaxBatch {
		return fault.Invalidf("TOO_MANY_IDS", "at most %d ids at once, not %d", MaxBatch, len(parts))
	}
	ids := make([]int64, len(parts))
	for i, p := range parts {
		id, err := apijson.Parse(p)
		if err != nil {
			return fault.Invalidf("INVALID_IDS", "query parameter ids: %v", err)
		}
		ids[i] = id
	}
	users, err := h.svc.GetMany(r.Context(), ids)
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
