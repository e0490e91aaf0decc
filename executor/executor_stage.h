// ExecutorStage: the executor threads of a node (paper section 3.4), executor-<r> for each key
// range r. For batch after batch, each thread takes the slices of the batch from the BatchRing
// (executor/batch_ring.h) in planner order, each as soon as it is runnable (published, and in
// sync mode replicated), and runs its range's EQ of it (executor/range_executor.h); dependency
// values flow between ranges through the slice's DepBoard. The last thread done with a batch
// resolves its logic-induced aborts, by re-execution (executor/abort_resolver.h) or, on a node
// of a partitioned row, by cascade, voting with its peers (executor/row_resolver.h, RowResolve),
// then marks the batch executed for the commit stage. Batch b + 1 runs only after a batch b
// that logged is resolved (its aborts must be undone first), so batches finish in order.
//
// Owns: one RangeExecutor per range (its log, digest delta and parked fragments: its thread's),
// the resolvers (used by the resolving executor only; batches resolve in turn), the row's abort
// votes and early dependency values, and the executor threads. Not owned: the ring and the
// table (the Pipeline's), the RowSender (the row node's); they outlive the stage.
//
// Threads: Start and Join from the controlling thread (the Pipeline's, under its control lock);
// PrepareSlice from the front-end thread that fills the slice; DeliverDepValue, DeliverVotes and
// AcceptRepeats from any thread; the *Locked functions with ring->mu held (REQUIRES). The
// executor threads run Loop.
//
// Repeats (docs/partitioned-rows.md 9.5). A row peer's leader that dies is succeeded by a node
// that resumes at some batch D, re-executes from D and re-sends its values and votes, which this
// node may already hold from the dead leader. By default a repeat is a protocol error (the row's
// determinism is broken or a peer is faulty). Once AcceptRepeats was called, receipt is
// idempotent instead:
//   - a dependency value for a batch committed already is dropped (its slot was filled, or the
//     batch could not have committed);
//   - a value for a slot already filled is dropped if it equals the value the slot holds, and is
//     kCorruption naming the batch, slice, slot and both values otherwise; a value that came
//     early (kept until its sub-slice is published) and repeats an earlier early one for the
//     same slot is checked the same way when the sub-slice is published (the early values keep
//     their bound: a repeat counts against it until then);
//   - abort votes for a batch committed already are dropped; votes from a peer for a (batch,
//     round) it gave already are dropped if they are the same set of txns, and are kCorruption
//     naming both sets otherwise, whether that round is still being collected or was consumed
//     already (the stage keeps the votes of the rounds it consumed for each batch not yet
//     committed: a repeat of a consumed round is neither fed into a later round nor kept).
// Dropping an equal repeat is safe because the values and votes of a batch are a function of
// the sub-slices and the state before the batch (section 4): the resuming node computes what
// its predecessor sent. Still errors with repeats accepted: a slot that the row does not fill or
// out of range, a batch too far ahead, votes from this node itself or outside the row.
//
// Locking: the ring's mu guards every shared field here too (GUARDED_BY(ring_->mu)); the
// hand-offs are those of batch_ring.h: a slice is read once `published` (under mu), a batch's
// fates, digest deltas and records are handed to the commit stage by `executed` (under mu).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/thread.h"
#include "common/thread_annotations.h"
#include "executor/abort_resolver.h"
#include "executor/batch_ring.h"
#include "executor/range_executor.h"
#include "executor/row_resolver.h"
#include "executor/write_history.h"
#include "storage/table.h"
#include "storage/table_image.h"

