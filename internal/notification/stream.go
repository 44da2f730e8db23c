package notification

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/auth"
	"board/internal/fault"
)

// Live delivery. A change to a user's inbox is committed first, and then announced on one Redis pub/sub channel
// that every instance listens to, with the users' ids: the instances that hold a stream of that user read the
// changes from the database, from the last sequence number each stream sent. So an announcement that is lost or
// comes twice only delays or repeats a read, never a notification; every stream also reads once a minute
// whatever it heard, and all of them read when the subscription is (re)made. docs/notifications.md argues the
// choice of one channel over a channel per user, and over the topic.

// hub holds this instance's open streams, by user.
type hub struct {
	mu              sync.Mutex
	byUser          map[int64]map[*listener]struct{}
	total           int
	max, maxPerUser int
}

// listener is one open stream: a change to its user's inbox wakes it.
type listener struct {
	user int64
	wake chan struct{} // one pending wake is enough: the stream reads all changes since its last
}

func newHub(max, maxPerUser int) *hub {
	return &hub{byUser: map[int64]map[*listener]struct{}{}, max: max, maxPerUser: maxPerUser}
}

func (h *hub) join(user int64) (*listener, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.total >= h.max {
		return nil, fault.Unavailablef(nil, "STREAMS_FULL", "this instance holds all the streams it can; try again")
	}
	streams := h.byUser[user]
	if len(streams) >= h.maxPerUser {
		return nil, &fault.Error{Kind: fault.RateLimited, Code: "TOO_MANY_STREAMS", RetryAfter: time.Minute,
			Message: fmt.Sprintf("you have %d notification streams open already; close one", h.maxPerUser)}
	}
	if streams == nil {
		streams = map[*listener]struct{}{}
		h.byUser[user] = streams
	}
	l := &listener{user: user, wake: make(chan struct{}, 1)}
	streams[l] = struct{}{}
	h.total++
	return l, nil
}

func (h *hub) leave(l *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byUser[l.user], l)
	if len(h.byUser[l.user]) == 0 {
		delete(h.byUser, l.user)
	}
	h.total--
}

// wake wakes the user's streams; all of them for user 0.
func (h *hub) wake(user int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for u, streams := range h.byUser {
		if user != 0 && u != user {
			continue
		}
		for l := range streams {
			select {
			case l.wake <- struct{}{}:
			default:
			}
		}
	}
}

// publishTimeout bounds an announcement: a stream that misses one reads within a minute anyway.
const publishTimeout = time.Second

// announceQueue bounds the announcements waiting for Redis; past it they are dropped (the streams read anyway).
const announceQueue = 4096

// publish announces a change to the user's inbox: at once to this instance's streams, and through Redis, by Run, to
// the other instances'. It never waits for Redis: a hint must not slow the inbox write it follows.
func (s *Service) publish(user int64) { s.publishAll([]int64{user}) }

// announceBatch bounds the users one announcement names: a fan-out to thousands of inboxes is a few messages.
const announceBatch = 500

// publishAll announces a change to each user's inbox, in messages of up to announceBatch users.
func (s *Service) publishAll(users []int64) {
	for _, user := range users {
		s.hub.wake(user)
	}
	for len(users) > 0 {
		n := min(len(users), announceBatch)
		select {
		case s.announce <- users[:n:n]:
		default:
		}
		users = users[n:]
	}
}

// Run sends this instance's announcements and listens to the other instances' until ctx ends.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.announceChanges(ctx) })
	ps := s.rdb.Subscribe(ctx, s.channel())
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() }) // Receive does not end with its context
	defer stop()
	for ctx.Err() == nil {
		msg, err := ps.Receive(ctx)
		switch m := msg.(type) {
		case *redis.Subscription:
			s.hub.wake(0) // subscribed again: what was said meanwhile was not heard
		case *redis.Message:
			for _, id := range strings.Split(m.Payload, ",") {
				if user, err := strconv.ParseInt(id, 10, 64); err == nil && user > 0 {
					s.hub.wake(user)
				}
			}
		}
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("notification: the announcements' subscription failed; subscribing again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	_ = ps.Close()
}

// announceChanges publishes the queued announcements, logging when Redis starts and stops failing them.
func (s *Service) announceChanges(ctx context.Context) {
	failing := false
	for {
		var users []int64
		select {
		case <-ctx.Done():
			return
		case users = <-s.announce:
		}
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := s.rdb.Publish(pctx, s.channel(), formatActors(users)).Err()
		cancel()
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			s.cfg.Logger.Warn("notification: cannot announce inbox changes; streams on other instances see them within a minute",
				"err", err)
		case err == nil && failing:
			s.cfg.Logger.Info("notification: announcing inbox changes again")
		}
		failing = err != nil
	}
}

