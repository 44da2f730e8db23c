package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"board/internal/app"
	"board/internal/event"
	"board/internal/mail/mailpit"
	"board/internal/progress"
	"board/internal/user"
)

// mailViaResets is `board bench mail --via resets`: n users ask for a password reset in a burst, and their mails go
// the whole way to srv, which is killed once it holds half of them and started again outage later.
func mailViaResets(ctx context.Context, cfg app.Config, srv *mailpit.Server, scratch string, n int, outage, floor time.Duration,
	stdout, stderr io.Writer) error {
	run := fmt.Sprintf("bench-mail-%d-", rand.Uint32()) // topics, groups and keys of this run alone
	cfg.Services = []string{"user", "mail"}
	cfg.UserAddr, cfg.MailAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.RateLimits = false
	cfg.SMTP.Addr = srv.SMTPAddr
	cfg.TopicPrefix, cfg.RedisPrefix = run, cfg.RedisPrefix+run
	cfg.MySQLDBPrefix += "mail_bench_" // never a board's own user database
	cfg.DataDir = scratch + "/data"    // nor its SQLite files
	if err := loadMailUsers(ctx, &cfg, n); err != nil {
		return err
	}
	a, err := app.Run(ctx, cfg, cfg.NewLogger(stderr))
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := a.Shutdown(stopCtx); err != nil {
			fmt.Fprintln(stderr, "board serve user mail:", err)
		}
	}()
	topic := event.MailRequested.Topic(run)

	bar := progress.Start(stderr, "mails delivered", int64(n))
	start := time.Now()
	type outageResult struct {
		killedAt time.Duration
		err      error
	}
	outageDone := make(chan outageResult, 1)
	go func() {
		killedAt, err := mailOutage(ctx, srv, n/2, outage, bar)
		outageDone <- outageResult{killedAt, err}
	}()
	burst, retried, err := resetBurst(ctx, a.URL("user"), n, 64)
	if err != nil {
		bar.Finish()
		return err
	}
	o := <-outageDone
	if o.err != nil {
		bar.Finish()
		return o.err
	}
	// Done when every record is handled (sent, skipped or dead-lettered) and every mail is there, not when the server
	// holds n mails: a duplicate would make up for a mail not sent yet.
	giveUp := time.Now().Add(outage + 5*time.Minute)
	var deadLetters float64
	for {
		if !sleepCtx(ctx, 50*time.Millisecond) {
			bar.Finish()
			return ctx.Err()
		}
		total, err := srv.Total(ctx)
		if err == nil {
			bar.Set(int64(total))
		}
		var consumed float64
		consumed, deadLetters, err = mailCounters(ctx, a.URL("mail"), topic)
		if err == nil && consumed+deadLetters >= float64(n) && total+int(deadLetters) >= n {
			break
		}
		if time.Now().After(giveUp) {
			fmt.Fprintf(stderr, "gave up waiting: %d mails on the server, %.0f records handled\n", total, consumed+deadLetters)
			break
		}
	}
	elapsed := time.Since(start)
	bar.Finish()
	fmt.Fprintf(stdout, "%d password resets asked in a burst of %s (64 at a time) of the user service; each mail through its outbox, "+
		"relay, Kafka, the mail service's consumer (%d partitions) to mailpit %s on loopback\n", n, burst.Round(time.Millisecond),
		cfg.TopicPartitions, mailpit.Version)
	fmt.Fprintf(stdout, "  503 answers   %d, each tried again (target 0)\n", retried)
	return mailReport(ctx, stdout, srv, mailResult{mails: n, killedAt: o.killedAt, outage: outage, elapsed: elapsed, floor: floor,
		deadLetters: deadLetters})
}

// loadMailUsers empties the scratch user database and loads n users, each with a verified address
// user<i>@example.com, as verification would have left them.
func loadMailUsers(ctx context.Context, cfg *app.Config, n int) error {
	e := app.NewEngines(cfg, cfg.NewLogger(io.Discard))
	defer e.Close()
	db, _, ids, err := toolDatabase(ctx, e, "user", user.Migrate)
	if err != nil {
		return err
	}
	for _, table := range []string{"users", "account_token", "outbox"} {
		if _, err := db.ExecContext(ctx, "DELETE FROM "+table); err != nil {
			return fmt.Errorf("empty %s: %w", table, err)
		}
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	rows := make([][]any, n)
	for i := range rows {
		id, err := ids.Next()
		if err != nil {
			return err
		}
		rows[i] = []any{id, "mailbench" + strconv.Itoa(i+1), "", "user", now, resetAddress(i + 1), 1}
	}
	return insertRows(ctx, db, "users", "user_id, username, password_hash, role, created_at, email, email_version", rows)
}

func resetAddress(i int) string { return "user" + strconv.Itoa(i) + "@example.com" }

// resetBurst sends n POST /v1/password-resets to the user service at base, workers at a time, each of a user's
// address, and returns how long they took and how many 503 answers it retried, as a client told to try again
// would; every one must end 202.
func resetBurst(ctx context.Context, base string, n, workers int) (time.Duration, int64, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}, Timeout: time.Minute}
	next := make(chan int)
	errs := make(chan error, workers)
	var retried atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := askReset(ctx, client, base, resetAddress(i), &retried); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for i := 1; i <= n; i++ {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs // nil when none failed
	}
	return time.Since(start), retried.Load(), err
}

// resetAttempts bounds the tries of one reset answered 503.
const resetAttempts = 20

func askReset(ctx context.Context, client *http.Client, base, addr string, retried *atomic.Int64) error {
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/password-resets", strings.NewReader(`{"email":"`+addr+`"}`))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusAccepted:
			return nil
		case resp.StatusCode == http.StatusServiceUnavailable && attempt < resetAttempts:
			retried.Add(1)
			if !sleepCtx(ctx, time.Duration(attempt)*20*time.Millisecond) {
				return ctx.Err()
			}
		default:
			return fmt.Errorf("POST /v1/password-resets for %s, attempt %d: %s: %s", addr, attempt, resp.Status, body)
		}
	}
}

// mailCounters reads, from the mail service's /metrics at base, the records of topic its consumer handled and
// those it dead-lettered.
func mailCounters(ctx context.Context, base, topic string) (consumed, deadLettered float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	label := `topic="` + topic + `"`
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		name, rest, _ := strings.Cut(line, "{")
		if !strings.Contains(rest, label) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, 0, fmt.Errorf("metrics: %q: %w", line, err)
		}
		switch name {
		case "board_events_consumed_total":
			consumed += v
		case "board_events_dead_lettered_total":
			deadLettered += v
		}
	}
	return consumed, deadLettered, sc.Err()
}
