package user

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// OIDCProvider is an OpenID Connect provider people may sign in with (--oidc-provider).
type OIDCProvider struct {
	Name         string // in the paths /v1/oidc/{name}/...: 1 to 32 of a-z, 0-9 and -
	Issuer       string // its issuer URL, where discovery begins and what its ID tokens must name
	ClientID     string
	ClientSecret string // empty for a public client (PKCE alone)
	RedirectURL  string // where the provider sends the browser back; the web's /oidc/{name}/callback by default
}

// String shows the provider without its client secret, for the configuration logged at start.
func (p OIDCProvider) String() string {
	return fmt.Sprintf("{name=%s issuer=%s client-id=%s redirect-url=%s}", p.Name, p.Issuer, p.ClientID, p.RedirectURL)
}

var providerName = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// ParseOIDCProvider reads a provider as comma-separated key=value pairs: name, issuer, client-id, and optionally
// client-secret and redirect-url.
func ParseOIDCProvider(v string) (OIDCProvider, error) {
	var p OIDCProvider
	fields := map[string]*string{"name": &p.Name, "issuer": &p.Issuer, "client-id": &p.ClientID,
		"client-secret": &p.ClientSecret, "redirect-url": &p.RedirectURL}
	for pair := range strings.SplitSeq(v, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
		field, known := fields[key]
		if !ok || !known {
			return p, fmt.Errorf("want name=...,issuer=...,client-id=...[,client-secret=...][,redirect-url=...], not %q", pair)
		}
		*field = value
	}
	if !providerName.MatchString(p.Name) {
		return p, fmt.Errorf("provider name %q: want 1 to 32 of a-z, 0-9 and -", p.Name)
	}
	for what, raw := range map[string]string{"issuer": p.Issuer, "redirect-url": p.RedirectURL} {
		if raw == "" && what == "redirect-url" {
			continue
		}
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return p, fmt.Errorf("provider %s: %s %q is not an http(s) URL", p.Name, what, raw)
		}
	}
	if p.ClientID == "" {
		return p, fmt.Errorf("provider %s: client-id is required", p.Name)
	}
	return p, nil
}

// Limits of the OIDC sign-in.
const (
	// OIDCStateTTL is how long a begun sign-in may take to come back.
	OIDCStateTTL = 10 * time.Minute
	// OIDCStateCookie is the cookie that binds a sign-in's state to the browser that began it (login CSRF).
	OIDCStateCookie = "board_oidc_state"
	// oidcTimeout bounds each call to a provider (discovery, token exchange, keys, userinfo).
	oidcTimeout = 5 * time.Second
	// oidcRetry spaces the discoveries of a provider that failed one, so that a burst of sign-ins while it is down
	// costs one try, not one each.
	oidcRetry = 2 * time.Second
	// authTimeSkew is how far the provider's clock may lag ours for a fresh sign-in's auth_time (seconds, truncated).
	authTimeSkew = time.Minute
	// oidcSweep is how often expired sign-in states are deleted.
	oidcSweep = 5 * time.Minute
)

// oidcProvider is a configured provider and, once its discovery document was read, its endpoints.
type oidcProvider struct {
	OIDCProvider
	client *http.Client // with oidcTimeout, for every call to the provider (go-oidc fetches keys in the background)
	// turn is held for a look at ready and for a discovery: one discovery at a time, and waiters give up with ctx.
	turn    chan struct{}
	ready   *oidcEndpoints
	retryAt time.Time
}

type oidcEndpoints struct {
	provider *oidc.Provider
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
}

func newOIDCProviders(list []OIDCProvider) (map[string]*oidcProvider, error) {
	out := make(map[string]*oidcProvider, len(list))
	for _, p := range list {
		if _, dup := out[p.Name]; dup {
			return nil, fmt.Errorf("OIDC provider %q is configured twice", p.Name)
		}
		if p.RedirectURL == "" {
			return nil, fmt.Errorf("OIDC provider %q has no redirect URL", p.Name)
		}
		out[p.Name] = &oidcProvider{OIDCProvider: p, client: &http.Client{Timeout: oidcTimeout}, turn: make(chan struct{}, 1)}
	}
	return out, nil
}

func errProviderDown(name string, cause error) error {
	return fault.Unavailablef(cause, "OIDC_PROVIDER_UNAVAILABLE", "the identity provider %s cannot be reached; try again later", name)
}

