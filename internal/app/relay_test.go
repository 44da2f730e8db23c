package app

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"board/internal/sqldb"
)

func TestRelayFlag(t *testing.T) {
	cfg, err := ParseServe([]string{"--relay", "vstream", "--vtgate-grpc-addr", "127.0.0.1:15991"},
		func(string) string { return "" }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Relay != RelayVStream || cfg.VTGateGRPCAddr != "127.0.0.1:15991" {
		t.Errorf("relay %q at %q, want vstream at 127.0.0.1:15991", cfg.Relay, cfg.VTGateGRPCAddr)
	}
	if _, err := ParseServe([]string{"--relay", "binlog"}, func(string) string { return "" }, &bytes.Buffer{}); err == nil {
		t.Error("--relay binlog was accepted")
	}
}

// The stream relay follows Vitess's change stream: on any other engine, or without vtgate's gRPC address, a service
// refuses to start rather than run without a relay.
func TestStreamRelayNeedsVitess(t *testing.T) {
	db, err := sqldb.OpenSQLite(filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg := Default()
	cfg.Relay, cfg.VTGateGRPCAddr = RelayVStream, "127.0.0.1:15991"
	e := &Engines{Config: &cfg, Logger: slog.New(slog.DiscardHandler)}
	if _, err := newRelay(e, "article", db, nil); err == nil || !strings.Contains(err.Error(), "vtgate") {
		t.Errorf("a stream relay on SQLite: %v, want an error naming vtgate", err)
	}
	cfg.Relay = RelayPoll
	if _, err := newRelay(e, "article", db, nil); err != nil {
		t.Errorf("a polling relay on SQLite: %v", err)
	}
}
