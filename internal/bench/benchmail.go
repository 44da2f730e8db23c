package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	gomail "github.com/wneessen/go-mail"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/event"
	"board/internal/kafka"
	"board/internal/mail"
	"board/internal/mail/mailpit"
	"board/internal/progress"
)

func benchMail(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("bench mail", `Usage: board bench mail [flags]

Produces --mails MAIL_REQUESTED records in a burst to a scratch mail topic (the configured brokers, or the embedded
one) and has the mail service's consumer send them to a real SMTP server, Mailpit, started here on loopback. Once
half of them are delivered, the server is killed (SIGKILL, at whatever moment) and started again --outage later on
the same database. Prints the mails delivered (distinct Message-IDs), the duplicates (the server's count past
that), the dead letters and the time taken; beside them, the floor: the same number of mails sent straight to a
fresh server with go-mail over one connection, without Kafka and without an outage.

With --via resets, the mails are password resets as users ask them: --mails users with verified addresses are
loaded straight into a scratch user database (database prefix mail_bench_, emptied first), and the user and mail
services are started here (rate limits off); --mails POST /v1/password-resets are sent in a burst, 64 at a time,
so that each mail goes the whole way: the user service's outbox, its relay, Kafka, the mail service's consumer,
SMTP. The server is killed and started again as above.`, stderr)
	cfg.EngineFlags(fs)
	mails := fs.Int("mails", 1000, "mails to send")
	outage := fs.Duration("outage", 30*time.Second, "how long the SMTP server stays down")
	via := fs.String("via", "topic", "how the mails are enqueued: topic (records produced to the mail topic) or resets (POST /v1/password-resets to the user service)")
	bin := fs.String("mailpit", "", "the mailpit binary (scripts/mailpit install; empty: built with go install into board's cache directory on first use)")
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *mails < 2 || *outage < 0 || *via != "topic" && *via != "resets" {
		return errors.New("need --mails >= 2, --outage >= 0 and --via topic or resets")
	}
	if *bin == "" {
		dir, err := mailpit.DefaultDir()
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "mailpit %s from %s (built there on first use, a few minutes)\n", mailpit.Version, dir)
		if *bin, err = mailpit.Install(ctx, dir); err != nil {
			return err
		}
	}
	scratch, err := os.MkdirTemp("", "board-bench-mail-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)

	floor, err := mailFloor(ctx, *bin, scratch+"/floor", *mails)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}

	srv, err := mailpit.Start(*bin, scratch+"/service")
	if err != nil {
		return err
	}
	defer srv.Kill()
	if *via == "resets" {
		return mailViaResets(ctx, cfg, srv, scratch, *mails, *outage, floor, stdout, stderr)
	}
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()
	if err := e.StartRedis(ctx); err != nil {
		return err
	}
	if err := e.StartKafka(ctx); err != nil {
		return err
	}
	run := fmt.Sprintf("bench-mail-%d-", rand.Uint32()) // topic, group and keys of this run alone
	topic := event.MailRequested.Topic(run)
	if err := kafka.EnsureTopics(ctx, e.Producer, []string{topic}, int32(cfg.TopicPartitions)); err != nil {
		return err
	}
	sender, err := mail.NewSMTP(mail.SMTPConfig{Addr: srv.SMTPAddr, From: mail.DefaultFrom})
	if err != nil {
		return err
	}
	svc := mail.New(mail.Config{Sender: sender, Redis: e.Redis, KeyPrefix: cfg.RedisPrefix + run, Logger: e.Logger})
	reg := prometheus.NewRegistry()
	c, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: e.KafkaBrokers, Group: run + "mail", Topics: []string{topic},
		Handlers: svc.Handlers(), Concurrent: true, Logger: e.Logger, Metrics: kafka.NewMetrics(reg)})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	consumed := make(chan error, 1)
	go func() { consumed <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-consumed; err != nil {
			fmt.Fprintln(stderr, "mail consumer:", err)
		}
	}()

	recs := make([]*kgo.Record, *mails)
	for i := range recs {
		id := int64(i + 1)
		payload, err := json.Marshal(benchMailOf(id))
		if err != nil {
			return err
		}
		value, err := event.Encode(id, event.MailRequested, payload)
		if err != nil {
			return err
		}
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(benchMailOf(id).To), Value: value}
	}
	bar := progress.Start(stderr, "mails delivered", int64(*mails))
	start := time.Now()
	if err := e.Producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		bar.Finish()
		return err
	}
	killedAt, err := mailOutage(ctx, srv, *mails/2, *outage, bar)
	if err != nil {
		bar.Finish()
		return err
	}
	// Done when every record is handled (sent, skipped or dead-lettered), not when the server holds N mails: a
	// duplicate would make up for a mail not sent yet.
	for handled := 0.0; handled < float64(*mails); {
		if !sleepCtx(ctx, 20*time.Millisecond) {
			bar.Finish()
			return ctx.Err()
		}
		handled = counterSum(reg, "board_events_consumed_total") + counterSum(reg, "board_events_dead_lettered_total")
		if total, err := srv.Total(ctx); err == nil {
			bar.Set(int64(total))
		}
	}
	elapsed := time.Since(start)
	bar.Finish()
	fmt.Fprintf(stdout, "%d mails through the mail service's consumer (%d partitions, sent side by side) to mailpit %s on loopback\n",
		*mails, cfg.TopicPartitions, mailpit.Version)
	return mailReport(ctx, stdout, srv, mailResult{mails: *mails, killedAt: killedAt, outage: *outage, elapsed: elapsed, floor: floor,
		deadLetters: counterSum(reg, "board_events_dead_lettered_total")})
}

