package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/auth"
	"board/internal/event"
	"board/internal/kafka"
)

// sessionProbe is a request to one service's port that its guard checks the token of: a write, or a read that
// carries the token.
type sessionProbe struct {
	service, method, path string
	body                  any
}

// sessionProbes are a write and a read on every service port that has each. The reads that need no token are sent
// as HEAD: their documents do not list the 401 that a read carrying a bad token gets, and the OpenAPI check skips
// HEAD, which the guard checks as the GET it is.
func sessionProbes(user int64) []sessionProbe {
	id := strconv.FormatInt(user, 10)
	return []sessionProbe{
		{"user", "GET", "/v1/blocks", nil},
		{"user", "PUT", "/v1/blocks/1", nil},
		{"article", "HEAD", "/v1/articles/1", nil},
		{"article", "POST", "/v1/articles", map[string]any{"title": "t", "content": "c", "boardId": 3}},
		{"comment", "HEAD", "/v2/comments/1", nil},
		{"comment", "POST", "/v2/comments", map[string]any{"articleId": "1", "content": "c"}},
		{"like", "HEAD", "/v1/article-likes/articles/1/count", nil},
		{"like", "POST", "/v1/article-likes/articles/1/users/" + id, nil},
		{"view", "HEAD", "/v1/article-views/articles/1/count", nil},
		{"view", "POST", "/v1/article-views/articles/1/users/" + id, nil},
		{"hot-article", "HEAD", "/v1/hot-articles/articles/date/20260101", nil},
		{"article-read", "HEAD", "/v1/articles/1", nil},
		{"moderation", "GET", "/v1/reports", nil},
		{"moderation", "POST", "/v1/reports", map[string]any{"targetType": "article", "targetId": "1", "reason": "spam"}},
		{"search", "HEAD", "/v1/search?q=board", nil},
		{"notification", "GET", "/v1/notifications", nil},
		{"notification", "PUT", "/v1/notification-preferences", map[string]any{}},
		{"media", "HEAD", "/v1/avatars/" + id, nil},
		{"media", "DELETE", "/v1/users/me/avatar", nil},
	}
}

// refusedProbes returns what of probes p's ports do not refuse as an ended session (401 UNAUTHENTICATED, saying so,
// with WWW-Authenticate), or, with refused false, what they refuse as such or at all with 401.
func refusedProbes(t *testing.T, p *program, token string, probes []sessionProbe, refused bool) []string {
	t.Helper()
	var wrong []string
	for _, pr := range probes {
		a := sendAs(t, bearer(token), pr.method, p.urls[pr.service]+pr.path, pr.body)
		var e struct{ Code, Message string }
		_ = json.Unmarshal(a.body, &e)
		ended := a.status == http.StatusUnauthorized && strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") &&
			(pr.method == "HEAD" || e.Code == "UNAUTHENTICATED" && e.Message == "this session has ended; sign in again")
		if refused != ended || (!refused && a.status == http.StatusUnauthorized) {
			wrong = append(wrong, fmt.Sprintf("%s %s %s: %d %s", pr.service, pr.method, pr.path, a.status, bytes.TrimSpace(a.body)))
		}
	}
	return wrong
}

// webSignedIn opens the home page of p's web with token as the session cookie, and tells whether it names the
// user and whether it clears the cookie.
func webSignedIn(t *testing.T, p *program, token, name string) (named, cleared bool) {
	t.Helper()
	req, err := http.NewRequest("GET", p.urls["web"]+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "board_session", Value: token})
	req.Header.Set(noTokenHeader, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, c := range resp.Cookies() {
		cleared = cleared || (c.Name == "board_session" && c.MaxAge < 0)
	}
	return strings.Contains(string(body), `<span id="nav-user" class="who">`+name+`</span>`), cleared
}