namespace qrstore::executor {

// Checkpoints (docs/recovery.md): at a batch boundary the executors take an image of the table
// (storage/table_image.h). Copy-on-write (CopyOnWrite()): the first executor past the boundary
// begins the image's epoch and none waits; each takes the epoch as it passes, the last hands
// the image over (with sparse records every executor stops there until the last begins it).
// Otherwise every executor stops there, copies its share, and all go on once every share is
// copied. Want and Taken are called with the ring's mu held, so they must
// be quick and must not block.
class ImageSink {
 public:
  virtual ~ImageSink() = default;
  // Once per batch b, by the first executor done with b: the image to fill with the table after
  // b (every range done with b and its aborts undone), or nullptr for none. Prepared (its
  // buffers sized for the table) by the sink; not touched by anyone else until Taken(b).
  virtual storage::TableImage* Want(uint64_t b) = 0;
  // The image Want(b) returned holds the table after b; copy-on-write: it is armed (the table's
  // writers preserve what they overwrite) and the sink completes the copy (CompleteCopy).
  virtual void Taken(uint64_t b) = 0;
  // Whether images are taken copy-on-write (asked once, when the stage is made).
  virtual bool CopyOnWrite() const { return false; }
};

struct ExecutorStageOptions {
  bool wait_for_replication = false;  // replication.mode=sync: run a slice once replicated
  bool capture_reads = false;         // leave each kRead's record in the slice's read values
  bool track_digest = false;          // keep each range's (and the resolver's) digest delta
  // A node of a partitioned row: kDepSend values go to this sender, kDepRecv values come in
  // through DeliverDepValue, and a batch that may abort is resolved by cascade with the
  // `row_partitions` nodes of the row (this one is `row_partition`). Not owned.
  RowSender* row_sender = nullptr;
  uint32_t row_partitions = 1;
  uint32_t row_partition = 0;
  // Rule 2 (docs/partitioned-rows.md 9.4). A row leader: after resolving a batch that may
  // abort, its result for the batch-end record: the txns with a part here whose vote fired on
  // some node (round 0) and the final aborted set, both sorted. Executor thread, no lock held.
  std::function<void(uint64_t b, const std::vector<RowTxn>& fired, const std::vector<RowTxn>& aborted)> on_row_resolved;
  // A row follower replaying its group's log: such a batch's result comes from the leader's
  // batch-end record (DeliverResolved) instead of voting with row peers; nothing is sent.
  bool row_resolved_by_leader = false;
  // Called once per batch, in batch order, by the batch's last executor once the batch is
  // executed and its aborts resolved (after on_row_resolved), no lock held: a row leader with
  // followers proposes its batch-end record here. It must not wait for anything the executors do.
  // Not called for a batch that finished after the ring halted (its row values may be fake).
  std::function<void(uint64_t b)> on_batch_executed;
  // replication.point = writes, a leader: after each batch, the last image of every record it
  // wrote (BatchSlot::written_keys/written_images) and its fates are handed to on_batch_writes,
  // by the batch's last executor once it is executed and resolved (before on_batch_executed), no
  // lock held. What it is given stays valid until the batch commits, which the caller holds back
  // (its slices are not replicated before it replicates what it was given). On a row node the
  // images are taken after the row's aborts are undone (RowResolve), and the fates are the row's.
  bool capture_writes = false;
  struct BatchWrites {
    uint64_t batch = 0;
    std::vector<const planner::PlannedSlice*> slices;  // [planner]
    std::vector<std::string_view> reads;               // [planner] read values (with capture_reads)
    const std::vector<std::vector<storage::Key>>* keys = nullptr;  // [range]
    const std::vector<std::string>* images = nullptr;              // [range]
    const BatchFates* fates = nullptr;
  };
  std::function<void(const BatchWrites&)> on_batch_writes;
  ImageSink* image_sink = nullptr;  // not owned; nullptr: no checkpoint images
  // Write histories (executor/write_history.h) of history_bytes / executors each; 0: none.
  // Ignored on a row node.
  uint64_t history_bytes = 0;
};

class ExecutorStage {
 public:
  ExecutorStage(ExecutorStageOptions options, BatchRing* ring, storage::Table* table);
  ~ExecutorStage() { Join(); }
  ExecutorStage(const ExecutorStage&) = delete;
  ExecutorStage& operator=(const ExecutorStage&) = delete;

