package user

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"

	"golang.org/x/crypto/argon2"

	"board/internal/fault"
)

// HashParams are the argon2id cost parameters of new password hashes. Verification reads the parameters from the
// stored hash, so changing them leaves existing hashes valid.
type HashParams struct {
	Memory  uint32 // KiB
	Time    uint32 // passes over the memory
	Threads uint8  // lanes
}

// DefaultHashParams are OWASP's first argon2id recommendation (m=19 MiB, t=2, p=1). Measured on the 2-core
// development machine (a shared VM) with BenchmarkHash: 24 to 33 ms per hash, 19.9 MB allocated, one core; a whole
// sign-in (TestSignInTiming) 24 to 36 ms. At most GOMAXPROCS hashes run at once (hasher.sem), so a flood of
// sign-ins costs GOMAXPROCS×19 MiB of memory and queues (503 BUSY at the request's deadline), not one hash per
// request; one instance on 2 cores signs in about 60 to 80 users a second.
var DefaultHashParams = HashParams{Memory: 19 * 1024, Time: 2, Threads: 1}

const (
	saltBytes = 16
	keyBytes  = 32
	// Bounds on the parameters read from a stored hash: a corrupt or planted hash must not make one sign-in take
	// gigabytes or minutes.
	maxMemoryKiB = 1 << 20 // 1 GiB
	maxTime      = 100
)

func (p HashParams) valid() error {
	if p.Memory < 8*uint32(p.Threads) || p.Memory > maxMemoryKiB || p.Time < 1 || p.Time > maxTime || p.Threads < 1 {
		return fmt.Errorf("argon2id parameters m=%d,t=%d,p=%d out of range", p.Memory, p.Time, p.Threads)
	}
	return nil
}

// HashPassword returns the argon2id hash of password with a random salt, as a PHC string:
// $argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<hash> (unpadded standard base64).
func HashPassword(p HashParams, password string) (string, error) {
	if err := p.valid(); err != nil {
		return "", err
	}
	salt := make([]byte, saltBytes)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, keyBytes)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Time, p.Threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// errBadHash is a stored hash this code cannot read. Its text never holds the hash.
var errBadHash = errors.New("stored password hash is not an argon2id PHC string")

// decodeHash parses a PHC string made by HashPassword.
func decodeHash(encoded string) (p HashParams, salt, key []byte, err error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return HashParams{}, nil, nil, errBadHash
	}
	var threads uint32
	if n, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &threads); err != nil || n != 3 || threads > 255 {
		return HashParams{}, nil, nil, errBadHash
	}
	p.Threads = uint8(threads)
	if p.valid() != nil {
		return HashParams{}, nil, nil, errBadHash
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	key, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(key) < 16 || len(key) > 64 {
		return HashParams{}, nil, nil, errBadHash
	}
	return p, salt, key, nil
}

// VerifyPassword reports whether password matches encoded, a hash HashPassword made (with any parameters), comparing
// in constant time.
func VerifyPassword(encoded, password string) (bool, error) {
	p, salt, want, err := decodeHash(encoded)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// hasher runs password hashes a few at a time: each takes Memory KiB for tens of milliseconds, so a flood of
// sign-ups and sign-ins queues here instead of exhausting memory. It counts the hashes it computes, so that tests
// can tell that every sign-in path costs the same (one hash), without timing them.
type hasher struct {
	params   HashParams
	sem      chan struct{}
	computed atomic.Int64
	// dummy is a hash of a random password, made at start with params: a sign-in for a username that does not
	// exist is verified against it, so that it takes as long as one for a user who does.
	dummy string
}

func newHasher(p HashParams) (*hasher, error) {
	var random [24]byte
	_, _ = rand.Read(random[:])
	dummy, err := HashPassword(p, base64.RawStdEncoding.EncodeToString(random[:]))
	if err != nil {
		return nil, err
	}
	return &hasher{params: p, sem: make(chan struct{}, runtime.GOMAXPROCS(0)), dummy: dummy}, nil
}

// errBusy answers a request whose deadline passed while it waited for a turn to hash.
func errBusy(cause error) error {
	return fault.Unavailablef(cause, "BUSY", "too many sign-ins and sign-ups at once; try again shortly")
}

// acquire waits for a turn to hash, until ctx ends.
func (h *hasher) acquire(ctx context.Context) error {
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return errBusy(ctx.Err())
	}
}

func (h *hasher) release() { <-h.sem }

// hash hashes a new password with the configured parameters.
func (h *hasher) hash(ctx context.Context, password string) (string, error) {
	if err := h.acquire(ctx); err != nil {
		return "", err
	}
	defer h.release()
	h.computed.Add(1)
	return HashPassword(h.params, password)
}

// verify checks password against encoded; an empty encoded (no such user) is checked against the dummy hash and
// never matches.
func (h *hasher) verify(ctx context.Context, encoded, password string) (bool, error) {
	if err := h.acquire(ctx); err != nil {
		return false, err
	}
	defer h.release()
	h.computed.Add(1)
	if encoded == "" {
		_, err := VerifyPassword(h.dummy, password)
		return false, err
	}
	return VerifyPassword(encoded, password)
}
