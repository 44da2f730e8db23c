package mail

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	netmail "net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"board/internal/fault"
	"board/internal/polltest"
)

// The shared suite of the Senders: each engine delivers the same message, read back from where it went (mailpit's
// API, the directory's files).

// received reads back every message an engine delivered, raw, in no particular order.
type received func(t *testing.T) [][]byte

type engine struct {
	name  string
	start func(t *testing.T, from string) (Sender, received)
}

var engines = []engine{
	{"dir", func(t *testing.T, from string) (Sender, received) {
		dir := filepath.Join(t.TempDir(), "mail")
		d, err := NewDir(dir, from)
		if err != nil {
			t.Fatal(err)
		}
		return d, func(t *testing.T) [][]byte {
			files, err := filepath.Glob(filepath.Join(dir, "*"))
			if err != nil {
				t.Fatal(err)
			}
			var out [][]byte
			for _, f := range files {
				if !strings.HasSuffix(f, ".eml") || strings.HasPrefix(filepath.Base(f), ".") {
					t.Errorf("%s: a file that is no mail's", f)
					continue
				}
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, b)
			}
			return out
		}
	}},
	{"smtp", func(t *testing.T, from string) (Sender, received) {
		srv := startMailpit(t)
		s, err := NewSMTP(SMTPConfig{Addr: srv.SMTPAddr, From: from})
		if err != nil {
			t.Fatal(err)
		}
		return s, func(t *testing.T) [][]byte {
			ctx := context.Background()
			msgs, err := srv.Messages(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out [][]byte
			for _, m := range msgs {
				raw, err := srv.Raw(ctx, m.ID)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, raw)
			}
			return out
		}
	}},
}

func TestSenders(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			senderSuite(t, e)
		})
	}
}

func senderSuite(t *testing.T, e engine) {
	ctx := context.Background()
	t.Run("plain", func(t *testing.T) {
		s, inbox := e.start(t, DefaultFrom)
		m := sampleMail(1001, "reader@example.com", false)
		if err := s.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		msg := only(t, inbox)
		wantHeaders(t, msg, map[string]string{"From": `"board" <noreply@localhost>`, "To": "<reader@example.com>",
			"Subject": m.Subject, "Message-Id": "<1001@localhost>", "Date": "Sun, 29 Nov 2026 12:00:00 +0000",
			"List-Unsubscribe": "", "List-Unsubscribe-Post": ""})
		parts := bodyParts(t, msg)
		if len(parts) != 1 || parts["text/plain"] != m.Text {
			t.Errorf("body parts %q, want the text alone: %q", parts, m.Text)
		}
	})
	t.Run("html and unsubscribe", func(t *testing.T) {
		s, inbox := e.start(t, "Board News <news@board.example>")
		m := sampleMail(1002, "reader@example.com", true)
		if err := s.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		msg := only(t, inbox)
		wantHeaders(t, msg, map[string]string{"From": `"Board News" <news@board.example>`,
			"Message-Id": "<1002@board.example>", "List-Unsubscribe": "<" + m.Unsubscribe + ">",
			"List-Unsubscribe-Post": "List-Unsubscribe=One-Click"})
		parts := bodyParts(t, msg)
		if len(parts) != 2 || parts["text/plain"] != m.Text || parts["text/html"] != m.HTML {
			t.Errorf("body parts %q, want the text and the HTML", parts)
		}
	})
	t.Run("a line break cannot add a header", func(t *testing.T) {
		s, inbox := e.start(t, DefaultFrom)
		m := sampleMail(1003, "reader@example.com", false)
		m.Subject = "Hello\r\nBcc: everyone@example.com"
		if err := s.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		wantHeaders(t, only(t, inbox), map[string]string{"Subject": "Hello Bcc: everyone@example.com", "Bcc": ""})
	})
	t.Run("non-ASCII", func(t *testing.T) {
		s, inbox := e.start(t, DefaultFrom)
		m := sampleMail(1004, "독자@example.com", false)
		m.Subject, m.Text = "새 댓글이 달렸습니다", "글에 답글이 달렸습니다. ✓"
		if err := s.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		msg := only(t, inbox)
		wantHeaders(t, msg, map[string]string{"Subject": m.Subject})
		if got := bodyParts(t, msg)["text/plain"]; got != m.Text {
			t.Errorf("text %q, want %q", got, m.Text)
		}
	})
	t.Run("concurrent sends", func(t *testing.T) {
		s, inbox := e.start(t, DefaultFrom)
		const n = 24
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if err := s.Send(ctx, sampleMail(int64(2000+i), fmt.Sprintf("r%d@example.com", i), i%2 == 0)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		ids := map[string]bool{}
		for _, raw := range inbox(t) {
			ids[parse(t, raw).Header.Get("Message-Id")] = true
		}
		if len(ids) != n {
			t.Errorf("%d distinct mails delivered, want %d", len(ids), n)
		}
	})
}

// only returns the one message delivered, waiting for it (mailpit stores what it accepted in the background).
func only(t *testing.T, inbox received) *netmail.Message {
	t.Helper()
	var got [][]byte
	polltest.Until(t, 10*time.Second, func() (bool, string) {
		got = inbox(t)
		return len(got) > 0, "no mail delivered"
	})
	if len(got) != 1 {
		t.Fatalf("%d mails delivered, want 1", len(got))
	}
	return parse(t, got[0])
}

func parse(t *testing.T, raw []byte) *netmail.Message {
	t.Helper()
	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("not an RFC 5322 message: %v\n%s", err, raw)
	}
	return msg
}