// publishSession publishes a user's session event on the session topic, keyed by the user's id, as the user
// service's relay would.
func publishSession(t *testing.T, p *program, id int64, typ event.Type, user int64, payload any) {
	t.Helper()
	cfg, err := app.ParseServe(p.flags, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	value, err := event.Encode(id, typ, raw)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.logs.kafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kafka.EventRecord(typ.Topic(cfg.TopicPrefix), user, id, typ, value)).FirstErr(); err != nil {
		t.Fatalf("publish %s: %v", typ, err)
	}
}

// A password change ends the user's earlier sessions on every port of every instance, without waiting for their
// tokens to expire: once USER_PASSWORD_CHANGED is on the session topic, a token signed before it is refused with 401
// by each service's writes and by its reads that carry it, and the web signs its cookie out, on both instances;
// a token signed at the new epoch works everywhere. A deletion then ends that one too. How long each took to arrive
// is logged, not asserted (the machine is shared): it is the ban's path, which arrives within a second.
func TestPasswordChangeEndsSessionsEverywhere(t *testing.T) {
	t.Parallel()
	first := startProgram(t, testFlags(t, t.TempDir()))
	second := secondInstance(t, first)
	programs := []*program{first, second}
	alice, old := signUp(t, first, "alice")
	probes := sessionProbes(alice)
	for _, s := range app.ServiceNames() {
		// The web is probed on its own below; mail has no API, only health, readiness and metrics.
		if s != "web" && s != "mail" && !slices.ContainsFunc(probes, func(pr sessionProbe) bool { return pr.service == s }) {
			t.Errorf("service %s has no probe: every port must be shown to end sessions", s)
		}
	}
	for i, p := range programs {
		if wrong := refusedProbes(t, p, old, probes, false); len(wrong) > 0 {
			t.Fatalf("instance %d refuses alice's token before any change:\n%s", i+1, strings.Join(wrong, "\n"))
		}
		if named, cleared := webSignedIn(t, p, old, "alice"); !named || cleared {
			t.Fatalf("instance %d's web: named %v, cookie cleared %v before any change", i+1, named, cleared)
		}
	}

	publishSession(t, first, 1, event.UserPasswordChanged, alice, event.Session{UserID: apijson.ID(alice), TokenEpoch: 1,
		Reason: event.SessionPasswordChanged, At: apijson.Time(time.Now())})
	changed := time.Now()
	for i, p := range programs {
		eventually(t, func() string {
			if wrong := refusedProbes(t, p, old, probes, true); len(wrong) > 0 {
				return fmt.Sprintf("instance %d still takes the token signed before the change:\n%s", i+1, strings.Join(wrong, "\n"))
			}
			if named, cleared := webSignedIn(t, p, old, "alice"); named || !cleared {
				return fmt.Sprintf("instance %d's web: named %v, cookie cleared %v after the change", i+1, named, cleared)
			}
			return ""
		})
		t.Logf("instance %d refused the old token on every port %v after the change was published", i+1,
			time.Since(changed).Round(time.Millisecond))
	}

	renewed := minterOf(t, first).token(t, auth.Principal{UserID: alice, Role: auth.RoleUser, TokenEpoch: 1})
	for i, p := range programs {
		if wrong := refusedProbes(t, p, renewed, probes, false); len(wrong) > 0 {
			t.Errorf("instance %d refuses a token of the new epoch:\n%s", i+1, strings.Join(wrong, "\n"))
		}
		if named, cleared := webSignedIn(t, p, renewed, "alice"); !named || cleared {
			t.Errorf("instance %d's web with a token of the new epoch: named %v, cookie cleared %v", i+1, named, cleared)
		}
	}

	publishSession(t, first, 2, event.UserDeleted, alice, event.UserDeletion{UserID: apijson.ID(alice), Content: event.DeleteKeep,
		TokenEpoch: 2, At: apijson.Time(time.Now())})
	for i, p := range programs {
		eventually(t, func() string {
			if wrong := refusedProbes(t, p, renewed, probes, true); len(wrong) > 0 {
				return fmt.Sprintf("instance %d still takes a deleted user's token:\n%s", i+1, strings.Join(wrong, "\n"))
			}
			return ""
		})
	}
}