// endpoints returns the provider's endpoints, reading its discovery document first if that was not done yet: a
// provider down at start is tried again at the next sign-in (after oidcRetry), and never keeps the service from
// starting.
func (p *oidcProvider) endpoints(ctx context.Context, now time.Time) (*oidcEndpoints, error) {
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, errProviderDown(p.Name, ctx.Err())
	}
	defer func() { <-p.turn }()
	if p.ready != nil {
		return p.ready, nil
	}
	if now.Before(p.retryAt) {
		return nil, errProviderDown(p.Name, errors.New("discovery failed a moment ago"))
	}
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, p.client), oidcTimeout)
	defer cancel()
	op, err := oidc.NewProvider(dctx, p.Issuer)
	if err != nil {
		p.retryAt = now.Add(oidcRetry)
		return nil, errProviderDown(p.Name, err)
	}
	if p.ready, err = p.use(op); err != nil {
		p.retryAt = now.Add(oidcRetry)
		return nil, errProviderDown(p.Name, err)
	}
	return p.ready, nil
}

// signingAlgs are the ID token algorithms go-oidc verifies.
var signingAlgs = map[string]bool{oidc.RS256: true, oidc.RS384: true, oidc.RS512: true, oidc.ES256: true,
	oidc.ES384: true, oidc.ES512: true, oidc.PS256: true, oidc.PS384: true, oidc.PS512: true, oidc.EdDSA: true}

// use returns the endpoints of the provider op describes (from its discovery document), for this client.
func (p *oidcProvider) use(op *oidc.Provider) (*oidcEndpoints, error) {
	var meta struct {
		JWKSURL string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := op.Claims(&meta); err != nil {
		return nil, err
	}
	keys := keySet{oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), p.client), meta.JWKSURL)}
	algs := slices.DeleteFunc(meta.Algs, func(a string) bool { return !signingAlgs[a] })
	return &oidcEndpoints{
		provider: op,
		oauth: oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, Endpoint: op.Endpoint(),
			RedirectURL: p.RedirectURL, Scopes: []string{oidc.ScopeOpenID, "profile", "email"}},
		// Discovery checked that the provider names itself p.Issuer.
		verifier: oidc.NewVerifier(p.Issuer, keys, &oidc.Config{ClientID: p.ClientID, SupportedSigningAlgs: algs}),
	}, nil
}

// keySet is the provider's key set, which tells the keys' fetch failing (the provider is down: 503) from a bad
// signature (401): go-oidc's verifier turns the fetch's error into text, so it is noted in the context instead.
type keySet struct{ oidc.KeySet }

// keysDown is the context key of the *error where keySet notes a failed fetch.
type keysDown struct{}

func (k keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := k.KeySet.VerifySignature(ctx, jwt)
	if noted, ok := ctx.Value(keysDown{}).(*error); ok && fault.IsDependencyDown(err) {
		*noted = err
	}
	return payload, err
}

func (s *Service) oidcProvider(name string) (*oidcProvider, error) {
	p, ok := s.oidc[name]
	if !ok {
		return nil, fault.NotFoundf("OIDC_PROVIDER_NOT_FOUND", "no identity provider is named %q", name)
	}
	return p, nil
}

// runOIDC reads every provider's discovery document once at start (in the background: a provider that is down is
// tried again lazily), then deletes expired sign-in states every oidcSweep until ctx ends.
func (s *Service) runOIDC(ctx context.Context) {
	if len(s.oidc) == 0 {
		return
	}
	for _, p := range s.oidc {
		if _, err := p.endpoints(ctx, s.cfg.Now()); err != nil && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "identity provider unreachable at start; sign-ins with it will try again", "provider", p.Name, "err", err)
		}
	}
	tick := time.NewTicker(oidcSweep)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := s.sweepOIDCStates(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.WarnContext(ctx, "deleting expired OIDC sign-in states failed", "err", err)
			}
		}
	}
}