// wantHeaders checks the headers of msg, decoded; "" wants the header absent.
func wantHeaders(t *testing.T, msg *netmail.Message, want map[string]string) {
	t.Helper()
	dec := new(mime.WordDecoder)
	for name, w := range want {
		values := msg.Header[name]
		switch {
		case w == "" && len(values) > 0:
			t.Errorf("%s: %q, want none", name, values)
		case w == "":
		case len(values) != 1:
			t.Errorf("%s: %q, want one: %q", name, values, w)
		default:
			got, err := dec.DecodeHeader(values[0])
			if err != nil || got != w {
				t.Errorf("%s: %q (%v), want %q", name, got, err, w)
			}
		}
	}
}

// bodyParts returns the text parts of msg by content type, decoded.
func bodyParts(t *testing.T, msg *netmail.Message) map[string]string {
	t.Helper()
	parts := map[string]string{}
	var walk func(header map[string][]string, body io.Reader)
	walk = func(header map[string][]string, body io.Reader) {
		get := func(k string) string {
			if v := header[k]; len(v) > 0 {
				return v[0]
			}
			return ""
		}
		mediaType, params, err := mime.ParseMediaType(get("Content-Type"))
		if err != nil {
			t.Fatalf("Content-Type %q: %v", get("Content-Type"), err)
		}
		if strings.HasPrefix(mediaType, "multipart/") {
			r := multipart.NewReader(body, params["boundary"])
			for {
				p, err := r.NextRawPart()
				if err == io.EOF {
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				walk(p.Header, p)
			}
		}
		switch strings.ToLower(get("Content-Transfer-Encoding")) {
		case "quoted-printable":
			body = quotedprintable.NewReader(body)
		case "base64":
			body = base64.NewDecoder(base64.StdEncoding, body)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		// SMTP ends a body that does not end with a line break with one.
		parts[mediaType] = strings.TrimSuffix(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
	}
	walk(msg.Header, msg.Body)
	return parts
}

// The directory's files are written whole and named by the mail id: a mail sent again replaces its own file, and
// no temporary file stays behind.
func TestDirWritesEachMailOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := NewDir(dir, DefaultFrom)
	if err != nil {
		t.Fatal(err)
	}
	m := sampleMail(42, "reader@example.com", true)
	for range 3 {
		if err := d.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "42.eml" {
		t.Fatalf("files %v, want 42.eml alone", entries)
	}
	// A directory it cannot write into (here a file took its place) is a dependency down: the mail waits.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Send(context.Background(), sampleMail(43, "reader@example.com", false)); fault.KindOf(err) != fault.Unavailable {
		t.Errorf("send into a directory that is gone: %v, want fault.Unavailable", err)
	}
}
