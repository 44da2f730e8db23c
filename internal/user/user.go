// Package user is the user service (SPEC §3.7): accounts with argon2id password hashes, sign-in that mints
// Ed25519-signed access tokens, and the signing keys every service verifies those tokens with (published as a JWK
// Set). It owns the SQL database "user" and publishes USER_ROLE_CHANGED events through its outbox, so that a role
// granted or taken back reaches every service at once (internal/standing).
package user

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the user schema and its outbox.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	return sqldb.Migrate(ctx, db, "user", migrations)
}

// Limits on input (SPEC §3.7).
const (
	MinUsername = 3
	MaxUsername = 30
	MinPassword = 8
	MaxPassword = 128 // characters
)

// User is an account. Its password hash never leaves the package.
type User struct {
	ID        int64
	Username  string // lower-case
	Role      auth.Role
	CreatedAt time.Time
	// TokenEpoch is carried by every token minted for the user: tokens of an older epoch are void.
	TokenEpoch int64
	Deleted    bool // the account is deleted (delete.go): it reads as DeletedName
}

// IDGenerator issues unique ids (a Snowflake generator in production).
type IDGenerator interface {
	Next() (int64, error)
}

// Service holds the user rules over the database.
type Service struct {
	db     *sqldb.DB
	ids    IDGenerator
	cfg    Config
	hasher *hasher
	keys   *KeyRing
	// tokenTxs counts the transactions that issued a mailed token, so that tests can tell that a reset for an
	// unknown address does the work a known one does, without timing them.
	tokenTxs atomic.Int64
	oidc     map[string]*oidcProvider // by name
}

// NewService returns the user service over db, whose schema Migrate has prepared. It makes the dummy password hash
// (one hash's time) and loads the signing keys, generating the first one when there is none.
func NewService(ctx context.Context, db *sqldb.DB, ids IDGenerator, cfg Config) (*Service, error) {
	keys, err := NewKeyRing(db, cfg)
	if err != nil {
		return nil, err
	}
	cfg = keys.cfg
	h, err := newHasher(cfg.Hash)
	if err != nil {
		return nil, err
	}
	if err := keys.Load(ctx); err != nil {
		return nil, err
	}
	if cfg.Outbox == nil {
		cfg.Outbox = outbox.New(db, outbox.DefaultShards, ids, cfg.Now, nil, nil)
	}
	providers, err := newOIDCProviders(cfg.OIDC)
	if err != nil {
		return nil, err
	}
	return &Service{db: db, ids: ids, cfg: cfg, hasher: h, keys: keys, oidc: providers}, nil
}

// Run reloads the signing keys every Reload (KeyRing.Run), deletes the expired mailed tokens every
// tokenPurgeEvery and does the OIDC sign-in's background work (runOIDC), until ctx ends.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.keys.Run(ctx) })
	wg.Go(func() { s.runOIDC(ctx) })
	s.purgeTokensEvery(ctx, tokenPurgeEvery)
	wg.Wait()
}

// NormalizeUsername checks a username and returns it lower-cased: 3..30 of [A-Za-z0-9_].
func NormalizeUsername(name string) (string, error) {
	lower, ok := lowerUsername(name)
	if !ok || len(name) < MinUsername || len(name) > MaxUsername {
		return "", fault.Invalidf("INVALID_USERNAME", "username must be %d to %d characters of a-z, 0-9 and _", MinUsername, MaxUsername)
	}
	return lower, nil
}

// lowerUsername returns name lower-cased, and whether it holds only the characters of a username, [A-Za-z0-9_].
// Only ASCII letters are lowered, so no other character can turn into one (as the Kelvin sign would under Unicode
// case folding).
func lowerUsername(name string) (string, bool) {
	out := []byte(name)
	for i, c := range out {
		switch {
		case c >= 'A' && c <= 'Z':
			out[i] = c + ('a' - 'A')
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		default:
			return "", false
		}
	}
	return string(out), true
}

// checkPassword checks a new password's length. Its message never holds the password.
func checkPassword(password string) error {
	if n := utf8.RuneCountInString(password); n < MinPassword || n > MaxPassword {
		return fault.Invalidf("INVALID_PASSWORD", "password must be %d to %d characters", MinPassword, MaxPassword)
	}
	return nil
}

func errTaken(name string) error {
	return fault.Conflictf("USERNAME_TAKEN", "username %q is taken", name)
}

func notFound(id int64) error { return fault.NotFoundf("USER_NOT_FOUND", "user %d not found", id) }

// SignUp creates a user with the role user.
func (s *Service) SignUp(ctx context.Context, username, password string) (User, error) {
	return s.Create(ctx, username, password, auth.RoleUser)
}

