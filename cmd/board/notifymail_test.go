package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/kafka"
)

// publishEvent publishes an event to its topic on the program's broker, as a relay would, and returns the record
// with its offset.
func publishEvent(t *testing.T, p *program, id int64, typ event.Type, key int64, payload any) *kgo.Record {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	value, err := event.Encode(id, typ, body)
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
	rec := kafka.EventRecord(typ.Topic("board-"), key, id, typ, value)
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("publish %s: %v", typ, err)
	}
	return rec
}

// TestNotificationMail: through the running services, a user who asks for notifications by e-mail, and whose address
// the user service verified, is mailed a reply: a MAIL_REQUESTED on the mail topic, keyed by her user id, with a
// one-click unsubscribe link under --public-url, which works without a token and is held to its rate limit.
func TestNotificationMail(t *testing.T) {
	t.Parallel()
	flags := append(testFlags(t, t.TempDir()), "--rate-limits=true", "--email-unsubscribe-rate-limit", "3/1h",
		"--public-url", "https://board.example/")
	p := startProgram(t, flags)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the board's log:\n%s", p.logs)
		}
	})
	n := p.urls["notification"]
	aliceID, alice := signUp(t, p, "alice")
	_, bob := signUp(t, p, "bob")
	prefs := map[string]any{"reply": true, "commentReply": true, "like": true, "moderation": true, "email": "immediate"}
	if a := sendAs(t, bearer(alice), "PUT", n+"/v1/notification-preferences", prefs); a.status != http.StatusOK {
		t.Fatalf("preferences: %d %s", a.status, a.body)
	}
	rec := publishEvent(t, p, 1, event.UserEmailVerified, aliceID, event.EmailVerified{UserID: apijson.ID(aliceID),
		Email: "alice@example.org", EmailVersion: 1, At: apijson.Time(time.Now())})
	handledBy(t, p, "notification", rec)

	article := writeArticle(t, p, alice, 1, "tell me")
	postComment(t, p.urls["comment"], bob, article, "")
	mails := readTopic(t, p, "board-mail", 1)
	env, err := event.Decode(mails[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	m, err := event.Payload[event.Mail](env)
	if err != nil {
		t.Fatal(err)
	}
	token, ok := strings.CutPrefix(m.Unsubscribe, "https://board.example/unsubscribe/")
	if string(mails[0].Key) != strconv.FormatInt(aliceID, 10) || m.To != "alice@example.org" || int64(m.UserID) != aliceID ||
		m.Kind != event.MailNotification || !ok || !strings.Contains(m.Text, "https://board.example/articles/"+article) {
		t.Fatalf("mail key %q: %+v", mails[0].Key, m)
	}

	if a := sendAs(t, "", "POST", n+"/v1/email-unsubscribe/"+token, nil); a.status != http.StatusNoContent {
		t.Fatalf("unsubscribe: %d %s", a.status, a.body)
	}
	var got struct{ Email string }
	if a := getAs(t, alice, n+"/v1/notification-preferences", &got); a.status != http.StatusOK || got.Email != "off" {
		t.Errorf("preferences after the unsubscribe: %d %s", a.status, a.body)
	}
	for i, want := range []int{http.StatusNotFound, http.StatusNotFound, http.StatusTooManyRequests} {
		forged := strings.Split(token, ".")[0] + "." + strings.Repeat("A", 43)
		if a := sendAs(t, "", "POST", n+"/v1/email-unsubscribe/"+forged, nil); a.status != want {
			t.Errorf("forged token %d: %d %s, want %d", i+1, a.status, a.body, want)
		}
	}
}
