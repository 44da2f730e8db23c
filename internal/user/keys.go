package user

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/outbox"
	"board/internal/sqldb"
)

// Signing keys and their rotation.
//
// The keys live in the signing_key table, so that every instance signs with the same keys and publishes the same
// JWK Set. Each instance reloads them every Reload. The rule that picks the signing key and the published keys is a
// function of the key list and the clock alone, so instances that have loaded the same list agree:
//
//   - The signing key is the newest key created at least Activation ago; when no key is that old, the oldest key.
//     So a new key is published (each instance reloads within Reload, and Activation is 2×Reload) before any
//     instance signs with it, and a verifier that meets its key id for the first time finds it in the JWK Set. The
//     very first key is used at once, and two instances that both inserted a first key agree on the oldest.
//   - A key retires when a newer key becomes the signing key: at the next newer key's creation + Activation.
//   - The JWK Set lists every key that has not retired, and a retired key until TokenTTL + 1 minute after it
//     retired: a token it signed just before keeps verifying until it expires, and nobody is logged out early.
//   - Rotate deletes keys retired more than a day ago (they have been out of the JWK Set for a day).

// Defaults of Config.
const (
	DefaultTokenTTL = time.Hour
	DefaultReload   = 5 * time.Second
	// DefaultPublicURL is the site of a process run as it comes (app's --public-url).
	DefaultPublicURL = "http://localhost:8080"
	// MaxTokenTTL bounds TokenTTL: Rotate deletes keys a day after they retired, so tokens must expire sooner.
	MaxTokenTTL = 12 * time.Hour
	// retiredKept is how long after retiring a key stays in the table (Rotate deletes it then).
	retiredKept = 24 * time.Hour
	// publishSlack is how long past TokenTTL a retired key stays published: room for clock differences.
	publishSlack = time.Minute
)

// Config tunes the user service; zero values take the defaults.
type Config struct {
	TokenTTL   time.Duration // lifetime of an access token; default 1 h, at most MaxTokenTTL
	Hash       HashParams    // parameters of new password hashes; default DefaultHashParams
	Reload     time.Duration // how often the signing keys are read again; default 5 s
	Activation time.Duration // how old a key must be to sign; default 2×Reload, at least Reload
	// Limiter, when not nil, holds sign-in attempts per username to the limit SignInAccountLimit, on top of the
	// per-address limit in front of the route: an attacker with many addresses still gets few guesses at an account.
	Limiter httpio.Limiter
	// ClientAddr names the client of a request for the per-client limit OIDCLimit of the OIDC routes, as the
	// Guard's ClientAddr does for the open routes; nil means the connection's remote host.
	ClientAddr func(*http.Request) string
	// Standing, when not nil, is what the process knows of bans: a banned user's sign-in answers 403 BANNED.
	Standing httpio.Standing
	// Outbox is where Grant writes its USER_ROLE_CHANGED events, and Block and Unblock their USER_BLOCKED and
	// USER_UNBLOCKED, in the transaction that makes the change; nil: an outbox of outbox.DefaultShards without a
	// relay, whose rows wait for the service's relay to poll them.
	Outbox *outbox.Outbox
	// PublicURL is the site's address as readers reach it: the links in verification and reset mails point under
	// it. Default DefaultPublicURL.
	PublicURL string
	// UsernameGrace is how long a deleted account's username stays taken (delete.go); 0: DefaultUsernameGrace.
	UsernameGrace time.Duration
	// Exports are where an export's parts are read (export.go).
	Exports ExportOrigins
	Now     func() time.Time
	Logger  *slog.Logger
	// OIDC are the identity providers people may sign in with (oidc.go).
	OIDC []OIDCProvider
}

