package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"
	topodatapb "vitess.io/vitess/go/vt/proto/topodata"
	vtgatepb "vitess.io/vitess/go/vt/proto/vtgate"
	vtgateservicepb "vitess.io/vitess/go/vt/proto/vtgateservice"

	"board/internal/event"
	"board/internal/sqldb"
)

// VStreamConfig makes a relay follow the outbox table's change stream through vtgate's VStream API instead of
// polling it (docs/messaging.md, "The relay by log tailing").
type VStreamConfig struct {
	Addr     string // vtgate's gRPC address
	Keyspace string // the keyspace of the outbox table: the service's database name behind vtgate
	Shards   int    // the logical shard count, for the sweep of the whole table when no position is stored
	// PositionKey is the Redis key that holds the stream's position (a VGTID, as JSON): every row committed before
	// it has been acknowledged by the broker.
	PositionKey string
}

// tailSweepAge is the age at which a row the stream relay left in the table is published by the poller, which
// keeps running beside the stream as a safety net: for rows whose delete failed, and for a stream that is down.
const tailSweepAge = time.Minute

const (
	// tailHeartbeat is how often vtgate sends a heartbeat on an idle stream; tailSilence without any message is a
	// hung vtgate or a dead connection, and the stream is opened again.
	tailHeartbeat = time.Second
	tailSilence   = 10 * tailHeartbeat
	// tailSaveEvery bounds how often the position is written to Redis: at most that much is published twice after a
	// crash, beyond what was in flight.
	tailSaveEvery = 100 * time.Millisecond
	// tailDeleteDelay is how long a stream relay's deleter gathers acknowledged rows before a DELETE.
	tailDeleteDelay = 100 * time.Millisecond
	// tailRetry is the pause before a failed stream is opened again.
	tailRetry = time.Second
	// tailRejections is how many failures in a row before a first event make a stored position count as rejected
	// (binary logs purged, shards that a Reshard removed): the relay then starts from vtgate's current position and
	// sweeps the table.
	tailRejections = 3
	// redisTimeout bounds each Redis call of the stream relay.
	redisTimeout = 2 * time.Second
)

// tail is the VStream side of a relay.
type tail struct {
	cfg    VStreamConfig
	rdb    redis.UniversalClient
	conn   *grpc.ClientConn
	client vtgateservicepb.VitessClient
}

// NewVStreamRelay returns a relay that publishes the outbox of db, a keyspace behind vtgate, from its change stream.
// The instance that owns logical shard 0 through coord owns the stream and keeps its position in rdb; every instance
// also polls its shards for rows older than a minute, which the stream missed. There is no fast path: the stream is
// as quick.
func NewVStreamRelay(db *sqldb.DB, client *kgo.Client, coord *Coordinator, rdb redis.UniversalClient, cfg RelayConfig,
	vs VStreamConfig, logger *slog.Logger, metrics *Metrics) (*Relay, error) {
	// grpc.NewClient does no I/O: the connection is made, and remade, by the stream's calls.
	conn, err := grpc.NewClient(vs.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("vtgate gRPC address %q: %w", vs.Addr, err)
	}
	cfg.MinAge = max(cfg.MinAge, tailSweepAge)
	r := NewRelay(db, client, coord, cfg, logger, metrics)
	r.tail = &tail{cfg: vs, rdb: rdb, conn: conn, client: vtgateservicepb.NewVitessClient(conn)}
	return r, nil
}

// tailLoop runs the stream while this instance owns shard 0, opening it again after each failure.
func (r *Relay) tailLoop(ctx context.Context) {
	defer func() { _ = r.tail.conn.Close() }() // only fails when already closed
	rejected := 0
	for ctx.Err() == nil {
		if !slices.Contains(r.coord.Owned(), 0) {
			sleep(ctx, r.coord.ping)
			continue
		}
		gotEvents, stored, err := r.tailOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil || gotEvents || !stored || status.Code(err) == codes.Unavailable:
			rejected = 0 // a vtgate that is down rejects nothing
		default:
			rejected++
		}
		if err != nil {
			r.logger.Warn("relay: the outbox's change stream ended; opening it again", "keyspace", r.tail.cfg.Keyspace, "err", err)
		}
		if rejected >= tailRejections {
			r.logger.Warn("relay: vtgate rejects the stored stream position; starting from the current one and sweeping the table",
				"keyspace", r.tail.cfg.Keyspace)
			if err := r.tail.forget(ctx); err != nil {
				r.logger.Warn("relay: cannot delete the stream position", "err", err)
			}
			rejected = 0
		}
		sleep(ctx, tailRetry)
	}
}