// sweepOIDCStates deletes the states whose sign-in never came back and expired, row by row by key: behind Vitess each
// delete stays on one shard.
func (s *Service) sweepOIDCStates(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		now := s.cfg.Now().UTC()
		rows, err := s.db.QueryContext(ctx, "SELECT state_hash FROM oidc_state WHERE expires_at < ? LIMIT 500", now)
		if err != nil {
			return err
		}
		var keys [][]byte
		for rows.Next() {
			var k []byte
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return err
			}
			keys = append(keys, k)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil || len(keys) == 0 {
			return err
		}
		for _, k := range keys {
			if _, err := s.db.ExecContext(ctx, "DELETE FROM oidc_state WHERE state_hash = ? AND expires_at < ?", k, now); err != nil {
				return err
			}
		}
	}
}

// OIDCStart is a sign-in begun: the provider's authorization URL to send the browser to, and the state to bind to
// that browser (OIDCStateCookie).
type OIDCStart struct {
	AuthorizationURL string
	State            string
	Secure           bool // the browser comes back over https: the cookie may be Secure
}

// OIDCLimit names the per-client limit of the OIDC routes: start stores a state for anyone, and a callback may make
// a user outside the sign-up limit.
const OIDCLimit = "oidc"

// allowOIDC takes one request of r's client from OIDCLimit's budget.
func (s *Service) allowOIDC(r *http.Request) error {
	if s.cfg.Limiter == nil {
		return nil
	}
	addr := httpio.RemoteHost(r)
	if s.cfg.ClientAddr != nil {
		addr = s.cfg.ClientAddr(r)
	}
	return s.cfg.Limiter.Allow(r.Context(), OIDCLimit, httpio.ClientKey(addr))
}

// oidcLink is the signed-in user a begun sign-in links its identity to, at the token epoch of the session that
// asked: the callback links only while that session lasts. Reauth asks the provider for a fresh sign-in.
type oidcLink struct {
	user, epoch int64
	reauth      bool
}

// StartOIDC begins a sign-in with the provider name (authorization code flow with PKCE S256, state and nonce). The
// state, nonce and PKCE verifier stay here, under sha256 of the state, for OIDCStateTTL.
func (s *Service) StartOIDC(ctx context.Context, name string) (OIDCStart, error) {
	return s.beginOIDC(ctx, name, oidcLink{})
}

var errSessionEnded = fault.Unauthenticatedf("UNAUTHENTICATED", "this session has ended; sign in again")

// LinkOIDC begins linking an identity at the provider name to the signed-in user p, who proves it is them again: a
// stolen token alone must not attach the thief's identity, a way in that outlives every password change. An
// account with a password gives it (401 BAD_CREDENTIALS when wrong, under SignInAccountLimit as a sign-in); one
// without gives none, and the provider is asked for a fresh sign-in instead (prompt=login, max_age=0, and the ID
// token's auth_time is checked at the callback).
func (s *Service) LinkOIDC(ctx context.Context, name string, p auth.Principal, password *string) (OIDCStart, error) {
	if _, err := s.oidcProvider(name); err != nil {
		return OIDCStart{}, err
	}
	u, hash, err := scanUser(s.db.QueryRowContext(ctx, "SELECT "+userColumns+" FROM users WHERE user_id = ? AND deleted_at IS NULL", p.UserID))
	if errors.Is(err, sql.ErrNoRows) {
		return OIDCStart{}, errSessionEnded
	} else if err != nil {
		return OIDCStart{}, err
	}
	if u.TokenEpoch != p.TokenEpoch {
		return OIDCStart{}, errSessionEnded
	}
	link := oidcLink{user: u.ID, epoch: u.TokenEpoch}
	switch {
	case hash == "" && password != nil:
		return OIDCStart{}, fault.Conflictf("NO_PASSWORD", "this account has no password: send none, and the identity provider asks you to sign in again")
	case hash == "":
		link.reauth = true
	case password == nil:
		return OIDCStart{}, fault.Invalidf("MISSING_FIELD", "field %q is required", "password")
	default:
		if s.cfg.Limiter != nil {
			if err := s.cfg.Limiter.Allow(ctx, SignInAccountLimit, u.Username); err != nil {
				return OIDCStart{}, err
			}
		}
		ok, err := s.hasher.verify(ctx, hash, *password)
		if err != nil {
			return OIDCStart{}, err
		}
		if !ok {
			return OIDCStart{}, errWrongPassword
		}
	}
	return s.beginOIDC(ctx, name, link)
}

