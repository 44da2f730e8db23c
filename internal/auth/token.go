package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Key is one Ed25519 signing key of the user service, named by its key id (the tokens' kid header).
type Key struct {
	ID      string
	Private ed25519.PrivateKey
	Created time.Time
}

// NewKey generates a signing key with a random key id.
func NewKey(now time.Time) (Key, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, fmt.Errorf("generate signing key: %w", err)
	}
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Key{}, fmt.Errorf("generate key id: %w", err)
	}
	return Key{ID: base64.RawURLEncoding.EncodeToString(id[:]), Private: priv, Created: now.UTC()}, nil
}

// PublicJWK is the key's public half as a JWK: what /.well-known/jwks.json lists. It never holds the private key.
func (k Key) PublicJWK() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.Private.Public(), KeyID: k.ID, Algorithm: string(jose.EdDSA), Use: "sig"}
}

// claims are a token's claims: the registered ones, the role and the user's token epoch when it was signed (absent:
// 0, as in tokens signed before there were epochs).
type claims struct {
	jwt.Claims
	Role       Role  `json:"role"`
	TokenEpoch int64 `json:"sep,omitempty"`
}

// Sign mints an access token for p, signed with k, valid from now for ttl.
func Sign(k Key, p Principal, now time.Time, ttl time.Duration) (token string, expires time.Time, err error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: k.Private, KeyID: k.ID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("signer: %w", err)
	}
	// Whole seconds: exp is a NumericDate, and the answer's expiresAt must be the instant the token's exp names.
	now = now.Truncate(time.Second)
	expires = now.Add(ttl)
	c := claims{Claims: jwt.Claims{Subject: strconv.FormatInt(p.UserID, 10), IssuedAt: jwt.NewNumericDate(now),
		Expiry: jwt.NewNumericDate(expires)}, Role: p.Role, TokenEpoch: p.TokenEpoch}
	token, err = jwt.Signed(signer).Claims(c).Serialize()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign token: %w", err)
	}
	return token, expires, nil
}

// clockLeeway is the clock difference between the instance that signed a token and one that verifies it that is
// forgiven, both for exp and for an iat in the future.
const clockLeeway = 30 * time.Second

// errBadToken is every answer to a token that does not verify. The reason goes to the caller's log, never to the
// client: telling a forger which check failed helps only the forger.
var errBadToken = errors.New("bad token")

// parse reads a token's header: its key id, and that it claims EdDSA, the only algorithm accepted (none, HS256 with
// the public key as secret and every other substitution fail here).
func parse(raw string) (*jwt.JSONWebToken, string, error) {
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", errBadToken, err)
	}
	if len(tok.Headers) != 1 || tok.Headers[0].KeyID == "" {
		return nil, "", fmt.Errorf("%w: no key id", errBadToken)
	}
	return tok, tok.Headers[0].KeyID, nil
}

// verify checks tok's signature with pub and its claims at now, and returns whom it names and until when (its expiry
// plus the clock leeway).
func verify(tok *jwt.JSONWebToken, pub ed25519.PublicKey, now time.Time) (Principal, time.Time, error) {
	var c claims
	if err := tok.Claims(pub, &c); err != nil {
		return Principal{}, time.Time{}, fmt.Errorf("%w: %w", errBadToken, err)
	}
	if c.Expiry == nil || c.IssuedAt == nil || c.Subject == "" {
		return Principal{}, time.Time{}, fmt.Errorf("%w: exp, iat and sub are required", errBadToken)
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Time: now}, clockLeeway); err != nil {
		return Principal{}, time.Time{}, fmt.Errorf("%w: %w", errBadToken, err)
	}
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || id <= 0 {
		return Principal{}, time.Time{}, fmt.Errorf("%w: sub %q is not a user id", errBadToken, c.Subject)
	}
	role, err := ParseRole(string(c.Role))
	if err != nil {
		return Principal{}, time.Time{}, fmt.Errorf("%w: %w", errBadToken, err)
	}
	if c.TokenEpoch < 0 {
		return Principal{}, time.Time{}, fmt.Errorf("%w: negative token epoch", errBadToken)
	}
	return Principal{UserID: id, Role: role, TokenEpoch: c.TokenEpoch}, c.Expiry.Time().Add(clockLeeway), nil
}
