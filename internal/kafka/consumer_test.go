package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/embedded"
	"board/internal/event"
	"board/internal/fault"
)

func TestOnFailure(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		err  error
		want failureAction
	}{
		{errors.New("db down"), retryUpToMax},
		{fmt.Errorf("handler panicked: %v", "boom"), retryUpToMax},
		{fault.Conflictf("DUP", "duplicate"), retryUpToMax},
		{fault.NotFoundf("NO_ARTICLE", "no article"), retryUpToMax},
		{fault.Invalidf("BAD", "bad"), deadLetterAtOnce},
		{fmt.Errorf("apply: %w", fault.Invalidf("BAD", "bad")), deadLetterAtOnce},
		{fmt.Errorf("%w: payload", event.ErrMalformed), deadLetterAtOnce},
		{fmt.Errorf("apply: %w", fmt.Errorf("%w: x", event.ErrMalformed)), deadLetterAtOnce},
		{fault.Unavailablef(errors.New("dial"), "REDIS_DOWN", "redis down"), stallUntilUp},
		{fmt.Errorf("apply: %w", fault.Unavailablef(nil, "REDIS_DOWN", "redis down")), stallUntilUp},
		{fmt.Errorf("incr: %w", refused), stallUntilUp},
		{fmt.Errorf("write: %w", syscall.ECONNRESET), stallUntilUp},
		{fmt.Errorf("query: %w", context.DeadlineExceeded), stallUntilUp},
		// The handler's word that the event is bad wins over the state of a dependency.
		{&fault.Error{Kind: fault.Invalid, Code: "BAD", Message: "bad", Err: refused}, deadLetterAtOnce},
		{fmt.Errorf("%w: %w", event.ErrMalformed, context.DeadlineExceeded), deadLetterAtOnce},
	} {
		if got := onFailure(tc.err); got != tc.want {
			t.Errorf("onFailure(%v) = %s, want %s", tc.err, actionName(got), actionName(tc.want))
		}
	}
	if _, err := event.Decode([]byte("garbage")); onFailure(err) != deadLetterAtOnce {
		t.Errorf("onFailure(a Decode error) = %s, want deadLetterAtOnce", actionName(onFailure(err)))
	}
}

func actionName(a failureAction) string {
	switch a {
	case retryUpToMax:
		return "retryUpToMax"
	case deadLetterAtOnce:
		return "deadLetterAtOnce"
	case stallUntilUp:
		return "stallUntilUp"
	}
	return fmt.Sprintf("failureAction(%d)", a)
}

func TestDelay(t *testing.T) {
	t.Parallel()
	c := &Consumer{backoff: 100 * time.Millisecond}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		3: 400 * time.Millisecond, 7: maxBackoff, 40: maxBackoff, 1000: maxBackoff} {
		for range 20 {
			if d := c.delay(n); d < want/2 || d > want {
				t.Fatalf("delay(%d) = %v, want within [%v, %v]", n, d, want/2, want)
			}
		}
	}
}