func (c Config) withDefaults() (Config, error) {
	if c.TokenTTL <= 0 {
		c.TokenTTL = DefaultTokenTTL
	}
	if c.Hash == (HashParams{}) {
		c.Hash = DefaultHashParams
	}
	if c.Reload <= 0 {
		c.Reload = DefaultReload
	}
	if c.Activation <= 0 {
		c.Activation = 2 * c.Reload
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.PublicURL == "" {
		c.PublicURL = DefaultPublicURL
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.TokenTTL > MaxTokenTTL:
		return c, fmt.Errorf("token TTL %v is over %v", c.TokenTTL, MaxTokenTTL)
	case c.Activation < c.Reload:
		return c, fmt.Errorf("key activation %v is shorter than the reload interval %v: instances could sign with a key others do not publish yet",
			c.Activation, c.Reload)
	}
	return c, c.Hash.valid()
}

// KeyRing holds the signing keys as last loaded from the database.
type KeyRing struct {
	db  *sqldb.DB
	cfg Config

	mu   sync.RWMutex
	keys []auth.Key // oldest first (created_at, then key id)
}

// NewKeyRing returns a key ring over db, empty until Load.
func NewKeyRing(db *sqldb.DB, cfg Config) (*KeyRing, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &KeyRing{db: db, cfg: cfg}, nil
}

// Load reads the keys, generating and storing the first one when there is none.
func (r *KeyRing) Load(ctx context.Context) error {
	keys, err := loadKeys(ctx, r.db, r.cfg.Now())
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.keys = keys
	r.mu.Unlock()
	return nil
}

// Run reloads the keys every Reload until ctx ends. A failed reload is logged and the keys loaded before stay.
func (r *KeyRing) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Reload)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		reloadCtx, cancel := context.WithTimeout(ctx, r.cfg.Reload)
		err := r.Load(reloadCtx)
		cancel()
		if err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("reloading the token signing keys failed; keeping the keys loaded before", "err", err)
		}
	}
}

// Signing returns the key to sign with now.
func (r *KeyRing) Signing() (auth.Key, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.keys) == 0 {
		return auth.Key{}, errNoKeys
	}
	return r.keys[signingIndex(r.keys, r.cfg.Now(), r.cfg.Activation)], nil
}

var errNoKeys = fault.Unavailablef(errors.New("no signing keys loaded"), "KEYS_UNAVAILABLE",
	"the token signing keys are not loaded; try again later")

// Sign mints an access token for p with the signing key, valid for the configured TokenTTL from now.
func (r *KeyRing) Sign(p auth.Principal) (token string, expires time.Time, err error) {
	return r.SignFor(p, r.cfg.TokenTTL)
}

// SignFor mints an access token for p with the signing key, valid for ttl from now.
func (r *KeyRing) SignFor(p auth.Principal, ttl time.Duration) (token string, expires time.Time, err error) {
	k, err := r.Signing()
	if err != nil {
		return "", time.Time{}, err
	}
	return auth.Sign(k, p, r.cfg.Now(), ttl)
}

// Published returns the keys the JWK Set lists now, oldest first.
func (r *KeyRing) Published() []auth.Key {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return published(r.keys, r.cfg.Now(), r.cfg.Activation, r.cfg.TokenTTL)
}

// JWKS returns the public halves of the published keys.
func (r *KeyRing) JWKS() jose.JSONWebKeySet {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, k := range r.Published() {
		set.Keys = append(set.Keys, k.PublicJWK())
	}
	return set
}

// signingIndex is the index in keys (oldest first, not empty) of the key to sign with at now.
func signingIndex(keys []auth.Key, now time.Time, activation time.Duration) int {
	for i := len(keys) - 1; i >= 0; i-- {
		if !keys[i].Created.After(now.Add(-activation)) {
			return i
		}
	}
	return 0
}

// retiredAt is when keys[i] stopped (or will stop) being a signing key: when the next newer key is activated. ok is
// false for the newest key, which has not retired.
func retiredAt(keys []auth.Key, i int, activation time.Duration) (t time.Time, ok bool) {
	if i == len(keys)-1 {
		return time.Time{}, false
	}
	return keys[i+1].Created.Add(activation), true
}

// published returns the keys of keys (oldest first) that the JWK Set lists at now.
func published(keys []auth.Key, now time.Time, activation, ttl time.Duration) []auth.Key {
	var out []auth.Key
	for i, k := range keys {
		if retired, ok := retiredAt(keys, i, activation); !ok || now.Before(retired.Add(ttl+publishSlack)) {
			out = append(out, k)
		}
	}
	return out
}

