package mail

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/mail/mailpit"
)

var installed struct {
	once sync.Once
	path string
	err  error
}

// mailpitBinary returns the mailpit binary (mailpit.ForTests), failing the test without one in CI, where
// BOARD_TEST_MAILPIT names it, and skipping it elsewhere if mailpit cannot be built.
func mailpitBinary(t *testing.T) string {
	t.Helper()
	installed.once.Do(func() { installed.path, installed.err = mailpit.ForTests(context.Background()) })
	if installed.err != nil {
		if os.Getenv("CI") != "" || os.Getenv(mailpit.TestEnv) != "" {
			t.Fatalf("no mailpit (see scripts/mailpit): %v", installed.err)
		}
		t.Skipf("no mailpit: %s is unset and it could not be built: %v", mailpit.TestEnv, installed.err)
	}
	return installed.path
}

// startMailpit starts a mailpit of the test's own, killed when the test ends.
func startMailpit(t *testing.T, args ...string) *mailpit.Server {
	t.Helper()
	s, err := mailpit.Start(mailpitBinary(t), t.TempDir(), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// testLogger passes warnings and errors to the test's output until the test ends.
func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{w: t.Output()}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	mu   sync.Mutex
	w    io.Writer
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	return w.w.Write(p)
}

// sampleMail is a mail to user n, with an HTML alternative and an unsubscribe link when full.
func sampleMail(id int64, to string, full bool) event.Mail {
	m := event.Mail{MailID: apijson.ID(id), Kind: event.MailNotification, UserID: 7, To: to,
		Subject: "A reply to your article", Text: "Someone replied.\n\nRead it at http://localhost:8080/articles/1",
		At: apijson.Time(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))}
	if full {
		m.HTML = "<p>Someone <b>replied</b>.</p>"
		m.Unsubscribe = "http://localhost:8080/unsubscribe/7.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"
	}
	return m
}

// envelope is the event of m.
func envelope(t testing.TB, m event.Mail) event.Envelope {
	t.Helper()
	payload, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return event.Envelope{EventID: m.MailID, Type: event.MailRequested, Payload: payload}
}