// beginOIDC stores a new sign-in's state, with the user to link (none when link.user is 0), and returns where to
// send the browser.
func (s *Service) beginOIDC(ctx context.Context, name string, link oidcLink) (OIDCStart, error) {
	p, err := s.oidcProvider(name)
	if err != nil {
		return OIDCStart{}, err
	}
	now := s.cfg.Now()
	e, err := p.endpoints(ctx, now)
	if err != nil {
		return OIDCStart{}, err
	}
	state, nonce, verifier := rand.Text(), rand.Text(), oauth2.GenerateVerifier()
	var user, epoch sql.NullInt64
	if link.user != 0 {
		user, epoch = sql.NullInt64{Int64: link.user, Valid: true}, sql.NullInt64{Int64: link.epoch, Valid: true}
	}
	hash := sha256.Sum256([]byte(state))
	if _, err := s.db.ExecContext(ctx, "INSERT INTO oidc_state (state_hash, provider, nonce, code_verifier, link_user_id, link_epoch, reauth, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		hash[:], name, nonce, verifier, user, epoch, link.reauth, now.Add(OIDCStateTTL).UTC()); err != nil {
		return OIDCStart{}, fmt.Errorf("store OIDC state: %w", err)
	}
	opts := []oauth2.AuthCodeOption{oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)}
	if link.reauth {
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "login"), oauth2.SetAuthURLParam("max_age", "0"))
	}
	return OIDCStart{AuthorizationURL: e.oauth.AuthCodeURL(state, opts...), State: state,
		Secure: strings.HasPrefix(p.RedirectURL, "https:")}, nil
}

var errInvalidState = fault.Invalidf("INVALID_STATE",
	"this sign-in is unknown, expired, already finished or was begun in another browser; start it again")

// oidcState is what StartOIDC kept of a sign-in.
type oidcState struct {
	provider, nonce, verifier string
	link                      oidcLink
	expires                   time.Time
}