// tailOnce follows the stream from the stored position, or from vtgate's current one with a sweep of the whole table
// when none is stored, until the stream fails, a publish fails, ownership moves or ctx ends. It reports whether the
// stream gave any event and whether it started from a stored position.
func (r *Relay) tailOnce(ctx context.Context) (gotEvents, stored bool, err error) {
	t := r.tail
	start, err := t.load(ctx)
	if err != nil {
		return false, false, err
	}
	stored = start != nil
	if !stored {
		// vtgate resolves "current" per shard of the keyspace as the stream starts, and follows shard splits from there.
		start = &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: t.cfg.Keyspace, Gtid: "current"}}}
	}
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := t.client.VStream(streamCtx, &vtgatepb.VStreamRequest{
		TabletType: topodatapb.TabletType_PRIMARY,
		Vgtid:      start,
		Filter:     &binlogdatapb.Filter{Rules: []*binlogdatapb.Rule{{Match: "outbox", Filter: "select * from outbox"}}},
		Flags:      &vtgatepb.VStreamFlags{HeartbeatInterval: uint32(tailHeartbeat / time.Second)},
	})
	if err != nil {
		return false, stored, err
	}
	r.logger.Info("relay: following the outbox's change stream", "keyspace", t.cfg.Keyspace, "from_saved_position", stored)

	p := newProgress()
	saved := make(chan struct{})
	saveCtx, stopSaving := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer close(saved)
		t.saveLoop(saveCtx, p, r.logger)
	}()
	defer func() {
		// What was handed to the broker is answered (or given up on) within the flush timeout; the position it
		// reached is saved then, so that a restart does not publish it again.
		flushCtx, cancelFlush := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.FlushTimeout)
		defer cancelFlush()
		_ = r.client.Flush(flushCtx) // what is unanswered is published again from the saved position
		stopSaving()
		<-saved
	}()

	// A watchdog ends the stream when it falls silent or this instance no longer owns it.
	alive := make(chan struct{}, 1)
	go func() {
		silence := time.NewTimer(tailSilence)
		defer silence.Stop()
		owner := time.NewTicker(r.coord.ping)
		defer owner.Stop()
		for {
			select {
			case <-streamCtx.Done():
				return
			case <-alive:
				silence.Reset(tailSilence)
			case <-owner.C:
				if !slices.Contains(r.coord.Owned(), 0) {
					cancel()
				}
			case <-silence.C:
				r.logger.Warn("relay: the outbox's change stream is silent; opening it again", "after", tailSilence)
				cancel()
			}
		}
	}()

	swept := stored
	var sweeping sync.WaitGroup
	defer func() {
		// Before the flush: a sweep cut short leaves its rows in the table.
		cancel()
		sweeping.Wait()
	}()
	d := newDecoder()
	for {
		resp, err := stream.Recv()
		if err != nil {
			if streamCtx.Err() != nil && ctx.Err() == nil && slices.Contains(r.coord.Owned(), 0) {
				err = errors.New("the stream fell silent")
			} else if streamCtx.Err() != nil {
				err = nil // shutdown, or another instance owns the stream now
			}
			return gotEvents, stored, err
		}
		select {
		case alive <- struct{}{}:
		default:
		}
		rows, position, err := d.decode(resp.Events)
		if err != nil {
			return gotEvents, stored, err
		}
		gotEvents = gotEvents || len(resp.Events) > 0
		if len(rows) > 0 {
			seq := p.add()
			r.publish(rows, "vstream", func(failed bool) { p.answered(seq, failed) })
		}
		if position != nil && resolved(position) {
			p.mark(position)
			if !swept {
				// Every row committed before the stream's start is in the table, unpublished or about to be deleted.
				swept = true
				sweeping.Go(func() { r.sweep(streamCtx, t.cfg.Shards) })
			}
		}
		if p.hasFailed() {
			return gotEvents, stored, errors.New("the broker did not acknowledge every event; resuming from the last saved position")
		}
	}
}

