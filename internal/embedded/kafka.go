package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Kafka is an in-process Kafka-protocol broker (kfake) persisting in a
// directory. See the package doc for what is written when.
type Kafka struct {
	c *kfake.Cluster
}

// StartKafka starts one broker listening on addr (host:port, port 0 for any
// free port) and loads the state kept in dataDir, creating it if needed.
// The broker advertises its listen address to clients, so the host must be
// one they can dial (e.g. 127.0.0.1), not a wildcard.
func StartKafka(addr, dataDir string, logger *slog.Logger) (*Kafka, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return nil, fmt.Errorf("embedded kafka: listen address %q: need a host clients can dial", addr)
	}
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.DataDir(dataDir),
		// kfake listens on 127.0.0.1:<port>; this honours the host as well.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, addr) }),
		kfake.WithLogger(kfakeLogger{logger}),
		// Kafka forgets an idle group's offsets after 7 days; an all-in-one install may well be stopped that long,
		// and its consumers should resume where they were rather than replay the whole log.
		kfake.BrokerConfigs(map[string]string{"offsets.retention.minutes": strconv.Itoa(365 * 24 * 60)}),
	)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka: %w", err)
	}
	k := &Kafka{c: c}
	logger.Info("embedded kafka listening", "addrs", k.Addrs(), "dir", dataDir)
	return k, nil
}

// Addrs are the seed broker addresses for franz-go or kcat.
func (k *Kafka) Addrs() []string { return k.c.ListenAddrs() }

// Close stops the broker after writing its complete state to the data
// directory. Persistence errors are logged, kfake does not return them.
func (k *Kafka) Close() { k.c.Close() }

// kfakeLogger passes kfake's logs to slog. kfake's Info is per-request and
// group membership chatter, so its Info and Debug both go to Debug.
type kfakeLogger struct{ l *slog.Logger }

func (k kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	lvl := slog.LevelDebug
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	}
	if k.l.Enabled(context.Background(), lvl) {
		k.l.Log(context.Background(), lvl, "kfake: "+fmt.Sprintf(format, args...))
	}
}
