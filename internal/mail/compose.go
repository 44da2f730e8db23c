package mail

import (
	"fmt"
	netmail "net/mail"
	"net/url"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"board/internal/event"
)

// DefaultFrom is the sender of the mails when none is configured.
const DefaultFrom = "board <noreply@localhost>"

// sender is the parsed From of the mails.
type sender struct {
	addr *netmail.Address
	host string // the domain of its address, which Message-IDs end with
}

// parseFrom reads a From address such as `board <noreply@example.com>`.
func parseFrom(from string) (sender, error) {
	addr, err := netmail.ParseAddress(from)
	if err != nil {
		return sender{}, fmt.Errorf("mail: from %q: %w", from, err)
	}
	_, host, _ := strings.Cut(addr.Address, "@")
	return sender{addr: addr, host: host}, nil
}

// check returns event.ErrMalformed, which dead-letters the record, for a mail that could never be sent.
func check(m event.Mail) error {
	malformed := func(format string, args ...any) error {
		return fmt.Errorf("%w: mail %s: %s", event.ErrMalformed, m.MailID, fmt.Sprintf(format, args...))
	}
	if m.MailID <= 0 {
		return malformed("no mailId")
	}
	if _, err := netmail.ParseAddress(m.To); err != nil {
		return malformed("to %q: %v", m.To, err)
	}
	if m.Text == "" && m.HTML == "" {
		return malformed("no body")
	}
	if m.Unsubscribe != "" {
		u, err := url.Parse(m.Unsubscribe)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return malformed("unsubscribe %q is not an http(s) URL", m.Unsubscribe)
		}
	}
	return nil
}

// oneLine keeps a header value on one line: a line break in a subject would start a header of its own.
var oneLine = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ")

// compose builds the message of m: both Senders write the same bytes but for what the SMTP server adds.
func compose(from sender, m event.Mail) (*gomail.Msg, error) {
	msg := gomail.NewMsg()
	msg.FromMailAddress(from.addr)
	if err := msg.To(m.To); err != nil {
		return nil, fmt.Errorf("%w: mail %s: to %q: %w", event.ErrMalformed, m.MailID, m.To, err)
	}
	msg.Subject(oneLine.Replace(m.Subject))
	// The id names the mail for good: a mail sent twice (see the package doc) shows as the same message.
	msg.SetMessageIDWithValue(m.MailID.String() + "@" + from.host)
	at := time.Time(m.At)
	if at.IsZero() {
		at = time.Now()
	}
	msg.SetDateWithValue(at)
	if m.Unsubscribe != "" {
		// RFC 8058 one-click unsubscribe: the mail client POSTs List-Unsubscribe=One-Click to the URL.
		msg.SetGenHeader(gomail.HeaderListUnsubscribe, "<"+m.Unsubscribe+">")
		msg.SetGenHeader(gomail.HeaderListUnsubscribePost, "List-Unsubscribe=One-Click")
	}
	switch {
	case m.Text != "" && m.HTML != "":
		msg.SetBodyString(gomail.TypeTextPlain, m.Text)
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	case m.Text != "":
		msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	default:
		msg.SetBodyString(gomail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}
