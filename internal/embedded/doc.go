// Package embedded runs the Redis-protocol server and the Kafka-protocol
// broker that board uses when no external ones are configured, so that a
// single binary needs nothing installed. Both listen on loopback, so
// redis-cli and kcat can look inside, and both keep their data in the data
// directory across a clean restart.
//
// Redis is miniredis (github.com/alicebob/miniredis/v2) plus a snapshot file,
// since miniredis itself keeps nothing on disk. The snapshot is loaded before
// the listener opens, rewritten every interval when a command that may
// change data ran since the last one, and written a last time by Close. TTLs
// run against the wall clock and are stored as absolute expiry times, so time
// spent stopped counts and keys that expired meanwhile are not restored.
//
// Kafka is kfake (github.com/twmb/franz-go/pkg/kfake), a single broker with
// kfake's own persistence (DataDir): produced record batches go to segment
// files and committed group offsets to groups.log as they arrive; topic
// metadata is rewritten (atomically, fsynced) when it changes; Close also
// writes partition snapshots, producer IDs and sequences and group sessions.
// Topics are not auto-created: the app creates them with CreateTopics.
//
// Limits:
//   - miniredis runs every command under one global lock, and snapshots take
//     that lock per batch of keys: fine for one process' traffic, but it is
//     no production Redis. No Redis Cluster, replication, SAVE or BGSAVE.
//   - A crash loses the Redis writes since the last snapshot, i.e. up to the
//     snapshot interval. A snapshot is consistent per batch of 100 keys, not
//     across all keys (unlike a fork-based RDB).
//   - Snapshots cover DBs 0–15 (Redis' default "databases 16") and the types
//     string, hash, list, set and zset. Keys of other types (stream,
//     HyperLogLog) are skipped with a warning; hash field TTLs (HEXPIRE) are
//     dropped, the fields are kept.
//   - kfake never fsyncs segment files or groups.log (its SyncWrites option,
//     left off as it costs an fsync per batch, would): a process crash loses
//     no record or commit, an OS crash or power loss may lose recent ones.
//   - As in Kafka, the committed offsets of a group with no live member expire
//     after offsets.retention.minutes, stopped time included; it is set to
//     365 days here (Kafka's default is 7), so consumers resume after a long stop.
package embedded
