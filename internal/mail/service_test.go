package mail

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/embedded"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
	"board/internal/polltest"
	"board/internal/redisclient/redisclienttest"
)

// pipeline is the mail service as `board serve mail` runs it: its consumer (concurrent, as the service's is) of a
// mail topic on a broker of the test's own, and Redis.
type pipeline struct {
	brokers  []string
	topic    string
	producer *kgo.Client
	metrics  *prometheus.Registry
	stop     func()
}

func startPipeline(t *testing.T, sender Sender, partitions int32) *pipeline {
	t.Helper()
	ctx := context.Background()
	k, err := embedded.StartKafka("127.0.0.1:0", t.TempDir(), embedded.DefaultKafkaRetention, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	p := &pipeline{brokers: k.Addrs(), topic: event.MailRequested.Topic("test-"), metrics: prometheus.NewRegistry()}
	if p.producer, err = kafka.NewProducer(p.brokers, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.producer.Close)
	if err := kafka.EnsureTopics(ctx, p.producer, []string{p.topic}, partitions); err != nil {
		t.Fatal(err)
	}
	rb := redisclienttest.Real(t)
	svc := New(Config{Sender: sender, Redis: rb.Client, KeyPrefix: rb.Prefix, Logger: testLogger(t)})
	c, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: p.brokers, Group: "test-mail", Topics: []string{p.topic},
		Handlers: svc.Handlers(), Concurrent: true, Logger: testLogger(t), Metrics: kafka.NewMetrics(p.metrics),
		Opts: []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond), kgo.FetchMaxWait(500 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("consumer: %v", err)
			}
		})
	}
	t.Cleanup(p.stop)
	return p
}

// mailRecord is the record of m as the outbox relay publishes it: keyed by the lower-cased recipient.
func mailRecord(t testing.TB, topic string, m event.Mail) *kgo.Record {
	t.Helper()
	payload, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return rawRecord(t, topic, m.To, int64(m.MailID), payload)
}

func rawRecord(t testing.TB, topic, to string, id int64, payload []byte) *kgo.Record {
	t.Helper()
	value, err := event.Encode(id, event.MailRequested, payload)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(strings.ToLower(to)), Value: value,
		Headers: []kgo.RecordHeader{{Key: event.HeaderType, Value: []byte(event.MailRequested)}}}
}

func (p *pipeline) produce(t *testing.T, recs ...*kgo.Record) {
	t.Helper()
	if err := p.producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// deadLetters reads the mail topic's dead-letter topic until it has n records.
func (p *pipeline) deadLetters(t *testing.T, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.brokers...), kgo.ConsumeTopics(event.DeadLetterTopic(p.topic)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	polltest.Until(t, time.Minute, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		recs = append(recs, cl.PollFetches(ctx).Records()...)
		return len(recs) >= n, fmt.Sprintf("%d dead letters, want %d", len(recs), n)
	})
	return recs
}

