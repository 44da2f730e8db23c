package app

import (
	"context"
	"time"

	"board/internal/auth"
	"board/internal/snowflake"
	"board/internal/sqldb"
	"board/internal/user"
)

// UserService is the user service over its database db, for the shell: its ids come from the node reserved for
// tools. Building it loads the signing keys, generating the first when there is none.
func UserService(ctx context.Context, db *sqldb.DB) (*user.Service, error) {
	ids, err := snowflake.New(snowflake.MaxNode, nil)
	if err != nil {
		return nil, err
	}
	return user.NewService(ctx, db, ids, user.Config{})
}

// TokenMinter mints access tokens for benchmarks and tests, from the signing keys of the user database it opened
// once (on the engines, which close it). It does not reload the keys: a rotation during its life leaves it signing
// with the key it loaded, whose tokens stay valid.
type TokenMinter struct {
	ring *user.KeyRing
}

// NewTokenMinter opens the user database on e (migrating it when the configuration says so), loads its signing
// keys, generating the first if there is none, and mints tokens valid for ttl (0: user.DefaultTokenTTL).
func NewTokenMinter(ctx context.Context, e *Engines, ttl time.Duration) (*TokenMinter, error) {
	db, err := e.OpenService(ctx, "user")
	if err != nil {
		return nil, err
	}
	ring, err := user.NewKeyRing(db, user.Config{TokenTTL: ttl})
	if err != nil {
		return nil, err
	}
	if err := ring.Load(ctx); err != nil {
		return nil, err
	}
	return &TokenMinter{ring: ring}, nil
}

// Mint returns an access token for p.
func (m *TokenMinter) Mint(p auth.Principal) (string, error) {
	token, _, err := m.ring.Sign(p)
	return token, err
}
