// LocalPlanner: the planning front-end of a single node or a leader (the paper's PLANBATCH,
// Algorithm 1): the client transaction queue, planner threads, and the token ring that makes
// the planned order the Submit order. Each planned slice is published to the Pipeline and, on
// a leader, handed to a hook that replicates it (the leader = LocalPlanner + Pipeline +
// ReplicateData; a follower has no LocalPlanner: it is fed by cluster/follow/follower_feed.h).
//
//   Submit() --> client txn queue (bounded, FIFO)
//     --> planner-<i>: take the token for (b, i), claim slice (b, i) in the pipeline (waits while
//         batches_in_flight batches are in flight: back-pressure reaches Submit through the
//         queue), pop this planner's share of batch b, pass the token on, then plan in parallel
//         with the next planner's popping, publish, and call the hook.
//
// Batches: a batch opens with its first txn (planner 0 blocks until one arrives) and closes
// when its slices are full (batch_txns in total, split evenly over planners), batch_timeout
// after its first txn, or when CloseInput ends the input; then the pipeline learns the end.
// Batch boundaries depend on the clock; what is in the planned order never does.
//
// A home node of a partitioned row (docs/partitioned-rows.md) sets LocalPlannerOptions::row:
// then the planners split each home slice into one sub-slice per partition (RowPlanner) and
// hand them to the RowHome instead of publishing to a pipeline. A batch also closes as soon as
// a peer has planned it (RowHome::PeerOpened) and nothing is queued: a home without clients
// plans it empty at once, so the row never waits on its silence. When the input ends, planner 0
// tells the RowHome and goes on planning empty batches as long as it says a peer needs them.
//
// Threads: Submit from any thread (several submitters: the queue order is the order of their
// pushes); Start/CloseInput/Stop from one controlling thread. Stop the pipeline first (or fail
// it), so that no planner is left waiting in BeginSlice, then this. The hook runs on planner
// threads, outside every lock, once per slice, in batch order per planner.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/bounded_queue.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread.h"
#include "common/thread_annotations.h"
#include "engine/pipeline.h"
#include "engine/spare_ops.h"
#include "planner/eq.h"
#include "storage/key_map.h"
#include "storage/txn.h"

namespace qrstore::engine {

class RowHome {
 public:
  virtual ~RowHome() = default;
  // Waits until home slice (b, planner) may be planned (the node's batch window); false: stop.
  virtual bool BeginHomeSlice(uint64_t b, uint32_t planner) = 0;
  // Whether some peer of the row has planned batch b already (cheap; any thread). The home
  // calls LocalPlanner::Kick when this turns true for a batch a planner may wait in.
  virtual bool PeerOpened(uint64_t b) const = 0;
  // Home slice (b, planner) is planned: (*subs)[p] is its sub-slice for partition p, *txns its
  // transactions in home order. Take them (swap or move out).
  virtual void HomeSlicePlanned(uint64_t b, uint32_t planner, std::vector<planner::PlannedSlice>* subs,
                                std::vector<storage::Txn>* txns, int64_t plan_ns) = 0;
  // Planner 0 found the input closed and drained at the start of batch b. Once.
  virtual void InputEnded(uint64_t b) = 0;
  // After InputEnded, for each batch b from there on: blocks until it is known whether b must
  // still be planned (true: a peer planned it; it is planned empty) or the row ends at or
  // before b (false), or the home stops (false).
  virtual bool NeedBatch(uint64_t b) = 0;
};

struct LocalPlannerOptions {
  uint32_t batch_txns = 10000;
  int64_t batch_timeout_ns = 10'000'000;
  uint32_t planners = 1;
  uint32_t client_queue_txns = 40000;
  storage::KeyMapper ranges;  // the pipeline's executor ranges
  uint64_t first_batch = 0;
  // Encode each slice for replicas while planning it (planner/replica_encoder.h) and hand the
  // bytes to the hook: EncodeSlice(slice, kWithoutReads) without a second pass.
  bool encode_for_replicas = false;
  // replication.point = input (planner/input_slice.h): hand the hook the slice's sequenced input
  // (EncodeInputSlice of its txns, after the session check) instead; followers plan it themselves.
  bool encode_input = false;
  // Keep planned txns' emptied op vectors for LendSpareOps (a submitter that builds its txns in
  // them: the in-process Engine). Off, they are freed after planning and nothing is pooled.
  bool recycle_ops = false;
  // A home of a partitioned row (see above); not owned. Then the pipeline is not used (pass
  // nullptr), `partitions` maps keys to partitions, and slice indices are
  // row_partition * planners + planner.
  RowHome* row = nullptr;
  storage::KeyMapper partitions;
  uint32_t row_partition = 0;
  // Client sessions (cluster/sessions/session_store.h): called on the planner thread holding the token,
  // after every pop into the slice being filled: (batch, planner, txns, first new index), the
  // planner being this home's own (0..planners-1) in a row. It may remove txns from
  // txns[first..] (answered without being planned); the kept ones keep their order. Their
  // indices are their (home) slice positions.
  std::function<void(uint64_t, uint32_t, std::vector<storage::Txn>*, size_t)> admit;
};


// Called after slice (b, p) is published. With a hook the pipeline waits for MarkReplicated
// (the hook's business); without one slices are replicated at once (a single node).
// `replica_bytes`: with encode_for_replicas, EncodeSlice(slice, kWithoutReads); with
// encode_input, the slice's input (EncodeInputSlice); else empty.
using PlannedHook = std::function<void(const planner::PlannedSlice& slice, std::string replica_bytes)>;

class LocalPlanner {
 public:
  LocalPlanner(LocalPlannerOptions options, Pipeline* pipeline, PlannedHook hook = nullptr);
  ~LocalPlanner();
  LocalPlanner(const LocalPlanner&) = delete;
  LocalPlanner& operator=(const LocalPlanner&) = delete;