  // Starts executor-0 .. executor-<E-1>. Once.
  void Start();
  // Joins the threads, last started first. They leave once the ring is halted or past its end
  // (after finishing every slice already published: another range may wait for one of its
  // values), so the caller halts the ring first.
  void Join();

  // Front-end thread, slice ss filled and checked, before it is published: makes its board
  // (dependency slots), a row node's table of which slots the row fills, and its read buffer.
  void PrepareSlice(SliceState& ss) const;
  // While publishing row sub-slice ss = (b, p): fills the values that came for it before it was
  // published. An error (a bad slot) means the pipeline must fail.
  Status TakeEarlyValuesLocked(SliceState& ss, uint64_t b, uint32_t p) REQUIRES(ring_->mu);
  // Row nodes, any thread: from now on repeated values and votes, and ones for batches committed
  // already, are taken idempotently (see "Repeats" above) instead of failing the pipeline.
  // Idempotent; there is no way back.
  void AcceptRepeats() EXCLUDES(ring_->mu);
  // Row nodes, any thread: the value of dependency slot `slot` of sub-slice (b, p), from the
  // partition that ran its kDepSend. Kept until the sub-slice is published if it comes first.
  // An error (no such slot, filled twice, a batch committed or too far ahead, too many early
  // values; with repeats accepted: filled with a different value, no slot or too far ahead,
  // too many early values) means the pipeline must fail; after a halt it is dropped (OK).
  // `from`: the sending partition (kNoSender: unknown, e.g. a follower's leader's record),
  // kept with an early value for ForgetFrom.
  static constexpr uint32_t kNoSender = UINT32_MAX;
  Status DeliverDepValue(uint64_t b, uint32_t p, uint32_t slot, int64_t value, uint32_t from = kNoSender)
      EXCLUDES(ring_->mu);
  // Row nodes, any thread: partition `from`'s leader changed and its successor resumes at
  // `first_batch` (docs/partitioned-rows.md 9.3): every value from `from` for batches from there
  // on still waiting for its sub-slice, and every vote from it for those batches not consumed yet,
  // is dropped (its predecessor may have computed them from its own home slices that never
  // reached its group's log; the successor sends its own). What was used was computed from
  // content in the order for good. Returns how many values and votes were dropped; the dropped
  // values' (batch, slice, slot) are appended to `values` if given (a leader also drops them
  // from the batch-end records it builds: cluster/row/row_node.h).
  struct Forgotten {
    uint64_t batch = 0;
    uint32_t slice = 0;
    uint32_t slot = 0;
  };
  size_t ForgetFrom(uint32_t from, uint64_t first_batch, std::vector<Forgotten>* values = nullptr) EXCLUDES(ring_->mu);
  // Row nodes, any thread: partition `from`'s aborted txns of batch b for voting round `round`.
  // An error (twice, from itself or out of range, batch outside the window; with repeats
  // accepted: twice with different txns, from itself or out of range, a batch too far ahead)
  // means the pipeline must fail; after a halt they are dropped (OK).
  Status DeliverVotes(uint64_t b, uint32_t from, uint32_t round, std::vector<RowTxn> ids) EXCLUDES(ring_->mu);
  // Row followers (row_resolved_by_leader), any thread: batch b's abort result from its
  // leader's batch-end record (on_row_resolved's arguments there). An error (twice, a batch
  // beyond the window) means the pipeline must fail; after a halt it is dropped (OK). A
  // result for a batch that turns out not to need one is forgotten once the batch committed,
  // and dropped when it comes after that.
  Status DeliverResolved(uint64_t b, std::vector<RowTxn> fired, std::vector<RowTxn> aborted) EXCLUDES(ring_->mu);
  // The ring halted: an executor may wait for a row value that will not come now (its sender
  // stopped); fills every such slot with 0 so it finishes the sub-slice it holds and leaves
  // (nothing is delivered after a halt, so the value does not matter).
  void ReleaseRowWaitsLocked() REQUIRES(ring_->mu);

