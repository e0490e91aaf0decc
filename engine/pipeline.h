// Pipeline: the execution half of a node (paper sections 3.4 and 3.5), around one
// storage::Table. It wires three parts together and is the front-end's way into them: the
// batch slots (executor/batch_ring.h: the hand-off state and its lock), the executor stage
// (executor/executor_stage.h: executor threads, one per key range, and the abort resolvers)
// and the commit stage (commit/commit_stage.h: commit threads). Its input is planned slices,
// fed in (batch, planner) order by a front-end:
//   - LocalPlanner (engine/local_planner.h) on a single node or a leader: planner threads take
//     transactions from the client queue and plan them into slices;
//   - FollowerFeed (cluster/follow/follower_feed.h) on a follower: the leader's slices arrive through
//     ReceiveData, are decoded and validated, and fed in the same order. Followers never plan.
// Its outputs are the outcomes of each slice, in global planned order (CommitSink), and one
// BatchInfo per committed batch (state digest, phase times).
//
//   front-end: BeginSlice(b, p) -> fill the PlannedSlice -> PublishSlice(b, p, replicated?)
//                                   MarkReplicated(b, p) from a replication callback
//     --> executor-<r>: for batch b, slices (b, 0), (b, 1), ... of its range, each as soon as it
//         is published (replication.mode=speculative) or replicated (sync); dependency values
//         flow between ranges; a batch that may abort is resolved by the last executor
//         (executor/abort_resolver.h) before batch b+1 runs
//     --> commit-<c>: a batch commits once executed AND every slice of it is replicated
//         (Invariant 1); outcomes per slice, delivered in planned order (Invariant 3).
//
// Determinism: the outcomes, the values read and the table after every batch are a function of
// the published slices alone (their order is the planned order), whatever the thread counts,
// timing or sync mode. With track_digest the state digest after each batch is kept incrementally
// (per-range deltas of the records each executor changed, plus the resolver's; no table scan),
// so a follower that replays the same slices reports the same digest per batch as its leader.
//
// Threads and ownership: the Pipeline owns the batch slots and both stages (each stage its
// threads: executor-<r>, commit-<c>); the Table, the sink and the hook are the caller's and
// must outlive it. One front-end thread per planner p calls BeginSlice/PublishSlice for its
// slices in batch order; MarkReplicated, Fail and the getters may be called from any thread;
// Start/Stop/WaitIdle from one controlling thread. Memory is bounded by batches_in_flight
// batch slots (1 = node-level synchronization: batch b+1 starts only after b committed).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "commit/commit_stage.h"
#include "commit/outcome.h"
#include "common/status.h"
#include "executor/executor_stage.h"
#include "planner/eq.h"
#include "storage/key_map.h"
#include "storage/table.h"

namespace qrstore::executor {
class RowSender;
struct RowTxn;
}