  Status Start() EXCLUDES(mu_);
  // Enqueues a transaction; blocks while the queue is full. false (the txn is not taken) after
  // CloseInput, Stop, or once the pipeline refused a slice (failed or stopped).
  bool Submit(storage::Txn txn);
  // Submits txns[first..] in order (moved out), blocking while the queue is full; returns how
  // many were taken (fewer than asked once the input is closed).
  size_t SubmitMany(std::vector<storage::Txn>& txns, size_t first = 0);
  // Non-blocking Submit: false when the queue is full or closed (`txn` is kept then).
  bool TrySubmit(storage::Txn& txn);
  // After SubmitMany took txns[first, first + n): gives those txns the emptied op vectors of
  // txns already planned (engine/spare_ops.h, with recycle_ops), for the caller to build its
  // next txns in.
  void LendSpareOps(std::vector<storage::Txn>& txns, size_t first, size_t n) { spare_.Lend(txns, first, n); }
  // No more input: planners drain the queue, close the open batch and tell the pipeline where
  // the input ends. Returns at once.
  void CloseInput();
  void Stop();
  // Wakes a planner waiting for its batch's first txn (a row home: a peer opened a batch).
  void Kick() { queue_.Kick(); }

  uint64_t batches_closed_by_timeout() const EXCLUDES(mu_);
  // The batch id at which the input ended (valid once ended() is true).
  bool ended() const EXCLUDES(mu_);
  uint64_t end_batch() const EXCLUDES(mu_);

 private:
  void PlannerLoop(uint32_t me) EXCLUDES(mu_);
  void Halt() EXCLUDES(mu_);

  const LocalPlannerOptions opt_;
  Pipeline* const pipeline_;
  const PlannedHook hook_;
  BoundedQueue<storage::Txn> queue_;
  SpareOps spare_;  // op vectors of planned txns, lent back to the submitter

  mutable Mutex mu_;
  std::condition_variable token_cv_;
  bool started_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  bool end_known_ GUARDED_BY(mu_) = false;
  uint64_t end_batch_ GUARDED_BY(mu_) = 0;
  uint64_t token_batch_ GUARDED_BY(mu_) = 0;  // who may pop next
  uint32_t token_planner_ GUARDED_BY(mu_) = 0;
  bool batch_closed_ GUARDED_BY(mu_) = false;  // the token's batch is closed (passed along)
  int64_t batch_deadline_ns_ GUARDED_BY(mu_) = 0;
  uint64_t closed_by_timeout_ GUARDED_BY(mu_) = 0;
  bool input_ended_ = false;       // planner 0 only: RowHome::InputEnded was called
  std::vector<NamedThread> threads_;
};

}  // namespace qrstore::engine
