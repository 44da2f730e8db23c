package kafka

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Compacted topics are created with their policy and no retention time; their dead-letter topics are plain ones,
// and a later EnsureTopics leaves them as they are.
func TestEnsureCompactedTopics(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	ctx := context.Background()
	if err := EnsureCompactedTopics(ctx, cl, []string{"board-ban"}, 3); err != nil {
		t.Fatal(err)
	}
	if err := EnsureTopics(ctx, cl, []string{"board-ban", "board-article"}, 3); err != nil {
		t.Fatal(err)
	}
	configs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, "board-ban", "board-ban.dlt", "board-article")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range configs {
		if rc.Err != nil {
			t.Fatalf("%s: %v", rc.Name, rc.Err)
		}
		got := map[string]string{}
		for _, c := range rc.Configs {
			if c.Value != nil && c.Source == kmsg.ConfigSourceDynamicTopicConfig { // set on the topic itself
				got[c.Key] = *c.Value
			}
		}
		compact := rc.Name == "board-ban"
		if (got["cleanup.policy"] == "compact") != compact || (got["retention.ms"] == "-1") != compact {
			t.Errorf("%s: topic configs %v", rc.Name, got)
		}
	}
}