  uint64_t reexecuted_locked() const REQUIRES(ring_->mu) { return reexecuted_; }
  // The ring's mutex, for a caller that holds it under its own name for the ring: MutexAlias
  // (common/mutex.h) tells the analysis that it is ring_->mu, which the *Locked functions require.
  Mutex& ring_mu() const RETURN_CAPABILITY(ring_->mu) { return ring_->mu; }
  // Every range's write history holds every write of batch `batch` and later (false without
  // histories). Any thread.
  // The next batch to be executed and resolved (any thread; under the ring's lock, so a caller
  // that sees batch b executed sees every write of it).
  uint64_t executed_batches() const EXCLUDES(ring_->mu);
  bool HistoryCovers(uint64_t batch) const;
  // The write histories record nothing more (WriteHistory::Stop). Any thread.
  void StopHistory();

 private:
  // Executor thread `me` (range me), from the ring's first batch until halt or end.
  void Loop(uint32_t me);
  // May executors take slice ss of batch b now?
  bool Runnable(const BatchSlot& slot, const SliceState& ss, uint64_t b) const REQUIRES(ring_->mu) {
    return slot.batch == b && ss.published && (!opt_.wait_for_replication || ss.replicated);
  }
  // The fates a follower's slices of batch b carry (replication.point = writes) into slot.fates.
  void TakeGivenFates(BatchSlot& slot) const;
  // Batch b's slices, in planner order (for Capture and on_batch_writes).
  std::vector<const planner::PlannedSlice*> SlicesOf(BatchSlot& slot) const;
  // Batch b of a row node may abort somewhere in the row: vote with the peers in rounds until
  // no node adds an aborted txn, then undo. Run by the batch's last executor, the others
  // waiting. False if the ring halted meanwhile.
  bool RowResolve(uint64_t b, BatchSlot& slot, uint64_t* digest_delta);
  // RowResolve of a row follower: waits for the leader's result (DeliverResolved), checks it
  // against this node's run and undoes. False if the ring halted (or the check failed it).
  bool ResolvedByLeader(uint64_t b, BatchSlot& slot, uint64_t* digest_delta);
  // Executor `me` at the boundary after batch `done`: the first to come asks the sink; if it
  // wants an image, waits for the others; then copy-on-write: the last to come arms the image and
  // all go on; otherwise each copies its share and waits until every share is copied. False if
  // the ring halted meanwhile.
  bool ImageBoundary(uint64_t done, uint32_t me);
  // An executor leaving on a halt at slice p of batch b (before starting it): no executor
  // starts it or anything after it (leave_at_).
  void LeaveAt(uint64_t b, uint32_t p) EXCLUDES(ring_->mu);
  void LeaveAtLocked(uint64_t b, uint32_t p) REQUIRES(ring_->mu);
  // Fills row slot `dep_slot` of sub-slice ss = (b, p).
  Status FillLocked(SliceState& ss, uint64_t b, uint32_t p, uint32_t dep_slot, int64_t value) REQUIRES(ring_->mu);
  // The votes partition `from` gave for (b, round), still collected or consumed already;
  // nullptr if none.
  const std::vector<RowTxn>* GivenVotesLocked(uint64_t b, uint32_t from, uint32_t round) const REQUIRES(ring_->mu);

  static constexpr size_t kMaxPendingValues = size_t{1} << 24;

  const ExecutorStageOptions opt_;
  BatchRing* const ring_;
  storage::Table* const table_;
  const uint32_t record_bytes_;