func TestNewConsumerValidates(t *testing.T) {
	t.Parallel()
	h := map[event.Type]Handler{event.ArticleViewed: func(context.Context, event.Envelope) error { return nil }}
	for name, cfg := range map[string]ConsumerConfig{
		"no brokers":  {Group: "g", Topics: []string{"t"}, Handlers: h},
		"no group":    {Brokers: []string{"x:1"}, Topics: []string{"t"}, Handlers: h},
		"no topics":   {Brokers: []string{"x:1"}, Group: "g", Handlers: h},
		"no handlers": {Brokers: []string{"x:1"}, Group: "g", Topics: []string{"t"}},
		"nil handler": {Brokers: []string{"x:1"}, Group: "g", Topics: []string{"t"},
			Handlers: map[event.Type]Handler{event.ArticleViewed: nil}},
		"negative attempts": {Brokers: []string{"x:1"}, Group: "g", Topics: []string{"t"}, Handlers: h, MaxAttempts: -1},
	} {
		if _, err := NewConsumer(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestRetryThenSuccess: a handler failing twice then succeeding handles the record on the third attempt, the offset
// is committed (a new member of the group gets nothing old), nothing is dead-lettered, and two retries are counted.
func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group = "board-view", "retry"
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 3); err != nil {
		t.Fatal(err)
	}
	produceViews(t, cl, topic, 1)
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)

	var calls atomic.Int32
	var ok handled
	stop := runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic}, Backoff: 10 * time.Millisecond, Metrics: metrics,
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			if calls.Add(1) <= 2 {
				return errors.New("database is down")
			}
			ok.add(idOf(env))
			return nil
		}},
	})
	eventually(t, 10*time.Second, "the record to be handled", func() bool { return ok.len() == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("handler called %d times, want 3", n)
	}
	labels := map[string]string{"group": group, "topic": topic}
	if v := metricValue(t, reg, "board_events_retried_total", labels); v != 2 {
		t.Errorf("retried = %v, want 2", v)
	}
	if v := metricValue(t, reg, "board_events_consumed_total", labels); v != 1 {
		t.Errorf("consumed = %v, want 1", v)
	}
	if v := metricValue(t, reg, "board_events_dead_lettered_total", labels); v > 0 {
		t.Errorf("dead_lettered = %v, want none", v)
	}
	if got, want := committed(t, cl, group, topic), endOffsets(t, cl, topic); !equalOffsets(got, want) {
		t.Errorf("committed %v, want the end offsets %v", got, want)
	}
	if recs := readAll(t, k.Addrs(), event.DeadLetterTopic(topic), 1, 300*time.Millisecond); len(recs) > 0 {
		t.Errorf("%d records in the dead-letter topic", len(recs))
	}

	// A new member of the group starts after the committed record: it sees only what is produced now.
	var again handled
	stop = runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic},
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			again.add(idOf(env))
			return nil
		}},
	})
	produceViews(t, cl, topic, 2)
	eventually(t, 10*time.Second, "the new record", func() bool { return slices.Contains(again.snapshot(), 2) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := again.snapshot(); !slices.Equal(got, []int64{2}) {
		t.Errorf("new member handled %v, want only [2]", got)
	}
}

// TestAlwaysFailingGoesToDLT: a record whose handler always fails is dead-lettered after MaxAttempts with its
// headers, and the records after it on the same partition are still handled.
func TestAlwaysFailingGoesToDLT(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group = "board-view", "dlt"
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 3); err != nil {
		t.Fatal(err)
	}
	// One key, so one partition, in this order: 10 (fails always), 11, 12.
	var recs []*kgo.Record
	for _, id := range []int64{10, 11, 12} {
		recs = append(recs, EventRecord(topic, 99, id, event.ArticleViewed, viewEvent(t, id)))
	}
	recs[0].Headers = append(recs[0].Headers, kgo.RecordHeader{Key: "trace", Value: []byte("abc")})
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var calls atomic.Int32
	var ok handled
	stop := runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic}, MaxAttempts: 3, Backoff: 5 * time.Millisecond,
		Metrics: NewMetrics(reg),
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			if idOf(env) == 10 {
				calls.Add(1)
				return errors.New("cannot apply 10")
			}
			ok.add(idOf(env))
			return nil
		}},
	})
	eventually(t, 10*time.Second, "records 11 and 12", func() bool { return ok.len() == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := ok.snapshot(); !slices.Equal(got, []int64{11, 12}) {
		t.Errorf("handled %v, want [11 12] in order", got)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("failing handler called %d times, want MaxAttempts = 3", n)
	}
	dlt := readAll(t, k.Addrs(), event.DeadLetterTopic(topic), 1, 5*time.Second)
	if len(dlt) != 1 {
		t.Fatalf("%d records in the dead-letter topic, want 1", len(dlt))
	}
	d := dlt[0]
	if string(d.Key) != "99" || string(d.Value) != string(recs[0].Value) {
		t.Errorf("dead letter key %q value %q, want the original", d.Key, d.Value)
	}
	for key, want := range map[string]string{
		event.HeaderType: "ARTICLE_VIEWED", event.HeaderEventID: "10", "trace": "abc",
		HeaderDLTError: "cannot apply 10", HeaderDLTOriginTopic: topic,
		HeaderDLTOriginPartition: itoa(int64(recs[0].Partition)), HeaderDLTOriginOffset: itoa(recs[0].Offset),
		HeaderDLTAttempts: "3",
	} {
		if got, _ := header(d, key); got != want {
			t.Errorf("header %s = %q, want %q", key, got, want)
		}
	}
	failedAt, _ := header(d, HeaderDLTFailedAt)
	if at, err := time.Parse(time.RFC3339, failedAt); err != nil || time.Since(at) > time.Minute {
		t.Errorf("header %s = %q (%v)", HeaderDLTFailedAt, failedAt, err)
	}
	labels := map[string]string{"group": group, "topic": topic}
	if v := metricValue(t, reg, "board_events_dead_lettered_total", labels); v != 1 {
		t.Errorf("dead_lettered = %v, want 1", v)
	}
	if v := metricValue(t, reg, "board_events_retried_total", labels); v != 2 {
		t.Errorf("retried = %v, want 2", v)
	}
	if got, want := committed(t, cl, group, topic), endOffsets(t, cl, topic); !equalOffsets(got, want) {
		t.Errorf("committed %v, want the end offsets %v", got, want)
	}
}

// TestUnhandleableRecordsGoToDLTAtOnce: garbage bytes never reach a handler, and a handler error of kind Invalid or
// wrapping event.ErrMalformed is not retried; a known type without a handler is skipped and committed.
func TestUnhandleableRecordsGoToDLTAtOnce(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group = "board-article", "atonce"
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 1); err != nil {
		t.Fatal(err)
	}
	created, err := event.Encode(30, event.ArticleCreated, []byte(`{"articleId":"1","boardId":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	recs := []*kgo.Record{
		{Topic: topic, Key: []byte("1"), Value: []byte("\x00not json at all")},                        // offset 0: garbage
		{Topic: topic, Key: []byte("1"), Value: []byte(`{"eventId":"5","type":"NOPE","payload":{}}`)}, // 1: unknown type
		EventRecord(topic, 1, 20, event.ArticleViewed, viewEvent(t, 20)),                              // 2: Invalid
		EventRecord(topic, 1, 21, event.ArticleViewed, viewEvent(t, 21)),                              // 3: ErrMalformed
		EventRecord(topic, 1, 30, event.ArticleCreated, created),                                      // 4: no handler
		EventRecord(topic, 1, 22, event.ArticleViewed, viewEvent(t, 22)),                              // 5: fine
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var calls sync.Map // event id -> *atomic.Int32
	stop := runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic}, Backoff: 5 * time.Millisecond, Metrics: NewMetrics(reg),
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			n, _ := calls.LoadOrStore(idOf(env), new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			switch idOf(env) {
			case 20:
				return fault.Invalidf("NEGATIVE_COUNT", "view count is negative")
			case 21:
				_, err := event.Payload[struct{ N int }](event.Envelope{Type: env.Type, Payload: []byte(`{"N":"x"}`)})
				return fmt.Errorf("apply: %w", err)
			}
			return nil
		}},
	})
	eventually(t, 10*time.Second, "record 22", func() bool { _, ok := calls.Load(int64(22)); return ok })
	dlt := readAll(t, k.Addrs(), event.DeadLetterTopic(topic), 4, 5*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(dlt) != 4 {
		t.Fatalf("%d dead letters, want 4", len(dlt))
	}
	for i, want := range []struct {
		offset   int64
		attempts string
	}{{0, "0"}, {1, "0"}, {2, "1"}, {3, "1"}} {
		if off, _ := header(dlt[i], HeaderDLTOriginOffset); off != itoa(want.offset) {
			t.Errorf("dead letter %d from offset %s, want %d", i, off, want.offset)
		}
		if a, _ := header(dlt[i], HeaderDLTAttempts); a != want.attempts {
			t.Errorf("dead letter %d: attempts %s, want %s", i, a, want.attempts)
		}
		if e, _ := header(dlt[i], HeaderDLTError); e == "" {
			t.Errorf("dead letter %d has no error", i)
		}
	}
	if string(dlt[0].Value) != "\x00not json at all" {
		t.Errorf("garbage dead letter value %q", dlt[0].Value)
	}
	for id, want := range map[int64]int32{20: 1, 21: 1, 22: 1} {
		n, _ := calls.Load(id)
		if n == nil || n.(*atomic.Int32).Load() != want {
			t.Errorf("event %d: handler calls %v, want %d", id, n, want)
		}
	}
	labels := map[string]string{"group": group, "topic": topic}
	if v := metricValue(t, reg, "board_events_retried_total", labels); v > 0 {
		t.Errorf("retried = %v, want none", v)
	}
	if v := metricValue(t, reg, "board_events_dead_lettered_total", labels); v != 4 {
		t.Errorf("dead_lettered = %v, want 4", v)
	}
	if got, want := committed(t, cl, group, topic), endOffsets(t, cl, topic); !equalOffsets(got, want) {
		t.Errorf("committed %v, want the end offsets %v", got, want)
	}
}

// TestCommitOnlyAfterHandling: the consumer is stopped while a handler is running; the records before it are
// committed, that one is not, and a new member of the group gets it again.
func TestCommitOnlyAfterHandling(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group = "board-view", "blocking"
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 1); err != nil {
		t.Fatal(err)
	}
	produceViews(t, cl, topic, 1, 2, 3)
	blocked := make(chan struct{})
	var ok handled
	stop := runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic},
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(ctx context.Context, env event.Envelope) error {
			if idOf(env) == 2 {
				close(blocked)
				<-ctx.Done()
				return ctx.Err()
			}
			ok.add(idOf(env))
			return nil
		}},
	})
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("handler never reached record 2")
	}
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Run returned %v after cancel", time.Since(start).Round(time.Millisecond))
	if got := ok.snapshot(); !slices.Equal(got, []int64{1}) {
		t.Fatalf("handled %v before the stop, want [1]", got)
	}
	if got := committed(t, cl, group, topic); got[0] != 1 {
		t.Errorf("committed %v, want partition 0 at offset 1 (after record 1 only)", got)
	}

	var again handled
	stop = runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic},
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			again.add(idOf(env))
			return nil
		}},
	})
	eventually(t, 10*time.Second, "records 2 and 3 again", func() bool { return again.len() == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := again.snapshot(); !slices.Equal(got, []int64{2, 3}) {
		t.Errorf("new member handled %v, want [2 3]", got)
	}
}

// TestShutdownStopsRetries: a cancel during a retry backoff ends Run at once, without committing the record.
func TestShutdownStopsRetries(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group = "board-view", "shutdown"
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 1); err != nil {
		t.Fatal(err)
	}
	produceViews(t, cl, topic, 1)
	failed := make(chan struct{}, 10)
	stop := runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic}, Backoff: 5 * time.Second,
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(context.Context, event.Envelope) error {
			failed <- struct{}{}
			return errors.New("still down")
		}},
	})
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("handler never called")
	}
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Run took %v to return after cancel during a 2.5-5s backoff", d)
	}
	if got := committed(t, cl, group, topic); len(got) > 0 {
		t.Errorf("committed %v, want nothing", got)
	}
	if recs := readAll(t, k.Addrs(), event.DeadLetterTopic(topic), 1, 300*time.Millisecond); len(recs) > 0 {
		t.Errorf("%d dead letters, want none", len(recs))
	}
}

// TestStallWhileDependencyDown: a handler saying its store is down (fault.Unavailable) more times than MaxAttempts
// is called again until it succeeds: the record is handled once, nothing is dead-lettered, the record after it on
// the partition waits for it, and everything ends committed.
func TestStallWhileDependencyDown(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group, downCalls = "board-view", "stall", 8
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 1); err != nil {
		t.Fatal(err)
	}
	produceViews(t, cl, topic, 1, 2)
	reg := prometheus.NewRegistry()
	var calls atomic.Int32
	var ok handled
	stop := runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic}, MaxAttempts: 3, Backoff: time.Millisecond,
		Metrics: NewMetrics(reg),
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			if idOf(env) == 1 && calls.Add(1) <= downCalls {
				return fault.Unavailablef(errors.New("dial tcp: connection refused"), "REDIS_DOWN", "redis is down")
			}
			ok.add(idOf(env))
			return nil
		}},
	})
	eventually(t, 10*time.Second, "both records", func() bool { return ok.len() == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := ok.snapshot(); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("handled %v, want [1 2]: each once, in order", got)
	}
	if n := calls.Load(); n != downCalls+1 {
		t.Errorf("handler called %d times for record 1, want %d", n, downCalls+1)
	}
	labels := map[string]string{"group": group, "topic": topic}
	if v := metricValue(t, reg, "board_events_retried_total", labels); v != downCalls {
		t.Errorf("retried = %v, want %d", v, downCalls)
	}
	if v := metricValue(t, reg, "board_events_dead_lettered_total", labels); v > 0 {
		t.Errorf("dead_lettered = %v, want none", v)
	}
	if recs := readAll(t, k.Addrs(), event.DeadLetterTopic(topic), 1, 300*time.Millisecond); len(recs) > 0 {
		t.Errorf("%d records in the dead-letter topic, want none", len(recs))
	}
	if got, want := committed(t, cl, group, topic), endOffsets(t, cl, topic); !equalOffsets(got, want) {
		t.Errorf("committed %v, want the end offsets %v", got, want)
	}
}

// TestShutdownDuringStall: a cancel while a record is stalled on a dependency that is down, past MaxAttempts, ends
// Run whether the handler or the backoff was running; the record is neither committed nor dead-lettered.
func TestShutdownDuringStall(t *testing.T) {
	t.Parallel()
	const stalledCalls = 5 // more than MaxAttempts
	for _, tc := range []struct {
		name    string
		backoff time.Duration
		// lastCall is the handler's answer at call stalledCalls, after it signalled the test.
		lastCall func(ctx context.Context) error
	}{
		// The handler waits on its context: Run could not return unless the cancel reached it.
		{"in the handler", time.Millisecond, func(ctx context.Context) error {
			<-ctx.Done()
			return fault.Unavailablef(ctx.Err(), "REDIS_DOWN", "redis is down")
		}},
		// The handler fails at once and the loop waits delay(5): 0.8-1.6 s with a 100 ms Backoff, far longer than
		// the test takes to cancel. A wait that ignored the cancel would end in one more handler call.
		{"in the backoff", 100 * time.Millisecond, func(context.Context) error {
			return fault.Unavailablef(errors.New("dial tcp: connection refused"), "REDIS_DOWN", "redis is down")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := startKafka(t)
			cl := newClient(t, k.Addrs())
			const topic, group = "board-view", "stall-shutdown"
			if err := EnsureTopics(context.Background(), cl, []string{topic}, 1); err != nil {
				t.Fatal(err)
			}
			produceViews(t, cl, topic, 1)
			var calls atomic.Int32
			reached := make(chan struct{})
			stop := runConsumer(t, ConsumerConfig{
				Brokers: k.Addrs(), Group: group, Topics: []string{topic}, MaxAttempts: 3, Backoff: tc.backoff,
				Handlers: map[event.Type]Handler{event.ArticleViewed: func(ctx context.Context, _ event.Envelope) error {
					if calls.Add(1) == stalledCalls {
						close(reached)
						return tc.lastCall(ctx)
					}
					return fault.Unavailablef(errors.New("dial tcp: connection refused"), "REDIS_DOWN", "redis is down")
				}},
			})
			select {
			case <-reached:
			case <-time.After(10 * time.Second):
				t.Fatalf("handler called %d times, never reached call %d", calls.Load(), stalledCalls)
			}
			start := time.Now()
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			t.Logf("Run returned %v after cancel", time.Since(start).Round(time.Millisecond))
			if n := calls.Load(); n != stalledCalls {
				t.Errorf("handler called %d times, want %d: none after the cancel", n, stalledCalls)
			}
			if got := committed(t, cl, group, topic); len(got) > 0 {
				t.Errorf("committed %v, want nothing", got)
			}
			if recs := readAll(t, k.Addrs(), event.DeadLetterTopic(topic), 1, 300*time.Millisecond); len(recs) > 0 {
				t.Errorf("%d dead letters, want none", len(recs))
			}
		})
	}
}

// TestDeadLetterProduceRetried: while the dead-letter topic cannot be written, the partition stalls on the record
// (nothing after it is handled or committed); once it can, the record lands there and consumption goes on.
func TestDeadLetterProduceRetried(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group = "board-like", "dltdown"
	createTopic(t, cl, topic, 1) // no dead-letter topic yet
	produceViews(t, cl, topic, 1, 2)
	reg := prometheus.NewRegistry()
	var ok handled
	stop := runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic}, MaxAttempts: 1, Backoff: 20 * time.Millisecond,
		Metrics: NewMetrics(reg),
		// Fail a produce to the missing topic at the first UNKNOWN_TOPIC_OR_PARTITION instead of after 4.
		Opts: []kgo.Opt{kgo.UnknownTopicRetries(0), kgo.MetadataMinAge(50 * time.Millisecond)},
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			if idOf(env) == 1 {
				return errors.New("poison")
			}
			ok.add(idOf(env))
			return nil
		}},
	})
	time.Sleep(time.Second)
	if n := ok.len(); n != 0 {
		t.Fatalf("%d records handled past the one that could not be dead-lettered", n)
	}
	if got := committed(t, cl, group, topic); len(got) > 0 {
		t.Fatalf("committed %v while the first record was neither handled nor dead-lettered", got)
	}
	createTopic(t, cl, event.DeadLetterTopic(topic), 1)
	eventually(t, 15*time.Second, "record 2", func() bool { return ok.len() == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dlt := readAll(t, k.Addrs(), event.DeadLetterTopic(topic), 1, 5*time.Second)
	if len(dlt) < 1 {
		t.Fatal("no dead letter")
	}
	if id, _ := header(dlt[0], event.HeaderEventID); id != "1" {
		t.Errorf("dead letter of event %s, want 1", id)
	}
	if got, want := committed(t, cl, group, topic), endOffsets(t, cl, topic); !equalOffsets(got, want) {
		t.Errorf("committed %v, want the end offsets %v", got, want)
	}
}

// TestRebalanceLosesNothing: two members share a 3-partition topic while 300 records are produced; one joins
// mid-way, the other leaves mid-way. Every record is handled at least once and all offsets end committed.
func TestRebalanceLosesNothing(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group, total = "board-comment", "rebalance", 300
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 3); err != nil {
		t.Fatal(err)
	}
	var seen handled
	var byMember [2]atomic.Int32
	cfg := func(member int) ConsumerConfig {
		return ConsumerConfig{
			Brokers: k.Addrs(), Group: group, Topics: []string{topic},
			Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
				time.Sleep(time.Millisecond) // let rebalances land mid-batch
				seen.add(idOf(env))
				byMember[member].Add(1)
				return nil
			}},
		}
	}
	next := int64(1)
	produceBatch := func() { // ten more events, spread over the partitions by key
		ids := make([]int64, 10)
		for i := range ids {
			ids[i] = next + int64(i)
		}
		produceViews(t, cl, topic, ids...)
		next += 10
		time.Sleep(5 * time.Millisecond)
	}
	stopA := runConsumer(t, cfg(0))
	for next <= 100 {
		produceBatch()
	}
	stopB := runConsumer(t, cfg(1))
	// Keep producing until B owns partitions and handles records: A must have given them up mid-stream.
	for byMember[1].Load() == 0 {
		if next > 250 {
			t.Fatal("member B never got a share")
		}
		produceBatch()
		time.Sleep(20 * time.Millisecond)
	}
	if err := stopA(); err != nil { // A leaves: B takes all the partitions
		t.Fatal(err)
	}
	for next <= total {
		produceBatch()
	}
	eventually(t, 20*time.Second, "every record", func() bool {
		ids := seen.snapshot()
		slices.Sort(ids)
		return len(slices.Compact(ids)) == total
	})
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	ids := seen.snapshot()
	t.Logf("handled %d records for %d events (A %d, B %d)", len(ids), total, byMember[0].Load(), byMember[1].Load())
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) != total || ids[0] != 1 || ids[total-1] != total {
		t.Errorf("handled %d distinct events, want 1..%d", len(ids), total)
	}
	if got, want := committed(t, cl, group, topic), endOffsets(t, cl, topic); !equalOffsets(got, want) {
		t.Errorf("committed %v, want the end offsets %v", got, want)
	}
}

// TestLagGauge: the lag is the fetch's high watermark minus the next offset, and reaches 0.
func TestLagGauge(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group = "board-view", "lag"
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 1); err != nil {
		t.Fatal(err)
	}
	produceViews(t, cl, topic, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	reg := prometheus.NewRegistry()
	reached, release := make(chan struct{}), make(chan struct{})
	var ok handled
	stop := runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic}, Metrics: NewMetrics(reg),
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			if idOf(env) == 2 {
				close(reached)
				<-release
			}
			ok.add(idOf(env))
			return nil
		}},
	})
	labels := map[string]string{"group": group, "topic": topic, "partition": "0"}
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("handler never reached record 2")
	}
	// Record 1 (offset 0) is done: lag = high watermark - 1. The first fetch may hold fewer than all ten.
	if v := metricValue(t, reg, "board_consumer_lag", labels); v < 1 || v > 9 {
		t.Errorf("lag while on the second record = %v, want between 1 and 9", v)
	}
	close(release)
	eventually(t, 10*time.Second, "all records", func() bool { return ok.len() == 10 })
	eventually(t, 5*time.Second, "lag 0", func() bool { return metricValue(t, reg, "board_consumer_lag", labels) == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if v := metricValue(t, reg, "board_consumer_lag", labels); v != -1 {
		t.Errorf("lag series still there after the partition was revoked: %v", v)
	}
}

// TestEventAgeHistogram: every record a handler applied is observed once, under its group and topic, at the
// consumer's clock minus the event's commit time (its eventCreatedAt header, else the record's timestamp); skipped
// and dead-lettered records are not.
func TestEventAgeHistogram(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group = "board-view", "age"
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 3); err != nil {
		t.Fatal(err)
	}
	// Recent enough that the broker's retention keeps them, and millisecond-exact as Kafka stores timestamps.
	stamped := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	const age = 1500 * time.Millisecond
	liked, err := event.Encode(5, event.ArticleLiked, []byte(`{"articleId":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	// No handler for the like: skipped, on the partition of record 1 and before it, so done once 1 is handled.
	recs := []*kgo.Record{EventRecord(topic, 1, 5, event.ArticleLiked, liked)}
	for _, id := range []int64{1, 2, 3, 4} {
		recs = append(recs, EventRecord(topic, id, id, event.ArticleViewed, viewEvent(t, id)))
	}
	for _, r := range recs {
		r.Timestamp = stamped
	}
	SetCreatedAt(recs[2], stamped.Add(-time.Second)) // record 2: committed a second before it was produced
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var ok handled
	stop := runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic}, MaxAttempts: 1, Metrics: NewMetrics(reg),
		Now: func() time.Time { return stamped.Add(age) },
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			if idOf(env) == 4 {
				return errors.New("cannot apply 4") // dead-lettered after its one attempt
			}
			ok.add(idOf(env))
			return nil
		}},
	})
	labels := map[string]string{"group": group, "topic": topic}
	eventually(t, 10*time.Second, "three records handled and one dead-lettered", func() bool {
		return ok.len() == 3 && metricValue(t, reg, "board_events_dead_lettered_total", labels) == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	count, sum, found := histogramValue(t, reg, "board_event_age_seconds", labels)
	if !found {
		t.Fatalf("no board_event_age_seconds{group=%q,topic=%q} series", group, topic)
	}
	if want := 3*age.Seconds() + 1; count != 3 || sum != want {
		t.Errorf("event age: %d samples summing to %vs, want 3 summing to %vs", count, sum, want)
	}
}

// equalOffsets compares per-partition offsets, a missing partition counting as offset 0 (nothing to commit).
func equalOffsets(a, b map[int32]int64) bool {
	for p, o := range a {
		if b[p] != o {
			return false
		}
	}
	for p, o := range b {
		if a[p] != o {
			return false
		}
	}
	return true
}

// TestConsumerSurvivesBrokerRestart: the broker goes away and comes back (same address, same data); the consumer
// carries on, nothing is lost and everything ends committed.
func TestConsumerSurvivesBrokerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k, err := embedded.StartKafka("127.0.0.1:0", dir, embedded.DefaultKafkaRetention, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	addr := k.Addrs()
	cl := newClient(t, addr, kgo.MetadataMinAge(100*time.Millisecond))
	const topic, group = "board-view", "outage"
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 3); err != nil {
		k.Close()
		t.Fatal(err)
	}
	produceViews(t, cl, topic, 1, 2, 3, 4, 5)
	var seen handled
	stop := runConsumer(t, ConsumerConfig{
		Brokers: addr, Group: group, Topics: []string{topic}, Backoff: 20 * time.Millisecond,
		Opts: []kgo.Opt{kgo.MetadataMinAge(100 * time.Millisecond)},
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			seen.add(idOf(env))
			return nil
		}},
	})
	eventually(t, 10*time.Second, "the first records", func() bool { return seen.len() == 5 })
	k.Close()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	k, err = embedded.StartKafka(addr[0], dir, embedded.DefaultKafkaRetention, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	produceViews(t, cl, topic, 6, 7, 8, 9, 10)
	eventually(t, 20*time.Second, "the records produced after the restart", func() bool {
		ids := seen.snapshot()
		slices.Sort(ids)
		return len(slices.Compact(ids)) == 10
	})
	t.Logf("consumer caught up %v after the restart", time.Since(start).Round(time.Millisecond))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got, want := committed(t, cl, group, topic), endOffsets(t, cl, topic); !equalOffsets(got, want) {
		t.Errorf("committed %v, want the end offsets %v", got, want)
	}
}

