package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"board/internal/apijson"
	"board/internal/fault"
	"board/internal/httpio"
)

// The reader's notifications (SPEC §3.11): the bell in the bar of every page, the inbox page and its forms, and the
// live stream the script keeps open, which passes the notification service's own stream on.

// notification is one notification of an inbox, as the notification service writes it.
type notification struct {
	NotificationID int64        `json:"notificationId,string"`
	Kind           string       `json:"kind"`
	ArticleID      int64        `json:"articleId,string"`
	ArticleTitle   string       `json:"articleTitle"`
	CommentID      int64        `json:"commentId,string"`
	ActorIDs       []apijson.ID `json:"actorIds"`
	ActorCount     int64        `json:"actorCount"`
	Action         string       `json:"action"`
	Reason         string       `json:"reason"`
	Read           bool         `json:"read"`
	CreatedAt      time.Time    `json:"createdAt"`
	UpdatedAt      time.Time    `json:"updatedAt"`
}

type notificationPage struct {
	Notifications []notification `json:"notifications"`
	NextCursor    string         `json:"nextCursor"`
}

// preferences are the kinds of notification a reader wants.
type preferences struct {
	Reply        bool `json:"reply"`
	CommentReply bool `json:"commentReply"`
	Like         bool `json:"like"`
	Moderation   bool `json:"moderation"`
	// Following (SPEC §3.13): mentions of the reader, new posts in what they watch, and watching what they write.
	Mention   bool `json:"mention"`
	Watched   bool `json:"watched"`
	AutoWatch bool `json:"autoWatch"`
	// Email is how notifications come by e-mail (SPEC §3.14): "off", "immediate" or "daily"; "" is not sent, which
	// keeps it as it is (the inbox's form does not show it).
	Email string `json:"email,omitempty"`
}