// sortKeys orders keys oldest first, ties broken by key id, so every instance sees the same order.
func sortKeys(keys []auth.Key) {
	slices.SortFunc(keys, func(a, b auth.Key) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return compareStrings(a.ID, b.ID)
	})
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// loadKeys reads every key; when there is none, it stores a first key made at now, in a transaction that reads the
// (empty) table under lock first, so that instances starting together usually agree on one first key. If two insert
// one anyway, the signing rule picks the same (the oldest) for both.
func loadKeys(ctx context.Context, db *sqldb.DB, now time.Time) ([]auth.Key, error) {
	keys, err := readKeys(ctx, db)
	if err != nil || len(keys) > 0 {
		return keys, err
	}
	first, err := auth.NewKey(apijson.Millis(now))
	if err != nil {
		return nil, err
	}
	// No locking read first: on an empty InnoDB table, concurrent gap locks make the inserts deadlock. Instances
	// that start together may each insert a first key; the oldest signs for all of them (signingIndex).
	if err := db.Transact(ctx, func(tx *sql.Tx) error { return insertKey(ctx, tx, first) }); err != nil {
		return nil, fmt.Errorf("store the first signing key: %w", err)
	}
	return readKeys(ctx, db)
}

func insertKey(ctx context.Context, tx *sql.Tx, k auth.Key) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO signing_key (key_id, private_key, created_at) VALUES (?, ?, ?)",
		k.ID, []byte(k.Private), k.Created)
	return err
}

func readKeys(ctx context.Context, db *sqldb.DB) ([]auth.Key, error) {
	rows, err := db.QueryContext(ctx, "SELECT key_id, private_key, created_at FROM signing_key")
	if err != nil {
		return nil, fmt.Errorf("read signing keys: %w", err)
	}
	defer rows.Close()
	var keys []auth.Key
	for rows.Next() {
		var k auth.Key
		var priv []byte
		if err := rows.Scan(&k.ID, &priv, &k.Created); err != nil {
			return nil, fmt.Errorf("read signing keys: %w", err)
		}
		if len(priv) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("signing key %s: %d bytes, want %d", k.ID, len(priv), ed25519.PrivateKeySize)
		}
		k.Private, k.Created = ed25519.PrivateKey(priv), k.Created.UTC()
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read signing keys: %w", err)
	}
	sortKeys(keys)
	return keys, nil
}

// Rotate stores a new signing key created at now, which every instance publishes within Reload and signs with from
// Activation after now, and deletes keys retired more than a day ago. It returns the new key.
func Rotate(ctx context.Context, db *sqldb.DB, now time.Time) (auth.Key, error) {
	k, err := auth.NewKey(apijson.Millis(now))
	if err != nil {
		return auth.Key{}, err
	}
	// The insert, the read and the deletes are apart: behind Vitess the keys are spread over shards, and a
	// transaction must stay on one. Nothing needs them together: a delete only drops a key long retired.
	if err := db.Transact(ctx, func(tx *sql.Tx) error { return insertKey(ctx, tx, k) }); err != nil {
		return auth.Key{}, fmt.Errorf("rotate the signing key: %w", err)
	}
	keys, err := readKeys(ctx, db)
	if err != nil {
		return auth.Key{}, fmt.Errorf("rotate the signing key: %w", err)
	}
	// Activation is each instance's setting, unknown here; retirements are dated with the default, which a day
	// dwarfs.
	for i, old := range keys {
		if retired, ok := retiredAt(keys, i, 2*DefaultReload); ok && now.Sub(retired) > retiredKept {
			if _, err := db.ExecContext(ctx, "DELETE FROM signing_key WHERE key_id = ?", old.ID); err != nil {
				return auth.Key{}, fmt.Errorf("rotate the signing key: delete a retired key: %w", err)
			}
		}
	}
	return k, nil
}

// Mint signs an access token for p directly with the signing keys in db (generating the first key if there is
// none), valid for ttl from now: for the shell, the README and benchmarks, which need tokens without passwords.
// Instances verify it like any token their own service signed. It loads the keys on every call; a caller minting
// many tokens keeps a KeyRing instead.
func Mint(ctx context.Context, db *sqldb.DB, p auth.Principal, ttl time.Duration, now time.Time) (token string, expires time.Time, err error) {
	ring, err := NewKeyRing(db, Config{Now: func() time.Time { return now }, TokenTTL: ttl})
	if err != nil {
		return "", time.Time{}, err
	}
	if err := ring.Load(ctx); err != nil {
		return "", time.Time{}, err
	}
	return ring.Sign(p)
}