// counter sums the consumer's counter name (board_events_*_total) over its labels.
func (p *pipeline) counter(t *testing.T, name string) float64 {
	t.Helper()
	families, err := p.metrics.Gather()
	if err != nil {
		t.Fatal(err)
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

// outage kills the SMTP server once `at` mails were sent, between two sends: it waits for the sends in flight and
// holds the next ones back until the server is dead. A server killed inside a send may have stored the mail without
// its 250 reaching the sender, which is then sent again: the window SMTP cannot close (docs/mail.md), which
// `board bench mail` measures by killing at any moment.
type outage struct {
	Sender
	mu      sync.RWMutex
	sent    atomic.Int64
	at      int64
	kill    func()
	stopped chan struct{}
}

func (o *outage) Send(ctx context.Context, m event.Mail) error {
	o.mu.RLock()
	err := o.Sender.Send(ctx, m)
	o.mu.RUnlock()
	if err == nil && o.sent.Add(1) == o.at {
		o.mu.Lock()
		o.kill()
		o.mu.Unlock()
		close(o.stopped)
	}
	return err
}

// The test of record (issue 41's target): 1,000 mails produced in a burst, the SMTP server killed once half of them
// are sent and started again 30 s later on the same database. Every mail is delivered exactly once: the server's
// count is 1,000 and so is the count of distinct Message-IDs, one per mail id; none is dead-lettered.
func TestBurstOfMailsSurvivesAnSMTPOutage(t *testing.T) {
	t.Parallel()
	const n, outageFor = 1000, 30 * time.Second
	srv := startMailpit(t)
	smtp, err := NewSMTP(SMTPConfig{Addr: srv.SMTPAddr, From: DefaultFrom})
	if err != nil {
		t.Fatal(err)
	}
	o := &outage{Sender: smtp, at: n / 2, kill: srv.Kill, stopped: make(chan struct{})}
	p := startPipeline(t, o, 3)
	want := map[string]bool{}
	recs := make([]*kgo.Record, n)
	for i := range n {
		m := sampleMail(int64(100_000+i), fmt.Sprintf("User%d@Example.com", i), i%3 == 0)
		m.Kind = event.MailPasswordReset
		want[fmt.Sprintf("%d@localhost", m.MailID)] = true
		recs[i] = mailRecord(t, p.topic, m)
	}
	start := time.Now()
	p.produce(t, recs...)
	select {
	case <-o.stopped:
	case <-time.After(5 * time.Minute):
		t.Fatalf("the server was never killed: %d mails sent", o.sent.Load())
	}
	killedAt := time.Since(start)
	time.Sleep(outageFor)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	polltest.Until(t, 5*time.Minute, func() (bool, string) {
		total, err := srv.Total(ctx)
		return err == nil && total >= n, fmt.Sprintf("%d mails delivered (%v)", total, err)
	})
	// Every record handled and committed before the count: a duplicate would show now, not later.
	polltest.Until(t, time.Minute, func() (bool, string) {
		consumed := p.counter(t, "board_events_consumed_total")
		return consumed >= n, fmt.Sprintf("%.0f records handled", consumed)
	})
	p.stop()
	msgs, err := srv.Messages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, m := range msgs {
		got[m.MessageID]++
	}
	for id, count := range got {
		if !want[id] || count != 1 {
			t.Errorf("Message-ID %s delivered %d times; want each of the %d mails once", id, count, n)
		}
	}
	if len(msgs) != n || len(got) != n {
		t.Errorf("the server has %d mails with %d distinct Message-IDs, want %d of each", len(msgs), len(got), n)
	}
	if dlt := p.counter(t, "board_events_dead_lettered_total"); dlt != 0 {
		t.Errorf("%.0f mails dead-lettered, want none", dlt)
	}
	t.Logf("%d mails; server killed after %d sent (%v in), down %v; all delivered once in %v; %.0f sends retried",
		n, o.at, killedAt.Round(time.Millisecond), outageFor, time.Since(start).Round(time.Millisecond),
		p.counter(t, "board_events_retried_total"))
}

// A mail the server refuses for good (5xx) and a record that is no mail are dead-lettered at once, with the reason
// in the headers, and the mails after them go on.
func TestRefusedAndMalformedMailsAreDeadLettered(t *testing.T) {
	t.Parallel()
	srv := startMailpit(t, "--smtp-allowed-recipients", `@example\.com$`)
	smtp, err := NewSMTP(SMTPConfig{Addr: srv.SMTPAddr, From: DefaultFrom})
	if err != nil {
		t.Fatal(err)
	}
	p := startPipeline(t, smtp, 1) // one partition: the records are handled in this order
	notJSON := &kgo.Record{Topic: p.topic, Key: []byte("x"), Value: []byte("{not json")}
	p.produce(t,
		mailRecord(t, p.topic, sampleMail(1, "first@example.com", false)),
		notJSON,
		rawRecord(t, p.topic, "", 2, []byte(`{"mailId":"2","subject":"no recipient","text":"hello"}`)),
		mailRecord(t, p.topic, sampleMail(3, "someone@elsewhere.org", false)),
		mailRecord(t, p.topic, func() event.Mail {
			m := sampleMail(4, "bad-link@example.com", true)
			m.Unsubscribe = "javascript:alert(1)"
			return m
		}()),
		mailRecord(t, p.topic, sampleMail(5, "last@example.com", false)),
	)
	dlt := p.deadLetters(t, 4)
	for i, want := range []struct{ errorHas, attempts string }{
		{"malformed", "0"}, {`to ""`, "1"}, {"550", "1"}, {"unsubscribe", "1"},
	} {
		h := map[string]string{}
		for _, kv := range dlt[i].Headers {
			h[kv.Key] = string(kv.Value)
		}
		if !strings.Contains(h[kafka.HeaderDLTError], want.errorHas) {
			t.Errorf("dead letter %d: error %q, want it to say %q", i, h[kafka.HeaderDLTError], want.errorHas)
		}
		if h[kafka.HeaderDLTAttempts] != want.attempts || h[kafka.HeaderDLTOriginTopic] != p.topic {
			t.Errorf("dead letter %d: headers %v, want %s attempts from %s", i, h, want.attempts, p.topic)
		}
	}
	polltest.Until(t, time.Minute, func() (bool, string) {
		msgs, err := srv.Messages(context.Background())
		var ids []string
		for _, m := range msgs {
			ids = append(ids, m.MessageID)
		}
		return err == nil && len(ids) == 2 && strings.Contains(strings.Join(ids, " "), "5@localhost"),
			fmt.Sprintf("delivered %v (%v), want mails 1 and 5", ids, err)
	})
}

// calls counts a Sender's calls.
type calls struct {
	Sender
	n atomic.Int64
}

func (c *calls) Send(ctx context.Context, m event.Mail) error {
	c.n.Add(1)
	return c.Sender.Send(ctx, m)
}

// A 4xx is the server saying "later": the mail waits, past the attempts that would dead-letter a failing event,
// and goes once the server takes it.
func TestTemporaryRefusalsWaitForTheServer(t *testing.T) {
	t.Parallel()
	srv := startMailpit(t, "--enable-chaos")
	ctx := context.Background()
	if err := srv.SetChaos(ctx, `{"Sender":{"ErrorCode":451,"Probability":100}}`); err != nil {
		t.Fatal(err)
	}
	smtp, err := NewSMTP(SMTPConfig{Addr: srv.SMTPAddr, From: DefaultFrom})
	if err != nil {
		t.Fatal(err)
	}
	c := &calls{Sender: smtp}
	p := startPipeline(t, c, 1)
	p.produce(t, mailRecord(t, p.topic, sampleMail(77, "patient@example.com", false)))
	polltest.Until(t, time.Minute, func() (bool, string) {
		return c.n.Load() > 6, fmt.Sprintf("%d sends tried", c.n.Load())
	})
	if err := srv.SetChaos(ctx, `{}`); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, time.Minute, func() (bool, string) {
		total, err := srv.Total(ctx)
		return err == nil && total == 1, fmt.Sprintf("%d mails delivered (%v)", total, err)
	})
	if dlt := p.counter(t, "board_events_dead_lettered_total"); dlt != 0 {
		t.Errorf("%.0f mails dead-lettered, want none", dlt)
	}
}

// What each failure of an SMTP send leads to.
func TestSMTPFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startMailpit(t, "--enable-chaos", "--smtp-allowed-recipients", `@example\.com$`)
	send := func(t *testing.T, cfg SMTPConfig, to string) error {
		t.Helper()
		if cfg.Addr == "" {
			cfg.Addr = srv.SMTPAddr
		}
		cfg.From = DefaultFrom
		s, err := NewSMTP(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s.Send(ctx, sampleMail(1, to, false))
	}
	t.Run("accepted, with a login", func(t *testing.T) {
		if err := send(t, SMTPConfig{Username: "board", Password: "secret"}, "a@example.com"); err != nil {
			t.Fatal(err)
		}
		msgs, err := srv.Messages(ctx)
		if err != nil || len(msgs) != 1 || msgs[0].Username != "board" {
			t.Fatalf("messages %+v (%v), want one sent as board", msgs, err)
		}
	})
	t.Run("5xx refuses the mail", func(t *testing.T) {
		if err := send(t, SMTPConfig{}, "a@elsewhere.org"); fault.KindOf(err) != fault.Invalid {
			t.Errorf("a recipient refused with 550: %v, want fault.Invalid", err)
		}
	})
	t.Run("no server", func(t *testing.T) {
		dead := mailpitDeadAddr(t)
		if err := send(t, SMTPConfig{Addr: dead}, "a@example.com"); fault.KindOf(err) != fault.Unavailable {
			t.Errorf("no server: %v, want fault.Unavailable", err)
		}
	})
	t.Run("no STARTTLS under mandatory", func(t *testing.T) {
		if err := send(t, SMTPConfig{TLS: TLSMandatory}, "a@example.com"); fault.KindOf(err) != fault.Unavailable {
			t.Errorf("mandatory TLS to a server without it: %v, want fault.Unavailable", err)
		}
	})
	t.Run("a refused sender waits for the flags to be mended", func(t *testing.T) {
		if err := srv.SetChaos(ctx, `{"Sender":{"ErrorCode":530,"Probability":100}}`); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = srv.SetChaos(ctx, `{}`) }()
		if err := send(t, SMTPConfig{}, "a@example.com"); fault.KindOf(err) != fault.Unavailable {
			t.Errorf("sender refused with 530: %v, want fault.Unavailable", err)
		}
	})
	t.Run("a refused login waits for the flags to be mended", func(t *testing.T) {
		if err := srv.SetChaos(ctx, `{"Authentication":{"ErrorCode":535,"Probability":100}}`); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = srv.SetChaos(ctx, `{}`) }()
		if err := send(t, SMTPConfig{Username: "board", Password: "wrong"}, "a@example.com"); fault.KindOf(err) != fault.Unavailable {
			t.Errorf("login refused with 535: %v, want fault.Unavailable", err)
		}
	})
}