// takeState returns the sign-in state and deletes it: a state serves once.
func (s *Service) takeState(ctx context.Context, state string) (oidcState, error) {
	hash := sha256.Sum256([]byte(state))
	var st oidcState
	var user, epoch sql.NullInt64
	err := s.db.QueryRowContext(ctx, "SELECT provider, nonce, code_verifier, link_user_id, link_epoch, reauth, expires_at FROM oidc_state WHERE state_hash = ?", hash[:]).
		Scan(&st.provider, &st.nonce, &st.verifier, &user, &epoch, &st.link.reauth, &st.expires)
	if errors.Is(err, sql.ErrNoRows) {
		return oidcState{}, errInvalidState
	}
	if err != nil {
		return oidcState{}, err
	}
	res, err := s.db.ExecContext(ctx, "DELETE FROM oidc_state WHERE state_hash = ?", hash[:])
	if err != nil {
		return oidcState{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 { // another callback took it meanwhile
		return oidcState{}, errors.Join(err, errInvalidState)
	}
	st.link.user, st.link.epoch = user.Int64, epoch.Int64
	return st, nil
}

// OIDCSignIn is a finished sign-in: the token minted, for whom, and whether that user was made (Created) or the
// identity attached to an account that existed before (Linked) by this sign-in.
type OIDCSignIn struct {
	Token
	UserID  int64
	Created bool
	Linked  bool
}

// oidcClaims is what a sign-in learnt of the person from the ID token and the userinfo endpoint.
type oidcClaims struct {
	Subject           string
	Email             string // normalized; "" when the provider gave none or not an address
	EmailVerified     bool
	PreferredUsername string
}

// FinishOIDC finishes a sign-in the provider sent back to the callback with query (code and state, or error), in
// the browser whose OIDCStateCookie is cookie. The state is checked (and spent) before anything else, then the
// code is exchanged with the PKCE verifier, the ID token verified (signature, issuer, audience, expiry) and its
// nonce compared; the e-mail comes from the ID token or the userinfo endpoint, whose sub must be the token's.
func (s *Service) FinishOIDC(ctx context.Context, name string, query url.Values, cookie string) (OIDCSignIn, error) {
	p, err := s.oidcProvider(name)
	if err != nil {
		return OIDCSignIn{}, err
	}
	state := query.Get("state")
	if state == "" || subtle.ConstantTimeCompare([]byte(state), []byte(cookie)) != 1 {
		return OIDCSignIn{}, errInvalidState
	}
	st, err := s.takeState(ctx, state)
	if err != nil {
		return OIDCSignIn{}, err
	}
	now := s.cfg.Now()
	if st.provider != name || !now.Before(st.expires) {
		return OIDCSignIn{}, errInvalidState
	}
	if denied := query.Get("error"); denied != "" {
		return OIDCSignIn{}, fault.Invalidf("OIDC_DENIED", "the identity provider did not sign you in (%.64s)", denied)
	}
	code := query.Get("code")
	if code == "" {
		return OIDCSignIn{}, fault.Invalidf("MISSING_CODE", "query parameter code is required")
	}
	e, err := p.endpoints(ctx, now)
	if err != nil {
		return OIDCSignIn{}, err
	}
	claims, err := p.exchange(ctx, e, code, st)
	if fe, ok := fault.As(err); ok && fe.Code == "INVALID_ID_TOKEN" {
		s.cfg.Logger.InfoContext(ctx, "ID token refused", "provider", name, "err", fe.Err)
	}
	if err != nil {
		return OIDCSignIn{}, err
	}
	return s.signInIdentity(ctx, name, claims, st.link)
}

// errInvalidIDToken refuses an ID token. The reason is logged (FinishOIDC), not answered: it would help only a
// forger.
func errInvalidIDToken(cause error) error {
	return &fault.Error{Kind: fault.Unauthenticated, Code: "INVALID_ID_TOKEN", Err: cause,
		Message: "the identity provider's ID token is not valid for this site (signature, issuer, audience or expiry); sign in again"}
}

// exchange trades the code for tokens and returns who they say signed in.
func (p *oidcProvider) exchange(ctx context.Context, e *oidcEndpoints, code string, st oidcState) (oidcClaims, error) {
	ctx = oidc.ClientContext(ctx, p.client)
	tok, err := e.oauth.Exchange(ctx, code, oauth2.VerifierOption(st.verifier))
	if err != nil {
		var refused *oauth2.RetrieveError
		if errors.As(err, &refused) && refused.Response != nil && refused.Response.StatusCode < 500 {
			return oidcClaims{}, fault.Invalidf("INVALID_CODE", "the identity provider refused the authorization code (%.64s); sign in again", refused.ErrorCode)
		}
		return oidcClaims{}, errProviderDown(p.Name, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return oidcClaims{}, errInvalidIDToken(errors.New("the provider sent none"))
	}
	var down error
	idToken, err := e.verifier.Verify(context.WithValue(ctx, keysDown{}, &down), raw)
	if down != nil {
		return oidcClaims{}, errProviderDown(p.Name, down)
	}
	if err != nil {
		return oidcClaims{}, errInvalidIDToken(err)
	}
	// go-oidc leaves the nonce to its caller.
	if subtle.ConstantTimeCompare([]byte(idToken.Nonce), []byte(st.nonce)) != 1 {
		return oidcClaims{}, fault.Invalidf("INVALID_NONCE", "the ID token's nonce is not this sign-in's; start it again")
	}
	var c struct {
		Email             string `json:"email"`
		EmailVerified     bool   `json:"email_verified"`
		PreferredUsername string `json:"preferred_username"`
		AuthTime          int64  `json:"auth_time"`
	}
	if err := idToken.Claims(&c); err != nil {
		return oidcClaims{}, errInvalidIDToken(err)
	}
	// A fresh sign-in was asked for (max_age=0): a provider that answered from an older session of the browser
	// does not count (OIDC Core §3.1.2.1 makes auth_time required then).
	if begun := st.expires.Add(-OIDCStateTTL - authTimeSkew); st.link.reauth && time.Unix(c.AuthTime, 0).Before(begun) {
		return oidcClaims{}, fault.Unauthenticatedf("REAUTHENTICATION_REQUIRED", "the identity provider did not ask you to sign in again; start linking again")
	}
	// Many providers (the test one too) give the e-mail only at the userinfo endpoint; its answer counts only for the
	// subject the ID token names (OIDC Core §5.3.2).
	if e.provider.UserInfoEndpoint() != "" {
		info, err := e.provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			return oidcClaims{}, errProviderDown(p.Name, err)
		}
		if info.Subject != idToken.Subject {
			return oidcClaims{}, errInvalidIDToken(errors.New("the userinfo endpoint names another subject"))
		}
		if info.Email != "" {
			c.Email, c.EmailVerified = info.Email, info.EmailVerified
		}
		var extra struct {
			PreferredUsername string `json:"preferred_username"`
		}
		if err := info.Claims(&extra); err == nil && extra.PreferredUsername != "" {
			c.PreferredUsername = extra.PreferredUsername
		}
	}
	return oidcClaims{Subject: idToken.Subject, Email: normalizeEmail(c.Email), EmailVerified: c.EmailVerified,
		PreferredUsername: c.PreferredUsername}, nil
}

// normalizeEmail returns the address as NormalizeEmail spells it, or "" when it is not one: one spelling per
// address, so that linking by address never takes a look-alike for an account's.
func normalizeEmail(raw string) string {
	addr, err := NormalizeEmail(raw)
	if err != nil {
		return ""
	}
	return addr
}

func identityHash(provider, subject string) []byte {
	h := sha256.Sum256([]byte(provider + "\x00" + subject))
	return h[:]
}

var errIdentityTaken = fault.Conflictf("IDENTITY_TAKEN", "this identity is linked to another account")

// signInIdentity finds or makes the account of the identity (provider, claims.Subject) and mints its token:
//   - an identity already linked signs in as its account (while signed in as another: 409 IDENTITY_TAKEN);
//   - a new identity while signed in (link.user) is linked to that account, while the session that asked lasts;
//   - else, an e-mail the provider verified that an account has verified too links to that account;
//   - else a user is made, without a password, with the provider's verified e-mail as theirs.
//
// An e-mail the provider has not verified is refused (403 EMAIL_NOT_VERIFIED) when it would make or link an account.
func (s *Service) signInIdentity(ctx context.Context, provider string, c oidcClaims, link oidcLink) (OIDCSignIn, error) {
	key := identityHash(provider, c.Subject)
	// Two first sign-ins of one identity at once: the second's insert fails on the identity's key, and it goes round
	// again to find the identity the first made.
	for attempt := 0; ; attempt++ {
		var owner int64
		err := s.db.QueryRowContext(ctx, "SELECT user_id FROM user_identity WHERE identity_hash = ?", key).Scan(&owner)
		switch {
		case err == nil:
			if link.user != 0 && owner != link.user {
				return OIDCSignIn{}, errIdentityTaken
			}
			return s.mintFor(ctx, OIDCSignIn{UserID: owner})
		case !errors.Is(err, sql.ErrNoRows):
			return OIDCSignIn{}, err
		case attempt == 2:
			return OIDCSignIn{}, fault.Unavailablef(nil, "IDENTITY_BUSY", "this identity is being linked by another sign-in; try again")
		}
		out, err := s.placeIdentity(ctx, provider, key, c, link)
		if errors.Is(err, errRaced) {
			continue
		}
		if err != nil {
			return OIDCSignIn{}, err
		}
		return s.mintFor(ctx, out)
	}
}

// errRaced is another sign-in of the same identity that linked it first.
var errRaced = errors.New("identity linked meanwhile")

// placeIdentity links a new identity to an account, or makes one for it.
func (s *Service) placeIdentity(ctx context.Context, provider string, key []byte, c oidcClaims, link oidcLink) (OIDCSignIn, error) {
	if link.user != 0 {
		return OIDCSignIn{UserID: link.user, Linked: true}, s.linkIdentity(ctx, provider, key, c, link.user, &link.epoch)
	}
	if c.Email != "" && !c.EmailVerified {
		return OIDCSignIn{}, &fault.Error{Kind: fault.Forbidden, Code: "EMAIL_NOT_VERIFIED",
			Message: "the identity provider has not verified your e-mail address; verify it there, or sign in with your password and link this identity from your account page"}
	}
	if c.Email != "" {
		var holder int64
		err := s.db.QueryRowContext(ctx, "SELECT user_id FROM users WHERE email = ? AND deleted_at IS NULL", c.Email).Scan(&holder)
		if err == nil {
			return OIDCSignIn{UserID: holder, Linked: true}, s.linkIdentity(ctx, provider, key, c, holder, nil)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return OIDCSignIn{}, err
		}
	}
	id, err := s.createForIdentity(ctx, provider, key, c)
	return OIDCSignIn{UserID: id, Created: true}, err
}

// linkIdentity links the identity to the account userID, if it is not deleted and, when epoch is not nil, while
// its token epoch is still *epoch (the session that asked for the link has not ended: 401 otherwise). The user's
// row is held for share meanwhile, so that an epoch bump waits for the link, or the link sees it. The account's
// verified address is mailed a notice in the same transaction: a link its owner did not make is a way in.
func (s *Service) linkIdentity(ctx context.Context, provider string, key []byte, c oidcClaims, userID int64, epoch *int64) error {
	err := s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		var name string
		var current int64
		var deleted sql.NullTime
		var email sql.NullString
		err := tx.QueryRowContext(ctx, "SELECT username, token_epoch, deleted_at, email FROM users WHERE user_id = ?"+s.db.ForShare(), userID).
			Scan(&name, &current, &deleted, &email)
		if errors.Is(err, sql.ErrNoRows) || err == nil && (deleted.Valid || epoch != nil && current != *epoch) {
			return errSessionEnded
		} else if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO user_identity (identity_hash, provider, subject, user_id, email, linked_at) VALUES (?, ?, ?, ?, ?, ?)",
			key, provider, c.Subject, userID, nullString(c.Email), s.cfg.Now().UTC()); err != nil {
			return err
		}
		if !email.Valid {
			return nil
		}
		return s.emitMail(emit, userID, s.linkedMail(name, email.String, provider, c.Email))
	})
	if sqldb.IsDuplicate(err) {
		return errRaced
	}
	return err
}