// sweep publishes every row of the table, all logical shards at once: what was committed before a stream that
// started from vtgate's current position.
func (r *Relay) sweep(ctx context.Context, shards int) {
	cutoff := r.now()
	var wg sync.WaitGroup
	for shard := range shards {
		wg.Go(func() { r.pollShard(ctx, shard, cutoff) })
	}
	wg.Wait()
	r.deleteAcked(ctx)
}

// resolved reports whether every shard of a position is a real one: vtgate's first positions may still say
// "current" for shards that have not started, and saving such a position would skip their rows at the next start.
func resolved(v *binlogdatapb.VGtid) bool {
	for _, s := range v.ShardGtids {
		if s.Gtid == "" || s.Gtid == "current" {
			return false
		}
	}
	return len(v.ShardGtids) > 0
}

// load reads the stored position; nil when none is stored.
func (t *tail) load(ctx context.Context) (*binlogdatapb.VGtid, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	body, err := t.rdb.Get(ctx, t.cfg.PositionKey).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the stream position: %w", err)
	}
	var v binlogdatapb.VGtid
	if err := protojson.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("stream position %s: %w", t.cfg.PositionKey, err)
	}
	return &v, nil
}

// forget deletes the stored position.
func (t *tail) forget(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	return t.rdb.Del(ctx, t.cfg.PositionKey).Err()
}

// saveLoop writes the newest fully published position every tailSaveEvery while it moves, and once more when ctx
// ends.
func (t *tail) saveLoop(ctx context.Context, p *progress, logger *slog.Logger) {
	var last *binlogdatapb.VGtid
	save := func() {
		v := p.position()
		if v == nil || v == last {
			return
		}
		body, err := protojson.Marshal(v)
		if err == nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
			err = t.rdb.Set(sctx, t.cfg.PositionKey, body, 0).Err()
			cancel()
		}
		if err != nil {
			logger.Warn("relay: cannot save the stream position; a restart publishes some events again", "err", err)
			return
		}
		last = v
	}
	tick := time.NewTicker(tailSaveEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			save()
			return
		case <-tick.C:
			save()
		}
	}
}

// progress tells the newest position of the stream all of whose rows the broker acknowledged. Batches are handed to
// the producer in stream order and answered in any order across partitions; a position marked after batch n is
// published once batches 0 to n are.
type progress struct {
	mu      sync.Mutex
	next    int64          // the number of the next batch
	pending map[int64]bool // batches not answered yet
	marks   []positionMark // positions waiting for their batches, oldest first
	done    *binlogdatapb.VGtid
	failed  bool
}

type positionMark struct {
	before int64 // published once every batch numbered below this is
	vgtid  *binlogdatapb.VGtid
}

func newProgress() *progress { return &progress{pending: map[int64]bool{}} }

// add numbers a batch about to be handed to the producer.
func (p *progress) add() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.next
	p.next++
	p.pending[n] = true
	return n
}

// answered records the broker's answer for batch n. A failed batch stops the position where it is: the stream is
// opened again from there.
func (p *progress) answered(n int64, failed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if failed {
		p.failed = true
		return
	}
	delete(p.pending, n)
	p.advance()
}

// mark records a position the stream reached after every batch added so far.
func (p *progress) mark(v *binlogdatapb.VGtid) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marks = append(p.marks, positionMark{before: p.next, vgtid: v})
	p.advance()
}

func (p *progress) advance() {
	if p.failed {
		return
	}
	lowest := p.next
	for n := range p.pending {
		lowest = min(lowest, n)
	}
	i := 0
	for ; i < len(p.marks) && p.marks[i].before <= lowest; i++ {
		p.done = p.marks[i].vgtid
	}
	p.marks = p.marks[i:]
}

