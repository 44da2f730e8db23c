package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/event"
)

// TestArticleEventsReachKafka writes articles over HTTP and reads their events with a plain Kafka client, as kcat
// would: key, headers and the JSON envelope as docs/messaging.md documents them.
func TestArticleEventsReachKafka(t *testing.T) {
	p := startProgram(t, testFlags(t, t.TempDir()))
	api := p.urls["article"]
	var a articleOut
	call(t, "POST", api+"/v1/articles", map[string]any{"title": "t", "content": "c", "writerId": 3, "boardId": 42},
		http.StatusCreated, &a)
	call(t, "PUT", api+"/v1/articles/"+a.ArticleID, map[string]any{"title": "t2", "content": "c2"}, http.StatusOK, nil)
	call(t, "DELETE", api+"/v1/articles/"+a.ArticleID, nil, http.StatusNoContent, nil)

	client, err := kgo.NewClient(kgo.SeedBrokers(p.logs.kafkaAddrs()...), kgo.ConsumeTopics("board-article"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var records []*kgo.Record
	for len(records) < 3 && ctx.Err() == nil {
		client.PollFetches(ctx).EachRecord(func(r *kgo.Record) { records = append(records, r) })
	}
	if len(records) != 3 {
		t.Fatalf("%d article events arrived, want 3", len(records))
	}
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`board_outbox_events_written_total{service="article"} 3`,
		`board_outbox_shards_owned{service="article"} 4`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// One key, one partition, one instance's fast path: commit order.
	want := []struct {
		typ          event.Type
		title        string
		version      int64
		boardCount   int64
		countVersion int64
	}{
		{event.ArticleCreated, "t", 1, 1, 1},
		{event.ArticleUpdated, "t2", 2, 1, 1},
		{event.ArticleDeleted, "t2", 3, 0, 2},
	}
	for i, rec := range records {
		headers := map[string]string{}
		for _, h := range rec.Headers {
			headers[h.Key] = string(h.Value)
		}
		env, err := event.Decode(rec.Value)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		pl, err := event.Payload[event.Article](env)
		if err != nil {
			t.Fatal(err)
		}
		w := want[i]
		if string(rec.Key) != "42" || headers[event.HeaderType] != string(w.typ) || headers[event.HeaderEventID] != env.EventID.String() {
			t.Errorf("record %d: key %q, headers %v; want key 42, type %s, event id %s", i, rec.Key, headers, w.typ, env.EventID)
		}
		if env.Type != w.typ || pl.ArticleID.String() != a.ArticleID || pl.Title != w.title || pl.ArticleVersion != w.version ||
			pl.BoardArticleCount != w.boardCount || pl.BoardArticleCountVersion != w.countVersion {
			t.Errorf("record %d: %s %+v; want %+v", i, env.Type, pl, w)
		}
	}
}
