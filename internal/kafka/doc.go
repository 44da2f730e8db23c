// Package kafka is the messaging glue of SPEC §4: the producer client the outbox relay publishes events with, topic
// creation, and the consumer loop every event-consuming service runs.
//
// # Producing
//
// [NewProducer] returns an idempotent, acks=all franz-go client whose records fail after a bounded delivery timeout
// instead of waiting forever for a dead broker (a record the caller produces again after such a failure may then be
// stored twice: consumers tolerate duplicates anyway). [EnsureTopics] creates the event topics and their dead-letter topics
// (event.DeadLetterTopic); [EventRecord] builds the record of one event (key = shard key, value = envelope JSON,
// headers eventType and eventId) and [SetCreatedAt] adds the time the event was committed (header eventCreatedAt,
// which the consumer's board_event_age_seconds measures from).
//
// # Consuming: what the loop guarantees
//
//   - At least once. A record's offset is committed only after the record was handled (its handler returned nil),
//     skipped (no handler is registered for its type) or dead-lettered (produced to `<topic>.dlt` and acknowledged).
//     Records of one partition are processed strictly in offset order, one at a time, so a committed offset never
//     passes a record that was neither handled nor dead-lettered. Nothing is silently dropped.
//   - Retries. A failing handler is called again after a backoff (Backoff, doubling, capped at 5 s, jittered) until
//     MaxAttempts calls have failed; then the record goes to the dead-letter topic and consumption goes on. Errors
//     that cannot succeed on a retry go to the dead-letter topic after the first attempt: a value event.Decode
//     rejects (the handler is never called), and a handler error of fault kind Invalid or wrapping
//     event.ErrMalformed. One function, onFailure, makes these decisions.
//   - Stalls. A handler error saying a dependency is down (fault kind Unavailable, or one fault.IsDependencyDown
//     recognises, which includes context.DeadlineExceeded) says nothing against the event: dead-lettering it would
//     skip it. Such a call is retried with the same backoff without limit, until it succeeds or Run's context ends;
//     it does not count toward MaxAttempts and the record is never dead-lettered for it. The partition stalls on
//     the record, and so does the rest of the batch, since partitions are worked through one after the other. A
//     stall is logged at Warn at its first failed call and then every tenth (about every 40 s). Rebalances wait
//     for the stall as for any batch: one that outlasts the group's rebalance timeout gets the member thrown out
//     (see Rebalances), and its partitions go to members that will most likely stall on the same dependency.
//   - Dead letters. The dead-letter record keeps the original key, value and headers and adds dlt-error (the error
//     text), dlt-origin-topic, dlt-origin-partition, dlt-origin-offset, dlt-attempts (handler calls made, 0 for a
//     record that could not be decoded) and dlt-failed-at (RFC 3339, UTC). If producing it fails (broker down,
//     topic missing), it is retried with backoff for as long as the consumer runs: the partition stalls rather than
//     skipping the record.
//   - Shutdown. When Run's context is cancelled, the handler's context is cancelled too, retries and backoffs stop at
//     once, the offsets of the records already handled are committed, the record being worked on is not (it will be
//     delivered again), and the member leaves the group.
//   - Rebalances. The client blocks rebalances while a polled batch is processed (kgo.BlockRebalanceOnPoll); the
//     batch's offsets are committed before rebalancing is allowed again, so a partition moves to another member
//     only with everything handled here committed: a rebalance neither loses records nor rewinds another member's
//     commits. The partitions-revoked callback commits whatever is still pending; the partitions-lost callback
//     (the member was kicked out, e.g. a handler outlived the rebalance timeout) drops it, since the commit would be
//     rejected, and those records are delivered again to the new owner. Batches are bounded (maxPollRecords) so a
//     rebalance waits for at most one batch.
//
// # Replaying
//
// [ResetGroupToStart] moves a group's committed offsets back to the start of its topics, so that its next consumer
// handles every record still kept again: a consumer's state is rebuilt by replaying the topics. It refuses while any
// consumer of the group runs ([ErrGroupNotEmpty]).
//
// # What a handler must tolerate
//
//   - Duplicates: a record is delivered again after a crash, a failed commit, a lost partition or a shutdown
//     mid-handling, and the relay itself may publish an event twice.
//   - Out-of-order events: per-key order is not guaranteed end to end (the relay publishes asynchronously and
//     re-publishes late rows). Use the versions the event package documents: keep the highest version applied per
//     aggregate and ignore an event whose version is not higher.
//   - Cancellation: ctx is cancelled at shutdown; return promptly (the record will be redelivered).
//   - A handler error is retried unless it is fault.Invalid or wraps event.ErrMalformed; return those for events that
//     can never be applied, so they reach the dead-letter topic without delay. Return fault.Unavailable (or the
//     dependency's error unwrapped, when fault.IsDependencyDown recognises it) when a store the handler needs is
//     down: the record then waits for it instead of being dead-lettered after MaxAttempts. Do not return it for a
//     fault of the event itself, or the partition stalls on that record for good.
package kafka