namespace qrstore::engine {

struct PipelineOptions {
  uint32_t planners = 1;           // slices per batch
  uint32_t executors = 2;          // executor threads = key ranges
  uint32_t committers = 1;
  uint32_t batches_in_flight = 3;  // batch slots; 1 = node-level sync
  storage::KeyMapper ranges;       // key -> executor range (buckets() == executors)
  uint64_t first_batch = 0;        // the first batch id fed
  bool executors_wait_for_replication = false;  // replication.mode=sync
  bool capture_reads = false;      // give the sink the values read (a node that answers clients)
  bool deliver_outcomes = true;    // call the sink (false: a follower, whose outcomes nobody reads)
  bool track_digest = false;       // keep the state digest per batch
  // A node of a partitioned row (docs/partitioned-rows.md): its input is row sub-slices (in
  // (batch, home * planners_per_home + planner) order: `planners` counts them all), kDepSend
  // values go to this sender, kDepRecv values come in through DeliverDepValue. Not owned.
  // A batch that may abort anywhere in the row is resolved by cascade, voting with the peers
  // (executor/row_resolver.h): `row_partitions` nodes, this one is `row_partition`.
  executor::RowSender* row_sender = nullptr;
  uint32_t row_partitions = 1;
  uint32_t row_partition = 0;
  // Rule 2 (docs/partitioned-rows.md 9.4; executor/executor_stage.h): a row leader's result of
  // each batch that may abort, for its batch-end record; a row follower that takes those
  // results through DeliverResolved instead of voting (its row_sender: a DropRowSender).
  std::function<void(uint64_t b, const std::vector<executor::RowTxn>& fired,
                     const std::vector<executor::RowTxn>& aborted)>
      on_row_resolved;
  bool row_resolved_by_leader = false;
  // Rule 2, a row leader with followers: batch b commits only once MarkBatchEnd(b) came too
  // (its batch-end record is replicated, or empty), and on_batch_executed(b) is called once b is
  // executed and resolved (executor thread, batch order, no lock held; it may call MarkBatchEnd
  // but must not wait for the pipeline; not for a batch that finished after a halt).
  bool batch_end_gate = false;
  std::function<void(uint64_t b)> on_batch_executed;
  // replication.point = writes, a leader (executor/executor_stage.h): each batch's last images
  // and fates go to on_batch_writes once it is executed; its slices must not be marked
  // replicated before what it was given is replicated (a row node: its batch_end_gate opens once
  // the entry carrying them is). A follower's slices carry them instead (planner/eq.h
  // SliceWrites), published as replicated.
  bool capture_writes = false;
  std::function<void(const executor::ExecutorStageOptions::BatchWrites&)> on_batch_writes;
  // Checkpoints: asked at every batch boundary whether to copy the table (executor_stage.h).
  // Not owned; outlives the pipeline.
  executor::ImageSink* image_sink = nullptr;
  // Each range keeps its writes' before-images in a write history of this many bytes / executors
  // (executor/write_history.h), for the read values of retried txns; 0: none. Not on a row node.
  uint64_t history_bytes = 0;
};

// The per-batch results of the commit stage (commit/commit_stage.h): the two types the
// pipeline's API names (the hook's argument is a commit::BatchInfo). The hook is called once per
// committed batch, in batch order, after the batch's last sink call, on a commit thread, outside
// the pipeline's lock. It must return quickly; of the pipeline it may call only Fail (as the sink
// may).
using BatchPhases = commit::BatchPhases;
using BatchHook = commit::BatchHook;

struct PipelineStats {
  uint64_t committed_batches = 0;  // batches [first_batch, first_batch + this) committed
  uint64_t committed = 0;
  uint64_t aborted = 0;
  uint64_t reexecuted = 0;
  uint64_t last_digest = 0;        // after the last committed batch (initial digest before any)
  BatchPhases phase_sums;          // sums over committed batches (divide by committed_batches)
};

class PipelineImpl;

class Pipeline {
 public:
  // `ranges` must have `executors` buckets. With track_digest, computes the table's digest once
  // (a full scan) as the starting point.
  Pipeline(PipelineOptions options, storage::Table* table, commit::CommitSink sink, BatchHook on_batch = nullptr);
  ~Pipeline();  // Stop()
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Starts the committer and executor threads. Once only.
  Status Start();

