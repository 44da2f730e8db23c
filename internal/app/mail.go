package app

import (
	"context"
	"net/http"
	"path/filepath"

	"board/internal/httpio"
	"board/internal/mail"
)

// The mail service's wiring (SPEC §3.14, docs/mail.md).

// buildMail starts the consumer that sends the mails, through the SMTP server of --smtp-addr or, without one, into
// files under --data-dir/mail. The service has no API: its port answers health, readiness and metrics.
func buildMail(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	var sender mail.Sender
	if e.Config.SMTP.Addr == "" {
		dir, err := filepath.Abs(filepath.Join(e.Config.DataDir, "mail"))
		if err != nil {
			return nil, nil, err
		}
		if sender, err = mail.NewDir(dir, e.Config.SMTP.From); err != nil {
			return nil, nil, err
		}
		e.Logger.Info("mail: no --smtp-addr; mails are written as files under " + dir)
	} else {
		smtp, err := mail.NewSMTP(e.Config.SMTP)
		if err != nil {
			return nil, nil, err
		}
		sender = smtp
		e.Logger.Info("mail: mails are sent through the SMTP server at "+e.Config.SMTP.Addr, "tls", e.Config.SMTP.TLS,
			"from", e.Config.SMTP.From)
	}
	svc := mail.New(mail.Config{Sender: sender, Redis: e.Redis, KeyPrefix: e.Config.RedisPrefix, Logger: e.Logger})
	// No key pattern: the mail service keeps no state to rebuild, and a mail once sent must never be replayed.
	if err := startConsumer(ctx, e, r, svc.Handlers(), ""); err != nil {
		return nil, nil, err
	}
	return http.NewServeMux(), consumerChecks(e), nil
}
