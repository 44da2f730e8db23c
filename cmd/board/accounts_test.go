package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"board/internal/event"
)

// mailLink returns the token of the link to page in the newest of the n mails on the program's mail topic.
func mailLink(t *testing.T, p *program, n int, page, to string) string {
	t.Helper()
	records := readTopic(t, p, "board-mail", n)
	env, err := event.Decode(records[n-1].Value)
	if err != nil {
		t.Fatal(err)
	}
	var m event.Mail
	if err := json.Unmarshal(env.Payload, &m); err != nil {
		t.Fatal(err)
	}
	match := regexp.MustCompile(`https://board\.test/` + page + `/([0-9]+\.[A-Za-z0-9_-]{43})`).FindStringSubmatch(m.Text)
	if env.Type != event.MailRequested || m.To != to || match == nil {
		t.Fatalf("mail %d is not a %s link to %s: %s", n, page, to, env.Payload)
	}
	return match[1]
}

// The account routes through a running board: an address added and verified, a password reset by mail, changed,
// and every session ended; the events reach their topics keyed by the user. Every exchange is checked against the
// user service's OpenAPI document (validateAPI).
func TestAccountsEndToEnd(t *testing.T) {
	t.Parallel()
	p := startProgram(t, append(testFlags(t, t.TempDir()), "--public-url", "https://board.test"))
	users := p.urls["user"]
	alice, token := signUp(t, p, "alice")

	if a := sendAs(t, bearer(token), "PUT", users+"/v1/users/me/email", map[string]any{"email": "Alice@Example.org", "password": "alice-password"}); a.status != http.StatusAccepted {
		t.Fatalf("change e-mail: %d %s", a.status, a.body)
	}
	verify := mailLink(t, p, 1, "verify-email", "alice@example.org")
	if a := sendAs(t, "", "POST", users+"/v1/email-verifications/"+verify, nil); a.status != http.StatusOK {
		t.Fatalf("verify: %d %s", a.status, a.body)
	}
	if a := sendAs(t, "", "POST", users+"/v1/email-verifications/"+verify, nil); a.status != http.StatusBadRequest || a.code() != "INVALID_TOKEN" {
		t.Errorf("verify again: %d %s", a.status, a.body)
	}
	a := sendAs(t, bearer(token), "GET", users+"/v1/users/me", nil)
	var me struct {
		Email        *string
		PendingEmail *string
		HasPassword  bool
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &me) != nil || me.Email == nil || *me.Email != "alice@example.org" || me.PendingEmail != nil || !me.HasPassword {
		t.Errorf("me: %d %s", a.status, a.body)
	}

	for _, addr := range []string{"alice@example.org", "nobody@example.org"} {
		if a := sendAs(t, "", "POST", users+"/v1/password-resets", map[string]any{"email": addr}); a.status != http.StatusAccepted || string(a.body) != "{}\n" {
			t.Errorf("reset for %s: %d %s", addr, a.status, a.body)
		}
	}
	reset := mailLink(t, p, 2, "reset-password", "alice@example.org")
	if a := sendAs(t, "", "POST", users+"/v1/password-resets/"+reset, map[string]any{"new": "alice-new-password"}); a.status != http.StatusNoContent {
		t.Fatalf("reset: %d %s", a.status, a.body)
	}
	if a := sendAs(t, "", "POST", users+"/v1/password-resets/"+reset, map[string]any{"new": "alice-other-password"}); a.status != http.StatusBadRequest || a.code() != "INVALID_TOKEN" {
		t.Errorf("reset again: %d %s", a.status, a.body)
	}

	a = sendAs(t, "", "POST", users+"/v1/tokens", map[string]any{"username": "alice", "password": "alice-new-password"})
	var tok struct{ AccessToken string }
	if a.status != http.StatusOK || json.Unmarshal(a.body, &tok) != nil {
		t.Fatalf("sign in with the new password: %d %s", a.status, a.body)
	}
	if a := sendAs(t, bearer(tok.AccessToken), "PUT", users+"/v1/users/me/password", map[string]any{"current": "wrong-password", "new": "alice-third-password"}); a.status != http.StatusUnauthorized || a.code() != "BAD_CREDENTIALS" {
		t.Errorf("change with a wrong password: %d %s", a.status, a.body)
	}
	a = sendAs(t, bearer(tok.AccessToken), "PUT", users+"/v1/users/me/password", map[string]any{"current": "alice-new-password", "new": "alice-third-password"})
	if a.status != http.StatusOK || json.Unmarshal(a.body, &tok) != nil {
		t.Fatalf("change the password: %d %s", a.status, a.body)
	}
	if a := sendAs(t, bearer(tok.AccessToken), "DELETE", users+"/v1/users/me/sessions", nil); a.status != http.StatusOK {
		t.Errorf("end sessions: %d %s", a.status, a.body)
	}

	key := []byte(strconv.FormatInt(alice, 10))
	for topic, n := range map[string]int{"board-session": 3, "board-account": 1} {
		for _, r := range readTopic(t, p, topic, n) {
			if string(r.Key) != string(key) {
				t.Errorf("%s record keyed %q, want the user id %s", topic, r.Key, key)
			}
		}
	}
}
