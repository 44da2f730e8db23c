package kafka

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"board/internal/event"
)

func TestResetGroupToStartValidates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"no brokers":  func() error { return ResetGroupToStart(ctx, nil, "g", []string{"t"}) },
		"no group":    func() error { return ResetGroupToStart(ctx, []string{"x:1"}, "", []string{"t"}) },
		"no topics":   func() error { return ResetGroupToStart(ctx, []string{"x:1"}, "g", nil) },
		"empty topic": func() error { return ResetGroupToStart(ctx, []string{"x:1"}, "g", []string{"t", ""}) },
	} {
		if err := call(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// viewsConsumer is a consumer config of group over topics that records the ids of the ARTICLE_VIEWED events it
// handles in seen.
func viewsConsumer(brokers []string, group string, seen *handled, topics ...string) ConsumerConfig {
	return ConsumerConfig{
		Brokers: brokers, Group: group, Topics: topics,
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			seen.add(idOf(env))
			return nil
		}},
	}
}

// TestResetGroupToStart: a group that consumed and committed everything is reset while none of its consumers runs;
// its next consumer handles every record of the reset topic again, and the group's offsets on another topic stay.
func TestResetGroupToStart(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, other, group = "board-view", "board-like", "replay"
	if err := EnsureTopics(context.Background(), cl, []string{topic, other}, 3); err != nil {
		t.Fatal(err)
	}
	produceViews(t, cl, topic, 1, 2, 3, 4, 5, 6)
	produceViews(t, cl, other, 101, 102)

	var first handled
	stop := runConsumer(t, viewsConsumer(k.Addrs(), group, &first, topic, other))
	eventually(t, 10*time.Second, "every record", func() bool { return first.len() == 8 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	end, otherEnd := endOffsets(t, cl, topic), endOffsets(t, cl, other)
	if got := committed(t, cl, group, topic); !equalOffsets(got, end) {
		t.Fatalf("committed %v before the reset, want the end offsets %v", got, end)
	}

	if err := ResetGroupToStart(context.Background(), k.Addrs(), group, []string{topic}); err != nil {
		t.Fatal(err)
	}
	got := committed(t, cl, group, topic)
	for p := range end {
		if o, ok := got[p]; !ok || o != 0 {
			t.Errorf("partition %d committed at %v (present: %v) after the reset, want 0", p, o, ok)
		}
	}
	if got := committed(t, cl, group, other); !equalOffsets(got, otherEnd) {
		t.Errorf("%s committed %v after resetting %s only, want its end offsets %v unchanged", other, got, topic, otherEnd)
	}

	var again handled
	stop = runConsumer(t, viewsConsumer(k.Addrs(), group, &again, topic, other))
	eventually(t, 10*time.Second, "the records of the reset topic again", func() bool { return again.len() >= 6 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	ids := again.snapshot()
	slices.Sort(ids)
	if want := []int64{1, 2, 3, 4, 5, 6}; !slices.Equal(ids, want) {
		t.Errorf("after the reset the group handled %v, want %v: every record of %s and none of %s", ids, want, topic, other)
	}
	if got := committed(t, cl, group, topic); !equalOffsets(got, end) {
		t.Errorf("committed %v after the replay, want the end offsets %v", got, end)
	}
}

// TestResetGroupToStartRefusesLiveGroup: while a consumer of the group runs, the reset fails naming the group and
// saying what to do, and the group's offsets stay where its consumer committed them.
func TestResetGroupToStartRefusesLiveGroup(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group = "board-view", "live"
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 3); err != nil {
		t.Fatal(err)
	}
	produceViews(t, cl, topic, 1, 2, 3, 4, 5, 6)
	var seen handled
	stop := runConsumer(t, viewsConsumer(k.Addrs(), group, &seen, topic))
	eventually(t, 10*time.Second, "every record", func() bool { return seen.len() == 6 })
	end := endOffsets(t, cl, topic)
	eventually(t, 10*time.Second, "the commit of every record", func() bool {
		return equalOffsets(committed(t, cl, group, topic), end)
	})

	err := ResetGroupToStart(context.Background(), k.Addrs(), group, []string{topic})
	if !errors.Is(err, ErrGroupNotEmpty) {
		t.Fatalf("reset of a group with a running consumer: %v, want ErrGroupNotEmpty", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `group `+group+`:`) || !strings.Contains(msg, "stop every consumer") {
		t.Errorf("error %q does not name group %s and say to stop its consumers", msg, group)
	}
	if got := committed(t, cl, group, topic); !equalOffsets(got, end) {
		t.Errorf("committed %v after the refused reset, want the end offsets %v unchanged", got, end)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := seen.len(); n != 6 {
		t.Errorf("the running consumer handled %d records, want 6: nothing replayed", n)
	}
}

// TestResetGroupToStartUnknownTopic: a topic that does not exist is an error, and the group's offsets stay.
func TestResetGroupToStartUnknownTopic(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const topic, group = "board-view", "typo"
	if err := EnsureTopics(context.Background(), cl, []string{topic}, 1); err != nil {
		t.Fatal(err)
	}
	produceViews(t, cl, topic, 1)
	var seen handled
	stop := runConsumer(t, viewsConsumer(k.Addrs(), group, &seen, topic))
	eventually(t, 10*time.Second, "the record", func() bool { return seen.len() == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	err := ResetGroupToStart(context.Background(), k.Addrs(), group, []string{topic, "board-veiw"})
	if err == nil || !strings.Contains(err.Error(), "board-veiw") {
		t.Fatalf("reset with an unknown topic: %v, want an error naming it", err)
	}
	if got, want := committed(t, cl, group, topic), endOffsets(t, cl, topic); !equalOffsets(got, want) {
		t.Errorf("committed %v after the failed reset, want the end offsets %v unchanged", got, want)
	}
}

// A group started at the end of one topic and the start of another handles what is produced to the first after, and
// all of the second; Reached says when it has handled everything up to given offsets.
func TestStartGroup(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	const endTopic, startTopic, group = "board-view", "board-like", "started"
	if err := EnsureTopics(context.Background(), cl, []string{endTopic, startTopic}, 2); err != nil {
		t.Fatal(err)
	}
	produceViews(t, cl, endTopic, 1, 2, 3)
	produceViews(t, cl, startTopic, 10, 11)
	ctx := context.Background()
	if err := StartGroup(ctx, k.Addrs(), group, []string{endTopic}, []string{startTopic}); err != nil {
		t.Fatal(err)
	}
	produceViews(t, cl, endTopic, 4, 5)
	ends, err := EndOffsets(ctx, k.Addrs(), []string{endTopic, startTopic})
	if err != nil {
		t.Fatal(err)
	}
	if reached, err := Reached(ctx, k.Addrs(), group, ends); err != nil || reached {
		t.Fatalf("Reached before any consumer: %v, %v", reached, err)
	}
	var seen handled
	stop := runConsumer(t, ConsumerConfig{Brokers: k.Addrs(), Group: group, Topics: []string{endTopic, startTopic},
		Handlers: map[event.Type]Handler{event.ArticleViewed: func(_ context.Context, env event.Envelope) error {
			seen.add(idOf(env))
			return nil
		}}})
	eventually(t, 10*time.Second, "the end offsets reached", func() bool {
		reached, err := Reached(ctx, k.Addrs(), group, ends)
		return err == nil && reached
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := seen.snapshot()
	slices.Sort(got)
	if !slices.Equal(got, []int64{4, 5, 10, 11}) {
		t.Errorf("handled %v, want [4 5 10 11]", got)
	}
}
