package mail

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"board/internal/event"
	"board/internal/fault"
)

// The TLS policies of SMTPConfig.TLS (--smtp-tls).
const (
	TLSOpportunistic = "opportunistic" // STARTTLS when the server offers it, else in the clear
	TLSMandatory     = "mandatory"     // STARTTLS or no mail
	TLSNone          = "none"          // never STARTTLS
)

// sendTimeout bounds each step of one send: the dial, the greeting and STARTTLS, then the transaction (go-mail
// renews the connection's deadline before it). A server slower than that is taken for down, and the mail is sent
// again later.
const sendTimeout = 30 * time.Second

// SMTPConfig configures the SMTP Sender.
type SMTPConfig struct {
	Addr     string // host:port of the server
	From     string // the mails' From, e.g. `board <noreply@example.com>`
	Username string // with Password, log in (NewSMTP says by which mechanisms)
	Password string
	TLS      string // TLSOpportunistic (the default when empty), TLSMandatory or TLSNone
}

// SMTP sends mails to an SMTP server, a connection each.
type SMTP struct {
	host string
	opts []gomail.Option
	from sender
}

// NewSMTP checks cfg and returns its Sender; it connects only to send.
func NewSMTP(cfg SMTPConfig) (*SMTP, error) {
	from, err := parseFrom(cfg.From)
	if err != nil {
		return nil, err
	}
	host, portText, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("mail: SMTP address %q: want host:port", cfg.Addr)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("mail: SMTP address %q: bad port", cfg.Addr)
	}
	policy, err := tlsPolicy(cfg.TLS)
	if err != nil {
		return nil, err
	}
	opts := []gomail.Option{gomail.WithPort(port), gomail.WithTimeout(sendTimeout), gomail.WithTLSPolicy(policy)}
	if cfg.Username != "" {
		// The first of these the server offers. Those that send the password itself (PLAIN, LOGIN) refuse to
		// without TLS, but to localhost, 127.0.0.1 or ::1 (as Go's net/smtp): a password never crosses a network in
		// the clear.
		opts = append(opts, gomail.WithOpportunisticSMTPAuth(gomail.SMTPAuthSCRAMSHA256PLUS, gomail.SMTPAuthSCRAMSHA256,
			gomail.SMTPAuthSCRAMSHA1PLUS, gomail.SMTPAuthSCRAMSHA1, gomail.SMTPAuthCramMD5, gomail.SMTPAuthPlain,
			gomail.SMTPAuthLogin), gomail.WithUsername(cfg.Username), gomail.WithPassword(cfg.Password))
	}
	if _, err := gomail.NewClient(host, opts...); err != nil {
		return nil, fmt.Errorf("mail: SMTP client: %w", err)
	}
	return &SMTP{host: host, opts: opts, from: from}, nil
}

// ParseTLS checks a --smtp-tls value.
func ParseTLS(v string) error {
	_, err := tlsPolicy(v)
	return err
}

func tlsPolicy(v string) (gomail.TLSPolicy, error) {
	switch v {
	case TLSOpportunistic, "":
		return gomail.TLSOpportunistic, nil
	case TLSMandatory:
		return gomail.TLSMandatory, nil
	case TLSNone:
		return gomail.NoTLS, nil
	}
	return 0, fmt.Errorf("want %s, %s or %s, not %q", TLSOpportunistic, TLSMandatory, TLSNone, v)
}

// Send implements Sender.
func (s *SMTP) Send(ctx context.Context, m event.Mail) error {
	msg, err := compose(s.from, m)
	if err != nil {
		return err
	}
	// A client per send, as cheap as a struct: a go-mail client keeps state of its sessions (the login mechanism
	// it settled on), which concurrent sends must not share.
	client, err := gomail.NewClient(s.host, s.opts...)
	if err != nil {
		return fault.Unavailablef(err, "SMTP_UNAVAILABLE", "cannot make an SMTP client")
	}
	err = client.DialAndSendWithContext(ctx, msg)
	if err != nil && !msg.IsDelivered() {
		return smtpFault(err)
	}
	// The server answered 250 to the mail's data, so it has it, even when what follows (RSET, QUIT) failed: sent
	// again, it would be there twice.
	return nil
}

// smtpFault says what a failed send leads to. A 5xx to the mail's recipient or content (RCPT TO, DATA) refuses it
// for good: fault.Invalid, and the mail is dead-lettered. Everything else may go through later: a 4xx, a server that
// does not answer or drops the connection, and also what is wrong with the server or its configuration rather than
// with the mail: a refused login, no STARTTLS under --smtp-tls mandatory, a refused sender (MAIL FROM: every mail
// has the same one) and a refusal for policy (enhanced status 5.7.x: authentication required, relaying denied). Those
// are fault.Unavailable: the mail waits, with every mail after it, until the server or the flags are mended, rather
// than every reset link going to the dead letters.
func smtpFault(err error) error {
	var se *gomail.SendError
	if errors.As(err, &se) && !se.IsTemp() && se.ErrorCode() >= 500 && se.ErrorCode() <= 599 &&
		!strings.HasPrefix(se.EnhancedStatusCode(), "5.7.") {
		switch se.Reason {
		case gomail.ErrSMTPRcptTo, gomail.ErrSMTPData, gomail.ErrSMTPDataClose:
			return &fault.Error{Kind: fault.Invalid, Code: "MAIL_REFUSED",
				Message: fmt.Sprintf("the SMTP server refused the mail (%d)", se.ErrorCode()), Err: err}
		}
	}
	return fault.Unavailablef(err, "SMTP_UNAVAILABLE", "the SMTP server did not take the mail")
}