func (p *progress) position() *binlogdatapb.VGtid {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *progress) hasFailed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// decoder turns the stream's events into outbox messages: the inserts of the outbox table (the relay's own deletes
// come back too and are skipped), and the position the events end at.
type decoder struct {
	columns map[string]outboxColumns // by shard and table, from the FIELD events that precede their rows
}

// outboxColumns are the indexes of the columns a message needs in a row of the outbox table.
type outboxColumns struct{ id, eventType, key, payload, createdAt int }

func newDecoder() *decoder { return &decoder{columns: map[string]outboxColumns{}} }

func (d *decoder) decode(events []*binlogdatapb.VEvent) ([]Message, *binlogdatapb.VGtid, error) {
	var msgs []Message
	var position *binlogdatapb.VGtid
	for _, e := range events {
		switch e.Type {
		case binlogdatapb.VEventType_FIELD:
			cols, err := columnsOf(e.FieldEvent.Fields)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", e.FieldEvent.TableName, err)
			}
			d.columns[e.Keyspace+"/"+e.Shard+"/"+e.FieldEvent.TableName] = cols
		case binlogdatapb.VEventType_ROW:
			cols, ok := d.columns[e.Keyspace+"/"+e.Shard+"/"+e.RowEvent.TableName]
			if !ok {
				return nil, nil, fmt.Errorf("a row of %s on %s/%s before its fields", e.RowEvent.TableName, e.Keyspace, e.Shard)
			}
			for _, change := range e.RowEvent.RowChanges {
				if change.After == nil || change.Before != nil {
					continue // a delete of a published row: nothing changes a row's event once written
				}
				m, err := cols.message(values(change.After))
				if err != nil {
					return nil, nil, err
				}
				msgs = append(msgs, m)
			}
		case binlogdatapb.VEventType_VGTID:
			// vtgate sends it after the rows of each transaction, before its COMMIT.
			position = e.Vgtid
		}
	}
	return msgs, position, nil
}

func columnsOf(fields []*querypb.Field) (outboxColumns, error) {
	at := map[string]int{}
	for i, f := range fields {
		at[f.Name] = i
	}
	var c outboxColumns
	for name, to := range map[string]*int{"outbox_id": &c.id, "event_type": &c.eventType, "record_key": &c.key,
		"payload": &c.payload, "created_at": &c.createdAt} {
		i, ok := at[name]
		if !ok {
			return c, fmt.Errorf("no column %s", name)
		}
		*to = i
	}
	return c, nil
}

// values splits a row as query.proto encodes it: the values concatenated, with their lengths (-1 for NULL).
func values(row *querypb.Row) [][]byte {
	out := make([][]byte, len(row.Lengths))
	offset := int64(0)
	for i, n := range row.Lengths {
		if n < 0 {
			continue
		}
		out[i] = row.Values[offset : offset+n]
		offset += n
	}
	return out
}

// datetimeLayout is how MySQL writes a DATETIME(3) as text; board stores UTC (sqldb sets the driver's location).
const datetimeLayout = "2006-01-02 15:04:05.999999"

func (c outboxColumns) message(v [][]byte) (Message, error) {
	if len(v) <= max(c.id, c.eventType, c.key, c.payload, c.createdAt) {
		return Message{}, fmt.Errorf("an outbox row of %d columns", len(v))
	}
	id, err := strconv.ParseInt(string(v[c.id]), 10, 64)
	if err != nil {
		return Message{}, fmt.Errorf("outbox_id %q: %w", v[c.id], err)
	}
	key, err := strconv.ParseInt(string(v[c.key]), 10, 64)
	if err != nil {
		return Message{}, fmt.Errorf("record_key %q of outbox row %d: %w", v[c.key], id, err)
	}
	createdAt, err := time.ParseInLocation(datetimeLayout, strings.TrimSpace(string(v[c.createdAt])), time.UTC)
	if err != nil {
		return Message{}, fmt.Errorf("created_at %q of outbox row %d: %w", v[c.createdAt], id, err)
	}
	return Message{ID: id, Type: event.Type(v[c.eventType]), Key: key, Payload: v[c.payload], CreatedAt: createdAt}, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