// mailResult is what a mail run measured, beside what the server holds.
type mailResult struct {
	mails                            int
	killedAt, outage, elapsed, floor time.Duration
	deadLetters                      float64
}

// mailReport prints a mail run's figures: the mails the server holds, told apart by Message-ID, against the target.
func mailReport(ctx context.Context, stdout io.Writer, srv *mailpit.Server, r mailResult) error {
	msgs, err := srv.Messages(ctx)
	if err != nil {
		return err
	}
	distinct := map[string]bool{}
	for _, m := range msgs {
		distinct[m.MessageID] = true
	}
	fmt.Fprintf(stdout, "  server killed at %d delivered (%s in), started again %s later\n", r.mails/2,
		r.killedAt.Round(time.Millisecond), r.outage)
	fmt.Fprintf(stdout, "  delivered     %d of %d (distinct Message-IDs; target all)\n", len(distinct), r.mails)
	fmt.Fprintf(stdout, "  duplicates    %d (target 0)\n", len(msgs)-len(distinct))
	fmt.Fprintf(stdout, "  dead letters  %.0f\n", r.deadLetters)
	fmt.Fprintf(stdout, "  elapsed       %s, of which the outage %s: %s sending (%.0f mails/s)\n", r.elapsed.Round(time.Millisecond),
		r.outage, (r.elapsed - r.outage).Round(time.Millisecond), rate(r.mails, r.elapsed-r.outage))
	fmt.Fprintf(stdout, "  floor: go-mail straight to a fresh mailpit, one connection, no Kafka, no outage  %s (%.0f mails/s)\n",
		r.floor.Round(time.Millisecond), rate(r.mails, r.floor))
	return nil
}

// benchMailOf is the bench's mail id: a password reset, as the user service writes them.
func benchMailOf(id int64) event.Mail {
	return event.Mail{MailID: apijson.ID(id), Kind: event.MailPasswordReset, UserID: apijson.ID(id),
		To: "user" + strconv.FormatInt(id, 10) + "@example.com", Subject: "Reset your password",
		Text: "Someone asked to reset your password. Follow the link within 30 minutes:\n\nhttp://localhost:8080/reset-password/" +
			strconv.FormatInt(id, 10) + "." + strings.Repeat("x", 43) + "\n\nIf it was not you, ignore this mail.",
		At: apijson.Time(time.Now().UTC())}
}

// mailOutage kills the server once it holds half mails, and starts it again outage later; it returns when it did
// the kill, measured from now.
func mailOutage(ctx context.Context, srv *mailpit.Server, half int, outage time.Duration, bar *progress.Bar) (time.Duration, error) {
	start := time.Now()
	for {
		total, err := srv.Total(ctx)
		if err == nil {
			bar.Set(int64(total))
		}
		if err == nil && total >= half {
			break
		}
		if !sleepCtx(ctx, 10*time.Millisecond) {
			return 0, ctx.Err()
		}
	}
	srv.Kill()
	killedAt := time.Since(start)
	if !sleepCtx(ctx, outage) {
		return 0, ctx.Err()
	}
	return killedAt, srv.Restart()
}

// mailFloor times n mails sent straight to a fresh mailpit with go-mail, over one connection.
func mailFloor(ctx context.Context, bin, dir string, n int) (time.Duration, error) {
	srv, err := mailpit.Start(bin, dir)
	if err != nil {
		return 0, err
	}
	defer srv.Kill()
	host, port, _ := strings.Cut(srv.SMTPAddr, ":")
	p, _ := strconv.Atoi(port)
	client, err := gomail.NewClient(host, gomail.WithPort(p), gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	if err != nil {
		return 0, err
	}
	msgs := make([]*gomail.Msg, n)
	for i := range msgs {
		m := benchMailOf(int64(i + 1))
		msg := gomail.NewMsg()
		if err := msg.From(mail.DefaultFrom); err != nil {
			return 0, err
		}
		if err := msg.To(m.To); err != nil {
			return 0, err
		}
		msg.Subject(m.Subject)
		msg.SetMessageIDWithValue(m.MailID.String() + "@localhost")
		msg.SetDate()
		msg.SetBodyString(gomail.TypeTextPlain, m.Text)
		msgs[i] = msg
	}
	start := time.Now()
	if err := client.DialAndSendWithContext(ctx, msgs...); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	total, err := srv.Total(ctx)
	if err != nil {
		return 0, err
	}
	if total != n {
		return 0, fmt.Errorf("the floor's server holds %d mails, want %d", total, n)
	}
	return elapsed, nil
}

// counterSum sums the counter name over its labels.
func counterSum(reg *prometheus.Registry, name string) float64 {
	families, err := reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