// TestFlushBeforeCommit: a batch's offsets are committed only once Flush succeeds; a Flush that never does leaves
// them uncommitted at shutdown, and the records are delivered again.
func TestFlushBeforeCommit(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group = "board-view", "flushing"
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 1); err != nil {
		t.Fatal(err)
	}
	produceViews(t, cl, topic, 1, 2, 3)
	var seen handled
	var flushes atomic.Int64
	stop := runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic}, Backoff: time.Millisecond,
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			seen.add(idOf(env))
			return nil
		}},
		Flush: func(context.Context) error { flushes.Add(1); return errors.New("disk full") },
	})
	eventually(t, 10*time.Second, "three records handled and Flush retried", func() bool {
		return seen.len() == 3 && flushes.Load() >= 3
	})
	if got := committed(t, cl, group, topic); len(got) != 0 {
		t.Fatalf("committed %v while Flush fails, want nothing", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, cl, group, topic); len(got) != 0 {
		t.Fatalf("committed %v at shutdown after failed flushes, want nothing", got)
	}

	var again handled
	var flushed atomic.Int64
	stop = runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: group, Topics: []string{topic},
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			again.add(idOf(env))
			return nil
		}},
		Flush: func(context.Context) error { flushed.Store(int64(again.len())); return nil },
	})
	eventually(t, 10*time.Second, "offset 3 committed", func() bool { return committed(t, cl, group, topic)[0] == 3 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := again.snapshot(); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("delivered again %v, want [1 2 3]", got)
	}
	if flushed.Load() != 3 {
		t.Errorf("the last Flush saw %d records handled, want 3", flushed.Load())
	}
}

