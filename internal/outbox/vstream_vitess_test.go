package outbox

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"board/internal/kafka"
	"board/internal/polltest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// VTGateGRPCEnv names vtgate's gRPC address for the stream relay's tests, which run when it and a vtgate in
// BOARD_TEST_MYSQL_DSN (with BOARD_TEST_VITESS_PREFIXES) are set: scripts/vitess start serves gRPC on its port - 2.
const VTGateGRPCEnv = "BOARD_TEST_VTGATE_GRPC"

// vstreamHarness is a harness over a keyspace behind vtgate, or a skip.
func vstreamHarness(t *testing.T) (*harness, string) {
	addr := os.Getenv(VTGateGRPCEnv)
	if addr == "" || os.Getenv(sqldbtest.VitessPrefixesEnv) == "" {
		t.Skipf("the stream relay runs on Vitess: set %s, %s and %s", VTGateGRPCEnv, sqldbtest.MySQLDSNEnv,
			sqldbtest.VitessPrefixesEnv)
	}
	return newHarness(t, sqldbtest.OpenMySQL(t, Migrate)), addr
}

// streamRelay starts a stream relay (an instance of service "article") and returns its outbox, its published counter
// by path, and a stop func that shuts it down the way a process does.
func (h *harness) streamRelay(addr string) (*Outbox, func(path string) int, func()) {
	vecs := NewMetricVecs(prometheus.NewRegistry())
	metrics := vecs.For("article")
	r, err := NewVStreamRelay(h.db, h.producer, NewCoordinator(h.rdb, h.prefix, "article", DefaultShards, testCoordinator,
		quiet, metrics), h.rdb, testRelay, VStreamConfig{Addr: addr, Keyspace: h.db.Name, Shards: DefaultShards,
		PositionKey: h.positionKey()}, quiet, metrics)
	if err != nil {
		h.t.Fatal(err)
	}
	ob := New(h.db, DefaultShards, ids, time.Now, metrics, r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	h.t.Cleanup(stop)
	published := func(path string) int {
		var m dto.Metric
		if err := vecs.published.WithLabelValues("article", path).Write(&m); err != nil {
			h.t.Fatal(err)
		}
		return int(m.GetCounter().GetValue())
	}
	return ob, published, stop
}

func (h *harness) positionKey() string { return h.prefix + "outbox-vstream::article::position" }

// TestStreamRelayResumesFromItsPosition: the stream relay publishes every write and empties the table; after a
// restart it resumes from the position it saved, so the events written while it was down come from the stream
// (none from the table, and none of the earlier ones again); with the position lost it sweeps the table, and a
// position vtgate rejects is dropped for the same sweep.
func TestStreamRelayResumesFromItsPosition(t *testing.T) {
	t.Parallel()
	h, addr := vstreamHarness(t)
	ctx := context.Background()

	ob, _, stop := h.streamRelay(addr)
	written := capture(ob)
	// A first start has no position: it starts from vtgate's current one and sweeps the table as well, so the
	// writes made until the position is saved may arrive twice. The sweep reads rows up to its start, so the writes
	// made after arrive once.
	polltest.Until(t, 20*time.Second, func() (bool, string) {
		write(t, ob, 10)
		return h.rdb.Exists(ctx, h.positionKey()).Val() == 1, "no stream position saved"
	})
	warmUp := written()
	write(t, ob, 300)
	first := written()
	seen := h.consume(first, 30*time.Second)
	checkAtLeastOnce(t, seen, first)
	for _, id := range first[len(warmUp):] {
		if seen[id] != 1 {
			t.Errorf("event %d, written once the stream ran, arrived %d times", id, seen[id])
		}
	}
	h.waitEmpty(10 * time.Second)
	stop()

	// Written while no relay runs: they wait in the table and in the binary log after the saved position.
	write(t, ob, 300)
	all := written()
	_, published, stop := h.streamRelay(addr)
	seen = h.consume(all, 30*time.Second)
	checkAtLeastOnce(t, seen, all)
	for _, id := range all[len(warmUp):] {
		if seen[id] != 1 {
			t.Errorf("event %d arrived %d times, want once: the restart resumed before its position", id, seen[id])
		}
	}
	h.waitEmpty(10 * time.Second)
	if got := published("vstream"); got != len(all)-len(first) {
		t.Errorf("after the restart the stream published %d events, want the %d written meanwhile", got, len(all)-len(first))
	}
	if got := published("poll"); got != 0 {
		t.Errorf("after the restart the table's poller published %d events, want none", got)
	}
	stop()

	// Position lost (a Redis that lost its data): the relay starts from vtgate's current position and sweeps the
	// table, where everything not yet published waits.
	if err := h.rdb.Del(ctx, h.positionKey()).Err(); err != nil {
		t.Fatal(err)
	}
	write(t, ob, 200)
	all = written()
	_, published, stop = h.streamRelay(addr)
	checkAtLeastOnce(t, h.consume(all, 30*time.Second), all)
	h.waitEmpty(10 * time.Second)
	if got := published("poll"); got != 200 {
		t.Errorf("without a position the sweep published %d events, want the 200 in the table", got)
	}
	stop()

	// A position vtgate rejects (here shards the keyspace does not have, as after a Reshard completed while the relay
	// was down) is dropped after a few tries, for the same sweep.
	if err := h.rdb.Set(ctx, h.positionKey(),
		`{"shardGtids":[{"keyspace":"`+h.db.Name+`","shard":"-40","gtid":"MariaDB/0-1-1"}]}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	write(t, ob, 100)
	all = written()
	_, published, _ = h.streamRelay(addr)
	checkAtLeastOnce(t, h.consume(all, 60*time.Second), all)
	h.waitEmpty(10 * time.Second)
	if got := published("poll"); got != 100 {
		t.Errorf("after a rejected position the sweep published %d events, want the 100 in the table", got)
	}
}

// The child process of TestStreamRelaySurvivesKill9: a stream relay over the keyspace, Redis and broker its
// environment names, until it is killed.
const childEnv = "BOARD_TEST_VSTREAM_CHILD"

func TestStreamRelayChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("runs only as TestStreamRelaySurvivesKill9's child")
	}
	var c struct{ DSN, Redis, Prefix, Broker, VTGate string }
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatal(err)
	}
	db, err := sqldb.OpenMySQL(context.Background(), c.DSN, 10)
	if err != nil {
		t.Fatal(err)
	}
	producer, err := kafka.NewProducer([]string{c.Broker}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: c.Redis})
	h := &harness{t: t, db: db, rdb: rdb, prefix: c.Prefix, producer: producer}
	h.streamRelay(c.VTGate)
	select {} // until killed
}

// TestStreamRelaySurvivesKill9: a stream relay's process killed with SIGKILL while events are written and published
// loses none of them: the next one resumes from the saved position, which never passes an unacknowledged event,
// and the table is emptied.
func TestStreamRelaySurvivesKill9(t *testing.T) {
	t.Parallel()
	h, addr := vstreamHarness(t)
	redisAddr := os.Getenv(redisclienttest.AddrEnv)
	if redisAddr == "" {
		t.Skipf("the relay's process needs a Redis of its own: set %s", redisclienttest.AddrEnv)
	}
	spec, err := json.Marshal(map[string]string{"DSN": sqldbtest.DSN(t, h.db.Name), "Redis": redisAddr, "Prefix": h.prefix,
		"Broker": h.addr, "VTGate": addr})
	if err != nil {
		t.Fatal(err)
	}
	child := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestStreamRelayChild$")
		cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill() // already dead for the first one
			_ = cmd.Wait()
		})
		return cmd
	}
	ob := New(h.db, DefaultShards, ids, time.Now, nil, nil)
	written := capture(ob)
	first := child()
	ctx := context.Background()
	// Killed once it published and saved a position, with events still being written.
	polltest.Until(t, 30*time.Second, func() (bool, string) {
		write(t, ob, 20)
		return h.rdb.Exists(ctx, h.positionKey()).Val() == 1 && h.rowsLeft() < len(written()),
			"the relay has not published and saved a position yet"
	})
	write(t, ob, 200)
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait() // killed
	write(t, ob, 200)
	child()
	write(t, ob, 200)
	all := written()
	checkAtLeastOnce(t, h.consume(all, 60*time.Second), all)
	// Rows the first relay had published and saved past, but not yet deleted, when it was killed lie before the saved
	// position: the stream does not see them again, and the poller publishes them once they are tailSweepAge old.
	h.waitEmpty(tailSweepAge + 20*time.Second)
}
