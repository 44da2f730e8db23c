// Package auth is who a request acts for: the access tokens the user service signs (Ed25519 JWTs), their local
// verification by every service with cached public keys, and the ownership rules of SPEC §2.1.
package auth

import (
	"context"
	"fmt"
	"strconv"

	"board/internal/fault"
)

// Role is what a user may do beyond their own writes.
type Role string

const (
	RoleUser      Role = "user"
	RoleModerator Role = "moderator" // may also update and delete others' articles and comments
)

// ParseRole reads a role by name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleUser, RoleModerator:
		return r, nil
	}
	return "", fmt.Errorf("role %q: want user or moderator", s)
}

// Principal is the user a request acts for: the subject and role of its access token, and the user's token epoch
// when it was signed. A password change, a reset or a deletion raises the user's epoch (event.Session): a token
// whose epoch is below the user's epoch now is void.
type Principal struct {
	UserID     int64
	Role       Role
	TokenEpoch int64
}

func (p Principal) String() string { return strconv.FormatInt(p.UserID, 10) + "/" + string(p.Role) }

type principalKey struct{}

// NewContext returns ctx carrying p, as the authentication middleware does for a request with a valid token.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal ctx carries, if any.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Acting returns the principal of ctx, or 401 when there is none. Writes always have one (the middleware makes sure);
// a handler asks again so that a route mistakenly left open fails closed.
func Acting(ctx context.Context) (Principal, error) {
	p, ok := FromContext(ctx)
	if !ok {
		return Principal{}, ErrNoToken
	}
	return p, nil
}

// ErrNoToken is the answer to a write without an access token.
var ErrNoToken = fault.Unauthenticatedf("UNAUTHENTICATED", "this request needs an access token: Authorization: Bearer <token>")

// ActAs checks that the acting user is userID (a writerId in a body, a {userId} in a path): nobody writes as
// someone else, moderators included.
func ActAs(ctx context.Context, userID int64) error {
	p, err := Acting(ctx)
	if err != nil {
		return err
	}
	if p.UserID != userID {
		return fault.Forbiddenf("user %d may not act as user %d", p.UserID, userID)
	}
	return nil
}

// MayChange checks that the acting user may update or delete what writerID wrote: the writer, or a moderator.
func MayChange(ctx context.Context, writerID int64) error {
	p, err := Acting(ctx)
	if err != nil {
		return err
	}
	if p.UserID != writerID && p.Role != RoleModerator {
		return fault.Forbiddenf("only its writer or a moderator may change this")
	}
	return nil
}

// Writer returns the writer of something new: the acting user. A request may name the writer (writerId), which
// then must be the acting user; named is 0 when it does not.
func Writer(ctx context.Context, named int64) (int64, error) {
	p, err := Acting(ctx)
	if err != nil {
		return 0, err
	}
	if named != 0 && named != p.UserID {
		return 0, fault.Forbiddenf("user %d may not write as user %d", p.UserID, named)
	}
	return p.UserID, nil
}
