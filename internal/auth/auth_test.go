package auth

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"board/internal/fault"
	"board/internal/polltest"
)

// keyServer serves a JWK Set of keys at /jwks and counts the fetches.
type keyServer struct {
	mu      sync.Mutex
	keys    []Key
	fetches atomic.Int64
	down    atomic.Bool
	srv     *httptest.Server
}

func newKeyServer(t *testing.T, keys ...Key) *keyServer {
	ks := &keyServer{keys: keys}
	ks.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ks.fetches.Add(1)
		if ks.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		ks.mu.Lock()
		defer ks.mu.Unlock()
		set := jose.JSONWebKeySet{}
		for _, k := range ks.keys {
			set.Keys = append(set.Keys, k.PublicJWK())
		}
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(ks.srv.Close)
	return ks
}

func (ks *keyServer) add(k Key) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.keys = append(ks.keys, k)
}

func (ks *keyServer) verifier(cfg VerifierConfig) *Verifier {
	if cfg.MinRefresh == 0 {
		cfg.MinRefresh = time.Millisecond
	}
	return NewVerifier(JWKS(ks.srv.Client(), ks.srv.URL), cfg)
}

func newTestKey(t *testing.T) Key {
	t.Helper()
	k, err := NewKey(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sign(t *testing.T, k Key, p Principal, now time.Time, ttl time.Duration) string {
	t.Helper()
	tok, _, err := Sign(k, p, now, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func wantRejected(t *testing.T, what string, p Principal, err error) {
	t.Helper()
	fe, ok := fault.As(err)
	if !ok || fe.Kind != fault.Unauthenticated || fe.Code != "UNAUTHENTICATED" {
		t.Errorf("%s: verified as %+v, err %v; want 401 UNAUTHENTICATED", what, p, err)
	}
}

func TestVerifyGoodToken(t *testing.T) {
	k := newTestKey(t)
	v := newKeyServer(t, k).verifier(VerifierConfig{})
	want := Principal{UserID: 42, Role: RoleModerator}
	got, err := v.Verify(context.Background(), sign(t, k, want, time.Now(), time.Hour))
	if err != nil || got != want {
		t.Fatalf("Verify = %+v, %v; want %+v", got, err, want)
	}
}

// Every way a token can lie is one answer: 401, without saying which check failed.
func TestVerifyRejects(t *testing.T) {
	k, stranger := newTestKey(t), newTestKey(t)
	v := newKeyServer(t, k).verifier(VerifierConfig{})
	ctx := context.Background()
	good := sign(t, k, Principal{UserID: 7, Role: RoleUser}, time.Now(), time.Hour)
	header, payload, _ := strings.Cut(good, ".")
	payload, sig, _ := strings.Cut(payload, ".")
	enc := base64.RawURLEncoding.EncodeToString

	// A payload made a moderator's, under the original signature.
	var c map[string]any
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	_ = json.Unmarshal(raw, &c)
	c["role"] = "moderator"
	tampered, _ := json.Marshal(c)

	pub := k.Private.Public().(ed25519.PublicKey)
	hs256, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(pub)},
		(&jose.SignerOptions{}).WithHeader("kid", k.ID))
	if err != nil {
		t.Fatal(err)
	}
	confused, err := jwt.Signed(hs256).Claims(jwt.Claims{Subject: "7", IssuedAt: jwt.NewNumericDate(time.Now()),
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	noneHeader := enc([]byte(`{"alg":"none","kid":"` + k.ID + `","typ":"JWT"}`))

	// A token signed by an unknown key under the known key's id: a forged signature.
	forgedKey := stranger
	forgedKey.ID = k.ID

	noRole, err := jwt.Signed(mustSigner(t, k)).Claims(jwt.Claims{Subject: "7", IssuedAt: jwt.NewNumericDate(time.Now()),
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	noExpiry, err := jwt.Signed(mustSigner(t, k)).Claims(map[string]any{"sub": "7", "role": "user", "iat": time.Now().Unix()}).Serialize()
	if err != nil {
		t.Fatal(err)
	}

	cases := map[string]string{
		"empty":               "",
		"garbage":             "not.a.token",
		"tampered payload":    header + "." + enc(tampered) + "." + sig,
		"forged signature":    sign(t, forgedKey, Principal{UserID: 7, Role: RoleUser}, time.Now(), time.Hour),
		"unknown key id":      sign(t, stranger, Principal{UserID: 7, Role: RoleUser}, time.Now(), time.Hour),
		"expired":             sign(t, k, Principal{UserID: 7, Role: RoleUser}, time.Now().Add(-2*time.Hour), time.Hour),
		"issued in future":    sign(t, k, Principal{UserID: 7, Role: RoleUser}, time.Now().Add(time.Hour), time.Hour),
		"alg none":            noneHeader + "." + payload + ".",
		"alg none with sig":   noneHeader + "." + payload + "." + sig,
		"HS256 public key":    confused,
		"no role":             noRole,
		"no expiry":           noExpiry,
		"subject not an id":   signClaims(t, k, map[string]any{"sub": "alice", "role": "user"}),
		"subject zero":        signClaims(t, k, map[string]any{"sub": "0", "role": "user"}),
		"unknown role":        signClaims(t, k, map[string]any{"sub": "7", "role": "admin"}),
		"signature stripped":  header + "." + payload + ".",
		"two signatures json": `{"payload":"` + payload + `","signatures":[]}`,
	}
	for name, tok := range cases {
		p, err := v.Verify(ctx, tok)
		wantRejected(t, name, p, err)
	}
}

func mustSigner(t *testing.T, k Key) jose.Signer {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: k.Private, KeyID: k.ID}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signClaims signs claims with iat and exp of now and an hour on, besides those given.
func signClaims(t *testing.T, k Key, c map[string]any) string {
	t.Helper()
	c["iat"], c["exp"] = time.Now().Unix(), time.Now().Add(time.Hour).Unix()
	tok, err := jwt.Signed(mustSigner(t, k)).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A token's expiry is forgiven only the clock leeway.
func TestVerifyExpiryLeeway(t *testing.T) {
	k := newTestKey(t)
	now := time.Now()
	clock := now
	v := newKeyServer(t, k).verifier(VerifierConfig{Now: func() time.Time { return clock }})
	tok := sign(t, k, Principal{UserID: 1, Role: RoleUser}, now, time.Minute)
	clock = now.Add(time.Minute + clockLeeway - time.Second)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Errorf("inside the leeway: %v", err)
	}
	clock = now.Add(time.Minute + clockLeeway + time.Second)
	p, err := v.Verify(context.Background(), tok)
	wantRejected(t, "past the leeway", p, err)
}

// Keys are fetched once and cached: many tokens, one fetch. A token of a key id not yet known (a rotation) makes
// the verifier fetch again, and then it verifies.
func TestVerifierCachesAndRefreshesOnUnknownKeyID(t *testing.T) {
	old := newTestKey(t)
	ks := newKeyServer(t, old)
	v := ks.verifier(VerifierConfig{})
	ctx := context.Background()
	for i := range 100 {
		if _, err := v.Verify(ctx, sign(t, old, Principal{UserID: int64(i + 1), Role: RoleUser}, time.Now(), time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if n := ks.fetches.Load(); n != 1 {
		t.Errorf("%d fetches for 100 tokens of one key, want 1", n)
	}
	rotated := newTestKey(t)
	ks.add(rotated)
	if _, err := v.Verify(ctx, sign(t, rotated, Principal{UserID: 1, Role: RoleUser}, time.Now(), time.Hour)); err != nil {
		t.Fatalf("token of the rotated key: %v", err)
	}
	if _, err := v.Verify(ctx, sign(t, old, Principal{UserID: 1, Role: RoleUser}, time.Now(), time.Hour)); err != nil {
		t.Errorf("token of the old key after the rotation: %v", err)
	}
	if n := ks.fetches.Load(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
}

// A flood of tokens with made-up key ids costs one fetch per MinRefresh, shared by the requests waiting for it.
func TestVerifierSpacesFetches(t *testing.T) {
	k := newTestKey(t)
	ks := newKeyServer(t, k)
	v := ks.verifier(VerifierConfig{MinRefresh: 200 * time.Millisecond})
	ctx := context.Background()
	stranger := newTestKey(t)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			s := stranger
			s.ID = "made-up-" + string(rune('a'+i%26))
			_, err := v.Verify(ctx, sign(t, s, Principal{UserID: 1, Role: RoleUser}, time.Now(), time.Hour))
			wantRejected(t, "made-up key id", Principal{}, err)
		})
	}
	wg.Wait()
	// The 50 ran within well under a second; concurrent misses share a fetch and the next waits its turn.
	if n := ks.fetches.Load(); n > 10 {
		t.Errorf("%d fetches for 50 tokens of unknown key ids", n)
	}
	t.Logf("%d fetches for 50 concurrent tokens with unknown key ids", ks.fetches.Load())
}

// Keys that cannot be fetched: a token of an unknown key id gets 503 (the verifier cannot tell), while tokens of keys
// already cached keep verifying, even past MaxAge.
func TestVerifierWithTheKeysDown(t *testing.T) {
	k := newTestKey(t)
	ks := newKeyServer(t, k)
	clock := time.Now()
	v := ks.verifier(VerifierConfig{MaxAge: time.Minute, Now: func() time.Time { return clock }})
	ctx := context.Background()
	tok := sign(t, k, Principal{UserID: 1, Role: RoleUser}, clock, 2*time.Hour)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	ks.down.Store(true)
	clock = clock.Add(time.Hour) // the cached keys are stale: the verifier tries again, fails, and keeps them
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Errorf("cached key while the keys are down: %v", err)
	}
	polltest.Until(t, 10*time.Second, func() (bool, string) { // the fetch behind the request was made
		n := ks.fetches.Load()
		return n >= 2, fmt.Sprintf("%d key fetches, want the one behind the request too (2)", n)
	})
	_, err := v.Verify(ctx, sign(t, newTestKey(t), Principal{UserID: 1, Role: RoleUser}, clock, time.Hour))
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.Unavailable {
		t.Errorf("unknown key id while the keys are down: %v, want 503", err)
	}
}

// The JWK Set holds public keys only; keys that are not Ed25519 signing keys are skipped, not fatal.
func TestJWKS(t *testing.T) {
	k := newTestKey(t)
	b, err := json.Marshal(k.PublicJWK())
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	_ = json.Unmarshal(b, &fields)
	if _, ok := fields["d"]; ok || fields["kty"] != "OKP" || fields["crv"] != "Ed25519" || fields["alg"] != "EdDSA" || fields["kid"] != k.ID {
		t.Errorf("public JWK = %s", b)
	}

	private, _ := json.Marshal(jose.JSONWebKey{Key: k.Private, KeyID: "private", Algorithm: "EdDSA"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"keys":[` + string(b) + `,` + string(private) +
			`,{"kty":"oct","k":"c2VjcmV0","kid":"hmac","alg":"HS256"},{"kty":"OKP","crv":"Ed25519","x":"short","kid":"bad","alg":"EdDSA"},"junk"]}`))
	}))
	defer srv.Close()
	keys, err := JWKS(srv.Client(), srv.URL)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[k.ID] == nil {
		t.Errorf("keys = %v, want only %s", keys, k.ID)
	}
}

func TestOwnershipRules(t *testing.T) {
	alice := NewContext(context.Background(), Principal{UserID: 1, Role: RoleUser})
	mod := NewContext(context.Background(), Principal{UserID: 9, Role: RoleModerator})
	anon := context.Background()
	kind := func(err error) fault.Kind { return fault.KindOf(err) }
	checks := []struct {
		what string
		err  error
		want fault.Kind
	}{
		{"alice acts as herself", ActAs(alice, 1), 0},
		{"alice acts as bob", ActAs(alice, 2), fault.Forbidden},
		{"a moderator acts as bob", ActAs(mod, 2), fault.Forbidden},
		{"nobody acts", ActAs(anon, 1), fault.Unauthenticated},
		{"alice changes her own", MayChange(alice, 1), 0},
		{"alice changes bob's", MayChange(alice, 2), fault.Forbidden},
		{"a moderator changes bob's", MayChange(mod, 2), 0},
		{"nobody changes", MayChange(anon, 1), fault.Unauthenticated},
	}
	for _, c := range checks {
		if got := kind(c.err); got != c.want {
			t.Errorf("%s: %v, want kind %d", c.what, c.err, c.want)
		}
	}
	if id, err := Writer(alice, 0); id != 1 || err != nil {
		t.Errorf("Writer(alice, omitted) = %d, %v", id, err)
	}
	if _, err := Writer(alice, 2); kind(err) != fault.Forbidden {
		t.Errorf("Writer(alice, bob) = %v", err)
	}
	if _, err := Writer(anon, 1); !errors.Is(err, ErrNoToken) {
		t.Errorf("Writer(nobody) = %v", err)
	}
}

// BenchmarkVerify is the cost a write pays for its token: the first time, parsing and one Ed25519 verification with
// a cached key; again, a lookup of the token already verified.
func BenchmarkVerify(b *testing.B) {
	k, err := NewKey(time.Now())
	if err != nil {
		b.Fatal(err)
	}
	pub := k.Private.Public().(ed25519.PublicKey)
	tok, _, err := Sign(k, Principal{UserID: 42, Role: RoleUser}, time.Now(), time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			parsed, _, err := parse(tok)
			if err == nil {
				_, _, err = verify(parsed, pub, time.Now())
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("again", func(b *testing.B) {
		keys := map[string]ed25519.PublicKey{k.ID: pub}
		v := NewVerifier(func(context.Context) (map[string]ed25519.PublicKey, error) { return keys, nil }, VerifierConfig{})
		ctx := context.Background()
		for b.Loop() {
			if _, err := v.Verify(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A token verified before is answered from memory, but not once its key is withdrawn: once the keys are fetched
// again (after MaxAge) without it, the token is refused.
func TestVerifiedTokenGoesWithItsKey(t *testing.T) {
	k, other := newTestKey(t), newTestKey(t)
	ks := newKeyServer(t, k, other)
	clock := time.Now()
	v := ks.verifier(VerifierConfig{MaxAge: time.Minute, Now: func() time.Time { return clock }})
	tok := sign(t, k, Principal{UserID: 3, Role: RoleUser}, clock, time.Hour)
	ctx := context.Background()
	for range 3 {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := ks.fetches.Load(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
	ks.mu.Lock()
	ks.keys = []Key{other} // k withdrawn
	ks.mu.Unlock()
	clock = clock.Add(2 * time.Minute)
	// The first request after MaxAge is answered from the stale keys while they are fetched again behind it.
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 10*time.Second, func() (bool, string) {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.keys[k.ID] == nil, "the withdrawn key " + k.ID + " is still cached"
	})
	p, err := v.Verify(ctx, tok)
	wantRejected(t, "token of a withdrawn key", p, err)
}

// A token of a cached key does not wait for a stale cache's refresh: while the user service hangs, it is answered at
// once, and the keys are fetched behind it.
func TestStaleKeysAnswerAtOnce(t *testing.T) {
	k := newTestKey(t)
	keys := map[string]ed25519.PublicKey{k.ID: k.Private.Public().(ed25519.PublicKey)}
	release := make(chan struct{})
	var fetches atomic.Int64
	src := func(ctx context.Context) (map[string]ed25519.PublicKey, error) {
		if fetches.Add(1) > 1 {
			<-release // a user service that hangs until the test ends
		}
		return keys, nil
	}
	defer close(release)
	clock := time.Now()
	v := NewVerifier(src, VerifierConfig{MaxAge: time.Minute, MinRefresh: time.Millisecond, Now: func() time.Time { return clock }})
	ctx := context.Background()
	if _, err := v.Verify(ctx, sign(t, k, Principal{UserID: 1, Role: RoleUser}, clock, 2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Hour)
	for i := range 3 { // new tokens, so that none is answered from the verified tokens
		if _, err := v.Verify(ctx, sign(t, k, Principal{UserID: int64(i + 2), Role: RoleUser}, clock, time.Hour)); err != nil {
			t.Fatalf("token %d with the keys stale and their source hung: %v", i, err)
		}
	}
	polltest.Until(t, 10*time.Second, func() (bool, string) { // one fetch behind the requests, still hanging
		n := fetches.Load()
		return n == 2, fmt.Sprintf("%d key fetches, want 2: the first and one behind the requests", n)
	})
}

// Known answers only for a token Verify accepted, and only while Verify would still accept it without work.
func TestKnownOnlyAfterVerify(t *testing.T) {
	k := newTestKey(t)
	now := time.Now()
	clock := now
	ks := newKeyServer(t, k)
	v := ks.verifier(VerifierConfig{Now: func() time.Time { return clock }})
	want := Principal{UserID: 7, Role: RoleUser}
	tok := sign(t, k, want, now, time.Minute)
	if p, ok := v.Known(tok); ok {
		t.Fatalf("Known before Verify = %+v", p)
	}
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if p, ok := v.Known(tok); !ok || p != want {
		t.Fatalf("Known after Verify = %+v, %v; want %+v", p, ok, want)
	}
	clock = now.Add(time.Minute + clockLeeway + time.Second)
	if p, ok := v.Known(tok); ok {
		t.Fatalf("Known after expiry = %+v", p)
	}
}
