package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/event"
	"board/internal/mail/mailpit"
	"board/internal/polltest"
)

// A board without --smtp-addr says at start where its mails go, and its mail service writes each MAIL_REQUESTED
// it reads as <mailId>.eml under --data-dir/mail.
func TestMailServiceWritesFilesWithoutSMTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startProgram(t, testFlags(t, dir))
	want := "mail: no --smtp-addr; mails are written as files under " + filepath.Join(dir, "mail")
	if !strings.Contains(p.logs.String(), want) {
		t.Errorf("the start log does not say %q:\n%s", want, p.logs)
	}
	payload, err := json.Marshal(map[string]any{"mailId": "314", "kind": event.MailVerifyEmail, "userId": "9",
		"to": "new@example.com", "subject": "Verify your address", "text": "Follow http://localhost:8080/verify-email/x",
		"at": "2026-11-29T12:00:00.000Z"})
	if err != nil {
		t.Fatal(err)
	}
	value, err := event.Encode(314, event.MailRequested, payload)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.logs.kafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rec := &kgo.Record{Topic: event.MailRequested.Topic("board-"), Key: []byte("new@example.com"), Value: value}
	if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "mail", "314.eml")
	var eml []byte
	polltest.Until(t, 30*time.Second, func() (bool, string) {
		eml, err = os.ReadFile(file)
		return err == nil, fmt.Sprint(err)
	})
	for _, h := range []string{"Message-ID: <314@localhost>", "To: <new@example.com>", "Subject: Verify your address"} {
		if !bytes.Contains(eml, []byte(h)) {
			t.Errorf("%s lacks %q:\n%s", file, h, eml)
		}
	}
	resp, err := http.Get(p.urls["mail"] + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /readyz of the mail service: %s", resp.Status)
	}
}

// The mail bench delivers every mail across the server's outage and prints its figures beside the floor.
func TestBenchMailDeliversEveryMail(t *testing.T) {
	t.Parallel()
	bin, err := mailpit.ForTests(context.Background())
	if err != nil {
		if os.Getenv(mailpit.TestEnv) != "" {
			t.Fatal(err)
		}
		t.Skipf("no mailpit: %s is unset and it could not be built: %v", mailpit.TestEnv, err)
	}
	var out bytes.Buffer
	args := append([]string{"bench", "mail", "--mails", "60", "--outage", "1s", "--mailpit", bin}, testFlags(t, t.TempDir())...)
	if err := run(context.Background(), args, noEnv, &out, &bytes.Buffer{}); err != nil {
		t.Fatalf("bench mail: %v\n%s", err, out.String())
	}
	for _, want := range []string{"delivered     60 of 60", "dead letters  0", "floor: go-mail"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bench mail printed no %q:\n%s", want, out.String())
		}
	}
}

func TestMailFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"bench", "mail", "--help"}, {"serve", "--help"}} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, noEnv, &out, &errOut); err != nil {
			t.Errorf("board %s: %v", strings.Join(args, " "), err)
		}
		if !strings.Contains(errOut.String()+out.String(), "smtp") && !strings.Contains(errOut.String()+out.String(), "mailpit") {
			t.Errorf("board %s says nothing of mail:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
		}
	}
	for _, args := range [][]string{{"serve", "--smtp-tls", "sometimes"}, {"serve", "--smtp-from", "not an address"},
		{"serve", "--smtp-addr", "smtp.example.com"}, {"bench", "mail", "--mails", "1"}} {
		if err := run(context.Background(), args, noEnv, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("board %s: no error", strings.Join(args, " "))
		}
	}
}
