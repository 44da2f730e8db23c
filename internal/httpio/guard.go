package httpio

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"board/internal/auth"
	"board/internal/fault"
)

// Guard is what a port asks of a write (any method but GET, HEAD and OPTIONS) before its handler runs: a valid
// access token, whose principal the handler finds with auth.FromContext, a user not banned, and the acting user's
// rate limit. A read (GET, HEAD) that carries an Authorization header has its token verified too, and its principal
// put in the context, so that a handler can show more to its writer or to moderators; a read without one passes
// untouched, and reads are never rate-limited nor refused for a ban. A token whose session has ended is refused on
// both, as if it had expired: a read must not show its writer's view to someone who holds their old password.
type Guard struct {
	// Verify checks a bearer token: auth.Verifier.Verify.
	Verify func(ctx context.Context, token string) (auth.Principal, error)
	// Standing, when not nil, is the user's standing now, which the token cannot know: a write of a banned user is
	// refused with 403 BANNED, and the principal's role is the one the user holds now when it changed since the
	// token was signed (a demoted moderator loses their powers at once, not at the token's expiry).
	Standing Standing
	// Sessions, when not nil, is what ends tokens before their expiry: a token of a session that has ended (signed
	// before the user's password changed, or of a deleted user) is refused with 401 UNAUTHENTICATED.
	Sessions Sessions
	// Limiter, when not nil, rate-limits writes: each user's under the limit "write", keyed by service and user, and
	// the open routes under their own limits, keyed by client address.
	Limiter Limiter
	// Unbanned are the route patterns of the writes a banned user may still make: a ban stops them writing on the
	// site, not keeping their account safe or leaving it (e.g. "DELETE /v1/users/me").
	Unbanned map[string]bool
	// Open maps the route patterns of writes taken without a token (sign-up and sign-in, e.g. "POST /v1/tokens") to
	// the name of the limit they are held to instead, per client address.
	Open map[string]string
	// ClientAddr names the client of a request for the open routes' limits; nil means the connection's remote host.
	ClientAddr func(*http.Request) string
}

// Standing is what the process knows of users' bans and roles from the events (internal/standing): the role userID
// holds now, "" when it knows of no change, and the ban in force, nil when there is none. It answers a
// fault.Unavailable error while it cannot tell (before it has read the events up to where they were at start).
type Standing interface {
	Lookup(userID int64) (auth.Role, *auth.Ban, error)
}

// Sessions is what the process knows of users' sessions from the events (internal/standing): whether p's token
// belongs to a session that has ended. It answers a fault.Unavailable error while it cannot tell.
type Sessions interface {
	Ended(p auth.Principal) (bool, error)
}

// errSessionEnded is the answer to a token of a session that has ended.
var errSessionEnded = fault.Unauthenticatedf("UNAUTHENTICATED", "this session has ended; sign in again")

// Limiter takes one request from the named limit's budget for key: nil when it is allowed, a fault.RateLimited
// error when it is over, a fault.Unavailable one when the budget cannot be checked.
type Limiter interface {
	Allow(ctx context.Context, limit, key string) error
}

// WriteLimit is the name of the per-user limit on writes.
const WriteLimit = "write"

// guards reports whether r must pass the port's guard: a write, or a read with a token, on a port that has one.
func (s Server) guards(r *http.Request) bool {
	if s.Guard == nil {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return r.Header.Get("Authorization") != ""
	case http.MethodOptions:
		return false
	}
	return true
}

// admit returns r with the principal of its token when it may go on to the route named by pattern: a write, or a
// read with a token.
func (s Server) admit(r *http.Request, pattern string) (*http.Request, error) {
	g := s.Guard
	ctx := r.Context()
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	if limit, open := g.Open[pattern]; open && !read {
		if g.Limiter == nil {
			return r, nil
		}
		return r, g.Limiter.Allow(ctx, limit, g.clientAddr(r))
	}
	token, err := bearer(r)
	if err != nil {
		return r, err
	}
	p, err := g.Verify(ctx, token)
	if err != nil {
		return r, err
	}
	if g.Sessions != nil {
		// While the sessions cannot be told, a write waits (503) and a read goes on, as with the standing below.
		switch ended, err := g.Sessions.Ended(p); {
		case err != nil && !read:
			return r, err
		case ended:
			return r, errSessionEnded
		}
	}
	if g.Standing != nil {
		role, ban, err := g.Standing.Lookup(p.UserID)
		switch {
		case err != nil && read:
			// A read goes on with the token's role: it changes nothing, and what it may show more is what the
			// token said a moment ago.
		case err != nil:
			return r, err
		case ban != nil && !read && !g.Unbanned[pattern]:
			return r, auth.Banned(*ban)
		case role != "":
			p.Role = role
		}
	}
	if g.Limiter != nil && !read {
		if err := g.Limiter.Allow(ctx, WriteLimit, s.Service+":"+strconv.FormatInt(p.UserID, 10)); err != nil {
			return r, err
		}
	}
	return r.WithContext(auth.NewContext(ctx, p)), nil
}

// clientAddr is the budget of the request's client: its IPv4 address, or the /64 network of its IPv6 address, as
// one subscriber commonly holds a whole /64 and would otherwise have 2^64 budgets.
func (g *Guard) clientAddr(r *http.Request) string {
	addr := RemoteHost(r)
	if g.ClientAddr != nil {
		addr = g.ClientAddr(r)
	}
	return ClientKey(addr)
}

// ClientKey is the rate-limit budget of the client at addr: its IPv4 address, or the /64 network of its IPv6 address.
func ClientKey(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	if ip = ip.Unmap().WithZone(""); ip.Is4() {
		return ip.String()
	}
	network, _ := ip.Prefix(64)
	return network.String()
}

// RemoteHost is the host of the connection's remote address.
func RemoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// bearer returns the token of the request's Authorization header.
func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", auth.ErrNoToken
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", fault.Unauthenticatedf("UNAUTHENTICATED", "the Authorization header must be: Bearer <access token>")
	}
	return strings.TrimSpace(token), nil
}