// A concurrent consumer handles a batch's partitions at once: each partition's first record waits for the other's,
// which a consumer that works through partitions one after another never reaches.
func TestConcurrentPartitions(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const topic = "board-view"
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 2); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for id := int64(1); id <= 4; id++ {
		r := EventRecord(topic, id, id, event.ArticleViewed, viewEvent(t, id))
		r.Partition = int32(id % 2)
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var started sync.WaitGroup
	started.Add(2)
	var together atomic.Int64 // first records that met the other partition's
	var seen handled
	stop := runConsumer(t, ConsumerConfig{
		Brokers: k.Addrs(), Group: "concurrent", Topics: []string{topic}, Concurrent: true,
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			if id := idOf(env); id <= 2 {
				started.Done()
				met := make(chan struct{})
				go func() { started.Wait(); close(met) }()
				select {
				case <-met:
					together.Add(1)
				case <-time.After(5 * time.Second):
				}
			}
			seen.add(idOf(env))
			return nil
		}},
	})
	eventually(t, 20*time.Second, "four records handled", func() bool { return seen.len() == 4 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if together.Load() != 2 {
		t.Errorf("%d of the partitions' first records ran beside the other's, want 2", together.Load())
	}
	// Each partition in order.
	var order [2][]int64
	for _, id := range seen.snapshot() {
		order[id%2] = append(order[id%2], id)
	}
	if !slices.Equal(order[0], []int64{2, 4}) || !slices.Equal(order[1], []int64{1, 3}) {
		t.Errorf("partition orders %v, want [2 4] and [1 3]", order)
	}
}
