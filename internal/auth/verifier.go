package auth

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"

	"board/internal/fault"
)

// KeySource fetches the public keys tokens are verified with, by key id.
type KeySource func(ctx context.Context) (map[string]ed25519.PublicKey, error)

// maxJWKSBytes bounds the JWK Set read from the user service: a handful of keys is a few hundred bytes.
const maxJWKSBytes = 1 << 20

// JWKS is the KeySource that reads the JWK Set at url (the user service's /.well-known/jwks.json). Keys that are
// not Ed25519 public signing keys are skipped: one odd key must not lock everyone out.
func JWKS(client *http.Client, url string) KeySource {
	return func(ctx context.Context) (map[string]ed25519.PublicKey, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		var set struct{ Keys []json.RawMessage }
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKSBytes)).Decode(&set); err != nil {
			return nil, fmt.Errorf("GET %s: %w", url, err)
		}
		keys := map[string]ed25519.PublicKey{}
		for _, raw := range set.Keys {
			var k jose.JSONWebKey
			if json.Unmarshal(raw, &k) != nil || k.KeyID == "" || k.Algorithm != string(jose.EdDSA) || !k.IsPublic() {
				continue
			}
			if pub, ok := k.Key.(ed25519.PublicKey); ok {
				keys[k.KeyID] = pub
			}
		}
		return keys, nil
	}
}

// VerifierConfig tunes a Verifier; zero values take the defaults.
type VerifierConfig struct {
	// MinRefresh spaces the fetches of the keys: a stream of tokens with made-up key ids costs one fetch per
	// MinRefresh, not one per token. Default 1 s.
	MinRefresh time.Duration
	// MaxAge is how long fetched keys are trusted before they are fetched again (behind the request that finds them
	// stale), so that a key the user service withdrew stops verifying. Default 10 min.
	MaxAge time.Duration
	// FetchTimeout bounds one fetch of the keys. Default 2 s.
	FetchTimeout time.Duration
	Now          func() time.Time
	Logger       *slog.Logger
}

// Verifier verifies access tokens locally with cached public keys, fetching them again only when a token names a
// key id it does not know (a rotation) or when they are older than MaxAge.
type Verifier struct {
	src     KeySource
	cfg     VerifierConfig
	fetches singleflight.Group

	mu      sync.Mutex
	keys    map[string]ed25519.PublicKey
	fetched time.Time // when keys were fetched; zero before the first fetch
	tried   time.Time // when the last fetch started, successful or not
	// verified remembers tokens already verified, by their exact text: a client sends one token for its whole life,
	// and a map lookup costs far less than an Ed25519 verification.
	verified map[string]verifiedToken
}

// verifiedToken is a token that verified, whom it names, and what it still depends on.
type verifiedToken struct {
	principal Principal
	kid       string
	until     time.Time // its expiry plus the clock leeway
}

// maxVerified bounds the memory of verified tokens; when full, it starts over.
const maxVerified = 10_000

