package sqldb

import (
	"errors"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// vitessCutover reports an error that a transaction meets when a Reshard's SwitchTraffic (or a reparent) moves its
// shard while it runs, and that a new attempt gets past (vtgate buffers the new one's first statement until the
// switch is over, and routes it by the new shards). vtgate retries such errors itself only outside transactions,
// and board's writes are transactions. Nothing of the failed transaction committed: vtgate refused a statement
// before the commit, and the rollback ends the rest. Seen through vtgate v0.24 during `Reshard switchtraffic`:
//   - 1105, "... vttablet: rpc error: code = Code(17) desc = operation not allowed in state NOT_SERVING": a statement
//     reached a source shard's primary after it stopped serving (Code 17 is Vitess's CLUSTER_EVENT);
//   - 1317, "multi-db transaction attempted: [target:{keyspace:"comment" shard:"-80" ...} ... target:{keyspace:
//     "comment" shard:"40-80" ...}]": the transaction began on a source shard and its next statement was routed to a
//     target shard. Two shards of one keyspace whose key ranges overlap exist only during a reshard; a transaction
//     across disjoint shards is a bug of board's and stays one.
//   - 1105, "target: article.-80.primary: current keyspace is being resharded" (or "primary is not serving, there may
//     be a reparent operation in progress"): vtgate's own CLUSTER_EVENT, when it found no serving primary for the
//     shard and its buffer gave up; it sent the statement nowhere. Seen over external tablets on Galera, when a
//     write switch stalled (docs/sharding.md, "External tablets over Galera").
func vitessCutover(err error) bool {
	var my *mysql.MySQLError
	if !errors.As(err, &my) {
		return false
	}
	switch my.Number {
	case 1105:
		return strings.Contains(my.Message, "code = Code(17)") ||
			strings.Contains(my.Message, "current keyspace is being resharded") ||
			strings.Contains(my.Message, "primary is not serving, there may be a reparent operation in progress")
	case 1317:
		return strings.Contains(my.Message, "multi-db transaction") && overlappingShards(my.Message)
	}
	return false
}

// shardTarget finds the keyspace and shard of each target in a vtgate error message.
var shardTarget = regexp.MustCompile(`keyspace:"([^"]*)" shard:"([^"]*)"`)

// overlappingShards reports whether the message names two shards of one keyspace whose key ranges overlap: a
// shard and a piece of it, as a Reshard's sources and targets are.
func overlappingShards(message string) bool {
	targets := shardTarget.FindAllStringSubmatch(message, -1)
	for i, a := range targets {
		for _, b := range targets[:i] {
			if a[1] == b[1] && a[2] != b[2] && keyRangesOverlap(a[2], b[2]) {
				return true
			}
		}
	}
	return false
}

// keyRangesOverlap compares two shard names, Vitess key ranges "start-end" in hex ("-80", "40-80", "80-"; "0" and
// "-" are the whole range), where an empty start is the lowest key and an empty end the highest. Hex of whole bytes
// orders as the bytes do.
func keyRangesOverlap(a, b string) bool {
	aStart, aEnd := keyRange(a)
	bStart, bEnd := keyRange(b)
	return (bEnd == "" || aStart < bEnd) && (aEnd == "" || bStart < aEnd)
}

func keyRange(shard string) (start, end string) {
	start, end, ok := strings.Cut(strings.ToLower(shard), "-")
	if !ok { // an unsharded keyspace's one shard, "0"
		return "", ""
	}
	return start, end
}
