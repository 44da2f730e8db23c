package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"board/internal/auth"
	"board/internal/fault"
)

// sessionCookie holds a signed-in reader's access token. It is HttpOnly (no script reads it), Secure on TLS (or
// always, with Config.SecureCookies, behind a proxy that ends TLS), and SameSite=Lax (another site's forms do not
// carry it; the cross-origin check refuses them anyway).
const sessionCookie = "board_session"

// viewer is the signed-in reader of a page.
type viewer struct {
	ID    int64
	Name  string
	Role  auth.Role
	token string
	// unread is the count of the bell, asked as the page starts (nil: not asked).
	unread *unreadCount
}

// Moderator says whether the viewer may change what others wrote.
func (v *viewer) Moderator() bool { return v != nil && v.Role == auth.RoleModerator }

// Token is the viewer's access token, "" for no viewer: for the reads that show a writer or a moderator more.
func (v *viewer) Token() string {
	if v == nil {
		return ""
	}
	return v.token
}

// Owns says whether the viewer may change what writerID wrote.
func (v *viewer) Owns(writerID int64) bool { return v != nil && (v.ID == writerID || v.Moderator()) }

// viewer returns the signed-in reader of r, nil when there is none. A cookie whose token no longer verifies, or
// whose session has ended, is cleared. When the signing keys cannot be fetched, the error says so: a page may go on
// signed out, a form may not.
func (s *Service) viewer(w http.ResponseWriter, r *http.Request) (*viewer, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	p, err := s.cfg.Tokens.Verify(r.Context(), c.Value)
	if err != nil {
		if fault.KindOf(err) == fault.Unavailable {
			return nil, err
		}
		s.clearSession(w, r)
		return nil, nil
	}
	if s.ended(r, p) {
		s.clearSession(w, r)
		return nil, nil
	}
	v := &viewer{ID: p.UserID, Role: p.Role, token: c.Value, unread: s.askUnread(r, p.UserID, c.Value)}
	v.Name = s.names.get(r.Context(), p.UserID)
	return v, nil
}

// knownViewer is the signed-in reader for an error page, from what is at hand: a token that verifies with the keys
// already fetched, and a name already known. An error page must not wait on a service that may be what failed.
func (s *Service) knownViewer(r *http.Request) *viewer {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	p, ok := s.cfg.Tokens.Known(c.Value)
	if !ok || s.ended(r, p) {
		return nil
	}
	return &viewer{ID: p.UserID, Role: p.Role, Name: s.names.cached(p.UserID), token: c.Value}
}

// ended reports whether p's session has ended (a password changed since its token was signed, the account
// deleted). While the process has not read the sessions yet, the session goes on, as a read does at the services'
// guards; the writes it sends wait there until they can tell.
func (s *Service) ended(r *http.Request, p auth.Principal) bool {
	if s.cfg.Sessions == nil {
		return false
	}
	ended, err := s.cfg.Sessions.Ended(p)
	if err != nil {
		s.cfg.Logger.DebugContext(r.Context(), "session end not checked", "err", err)
	}
	return ended
}

// reader is viewer for a page any reader may see: when the keys cannot be checked the page is shown signed out.
func (s *Service) reader(w http.ResponseWriter, r *http.Request) *viewer {
	v, err := s.viewer(w, r)
	if err != nil {
		s.cfg.Logger.WarnContext(r.Context(), "session not checked; page shown signed out", "err", err)
	}
	return v
}

// signedIn is viewer for a form that acts as the reader: no session sends the reader to sign in first.
func (s *Service) signedIn(w http.ResponseWriter, r *http.Request) (*viewer, bool, error) {
	v, err := s.viewer(w, r)
	if err != nil {
		return nil, false, &serviceError{service: "user", err: err}
	}
	if v == nil {
		http.Redirect(w, r, "/signin?next="+returnPath(r), http.StatusSeeOther)
		return nil, false, nil
	}
	return v, true, nil
}

func (s *Service) setSession(w http.ResponseWriter, r *http.Request, token string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: token, Path: "/", Expires: expires,
		HttpOnly: true, Secure: s.cfg.SecureCookies || r.TLS != nil, SameSite: http.SameSiteLaxMode})
}

func (s *Service) clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.cfg.SecureCookies || r.TLS != nil, SameSite: http.SameSiteLaxMode})
}

// localPath returns next if it is a path on this site, else "/": a sign-in link must not send anyone elsewhere.
func localPath(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return next
}

// urlPath is the path and query of an absolute or relative URL, for a Referer.
func urlPath(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Path == "" {
		return "", errors.New("no path")
	}
	return localPath(u.RequestURI()), nil
}

// names remembers usernames by user id: a name never changes, so a page needs the user service only for writers it
// has not shown before, all of them in one call.
type names struct {
	api    *backend
	logger *slog.Logger
	mu     sync.Mutex
	known  map[int64]string
	// resting is until when lookups are not tried, after one failed: a hung user service must not cost every page
	// the lookup's wait.
	resting time.Time
}

// maxNames bounds the memory of names; when full, it starts over. A lookup waits at most nameTimeout, and after a
// failure none is tried for nameRest.
const (
	maxNames    = 100_000
	nameTimeout = 500 * time.Millisecond
	nameRest    = 5 * time.Second
)

func newNames(api *backend, logger *slog.Logger) *names {
	return &names{api: api, logger: logger, known: map[int64]string{}}
}

// cached returns the name of userID if it is remembered, else "user <id>", without asking the user service.
func (n *names) cached(userID int64) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := n.known[userID]; ok {
		return name
	}
	return "user " + id(userID)
}

func (n *names) get(ctx context.Context, userID int64) string {
	return n.lookup(ctx, []int64{userID})[userID]
}

// lookup returns the names of ids. A name the user service cannot give now is shown as "user <id>": a page of
// articles is still worth showing while the user service is down.
func (n *names) lookup(ctx context.Context, ids []int64) map[int64]string {
	out := make(map[int64]string, len(ids))
	var missing []int64
	n.mu.Lock()
	for _, uid := range ids {
		if name, ok := n.known[uid]; ok {
			out[uid] = name
		} else if _, asked := out[uid]; !asked {
			out[uid] = ""
			missing = append(missing, uid)
		}
	}
	resting := time.Now().Before(n.resting)
	n.mu.Unlock()
	if resting {
		missing = nil
	}
	if len(missing) > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, nameTimeout)
		defer cancel()
	}
	for len(missing) > 0 {
		batch := missing[:min(len(missing), 100)]
		missing = missing[len(batch):]
		users, err := n.api.users(ctx, batch)
		if err != nil {
			n.logger.WarnContext(ctx, "usernames unavailable; showing user ids", "err", err)
			n.mu.Lock()
			n.resting = time.Now().Add(nameRest)
			n.mu.Unlock()
			break
		}
		n.mu.Lock()
		if len(n.known)+len(batch) > maxNames {
			clear(n.known)
		}
		for _, u := range users {
			out[u.UserID] = u.Username
		}
		// An id the user service does not know is remembered too: ids are never reused, so asking again would only
		// cost a call per page.
		for _, uid := range batch {
			if out[uid] == "" {
				out[uid] = "user " + id(uid)
			}
			n.known[uid] = out[uid]
		}
		n.mu.Unlock()
	}
	for uid, name := range out {
		if name == "" {
			out[uid] = "user " + id(uid)
		}
	}
	return out
}
