package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// resetTimeout bounds the whole of ResetGroupToStart, whatever the caller's context allows.
const resetTimeout = 30 * time.Second

// ErrGroupNotEmpty is what ResetGroupToStart returns (wrapped, with the group's name) when the group has live
// members: a group's offsets can only be rewritten while none of its consumers runs.
var ErrGroupNotEmpty = errors.New("the consumer group has live members")

// ResetGroupToStart sets the committed offsets of group to the start of every partition of topics (each partition's
// log start offset: its oldest record still kept), so that the group's next consumer handles every record again:
// the rebuild of a consumer's state by replaying the topics. Offsets the group has for other topics are left alone.
//
// It connects to brokers with a client of its own, closed before it returns. It first describes the group and
// refuses, with an error wrapping ErrGroupNotEmpty, when the group has members: stop every consumer of the group
// first (Kafka would reject the commit anyway, and a running member would commit its own offsets over it). It then
// lists the start offsets and commits them as a "simple" commit (generation -1, no member), as an admin tool does.
// A member joining between the describe and the commit makes the commit fail, with the same error. An unknown topic
// is an error; an unknown group is not (the commit creates its offsets). It changes nothing unless every offset was
// listed. Bounded by ctx and by resetTimeout. Works on classic consumer groups, those Consumer uses.
func ResetGroupToStart(ctx context.Context, brokers []string, group string, topics []string) error {
	switch {
	case len(brokers) == 0:
		return errors.New("reset group: no brokers")
	case group == "":
		return errors.New("reset group: no group")
	case len(topics) == 0 || slices.Contains(topics, ""):
		return fmt.Errorf("reset group %s: no topics, or an empty topic name", group) // none would mean all of them
	}
	ctx, cancel := context.WithTimeout(ctx, resetTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return fmt.Errorf("reset group %s: %w", group, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("reset group %s: describe: %w", group, err)
	}
	if g, ok := described[group]; ok {
		if g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
			return fmt.Errorf("reset group %s: describe: %w", group, g.Err)
		}
		if len(g.Members) > 0 {
			members := make([]string, len(g.Members))
			for i, m := range g.Members {
				members[i] = m.ClientID + "@" + m.ClientHost
			}
			return fmt.Errorf("reset group %s: %w (%s, state %s); stop every consumer of the group first",
				group, ErrGroupNotEmpty, strings.Join(members, ", "), g.State)
		}
	}

	listed, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("reset group %s: list start offsets: %w", group, err)
	}
	var errs []error
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("%s/%d: %w", o.Topic, o.Partition, o.Err))
		}
	})
	for _, t := range topics {
		if _, ok := listed[t]; !ok {
			errs = append(errs, fmt.Errorf("%s: no partitions listed", t))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("reset group %s: list start offsets: %w", group, err)
	}
	starts := make(kadm.Offsets)
	listed.Each(func(o kadm.ListedOffset) {
		// No leader epoch: the consumer then starts there without validating the offset against an epoch.
		starts.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})

	// kadm's commit is a simple one: generation -1 and no member id, which Kafka accepts for an empty group only.
	commits, err := adm.CommitOffsets(ctx, group, starts)
	if err != nil {
		return fmt.Errorf("reset group %s: commit: %w", group, err)
	}
	if err := commits.Error(); err != nil {
		if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) ||
			errors.Is(err, kerr.RebalanceInProgress) {
			return fmt.Errorf("reset group %s: %w (a member joined during the reset: %w); stop every consumer of the group first",
				group, ErrGroupNotEmpty, err)
		}
		return fmt.Errorf("reset group %s: commit: %w", group, err)
	}
	return nil
}

// StartGroup commits the first offsets of a new group: the end offset of every partition of atEnd as it is now, and
// the start (the oldest record kept) of every partition of atStart. Its first consumer handles only what is produced
// to atEnd from this moment on, and all of atStart. A rebuild from a snapshot calls it before the snapshot, so that
// whatever changes during the snapshot is applied after it; a topic whose state the snapshot's sources may not have
// applied yet is read again from its start. Bounded by ctx and by resetTimeout.
func StartGroup(ctx context.Context, brokers []string, group string, atEnd, atStart []string) error {
	ctx, cancel := context.WithTimeout(ctx, resetTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return fmt.Errorf("start group %s: %w", group, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	first := make(kadm.Offsets)
	for _, list := range []struct {
		topics  []string
		offsets func(context.Context, ...string) (kadm.ListedOffsets, error)
	}{{atEnd, adm.ListEndOffsets}, {atStart, adm.ListStartOffsets}} {
		if len(list.topics) == 0 {
			continue
		}
		listed, err := list.offsets(ctx, list.topics...)
		if err == nil {
			err = listed.Error()
		}
		if err != nil {
			return fmt.Errorf("start group %s: list offsets: %w", group, err)
		}
		listed.Each(func(o kadm.ListedOffset) {
			first.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
		})
	}
	commits, err := adm.CommitOffsets(ctx, group, first)
	if err == nil {
		err = commits.Error()
	}
	if err != nil {
		return fmt.Errorf("start group %s: commit: %w", group, err)
	}
	return nil
}

// EndOffsets returns the end offset of every partition of topics: topic -> partition -> offset.
func EndOffsets(ctx context.Context, brokers []string, topics []string) (map[string]map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %v: %w", topics, err)
	}
	out := map[string]map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out, nil
}

// Reached reports whether group has committed at least offsets on every partition they name: whether its consumers
// have handled everything up to there.
func Reached(ctx context.Context, brokers []string, group string, offsets map[string]map[int32]int64) (bool, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return false, err
	}
	defer cl.Close()
	topics := slices.Collect(maps.Keys(offsets))
	committed, err := kadm.NewClient(cl).FetchOffsetsForTopics(ctx, group, topics...)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("committed offsets of group %s: %w", group, err)
	}
	for topic, partitions := range offsets {
		for p, want := range partitions {
			if c, ok := committed.Lookup(topic, p); !ok || c.At < want {
				return false, nil
			}
		}
	}
	return true, nil
}