  // Front-end side. Waits until batch b may enter (batch b - batches_in_flight committed), then
  // returns slice (b, p) to fill (a reused value: Reset or DecodeSlice it). nullptr once the
  // pipeline failed or stopped, or when b is at or past the end.
  planner::PlannedSlice* BeginSlice(uint64_t b, uint32_t p);
  // Slice (b, p) is filled and valid (a decoded slice must have passed planner::ValidateSlice):
  // executors may take it. `plan_ns` is what planning/decoding it cost. `replicated` opens its
  // Invariant-1 gate at once (a single node, or a follower, whose input is replicated already).
  // `cut_ns`: a planner's, from its batch's first txn taken to this slice closed (0: not known,
  // as on a follower).
  void PublishSlice(uint64_t b, uint32_t p, int64_t plan_ns, bool replicated, int64_t cut_ns = 0);
  // Replication of slice (b, p) is confirmed (any thread; cheap).
  void MarkReplicated(uint64_t b, uint32_t p);
  // Row nodes (any thread; idempotent, and on for good once called): a failover inside the row
  // (docs/partitioned-rows.md 9.5) has a peer's successor re-send values and votes this node may
  // hold already, so from now on DeliverDepValue and DeliverVotes take repeats idempotently
  // (executor/executor_stage.h, "Repeats"): a value or votes for a batch committed already are
  // dropped; a value for a slot already filled, or votes for a (batch, from, round) given
  // already, are dropped if equal to what was received first, and fail the pipeline naming both
  // otherwise. Before this call every repeat fails the pipeline, as documented below.
  void AcceptRepeats();
  // Row nodes: the value of dependency slot `slot` of sub-slice (b, p), sent by the partition
  // that ran its kDepSend (any thread; cheap). May come before the sub-slice is published (it
  // is kept until then). A slot that is not a kDepRecv's, one filled twice, or a batch
  // committed already or too far ahead fails the pipeline with an error naming it (but see
  // AcceptRepeats).
  // `from`: the sending partition, for ForgetFrom (executor::ExecutorStage::kNoSender: unknown).
  void DeliverDepValue(uint64_t b, uint32_t p, uint32_t slot, int64_t value,
                       uint32_t from = executor::ExecutorStage::kNoSender);
  // Row nodes: partition `from`'s leader changed; its successor resumes at `first_batch`: its
  // predecessor's values and votes for those batches not used yet are dropped
  // (ExecutorStage::ForgetFrom; docs/partitioned-rows.md 9.3). Returns how many; the dropped
  // values' (batch, slice, slot) go to `values` if given.
  size_t ForgetFrom(uint32_t from, uint64_t first_batch,
                    std::vector<executor::ExecutorStage::Forgotten>* values = nullptr);
  // Row nodes: partition `from`'s aborted txns of batch b for voting round `round` (any thread).
  // Twice for one (b, from, round), from itself or out of range: fails the pipeline (but see
  // AcceptRepeats).
  void DeliverVotes(uint64_t b, uint32_t from, uint32_t round, std::vector<executor::RowTxn> ids);
  // Row followers (row_resolved_by_leader): batch b's abort result from its leader's batch-end
  // record (any thread; cheap). Twice, or a batch outside the window: fails the pipeline.
  void DeliverResolved(uint64_t b, std::vector<executor::RowTxn> fired, std::vector<executor::RowTxn> aborted);
  // Row leaders with batch_end_gate: batch b's batch-end record is replicated (any thread, once
  // on_batch_executed(b) was called). Ignored after a halt.
  void MarkBatchEnd(uint64_t b);
  // Waits until batch b may enter (batch b - batches_in_flight committed): what BeginSlice
  // waits for, without taking a slice (a row follower's batch-end records are delivered within
  // that window). False once the pipeline halted or b is at or past the end.
  bool AwaitBatch(uint64_t b);
  // Outcomes of batches b and later go to the sink, none before (a follower that starts
  // leading at b; deliver_outcomes must have been set). Before batch b's first slice is
  // published. Any thread.
  void DeliverOutcomesFrom(uint64_t b);
  // Batches [first_batch, end) are all there will be.
  void EndInput(uint64_t end);
  // Stops with an error: nothing more is executed than what executors already hold, no outcome
  // is delivered after this returns, WaitIdle and BeginSlice return at once. First error wins.
  // From inside a sink or hook call it returns at once (that call is the last one).
  void Fail(Status status);

  // Blocks until every batch before the end committed (OK), or the pipeline failed (its error)
  // or was stopped (kAborted), or timeout_ms passed (kTimeout; < 0: no limit).
  Status WaitIdle(int64_t timeout_ms = -1);
  // Stops and joins every thread. Idempotent; safe without Start.
  void Stop();

  PipelineStats Stats() const;
  // OK, or the error given to Fail.
  Status health() const;
  uint64_t committed_batches() const;  // absolute: the next batch id to commit
  // The write histories hold every write of batch `batch` and later (history_bytes > 0 and none
  // overwritten since). Any thread.
  // Absolute: the next batch to be executed and resolved here (it may not be committed yet). A
  // caller that sees batch b executed sees every write of it (the table is safe to read for it).
  uint64_t executed_batches() const;
  bool HistoryCovers(uint64_t batch) const;
  // The write histories record nothing more (HistoryCovers is false from then on). Any thread.
  void StopHistory();

 private:
  std::unique_ptr<PipelineImpl> impl_;
};

}  // namespace qrstore::engine