// linkedMail tells an account's owner that an identity at provider (known there as identityEmail, if any) now
// signs in to their account.
func (s *Service) linkedMail(username, addr, provider, identityEmail string) outMail {
	who := "an account at " + provider
	if identityEmail != "" {
		who += " (" + identityEmail + ")"
	}
	account := s.link("/account")
	text, body := paragraphs(account,
		"Hello "+username+",",
		who+" was connected to your account: it can now sign in as you.",
		"If you did not do this, sign in, remove it and end every session on your account page, and change your password:",
		account)
	return outMail{event.MailNotification, addr, "A sign-in was connected to your account", text, body}
}

// errIdentityNotFound answers the removal of an identity the user does not have.
var errIdentityNotFound = fault.NotFoundf("IDENTITY_NOT_FOUND", "your account has no identity at this provider")

// UnlinkIdentity removes the user's identities at provider, unless they are the account's last way to sign in (no
// password and no other identity: 409 LAST_SIGN_IN).
func (s *Service) UnlinkIdentity(ctx context.Context, userID int64, provider string) error {
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		var hash string
		err := tx.QueryRowContext(ctx, "SELECT password_hash FROM users WHERE user_id = ? AND deleted_at IS NULL"+s.db.ForUpdate(), userID).Scan(&hash)
		if errors.Is(err, sql.ErrNoRows) {
			return errIdentityNotFound
		} else if err != nil {
			return err
		}
		var here, elsewhere int
		if err := tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(CASE WHEN provider = ? THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN provider = ? THEN 0 ELSE 1 END), 0) FROM user_identity WHERE user_id = ?",
			provider, provider, userID).Scan(&here, &elsewhere); err != nil {
			return err
		}
		switch {
		case here == 0:
			return errIdentityNotFound
		case hash == "" && elsewhere == 0:
			return fault.Conflictf("LAST_SIGN_IN", "this is the only way to sign in to your account: set a password or connect another provider first")
		}
		_, err = tx.ExecContext(ctx, "DELETE FROM user_identity WHERE user_id = ? AND provider = ?", userID, provider)
		return err
	})
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// createForIdentity makes a user for a new identity, in one transaction with the identity and, when the provider
// verified an e-mail no account has, that address as the user's verified one (and its USER_EMAIL_VERIFIED). The
// username comes from the provider's preferred username or the e-mail's local part, with digits added when taken.
func (s *Service) createForIdentity(ctx context.Context, provider string, key []byte, c oidcClaims) (int64, error) {
	hint := c.PreferredUsername
	if hint == "" {
		hint = c.Email
	}
	base := usernameBase(hint)
	email := ""
	if c.EmailVerified {
		email = c.Email
	}
	for attempt := 0; attempt < 10; attempt++ {
		name := base
		if attempt > 0 {
			digits := fmt.Sprint(randomDigits(min(2+attempt, 9)))
			name = base[:min(len(base), MaxUsername-len(digits))] + digits
		}
		if _, _, err := s.byName(ctx, name); err == nil {
			continue
		} else if !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
		id, err := s.ids.Next()
		if err != nil {
			return 0, snowflake.Unavailable(err)
		}
		created := apijson.Millis(snowflake.Timestamp(id))
		err = s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
			version := 0
			if email != "" {
				version = 1
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO users (user_id, username, password_hash, role, created_at, email, email_version) VALUES (?, ?, '', ?, ?, ?, ?)",
				id, name, string(auth.RoleUser), created, nullString(email), version); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO user_identity (identity_hash, provider, subject, user_id, email, linked_at) VALUES (?, ?, ?, ?, ?, ?)",
				key, provider, c.Subject, id, nullString(c.Email), s.cfg.Now().UTC()); err != nil {
				return err
			}
			if email == "" {
				return nil
			}
			return emit(event.UserEmailVerified, id, event.EmailVerified{UserID: apijson.ID(id), Email: email, EmailVersion: 1,
				At: apijson.Time(s.cfg.Now())})
		})
		if err == nil {
			return id, nil
		}
		if !sqldb.IsDuplicate(err) {
			return 0, fmt.Errorf("create user for identity: %w", err)
		}
		// Which key was taken meanwhile: the identity (another sign-in of it), the address, or the name.
		var n int
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM user_identity WHERE identity_hash = ?", key).Scan(&n); err != nil {
			return 0, err
		} else if n > 0 {
			return 0, errRaced
		}
		if email != "" {
			if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM users WHERE email = ?", email).Scan(&n); err != nil {
				return 0, err
			} else if n > 0 {
				email = ""
				attempt--
			}
		}
	}
	return 0, fault.Conflictf("USERNAME_TAKEN", "no free username was found for this identity; try again")
}