// mailpitDeadAddr is a loopback address nothing listens on.
func mailpitDeadAddr(t *testing.T) string {
	t.Helper()
	srv := startMailpit(t)
	srv.Kill()
	return srv.SMTPAddr
}

// A mail already sent is skipped when its record comes again (a redelivery after a crash between the send and the
// commit); without Redis, the mail waits rather than risk a second send.
func TestRedeliveredMailIsNotSentAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startMailpit(t)
	smtp, err := NewSMTP(SMTPConfig{Addr: srv.SMTPAddr, From: DefaultFrom})
	if err != nil {
		t.Fatal(err)
	}
	rb := redisclienttest.Real(t)
	svc := New(Config{Sender: smtp, Redis: rb.Client, KeyPrefix: rb.Prefix, Logger: testLogger(t)})
	handle := svc.Handlers()[event.MailRequested]
	env := envelope(t, sampleMail(9, "reader@example.com", false))
	for range 3 {
		if err := handle(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	if total, err := srv.Total(ctx); err != nil || total != 1 {
		t.Errorf("%d mails delivered (%v), want 1", total, err)
	}
	if ttl := rb.Client.TTL(ctx, rb.Prefix+"mail::sent:9").Val(); ttl <= 23*time.Hour || ttl > 24*time.Hour {
		t.Errorf("the sent mark lives %v, want a day", ttl)
	}

	down := redisclienttest.Mini(t)
	down.Mini.Close()
	svc = New(Config{Sender: smtp, Redis: down.Client, KeyPrefix: down.Prefix, Logger: testLogger(t)})
	if err := svc.Handlers()[event.MailRequested](ctx, envelope(t, sampleMail(10, "reader@example.com", false))); fault.KindOf(err) != fault.Unavailable {
		t.Errorf("Redis down: %v, want fault.Unavailable", err)
	}
	if total, err := srv.Total(ctx); err != nil || total != 1 {
		t.Errorf("%d mails delivered (%v), want 1: none sent while Redis is down", total, err)
	}
}

// slowSender takes a while over each send, and counts them.
type slowSender struct {
	sends atomic.Int32
	fail  atomic.Bool
}

func (s *slowSender) Send(ctx context.Context, _ event.Mail) error {
	s.sends.Add(1)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(200 * time.Millisecond):
	}
	if s.fail.Load() {
		return fault.Unavailablef(nil, "SMTP_UNAVAILABLE", "down")
	}
	return nil
}