func (b *backend) notifications(ctx context.Context, v *viewer, cursor string, size int64) (notificationPage, error) {
	var p notificationPage
	q := url.Values{"pageSize": {id(size)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	err := b.do(ctx, call{service: "notification", method: http.MethodGet, url: b.origins.Notification + "/v1/notifications?" + q.Encode(), token: v.token}, &p)
	return p, err
}

func (b *backend) unreadCount(ctx context.Context, token string) (int64, error) {
	var out struct {
		Count int64 `json:"count"`
	}
	err := b.do(ctx, call{service: "notification", method: http.MethodGet, url: b.origins.Notification + "/v1/notifications/unread-count", token: token}, &out)
	return out.Count, err
}

func (b *backend) markRead(ctx context.Context, v *viewer, notificationID int64) error {
	return b.do(ctx, call{service: "notification", method: http.MethodPost, url: b.origins.Notification + "/v1/notifications/" + id(notificationID) + "/read", token: v.token}, nil)
}

func (b *backend) markAllRead(ctx context.Context, v *viewer) error {
	return b.do(ctx, call{service: "notification", method: http.MethodPost, url: b.origins.Notification + "/v1/notifications/read-all", token: v.token}, nil)
}

func (b *backend) preferences(ctx context.Context, v *viewer) (preferences, error) {
	var p preferences
	err := b.do(ctx, call{service: "notification", method: http.MethodGet, url: b.origins.Notification + "/v1/notification-preferences", token: v.token}, &p)
	return p, err
}

func (b *backend) setPreferences(ctx context.Context, v *viewer, p preferences) error {
	return b.do(ctx, call{service: "notification", method: http.MethodPut, url: b.origins.Notification + "/v1/notification-preferences", body: p, token: v.token}, nil)
}

// The bell's count is asked as a page starts, beside the page's own calls, and waited for at most bellTimeout: a
// slow notification service costs a page no more, and after it failed none is asked for bellRest. The page then
// shows the bell without a count, which the stream fills in.
//
// A reader's count is asked at most once in bellFresh: the pages a reader opens meanwhile (going through a board,
// opening articles in tabs) are shown the same count, or wait for the same ask, rather than each cost the
// notification service a call. A count that changed in between shows at the next ask, and at once with script,
// whose stream sets the bell as the page opens; the reader's own "mark read" and the inbox ask again.
const (
	bellTimeout = 500 * time.Millisecond
	bellRest    = 5 * time.Second
	bellFresh   = 2 * time.Second
	// maxBells bounds the readers whose count is kept: when full, counts older than bellFresh are dropped, and if
	// none is, a new count is not kept.
	maxBells = 10_000
)

// unreadCount is the bell's count, being asked.
type unreadCount struct {
	done  chan struct{}
	asked time.Time
	n     int64
	err   error
}

// bells are the readers' counts asked in the last bellFresh, by user id.
type bells struct {
	mu     sync.Mutex
	counts map[int64]*unreadCount
}

// askUnread starts asking the reader's unread count for the page r makes, or returns the count asked for them in
// the last bellFresh; nil for a request that shows no bell (a form, a fragment) or when there is no notification
// service to ask.
func (s *Service) askUnread(r *http.Request, userID int64, token string) *unreadCount {
	if s.cfg.Origins.Notification == "" || (r.Method != http.MethodGet && r.Method != http.MethodHead) ||
		r.Header.Get("X-Fragment") != "" || time.Now().UnixNano() < s.bellResting.Load() {
		return nil
	}
	now := s.cfg.Now()
	s.bells.mu.Lock()
	defer s.bells.mu.Unlock()
	if u := s.bells.counts[userID]; u != nil && now.Sub(u.asked) < bellFresh && r.URL.Path != "/notifications" {
		return u
	}
	u := &unreadCount{done: make(chan struct{}), asked: now}
	s.bells.keep(userID, u, now)
	// Not the request's context: the pages waiting for the count are not only this one's.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bellTimeout)
	go func() {
		defer close(u.done)
		defer cancel()
		u.n, u.err = s.api.unreadCount(ctx, token)
		if u.err != nil {
			s.bells.forget(userID, u)
			s.cfg.Logger.WarnContext(ctx, "unread count unavailable; the bell is shown without it", "err", u.err)
			if st := statusOf(u.err); st == 0 || st >= 500 {
				s.bellResting.Store(time.Now().Add(bellRest).UnixNano())
			}
		}
	}()
	return u
}

// keep keeps u as userID's count, asked at now; b.mu is held.
func (b *bells) keep(userID int64, u *unreadCount, now time.Time) {
	if len(b.counts) >= maxBells {
		for id, old := range b.counts {
			if now.Sub(old.asked) >= bellFresh {
				delete(b.counts, id)
			}
		}
		if len(b.counts) >= maxBells {
			return
		}
	}
	b.counts[userID] = u
}

// forget drops userID's count, if it is u (nil: whichever it is), so that their next page asks again.
func (b *bells) forget(userID int64, u *unreadCount) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if u == nil || b.counts[userID] == u {
		delete(b.counts, userID)
	}
}

// get waits for the count; false when there is none.
func (u *unreadCount) get() (int64, bool) {
	if u == nil {
		return 0, false
	}
	<-u.done
	return u.n, u.err == nil
}

// notificationsPerPage is the inbox's page size.
const notificationsPerPage = 20

// maxCursor bounds the cursor taken from an address: the service's are far shorter.
const maxCursor = 512

// inboxItem is a notification as the inbox shows it: Who did what (Says) to Title, which links to the comment or the
// article; Names are the people behind a count ("3 people").
type inboxItem struct {
	ID                     int64
	Kind                   string
	Who, Says, Title, Link string
	Names, Reason          string
	Read                   bool
	UpdatedAt              time.Time
}

// Class is the item's class: an unread one stands out.
func (n inboxItem) Class() string {
	if n.Read {
		return "notification"
	}
	return "notification unread"
}

type inboxPage struct {
	layout
	Items []inboxItem
	// Cursor is this page's cursor ("": the newest, which the script keeps live); Older, the next page's address.
	Cursor, Older    string
	AnyUnread        bool
	Prefs            preferences
	PrefsUnavailable bool
}

// inbox is the reader's notifications, newest first, with the preferences form: the list and the preferences
// asked at once, then the names of the people in them.
func (s *Service) inbox(w http.ResponseWriter, r *http.Request) error {
	cursor := r.URL.Query().Get("cursor")
	if len(cursor) > maxCursor {
		return fault.Invalidf("BAD_CURSOR", "This address does not name a page of your notifications.")
	}
	v, ok, err := s.signedIn(w, r)
	if !ok {
		return err
	}
	fragment := r.Header.Get("X-Fragment") != ""
	ctx := r.Context()
	var (
		wg       sync.WaitGroup
		page     notificationPage
		pageErr  error
		prefs    preferences
		prefsErr error
	)
	wg.Go(func() { page, pageErr = s.api.notifications(ctx, v, cursor, notificationsPerPage) })
	if !fragment {
		wg.Go(func() { prefs, prefsErr = s.api.preferences(ctx, v) })
	}
	wg.Wait()
	if pageErr != nil {
		return pageErr
	}
	if prefsErr != nil {
		s.cfg.Logger.WarnContext(ctx, "notification preferences unavailable on the inbox", "err", prefsErr)
	}
	var actors []int64
	for _, n := range page.Notifications {
		for _, a := range n.ActorIDs {
			actors = append(actors, int64(a))
		}
	}
	names := s.names.lookup(ctx, actors)
	data := inboxPage{layout: s.pageLayout(r, v, "Notifications"), Cursor: cursor, Prefs: prefs, PrefsUnavailable: prefsErr != nil}
	for _, n := range page.Notifications {
		data.Items = append(data.Items, inboxItemOf(n, names))
		data.AnyUnread = data.AnyUnread || !n.Read
	}
	data.AnyUnread = data.AnyUnread || (data.UnreadKnown && data.Unread > 0)
	if page.NextCursor != "" {
		data.Older = "/notifications?cursor=" + url.QueryEscape(page.NextCursor)
	}
	if fragment {
		return s.renderFragment(w, r, inboxList(data))
	}
	return s.render(w, r, http.StatusOK, inboxView(data))
}

// inboxItemOf says what n is about, with the names of its people.
func inboxItemOf(n notification, names map[int64]string) inboxItem {
	it := inboxItem{ID: n.NotificationID, Kind: n.Kind, Title: n.ArticleTitle, Read: n.Read, UpdatedAt: n.UpdatedAt,
		Who: actorNames(n, names)}
	if n.ArticleID != 0 {
		it.Link = "/articles/" + id(n.ArticleID)
		if n.CommentID != 0 {
			it.Link += "#c-" + id(n.CommentID)
		}
	}
	switch n.Kind {
	case "article-comment":
		it.Says = "commented on your article"
	case "comment-reply":
		it.Says = "replied to your comment on"
	case "article-like":
		it.Says = "liked your article"
		if n.ActorCount > 1 {
			it.Who, it.Names = strconv.FormatInt(n.ActorCount, 10)+" people", it.Who
		}
	case "moderation":
		switch {
		case len(n.ActorIDs) > 0:
		case n.Action == "hide":
			it.Who = "Readers' reports" // enough of them hide it until a moderator looks
		default:
			it.Who = "A moderator"
		}
		it.Says, it.Reason = moderationSays(n), n.Reason
		if n.ArticleID == 0 {
			it.Title = ""
		}
	case "mention":
		it.Says = "mentioned you in"
	case "watched-comment":
		it.Says = "commented on"
	case "watched-article":
		it.Says = "posted on a board you watch:"
	default:
		it.Says = "did something on"
	}
	return it
}

// actorNames names the people of n, newest first: "alice", "alice and bob", "alice, bob and 3 others".
func actorNames(n notification, names map[int64]string) string {
	var who []string
	for _, a := range n.ActorIDs {
		who = append(who, names[int64(a)])
	}
	count := max(n.ActorCount, int64(len(who)))
	switch {
	case len(who) == 0:
		return "Someone"
	case count == 1:
		return who[0]
	case count == 2 && len(who) >= 2:
		return who[0] + " and " + who[1]
	case count == 3 && len(who) >= 3:
		return who[0] + ", " + who[1] + " and " + who[2]
	}
	shown := who[:min(len(who), 2)]
	others := count - int64(len(shown))
	return strings.Join(shown, ", ") + " and " + strconv.FormatInt(others, 10) + plural(others, " other", " others")
}

// moderationSays is what a moderator's action did, to the reader's comment, article or account.
func moderationSays(n notification) string {
	switch n.Action {
	case "ban":
		return "banned you"
	case "unban":
		return "lifted your ban"
	}
	verb := map[string]string{"hide": "hid", "remove": "removed", "restore": "restored", "lock": "locked",
		"unlock": "unlocked", "pin": "pinned", "unpin": "unpinned"}[n.Action]
	if verb == "" {
		verb = "acted on"
	}
	if n.CommentID != 0 {
		return verb + " your comment on"
	}
	return verb + " your article"
}

// notificationIDOf returns the path's {notificationId}.
func notificationIDOf(r *http.Request) (int64, error) {
	n, err := apijson.Parse(r.PathValue("notificationId"))
	if err != nil || n <= 0 {
		return 0, fault.NotFoundf("NO_NOTIFICATION", "There is no such notification.")
	}
	return n, nil
}

// markRead marks one notification read and goes back to the page of the inbox it was on.
func (s *Service) markRead(w http.ResponseWriter, r *http.Request) error {
	nid, err := notificationIDOf(r)
	if err != nil {
		return err
	}
	v, ok, err := s.signedIn(w, r)
	if !ok {
		return err
	}
	if err := form(w, r); err != nil {
		return err
	}
	if err := s.api.markRead(r.Context(), v, nid); err != nil {
		return err
	}
	s.bells.forget(v.ID, nil)
	back := "/notifications"
	if b := r.PostFormValue("back"); b != "" {
		back = localPath(b)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil
}

func (s *Service) markAllRead(w http.ResponseWriter, r *http.Request) error {
	v, ok, err := s.signedIn(w, r)
	if !ok {
		return err
	}
	if err := form(w, r); err != nil {
		return err
	}
	if err := s.api.markAllRead(r.Context(), v); err != nil {
		return err
	}
	s.bells.forget(v.ID, nil)
	http.Redirect(w, r, "/notifications?notice=allread", http.StatusSeeOther)
	return nil
}

// savePreferences sets the kinds the reader wants from the form's checkboxes: a box left unchecked is not sent, and
// means no.
func (s *Service) savePreferences(w http.ResponseWriter, r *http.Request) error {
	v, ok, err := s.signedIn(w, r)
	if !ok {
		return err
	}
	if err := form(w, r); err != nil {
		return err
	}
	checked := func(name string) bool { return r.PostFormValue(name) != "" }
	p := preferences{Reply: checked("reply"), CommentReply: checked("commentReply"), Like: checked("like"), Moderation: checked("moderation"),
		Mention: checked("mention"), Watched: checked("watched"), AutoWatch: checked("autoWatch")}
	if err := s.api.setPreferences(r.Context(), v, p); err != nil {
		return err
	}
	http.Redirect(w, r, "/notifications?notice=preferences#preferences", http.StatusSeeOther)
	return nil
}

// The live stream: the answer's headers come from the notification service within callTimeout, and then something
// (an event, or its ping every 15 s) at least every streamIdle, else the stream is taken as lost and ended, and the
// browser reconnects. Each write to the browser must be done within streamWriteTimeout: a reader who stopped
// reading does not hold a stream open.
const (
	streamIdle         = 45 * time.Second
	streamWriteTimeout = 10 * time.Second
	streamBuffer       = 4 << 10
	maxLastEventID     = 64
)

// stream passes the notification service's stream of the signed-in reader's notifications on to the browser,
// event by event as each arrives, resuming from the browser's Last-Event-ID. Its answers are for the script: a
// stream, or an error as {code, message}. It is served without the web's request deadline (the app lists it among the web's streams),
// and clears the server's own read and write deadlines.
func (s *Service) stream(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		streamError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Sign in to get your notifications.")
		return
	}
	if _, err := s.cfg.Tokens.Verify(r.Context(), c.Value); err != nil {
		if fault.KindOf(err) == fault.Unavailable {
			streamError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "Your session cannot be checked right now.")
			return
		}
		streamError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Your session has ended: sign in again.")
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.Origins.Notification+"/v1/notifications/stream", nil)
	if err != nil {
		streamError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "Notifications cannot be reached.")
		return
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.Value)
	// EventSource sends the header when it reconnects by itself; the page's own reopening passes the parameter.
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("lastEventId")
	}
	if last != "" && len(last) <= maxLastEventID {
		req.Header.Set("Last-Event-ID", last)
	}
	if rid := httpio.RequestID(r.Context()); rid != "" {
		req.Header.Set("X-Request-Id", rid)
	}
	watchdog := time.AfterFunc(callTimeout, cancel)
	defer watchdog.Stop()
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		if r.Context().Err() == nil {
			s.cfg.Logger.WarnContext(r.Context(), "notification stream unavailable", "err", err)
		}
		streamError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "Notifications cannot be reached right now.")
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		passStreamError(w, resp)
		return
	}
	rc := http.NewResponseController(w)
	// The web's server bounds every request's reading (a read timeout would cancel this one) and writing; this
	// answer lasts as long as the reader stays, with each write bounded instead.
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold events back
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		if errors.Is(err, http.ErrNotSupported) {
			s.cfg.Logger.ErrorContext(r.Context(), "the notification stream cannot be flushed to the browser", "err", err)
		}
		return
	}
	buf := make([]byte, streamBuffer)
	for {
		watchdog.Reset(streamIdle)
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
		if err != nil {
			return // the service ended it (the token expired) or it was lost: the browser reconnects
		}
	}
}

// passStreamError answers with the notification service's refusal of a stream (401, 429 with its Retry-After), and
// with 503 for its failures.
func passStreamError(w http.ResponseWriter, resp *http.Response) {
	var e struct{ Code, Message string }
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	_ = json.Unmarshal(raw, &e)
	status := resp.StatusCode
	if status < 400 || status >= 500 || e.Code == "" {
		status, e.Code, e.Message = http.StatusServiceUnavailable, "UNAVAILABLE", "Notifications cannot be streamed right now."
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	streamError(w, status, e.Code, e.Message)
}

func streamError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Cache-Control", "no-store")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="board"`)
	}
	httpio.Write(w, status, map[string]string{"code": code, "message": message})
}