// usernameBase turns a provider's preferred username or e-mail into a username: its part before any @, lower-cased,
// every run of other characters than a-z, 0-9 and _ made one _, cut to MaxUsername, and "user" when too short.
func usernameBase(hint string) string {
	hint, _, _ = strings.Cut(hint, "@")
	var b strings.Builder
	for _, r := range strings.ToLower(hint) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		case !strings.HasSuffix(b.String(), "_"):
			b.WriteByte('_')
		}
	}
	name := strings.Trim(b.String(), "_")
	name = name[:min(len(name), MaxUsername)]
	if len(name) < MinUsername {
		return "user"
	}
	return name
}

// randomDigits returns a random number of exactly n decimal digits (n ≤ 9).
func randomDigits(n int) int64 {
	lo := int64(1)
	for range n - 1 {
		lo *= 10
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return lo + int64(v%uint64(9*lo))
}

// mintFor mints the token of the signed-in user, at their token epoch: 401 BAD_CREDENTIALS for a deleted account,
// 403 BANNED for a banned one, as a password sign-in answers.
func (s *Service) mintFor(ctx context.Context, out OIDCSignIn) (OIDCSignIn, error) {
	var role string
	var epoch int64
	var deleted sql.NullTime
	err := s.db.QueryRowContext(ctx, "SELECT role, token_epoch, deleted_at FROM users WHERE user_id = ?", out.UserID).Scan(&role, &epoch, &deleted)
	if errors.Is(err, sql.ErrNoRows) || err == nil && deleted.Valid {
		return OIDCSignIn{}, errBadCredentials
	}
	if err != nil {
		return OIDCSignIn{}, err
	}
	r, err := auth.ParseRole(role)
	if err != nil {
		return OIDCSignIn{}, fmt.Errorf("user %d: %w", out.UserID, err)
	}
	if s.cfg.Standing != nil {
		_, ban, err := s.cfg.Standing.Lookup(out.UserID)
		if err != nil {
			return OIDCSignIn{}, err
		}
		if ban != nil {
			return OIDCSignIn{}, auth.Banned(*ban)
		}
	}
	token, expires, err := s.keys.Sign(auth.Principal{UserID: out.UserID, Role: r, TokenEpoch: epoch})
	if err != nil {
		return OIDCSignIn{}, err
	}
	out.Token = Token{AccessToken: token, ExpiresAt: expires}
	return out, nil
}