// NewVerifier returns a Verifier of the keys src fetches.
func NewVerifier(src KeySource, cfg VerifierConfig) *Verifier {
	if cfg.MinRefresh <= 0 {
		cfg.MinRefresh = time.Second
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 10 * time.Minute
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Verifier{src: src, cfg: cfg}
}

// ErrBadToken is the answer to a token that is malformed, forged, signed by an unknown key or expired. The reason is
// logged at debug level only: telling a forger which check failed helps only the forger.
var ErrBadToken = fault.Unauthenticatedf("UNAUTHENTICATED", "the access token is invalid or expired")

// Verify returns whom the token acts for: 401 for a bad token, 503 when the keys cannot be fetched for a key id
// not yet known.
func (v *Verifier) Verify(ctx context.Context, raw string) (Principal, error) {
	if p, ok := v.remembered(raw); ok {
		return p, nil
	}
	tok, kid, err := parse(raw)
	if err != nil {
		return Principal{}, v.reject(ctx, err)
	}
	pub, err := v.key(ctx, kid)
	if err != nil {
		return Principal{}, err
	}
	if pub == nil {
		return Principal{}, v.reject(ctx, fmt.Errorf("%w: unknown key id %q", errBadToken, kid))
	}
	p, until, err := verify(tok, pub, v.cfg.Now())
	if err != nil {
		return Principal{}, v.reject(ctx, err)
	}
	v.remember(raw, verifiedToken{principal: p, kid: kid, until: until})
	return p, nil
}

// Known returns whom a token verified before acts for, under the same conditions as Verify, but without verifying a
// token not seen before or fetching keys: for an answer that must not wait on the user service.
func (v *Verifier) Known(raw string) (Principal, bool) { return v.remembered(raw) }

// remembered returns the principal of a token verified before, while it has not expired and its key is still among
// fresh keys (a key the user service withdrew takes its tokens with it).
func (v *Verifier) remembered(raw string) (Principal, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	t, ok := v.verified[raw]
	now := v.cfg.Now()
	if !ok || !now.Before(t.until) || v.keys[t.kid] == nil || now.Sub(v.fetched) >= v.cfg.MaxAge {
		return Principal{}, false
	}
	return t.principal, true
}

func (v *Verifier) remember(raw string, t verifiedToken) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verified == nil || len(v.verified) >= maxVerified {
		v.verified = make(map[string]verifiedToken)
	}
	v.verified[raw] = t
}

func (v *Verifier) reject(ctx context.Context, err error) error {
	v.cfg.Logger.DebugContext(ctx, "access token rejected", "err", err)
	return ErrBadToken
}

// key returns the public key kid names, nil when the user service does not list it.
func (v *Verifier) key(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	v.mu.Lock()
	pub, fresh := v.keys[kid], !v.fetched.IsZero() && v.cfg.Now().Sub(v.fetched) < v.cfg.MaxAge
	v.mu.Unlock()
	switch {
	case pub != nil && fresh:
		return pub, nil
	case pub != nil:
		// Stale but known: answer with it now and fetch the keys behind the request, so that a user service that is
		// down or slow costs writes nothing while their keys are cached.
		go v.refresh(context.WithoutCancel(ctx)) //nolint:errcheck // refresh logs its failure
		return pub, nil
	}
	err := v.refresh(ctx)
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.keys[kid] != nil:
		return v.keys[kid], nil // an older copy of the keys still answers for a key it holds
	case err != nil:
		return nil, fault.Unavailablef(err, "KEYS_UNAVAILABLE", "the token signing keys cannot be fetched; try again later")
	}
	return nil, nil
}

// refresh fetches the keys once for every caller waiting on it, no sooner than MinRefresh after the last fetch began.
func (v *Verifier) refresh(ctx context.Context) error {
	ch := v.fetches.DoChan("", func() (any, error) {
		v.mu.Lock()
		wait := v.cfg.MinRefresh - v.cfg.Now().Sub(v.tried)
		v.mu.Unlock()
		if wait > 0 {
			time.Sleep(wait)
		}
		v.mu.Lock()
		v.tried = v.cfg.Now()
		v.mu.Unlock()
		// The fetch is shared, so it runs on its own deadline rather than on the first caller's context.
		fetchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.cfg.FetchTimeout)
		defer cancel()
		keys, err := v.src(fetchCtx)
		if err != nil {
			v.cfg.Logger.WarnContext(ctx, "fetching the token signing keys failed", "err", err)
			return nil, err
		}
		v.mu.Lock()
		v.keys, v.fetched = keys, v.cfg.Now()
		v.mu.Unlock()
		return nil, nil
	})
	select {
	case res := <-ch:
		return res.Err
	case <-ctx.Done():
		return errors.Join(errors.New("waiting for the token signing keys"), ctx.Err())
	}
}