// Stream timings.
const (
	streamRetry      = 3 * time.Second  // how long EventSource waits before it reconnects
	streamWrite      = 10 * time.Second // a client that takes longer to take a write is gone
	streamPageSize   = 100
	streamCheckEvery = 4               // heartbeats between reads of a stream that heard nothing
	streamQuery      = 5 * time.Second // bounds a stream's reads of the inbox
)

// stream serves GET /v1/notifications/stream: the user's unread count, and every notification changed after the
// Last-Event-ID the client sends (none: from now on), live.
func (h handlers) stream(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p, err := auth.Acting(ctx)
	if err != nil {
		return err
	}
	last, resume, err := lastEventID(r)
	if err != nil {
		return err
	}
	s := h.svc
	l, err := s.hub.join(p.UserID)
	if err != nil {
		return err
	}
	defer s.hub.leave(l)
	// Joined first, read second: a change made in between wakes the stream, which then reads it.
	qctx, cancel := context.WithTimeout(ctx, streamQuery)
	seq, _, err := s.state(qctx, p.UserID)
	cancel()
	if err != nil {
		return err
	}
	if !resume || last > seq {
		last = seq
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // nginx would hold the events back
	w.WriteHeader(http.StatusOK)
	out := sse{w: w, rc: rc, unread: -1}
	// The id, without an event, becomes the client's last event id: one that reconnects before any notification
	// came resumes from here, not from the moment it reconnects.
	out.buf = fmt.Appendf(out.buf, "retry: %d\nid: %d\n\n", streamRetry.Milliseconds(), last)
	lifetime := time.NewTimer(s.cfg.StreamLifetime)
	defer lifetime.Stop()
	heartbeat := time.NewTicker(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	// Streams opened together check at different beats, so that their periodic reads do not come at once.
	for check, beats := true, rand.IntN(streamCheckEvery); ; {
		if check {
			qctx, cancel := context.WithTimeout(ctx, streamQuery)
			last, err = out.catchUp(qctx, s, p.UserID, last)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					s.cfg.Logger.Info("notification: stream ended", "user", p.UserID, "err", err)
				}
				return nil // the answer is under way: the client reconnects from its last event id
			}
			check = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-lifetime.C:
			return nil
		case <-l.wake:
			check = true
		case <-heartbeat.C:
			if ended, _ := s.ended(p); ended {
				return nil
			}
			if beats++; beats%streamCheckEvery == 0 {
				check = true // in case an announcement was lost
				continue
			}
			out.buf = append(out.buf, ": ping\n\n"...)
			if err := out.flush(); err != nil {
				return nil
			}
		}
	}
}

// ended reports whether p's session has ended since its stream opened; while that cannot be told, it goes on.
func (s *Service) ended(p auth.Principal) (bool, error) {
	if s.cfg.Sessions == nil {
		return false, nil
	}
	return s.cfg.Sessions.Ended(p)
}

// lastEventID is the id a reconnecting client last had: the Last-Event-ID header EventSource sends, or the
// lastEventId parameter for a client that cannot set headers.
func lastEventID(r *http.Request) (seq int64, ok bool, err error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("lastEventId")
	}
	if v == "" {
		return 0, false, nil
	}
	seq, err = strconv.ParseInt(v, 10, 64)
	if err != nil || seq < 0 {
		return 0, false, fault.Invalidf("INVALID_LAST_EVENT_ID", "Last-Event-ID must be an event id this stream sent")
	}
	return seq, true, nil
}

// sse writes one stream's events.
type sse struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	buf    []byte
	unread int64 // the count last sent; -1 before the first
}

// catchUp sends the notifications changed after sequence number last, and the unread count if it changed, and
// returns the last sequence number sent.
func (o *sse) catchUp(ctx context.Context, s *Service, user, last int64) (int64, error) {
	// The count is read before the notifications: a notification committed in between is then sent before a count
	// that includes it (its own wake-up sends that count), never after.
	_, unread, err := s.state(ctx, user)
	if err != nil {
		return last, err
	}
	for {
		page, err := s.since(ctx, user, last, streamPageSize)
		if err != nil {
			return last, err
		}
		for _, n := range page {
			body, err := json.Marshal(toJSON(n))
			if err != nil {
				return last, err
			}
			o.buf = fmt.Appendf(o.buf, "id: %d\nevent: notification\ndata: %s\n\n", n.Seq, body)
			last = n.Seq
		}
		if len(page) < streamPageSize {
			break
		}
		if err := o.flush(); err != nil {
			return last, err
		}
	}
	if unread != o.unread {
		o.buf = fmt.Appendf(o.buf, "id: %d\nevent: unread\ndata: {\"count\":%d}\n\n", last, unread)
		o.unread = unread
	}
	return last, o.flush()
}

// flush writes what is buffered, within the write deadline.
func (o *sse) flush() error {
	if len(o.buf) == 0 {
		return nil
	}
	if err := o.rc.SetWriteDeadline(time.Now().Add(streamWrite)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := o.w.Write(o.buf); err != nil {
		return err
	}
	o.buf = o.buf[:0]
	return o.rc.Flush()
}