// Create creates a user with role: 400 for a bad username or password, 409 USERNAME_TAKEN when the name is taken in
// any case.
func (s *Service) Create(ctx context.Context, username, password string, role auth.Role) (User, error) {
	name, err := NormalizeUsername(username)
	if err != nil {
		return User{}, err
	}
	if err := checkPassword(password); err != nil {
		return User{}, err
	}
	if _, err := auth.ParseRole(string(role)); err != nil {
		return User{}, fault.Invalidf("INVALID_ROLE", "%v", err)
	}
	// Save the hash's time and memory when the name is plainly taken; the unique index decides the close calls. A
	// deleted account's name is taken until its grace has passed, and then freed here (delete.go).
	if held, _, err := s.byName(ctx, name); err == nil {
		if released, err := s.releaseName(ctx, held); err != nil || !released {
			return User{}, cmp.Or(err, errTaken(name))
		}
	} else if !errors.Is(err, sql.ErrNoRows) {
		return User{}, err
	}
	hash, err := s.hasher.hash(ctx, password)
	if err != nil {
		return User{}, err
	}
	// An id can repeat another process's only if both use one node id (tools share snowflake.MaxNode): a duplicate
	// that is not the username's gets a fresh id.
	for attempt := 0; ; attempt++ {
		id, err := s.ids.Next()
		if err != nil {
			return User{}, snowflake.Unavailable(err)
		}
		u := User{ID: id, Username: name, Role: role, CreatedAt: apijson.Millis(snowflake.Timestamp(id))}
		_, err = s.db.ExecContext(ctx, "INSERT INTO users (user_id, username, password_hash, role, created_at) VALUES (?, ?, ?, ?, ?)",
			u.ID, u.Username, hash, string(u.Role), u.CreatedAt)
		if err == nil {
			return u, nil
		}
		if !sqldb.IsDuplicate(err) {
			return User{}, fmt.Errorf("insert user: %w", err)
		}
		if _, _, err := s.byName(ctx, name); err == nil || attempt == 2 {
			return User{}, errTaken(name)
		}
	}
}

// errBadCredentials is the one answer to a sign-in with an unknown username or a wrong password.
var errBadCredentials = fault.Unauthenticatedf("BAD_CREDENTIALS", "wrong username or password")

// Token is an access token and when it expires.
type Token struct {
	AccessToken string
	ExpiresAt   time.Time
}

// SignInAccountLimit names the limit of sign-in attempts per username.
const SignInAccountLimit = "sign-in-account"

// SignIn checks a username and password and mints an access token for the user. An unknown username costs the same
// one hash as a wrong password (against the dummy hash), and both answer 401 BAD_CREDENTIALS.
func (s *Service) SignIn(ctx context.Context, username, password string) (Token, error) {
	var u User
	var hash string // "" for an unknown user: verify uses the dummy hash
	if name, err := NormalizeUsername(username); err == nil {
		if s.cfg.Limiter != nil { // known and unknown names alike, so that the limit tells nothing of which exist
			if err := s.cfg.Limiter.Allow(ctx, SignInAccountLimit, name); err != nil {
				return Token{}, err
			}
		}
		u, hash, err = s.byName(ctx, name)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return Token{}, err
		}
	}
	ok, err := s.hasher.verify(ctx, hash, password)
	if err != nil {
		return Token{}, err
	}
	if !ok || hash == "" {
		return Token{}, errBadCredentials
	}
	// Only the password's owner learns of the ban, after the same work as any sign-in.
	if s.cfg.Standing != nil {
		_, ban, err := s.cfg.Standing.Lookup(u.ID)
		if err != nil {
			return Token{}, err
		}
		if ban != nil {
			return Token{}, auth.Banned(*ban)
		}
	}
	s.rehash(ctx, u.ID, hash, password)
	return s.tokenFor(u)
}

// rehash stores a new hash of a user's password, just verified, when its hash was made with other parameters than
// the current ones. A sign-in for an unknown username costs one hash with the current parameters, so a user whose
// hash costs more or less would stand out by timing; each sign-in brings one more user to the current cost. A
// failure is logged: the sign-in itself succeeded.
func (s *Service) rehash(ctx context.Context, userID int64, old, password string) {
	if p, _, _, err := decodeHash(old); err != nil || p == s.cfg.Hash {
		return
	}
	fresh, err := s.hasher.hash(ctx, password)
	if err == nil {
		_, err = s.db.ExecContext(ctx, "UPDATE users SET password_hash = ? WHERE user_id = ? AND password_hash = ?", fresh, userID, old)
	}
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "storing a password hash with the current parameters failed", "user", userID, "err", err)
	}
}