  std::vector<std::unique_ptr<RangeExecutor>> executors_;  // [range], one per executor thread
  std::vector<std::unique_ptr<WriteHistory>> histories_;  // [range] (empty: none); each its executor's
  AbortResolver resolver_;     // the resolving executor's (batches resolve in turn)
  RowResolver row_resolver_;   // likewise, on a row node
  uint64_t executed_ GUARDED_BY(ring_->mu);  // batches [first, this) executed and resolved
  // The first (batch, slice) no executor starts, once one left on a halt.
  // An executor leaving at a point the others may pass (a batch's resolution or an image
  // boundary that another executor finishes after this one saw the halt) would otherwise leave
  // them running slices whose dependency values it never publishes. Every executor leaves at
  // the first such point: each one's run before it is the same, so each waits only for values
  // the others publish.
  std::pair<uint64_t, uint32_t> leave_at_ GUARDED_BY(ring_->mu){std::numeric_limits<uint64_t>::max(), 0};
  uint64_t reexecuted_ GUARDED_BY(ring_->mu) = 0;  // txns the resolver re-executed, in total
  // Row nodes: abort votes by (batch, round): (from partition, txns) per peer so far.
  using PeerVotes = std::vector<std::pair<uint32_t, std::vector<RowTxn>>>;
  std::map<std::pair<uint64_t, uint32_t>, PeerVotes> votes_ GUARDED_BY(ring_->mu);
  // Row nodes: the peers' votes of the rounds RowResolve consumed, by batch, then round (rounds
  // are consumed in order): what a repeat of a consumed round is checked against. Kept whether or
  // not repeats are accepted yet (AcceptRepeats may come while a batch votes); a batch's entry is
  // dropped once it committed (at the next delivery or resolve), so this holds at most the
  // batches of the window.
  std::map<uint64_t, std::vector<PeerVotes>> consumed_votes_ GUARDED_BY(ring_->mu);
  bool accept_repeats_ GUARDED_BY(ring_->mu) = false;  // only goes from false to true
  // Row followers: batch results delivered and not yet used, by batch (fired, aborted).
  std::map<uint64_t, std::pair<std::vector<RowTxn>, std::vector<RowTxn>>> resolved_ GUARDED_BY(ring_->mu);
  // Row nodes: dependency values that came before their sub-slice, by (batch, slice).
  struct EarlyValue {
    uint32_t slot = 0;
    int64_t value = 0;
    uint32_t from = kNoSender;
  };
  std::map<std::pair<uint64_t, uint32_t>, std::vector<EarlyValue>> pending_ GUARDED_BY(ring_->mu);
  size_t pending_values_ GUARDED_BY(ring_->mu) = 0;
  // Images: boundaries below image_next_ are decided; image_ (if any) is for boundary
  // image_batch_, with image_arrived_ executors there and image_copied_ done; image_complete_ is
  // one past the last boundary whose image is complete (only grows, so a waiter never misses its
  // barrier's end when the next one starts).
  uint64_t image_next_ GUARDED_BY(ring_->mu) = 0;
  uint64_t image_batch_ GUARDED_BY(ring_->mu) = 0;
  storage::TableImage* image_ GUARDED_BY(ring_->mu) = nullptr;
  uint32_t image_arrived_ GUARDED_BY(ring_->mu) = 0;
  uint32_t image_copied_ GUARDED_BY(ring_->mu) = 0;
  uint64_t image_complete_ GUARDED_BY(ring_->mu) = 0;
  bool image_cow_ = false;  // opt_.image_sink->CopyOnWrite(), asked once (constructor), then read-only
  // Copy-on-write: the epoch of the image being taken (TableImage::Begin).
  uint8_t image_epoch_ GUARDED_BY(ring_->mu) = 0;
  // A copy-on-write image taken without stopping: for boundary cow_batch_, cow_arrived_
  // executors past it so far; executors may pass later boundaries meanwhile.
  storage::TableImage* cow_image_ GUARDED_BY(ring_->mu) = nullptr;
  uint64_t cow_batch_ GUARDED_BY(ring_->mu) = 0;
  uint32_t cow_arrived_ GUARDED_BY(ring_->mu) = 0;

  std::vector<NamedThread> threads_;  // start order; Start and Join only (the controlling thread)
};

}  // namespace qrstore::executor
