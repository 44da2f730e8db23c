// Package standing is what every instance of every service knows of its users' standing: their bans, the roles
// granted since their tokens were signed, and the sessions ended since (a password changed or reset, every session
// ended, the account deleted), so that a ban, a role change or an ended session takes effect everywhere within a
// second (SPEC §3.9, §3.14), not at the token's expiry.
//
// A Table is a per-process map userId -> {role, RoleVersion; ban, BanVersion}, and another userId -> {token epoch,
// deleted}, fed by a reader (internal/compacted) of the ban topic (USER_BANNED, USER_UNBANNED from the moderation
// service), the user topic (USER_ROLE_CHANGED from the user service) and the session topic (USER_PASSWORD_CHANGED,
// USER_DELETED from the user service): every instance reads every partition of the three from the start, then
// follows them, so that a ban published reaches it within a fraction of a second. Records are applied only when
// their version is newer than what the table holds for that user (for a session, the token epoch only rises and a
// deletion is for good), so duplicates and late records never undo newer state.
//
// Cost at start. The three topics are compacted (event.CompactedTopics): Kafka keeps each user's latest record for
// good. What a start reads is then about one record per user who was ever banned or had a role changed, and one per
// user who ever changed or reset their password, ended their sessions or deleted their account — not the history of
// moderation nor of sign-ins. The table holds an entry per banned or re-roled user, and one of 16 bytes per user of
// the session topic (56 MB for a million of them, with the map's overhead, measured). Deleted users stay in it for
// good: nothing says when the last of their tokens has expired, and their records stay on the compacted topic.
//
// Until the reader has read up to the end offsets it saw when it started (it is "caught up"), the table does not
// know whom it would refuse: Lookup and Ended answer a fault.Unavailable error (a write gets a 503, which the client
// retries) and Ready fails, so a load balancer sends no traffic here yet.
package standing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/auth"
	"board/internal/compacted"
	"board/internal/event"
	"board/internal/fault"
)

// Config configures a Table's reader; zero values take the defaults noted.
type Config struct {
	Brokers     []string
	TopicPrefix string // e.g. "board-"
	// FetchMaxWait is how long the broker holds a fetch open waiting for records (150 ms): with it, how late a ban
	// reaches this instance at most, beyond its publishing.
	FetchMaxWait time.Duration
	Now          func() time.Time // the clock that ends bans (time.Now)
	Logger       *slog.Logger     // slog.Default()
	Opts         []kgo.Opt        // extra client options, applied last
}

// Table holds the standing of the users who have one. Its zero value is not usable; make one with New.
type Table struct {
	cfg    Config
	reader *compacted.Reader

	mu       sync.RWMutex
	users    map[int64]*entry
	sessions map[int64]session
	caught   atomic.Bool
	ready    chan struct{} // closed once caught up
}

// entry is one user's standing: the latest role and ban events applied, by version.
type entry struct {
	role        auth.Role // "" until a role event is applied
	roleVersion int64
	banned      bool
	reason      string
	until       *time.Time // nil: for good
	banVersion  int64
}

// session is what ends a user's tokens: those signed at an epoch below epoch are void, and all are once deleted.
type session struct {
	epoch   int64
	deleted bool
}

// errLoading is the answer while the table is not caught up.
var errLoading = fault.Unavailablef(nil, "STANDING_UNAVAILABLE", "this server is still reading bans, roles and sessions; try again shortly")

// New returns a table and its reader; Run reads into it.
func New(cfg Config) (*Table, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	t := newTable(cfg)
	r, err := compacted.New(compacted.Config{Brokers: cfg.Brokers, FetchMaxWait: cfg.FetchMaxWait, Logger: cfg.Logger, Opts: cfg.Opts,
		Topics: []string{event.UserBanned.Topic(cfg.TopicPrefix), event.UserRoleChanged.Topic(cfg.TopicPrefix),
			event.UserPasswordChanged.Topic(cfg.TopicPrefix)}})
	if err != nil {
		return nil, fmt.Errorf("standing: %w", err)
	}
	t.reader = r
	return t, nil
}

func newTable(cfg Config) *Table {
	return &Table{cfg: cfg, users: map[int64]*entry{}, sessions: map[int64]session{}, ready: make(chan struct{})}
}

// Run reads the ban, user and session topics into the table until ctx ends.
func (t *Table) Run(ctx context.Context) { t.reader.Run(ctx, t.apply, t.caughtUp) }

func (t *Table) caughtUp(took time.Duration) {
	t.mu.RLock()
	n, sessions := len(t.users), len(t.sessions)
	t.mu.RUnlock()
	t.cfg.Logger.Info("standing: read bans, roles and sessions", "users", n, "sessions", sessions, "took", took.Round(time.Millisecond))
	t.setCaughtUp()
}

