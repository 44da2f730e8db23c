// Package embedded runs the Redis-protocol server and the Kafka-protocol
// broker that board uses when no external ones are configured, so that a
// single binary needs nothing installed. Both listen on loopback (Redis may
// listen elsewhere only with a password), so redis-cli and kcat can look
// inside, and both keep their data in the data directory across restarts.
//
// Redis comes in two engines:
//   - RedisServer runs Debian's (or any) redis-server as a child process,
//     whenever it is installed. Its append-only file, written before each
//     reply and fsynced every second, is in the data directory, so a restart
//     finds one point in time: everything after a clean stop or a crash of
//     board or of redis-server, at most about a second less after an OS crash.
//     Per-command cost does not grow with the key count, as in any Redis.
//   - Redis is the in-process fallback: miniredis (third_party/miniredis,
//     patched so that per-command cost does not grow with the key count) plus
//     a base file and logs of change sets in the data directory. A command's
//     changes reach the log before its reply, and the log is fsynced every
//     interval, so a restart finds one point in time: every acknowledged write
//     after a crash of board, up to one interval less after an OS crash.
//     Limits: one global lock; EVALSHA about 10,000/s (gopher-lua); about
//     600 MB of memory per million small keys. Kept:
//     every DB, and strings, hashes (with field TTLs), lists, sets and sorted
//     sets; streams and HyperLogLogs are not (one warning).
//
// Kafka is kfake (github.com/twmb/franz-go/pkg/kfake), a single broker with
// kfake's own persistence (DataDir): produced record batches go to segment
// files and committed group offsets to groups.log as they arrive; topic
// metadata is rewritten (atomically, fsynced) when it changes; Close also
// writes partition snapshots, producer IDs and sequences and group sessions.
// Topics are not auto-created: the app creates them with CreateTopics.
// Records are deleted after a retention (StartKafka's argument, set as the
// broker-wide log.retention.ms so it covers every topic): once before
// StartKafka returns, then every tenth of the retention, at most every 5
// minutes. On disk a whole 8 MiB segment file goes at a time.
//
// Limits:
//   - kfake never fsyncs segment files or groups.log (its SyncWrites option,
//     left off as it costs an fsync per batch, would): a process crash loses
//     no record or commit, an OS crash or power loss may lose recent ones.
//   - As in Kafka, the committed offsets of a group with no live member expire
//     after offsets.retention.minutes, stopped time included; it is set to
//     365 days here (Kafka's default is 7), so consumers resume after a long stop.
//   - kfake deletes up to the last expired record batch, so a record stamped
//     further back than the retention takes the records before it along
//     (Kafka stops at the first segment still live). Board stamps its records
//     when it publishes them.
//   - kfake frees the index entries (about 85 B per batch) of deleted segments
//     only when a partition's segment list next grows or at a restart, so
//     memory follows the most that was retained lately.
//   - A restart after a crash (no Close, so no partition snapshot) replays the
//     segments and holds a partition's whole log in memory while loading.
package embedded
