package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// DefaultKafkaRetention is how long the embedded broker keeps a record by default: Kafka's own log.retention.ms.
const DefaultKafkaRetention = 7 * 24 * time.Hour

const (
	// maxRetentionCheckInterval is Kafka's log.retention.check.interval.ms: a record outlives the retention by at
	// most this long (less for short retentions, see retentionCheckInterval).
	maxRetentionCheckInterval = 5 * time.Minute

	// segmentBytes replaces kfake's 100 MiB segments. Retention deletes whole segment files only, and kfake rolls
	// a segment by size alone (it ignores log.roll.ms), so each partition keeps up to one segment of expired
	// records on disk and in its index; and a restart reads every partition's segments whole, all partitions at
	// once, so the segment size also bounds what loading holds in memory.
	segmentBytes = 8 << 20
)

// Kafka is an in-process Kafka-protocol broker (kfake) persisting in a
// directory. See the package doc for what is written when.
type Kafka struct {
	c         *kfake.Cluster
	stop      chan struct{}
	swept     chan struct{} // closed when the retention sweep has stopped
	closeOnce sync.Once
}

// StartKafka starts one broker listening on addr (host:port, port 0 for any
// free port) and loads the state kept in dataDir, creating it if needed.
// The broker advertises its listen address to clients, so the host must be
// one they can dial (e.g. 127.0.0.1), not a wildcard.
//
// Every topic, whenever and however it was created, keeps its records for
// retention (at least a second), measured from the timestamps producers set:
// a batch of records whose newest one is older than that is gone when
// StartKafka returns, or deleted within a tenth of the retention (at most 5
// minutes) after it expires. kfake deletes up to the last expired batch, so
// a record stamped further back than the retention also takes the records
// before it, unlike Kafka.
func StartKafka(addr, dataDir string, retention time.Duration, logger *slog.Logger) (*Kafka, error) {
	if retention < time.Second {
		return nil, fmt.Errorf("embedded kafka: retention %v: must be at least 1s", retention)
	}
	return newKafka(addr, dataDir, retention, retentionCheckInterval(retention), logger)
}

// retentionCheckInterval is how often the broker deletes expired records: a record outlives the retention by at
// most a tenth of it.
func retentionCheckInterval(retention time.Duration) time.Duration {
	return min(retention/10, maxRetentionCheckInterval)
}

func newKafka(addr, dataDir string, retention, checkInterval time.Duration, logger *slog.Logger) (*Kafka, error) {
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
		// Options override the broker configs kfake persisted, so a changed retention applies from this start.
		kfake.BrokerConfigs(map[string]string{
			// Kafka forgets an idle group's offsets after 7 days; an all-in-one install may well be stopped that
			// long, and its consumers should resume where they were rather than replay the whole log.
			"offsets.retention.minutes": strconv.Itoa(365 * 24 * 60),
			// The broker-wide default of every topic without a retention.ms of its own, i.e. all of ours.
			"log.retention.ms":  strconv.FormatInt(retention.Milliseconds(), 10),
			"log.segment.bytes": strconv.Itoa(segmentBytes),
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka: %w", err)
	}
	k := &Kafka{c: c, stop: make(chan struct{}), swept: make(chan struct{})}
	// kfake runs its own retention pass only for topics with a retention config of their own, so this sweep
	// applies the broker-wide one. The first pass runs before StartKafka returns, so that records that expired
	// while the broker was stopped are not served to the clients it starts.
	c.ApplyRetention()
	// Loading read every segment file whole; return that garbage to the OS now rather than over minutes.
	debug.FreeOSMemory()
	go k.sweep(checkInterval)
	logger.Info("embedded kafka listening", "addrs", k.Addrs(), "dir", dataDir, "retention", retention)
	return k, nil
}

// sweep deletes expired records every interval until Close.
func (k *Kafka) sweep(interval time.Duration) {
	defer close(k.swept)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
			k.c.ApplyRetention()
		}
	}
}

// Addrs are the seed broker addresses for franz-go or kcat.
func (k *Kafka) Addrs() []string { return k.c.ListenAddrs() }

// Close stops the broker after writing its complete state to the data
// directory. Persistence errors are logged, kfake does not return them.
// Calling it again does nothing.
func (k *Kafka) Close() {
	k.closeOnce.Do(func() {
		// kfake's admin calls, ApplyRetention included, block forever once the cluster is closed.
		close(k.stop)
		<-k.swept
		k.c.Close()
	})
}

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