// TestMailHandledTwiceAtOnceIsSentOnce: two members handling one record at the same moment (a partition's two owners
// during a rebalance) send it once: the second waits on the first's claim, then finds the mail sent. A failed send
// releases its claim, so that the retry sends at once.
func TestMailHandledTwiceAtOnceIsSentOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rb := redisclienttest.Mini(t)
	sender := &slowSender{}
	svc := New(Config{Sender: sender, Redis: rb.Client, KeyPrefix: rb.Prefix, Logger: testLogger(t)})
	handle := svc.Handlers()[event.MailRequested]

	sender.fail.Store(true)
	if err := handle(ctx, envelope(t, sampleMail(11, "reader@example.com", false))); fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("a failed send: %v, want fault.Unavailable", err)
	}
	sender.fail.Store(false)

	env := envelope(t, sampleMail(11, "reader@example.com", false))
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- handle(ctx, env) }()
	}
	var waited int
	for range 2 {
		switch err := <-errs; {
		case fault.KindOf(err) == fault.Unavailable:
			waited++
		case err != nil:
			t.Fatal(err)
		}
	}
	if err := handle(ctx, env); err != nil { // the waiting member's retry
		t.Fatal(err)
	}
	if n := sender.sends.Load(); n != 2 || waited != 1 {
		t.Errorf("%d sends (one failed) and %d members waited; want 2 and 1", n, waited)
	}
}

// A server that took the mail (250 to its data) and then went away before the session's end has the mail: the send
// succeeded, and sending it again would deliver it twice.
func TestSMTPMailTakenBeforeTheConnectionDropsIsSent(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		fmt.Fprint(conn, "220 test ESMTP\r\n")
		for data := false; ; {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			switch cmd := strings.ToUpper(strings.TrimSpace(line)); {
			case data && cmd == ".":
				data = false
				fmt.Fprint(conn, "250 2.0.0 queued\r\n")
			case data:
			case strings.HasPrefix(cmd, "EHLO"):
				fmt.Fprint(conn, "250-test\r\n250 8BITMIME\r\n")
			case cmd == "DATA":
				data = true
				fmt.Fprint(conn, "354 go ahead\r\n")
			case cmd == "RSET":
				return // gone, as a server killed right after its 250
			default:
				fmt.Fprint(conn, "250 2.0.0 ok\r\n")
			}
		}
	}()
	s, err := NewSMTP(SMTPConfig{Addr: ln.Addr().String(), From: DefaultFrom, TLS: TLSNone})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(context.Background(), sampleMail(5, "reader@example.com", false)); err != nil {
		t.Errorf("send: %v, want success: the server had answered 250", err)
	}
}