// Get returns a user by id.
func (s *Service) Get(ctx context.Context, id int64) (User, error) {
	u, _, err := scanUser(s.db.QueryRowContext(ctx, "SELECT "+userColumns+" FROM users WHERE user_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, notFound(id)
	}
	return u, err
}

// MaxBatch is how many users one GetMany asks for at most: a page's writers.
const MaxBatch = 100

// GetMany returns the users of ids that exist, in the order of ids, each once: what a page of articles or comments
// needs to name its writers in one call. A client asks for at most MaxBatch (Routes refuses more), Blocks for up to
// MaxBlocks.
func (s *Service) GetMany(ctx context.Context, ids []int64) ([]User, error) {
	return usersIn(ctx, s, "user_id", ids, func(u User) int64 { return u.ID })
}

// ByUsernames returns the users of names (normalized already) that exist, in the order of names, each once: how
// the @mentions of a post are resolved. names are at most MaxBatch.
func (s *Service) ByUsernames(ctx context.Context, names []string) ([]User, error) {
	return usersIn(ctx, s, "username", names, func(u User) string { return u.Username })
}

// usersIn returns the users whose column is one of keys, in the order of keys, each once; keyOf is a user's value of
// the column.
func usersIn[K comparable](ctx context.Context, s *Service, column string, keys []K, keyOf func(User) K) ([]User, error) {
	if len(keys) == 0 {
		return []User{}, nil
	}
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	// By username, a deleted account is nobody: its name is not a mention's.
	query := "SELECT " + userColumns + " FROM users WHERE " + column + " IN (?" + strings.Repeat(", ?", len(keys)-1) + ")"
	if column == "username" {
		query += " AND deleted_at IS NULL"
	}
	found, err := s.users(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	byKey := make(map[K]User, len(found))
	for _, u := range found {
		byKey[keyOf(u)] = u
	}
	users := make([]User, 0, len(byKey))
	for _, k := range keys {
		if u, ok := byKey[k]; ok {
			users = append(users, u)
			delete(byKey, k)
		}
	}
	return users, nil
}

// ByPrefix returns up to limit users whose username starts with prefix (normalized already), by username: the
// suggestions of an @mention being typed.
func (s *Service) ByPrefix(ctx context.Context, prefix string, limit int) ([]User, error) {
	// _ is a LIKE wildcard; ! is not a username character.
	pattern := strings.ReplaceAll(prefix, "_", "!_") + "%"
	return s.users(ctx, "SELECT "+userColumns+" FROM users WHERE username LIKE ? ESCAPE '!' AND deleted_at IS NULL ORDER BY username LIMIT ?", pattern, limit)
}

func (s *Service) users(ctx context.Context, query string, args ...any) ([]User, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	users := []User{}
	for rows.Next() {
		u, _, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		users = append(users, u)
	}
	return users, rows.Err()
}

// ByUsername returns a user by username, in any case.
func (s *Service) ByUsername(ctx context.Context, username string) (User, error) {
	name, err := NormalizeUsername(username)
	if err != nil {
		return User{}, err
	}
	u, _, err := s.byName(ctx, name)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, fault.NotFoundf("USER_NOT_FOUND", "user %q not found", name)
	}
	return u, err
}

// Grant sets a user's role and writes a USER_ROLE_CHANGED event with the user's next role_version in the same
// transaction: every service applies it to the tokens already issued as soon as it is published (internal/standing).
func (s *Service) Grant(ctx context.Context, username string, role auth.Role) (User, error) {
	if _, err := auth.ParseRole(string(role)); err != nil {
		return User{}, fault.Invalidf("INVALID_ROLE", "%v", err)
	}
	u, err := s.ByUsername(ctx, username)
	if err != nil {
		return User{}, err
	}
	err = s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if _, err := tx.ExecContext(ctx, "UPDATE users SET role = ?, role_version = role_version + 1 WHERE user_id = ?",
			string(role), u.ID); err != nil {
			return err
		}
		var version int64
		if err := tx.QueryRowContext(ctx, "SELECT role_version FROM users WHERE user_id = ?", u.ID).Scan(&version); err != nil {
			return err
		}
		return emit(event.UserRoleChanged, u.ID, event.Role{UserID: apijson.ID(u.ID), Role: string(role), RoleVersion: version})
	})
	if err != nil {
		return User{}, fmt.Errorf("grant role: %w", err)
	}
	u.Role = role
	return u, nil
}

const userColumns = "user_id, username, role, created_at, password_hash, token_epoch, deleted_at"

// byName returns the user named name (normalized) and its password hash; sql.ErrNoRows when there is none.
func (s *Service) byName(ctx context.Context, name string) (User, string, error) {
	return scanUser(s.db.QueryRowContext(ctx, "SELECT "+userColumns+" FROM users WHERE username = ?", name))
}

// scanUser reads a row of userColumns, and then of extra columns into extra.
func scanUser(row interface{ Scan(...any) error }, extra ...any) (User, string, error) {
	var u User
	var role, hash string
	var deleted sql.NullTime
	if err := row.Scan(append([]any{&u.ID, &u.Username, &role, &u.CreatedAt, &hash, &u.TokenEpoch, &deleted}, extra...)...); err != nil {
		return User{}, "", err
	}
	u.Deleted = deleted.Valid
	r, err := auth.ParseRole(role)
	if err != nil {
		return User{}, "", fmt.Errorf("user %d: %w", u.ID, err)
	}
	u.Role, u.CreatedAt = r, u.CreatedAt.UTC()
	return u, hash, nil
}