// apply applies one event of the ban, user or session topic.
func (t *Table) apply(env event.Envelope) error {
	switch env.Type {
	case event.UserBanned, event.UserUnbanned:
		b, err := event.Payload[event.Ban](env)
		if err != nil {
			return err
		}
		if b.UserID <= 0 || b.BanVersion <= 0 {
			return errors.New("no userId or banVersion")
		}
		t.applyBan(b)
	case event.UserRoleChanged:
		p, err := event.Payload[event.Role](env)
		if err != nil {
			return err
		}
		role, err := auth.ParseRole(p.Role)
		if err != nil {
			return err
		}
		if p.UserID <= 0 || p.RoleVersion <= 0 {
			return errors.New("no userId or roleVersion")
		}
		t.applyRole(int64(p.UserID), role, p.RoleVersion)
	case event.UserPasswordChanged:
		p, err := event.Payload[event.Session](env)
		if err != nil {
			return err
		}
		if p.UserID <= 0 || p.TokenEpoch <= 0 {
			return errors.New("no userId or tokenEpoch")
		}
		t.applySession(int64(p.UserID), p.TokenEpoch, false)
	case event.UserDeleted:
		p, err := event.Payload[event.UserDeletion](env)
		if err != nil {
			return err
		}
		if p.UserID <= 0 || p.TokenEpoch < 0 {
			return errors.New("no userId, or a negative tokenEpoch")
		}
		t.applySession(int64(p.UserID), p.TokenEpoch, true)
	}
	return nil
}

// Lookup returns the role userID holds now when an event changed it ("" otherwise), and the ban in force on them
// (nil when none, or when it has ended); a fault.Unavailable error until the table is caught up. It implements
// httpio.Standing.
func (t *Table) Lookup(userID int64) (auth.Role, *auth.Ban, error) {
	if !t.caught.Load() {
		return "", nil, errLoading
	}
	t.mu.RLock()
	e := t.users[userID]
	var role auth.Role
	var ban *auth.Ban
	if e != nil {
		role = e.role
		if e.banned && (e.until == nil || e.until.After(t.cfg.Now())) {
			ban = &auth.Ban{Reason: e.reason, Until: e.until}
		}
	}
	t.mu.RUnlock()
	return role, ban, nil
}

// Ended reports whether p's session has ended: its token was signed at an epoch below the user's epoch now (a
// password change, a reset or "end every session" came after it), or the user is deleted. A fault.Unavailable error
// until the table is caught up. It implements httpio.Sessions.
func (t *Table) Ended(p auth.Principal) (bool, error) {
	if !t.caught.Load() {
		return false, errLoading
	}
	t.mu.RLock()
	s := t.sessions[p.UserID]
	t.mu.RUnlock()
	return s.deleted || p.TokenEpoch < s.epoch, nil
}

// Deleted reports whether the user deleted their account, as far as the table has read.
func (t *Table) Deleted(userID int64) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.sessions[userID].deleted
}

// Ready is the table's readiness check: nil once it is caught up.
func (t *Table) Ready(context.Context) error {
	if !t.caught.Load() {
		return errLoading
	}
	return nil
}

// CaughtUp is closed once the table has read the topics up to where they ended when Run started.
func (t *Table) CaughtUp() <-chan struct{} { return t.ready }

// setCaughtUp marks the table caught up, once.
func (t *Table) setCaughtUp() {
	if t.caught.CompareAndSwap(false, true) {
		close(t.ready)
	}
}

// applyBan applies a USER_BANNED or USER_UNBANNED payload when it is newer than what the table holds.
func (t *Table) applyBan(b event.Ban) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(int64(b.UserID))
	if b.BanVersion <= e.banVersion {
		return false
	}
	e.banVersion, e.banned, e.reason, e.until = b.BanVersion, b.Banned, b.Reason, nil
	if b.Until != nil {
		until := time.Time(*b.Until)
		e.until = &until
	}
	return true
}

// applyRole applies a USER_ROLE_CHANGED payload when it is newer than what the table holds.
func (t *Table) applyRole(userID int64, role auth.Role, version int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(userID)
	if version <= e.roleVersion {
		return false
	}
	e.role, e.roleVersion = role, version
	return true
}

// applySession raises a user's token epoch to epoch, never lowers it, and marks them deleted for good when deleted:
// the epoch orders a user's session events, so that a late or repeated one changes nothing.
func (t *Table) applySession(userID, epoch int64, deleted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sessions[userID]
	s.epoch = max(s.epoch, epoch)
	s.deleted = s.deleted || deleted
	t.sessions[userID] = s
}

// entry returns the entry of a user, made when missing; t.mu is held.
func (t *Table) entry(userID int64) *entry {
	e := t.users[userID]
	if e == nil {
		e = &entry{}
		t.users[userID] = e
	}
	return e
}
