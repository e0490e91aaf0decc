// BatchRing: the batches a node has in flight (the paper's batch metadata, section 3.4), as a
// ring of batches_in_flight slots, and the one mutex and the condition variables through which
// the node's stages hand each batch on: front-end (engine/pipeline.h) -> executor stage
// (executor/executor_stage.h) -> commit stage (commit/commit_stage.h) -> back to the front-end
// (a committed batch frees its slot). It is plain shared state, not a thread: the Pipeline owns
// it, the stages hold a pointer to it, and each stage owns the fields it writes (below).
//
// Why shared state and not queues between the stages: a slice is written once by its front-end
// thread and then read in place by every executor (one EQ each) and by a committer; copying it
// through a queue per stage would cost a copy per slice and per stage for nothing. Each hand-off
// is a flag or counter flipped under `mu`, and taking `mu` orders the plain-data writes of one
// stage (the slice, the records, the fates, the read values, the digest deltas) before the
// reads of the next. `mu` is taken a few times per slice, never per transaction or op.
//
// Lifecycle of slot b % size() (batch b):
//   front-end  BeginSlice(b, p): waits on admit_cv until batch b - size() committed; the first
//              slice of b claims the slot (BatchSlot::Claim) -> fills slice p (its own until
//              published) -> publishes it (published = true, published_cv) and, once confirmed,
//              marks it replicated (replicated = true, published_cv in sync mode, executed_cv).
//   executor-r waits on published_cv for each slice of b in planner order, runs its EQ, adds
//              its digest delta and counts itself in exec_done; the last one resolves the
//              batch's aborts (fates, resolver_delta), sets executed and notifies executed_cv.
//   commit-c   waits on executed_cv for executed AND every slice replicated (Invariant 1; a row
//              leader with followers: its batch-end record too, end_confirmed), then
//              delivers its slices in ticket order (delivered_cv), counts committed/aborted;
//              the last ticket's holder sets `committed` = b + 1 and notifies admit_cv.
// Halt: `stop` or a failed `health` (set under mu, every condition variable notified) makes
// every wait return; nothing becomes runnable or is delivered after it.
//
// Thread safety: everything marked "guarded by mu" (BatchRing's own fields: GUARDED_BY(mu), which
// clang checks) is read and written only with mu held. The slots' and slices' fields keep the
// comment: the analysis cannot name the ring's mu from a struct the ring holds. Fields marked
// otherwise are owned by one thread at a time, passed on by a guarded flag as noted.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/mutex.h"
#include "common/status.h"
#include "executor/abort_resolver.h"
#include "executor/dep_board.h"
#include "planner/eq.h"

namespace qrstore::executor {

// Slice (b, p) in batch b's slot.
struct SliceState {
  // Written by its front-end thread between BeginSlice and `published`, then read-only until
  // the slot is claimed again (batch b + size()).
  planner::PlannedSlice plan;
  // Reset by the front-end before `published` (ExecutorStage::PrepareSlice); then executors
  // publish and wait on its slots (DepBoard's atomics), and a row's values are published into it
  // under mu (ExecutorStage::DeliverDepValue).
  DepBoard deps;
  // capture_reads: plan.read_slots records, sized by the front-end before `published`; each
  // executor writes its own read slots (and the resolver re-captures); read by the committer of
  // the slice once the batch is executed.
  std::string read_values;
  // Row nodes: per dependency slot, kLocalSlot / kRowWaiting / kRowFilled. Set by the front-end
  // before `published`, then guarded by mu.
  std::vector<uint8_t> recv;
  bool begun = false;      // guarded by mu: BeginSlice handed it out
  bool published = false;  // guarded by mu: executors may look at it (speculative mode)
  bool replicated = false; // guarded by mu: its Invariant-1 gate is open
  int64_t plan_ns = 0;     // guarded by mu: what planning or decoding it cost
  int64_t cut_ns = 0;      // guarded by mu: its batch's first txn taken -> this slice closed (0: unknown)

  static constexpr uint8_t kLocalSlot = 0;   // filled by a local kDepRead
  static constexpr uint8_t kRowWaiting = 1;  // a kDepRecv's: filled from the row, not yet
  static constexpr uint8_t kRowFilled = 2;   // a kDepRecv's, filled
};

// One batch in flight. Slot b % size() holds batch b, claimed by the first BeginSlice of b once
// batch b - size() committed (the memory bound, and the sync mode when size() == 1).
struct BatchSlot {
  uint64_t batch = UINT64_MAX;                      // guarded by mu
  std::vector<std::unique_ptr<SliceState>> slices;  // [planner]; the vector is fixed at construction
  // Guarded by mu. exec_done, executed, exec_start_ns, executed_ns: written by the executor
  // stage; replicated_slices, first_published_ns, replicated_ns: by the front-end; committed,
  // aborted: by the commit stage (its ticket holders, one at a time).
  uint32_t exec_done = 0;
  bool executed = false;  // every executor done and aborts resolved
  uint32_t replicated_slices = 0;
  int64_t first_published_ns = 0;
  int64_t exec_start_ns = 0;
  int64_t executed_ns = 0;
  int64_t replicated_ns = 0;  // when the last slice was replicated
  // A row leader with followers (BatchRing::batch_end_gate): its batch-end record is replicated
  // (or empty). Written by the front-end, like replicated_slices.
  bool end_confirmed = false;
  uint64_t committed = 0;
  uint64_t aborted = 0;
  // Written by each executor (its own entry) before it counts itself in exec_done, by the
  // resolving executor before `executed`; read by the committer of the last ticket after.
  std::vector<uint64_t> digest_deltas;  // [range]
  uint64_t resolver_delta = 0;
  // Written by the resolving executor before `executed`; read by committers after.
  BatchFates fates;
  // replication.point = writes, a leader (ExecutorStageOptions::capture_writes): per range, the
  // keys the batch wrote and their last images (RangeExecutor::Capture). Written by each executor
  // (its own entry) before it counts itself in exec_done, or by the resolving executor for every
  // range; read-only from `executed` until the batch commits.
  std::vector<std::vector<storage::Key>> written_keys;  // [range]
  std::vector<std::string> written_images;              // [range]

  // Batch b claims this slot (mu held, by the first BeginSlice of b): batch b - size()
  // committed, so no executor or committer touches it any more.
  void Claim(uint64_t b) {
    batch = b;
    exec_done = 0;
    executed = false;
    replicated_slices = 0;
    first_published_ns = 0;
    exec_start_ns = 0;
    executed_ns = 0;
    replicated_ns = 0;
    end_confirmed = false;
    resolver_delta = 0;
    committed = 0;
    aborted = 0;
    for (auto& s : slices) {
      s->begun = false;
      s->published = false;
      s->replicated = false;
    }
  }
};

struct BatchRing {
  // `planners` slices per batch, `executors` key ranges, batches from `first_batch` on; with
  // `end_gate` a batch also waits for its batch-end record (a row leader with followers).
  BatchRing(uint32_t batches_in_flight, uint32_t planners_per_batch, uint32_t ranges, uint64_t first,
            bool end_gate = false)
      : planners(planners_per_batch), executors(ranges), first_batch(first), batch_end_gate(end_gate), committed(first) {
    slots_.resize(batches_in_flight);
    for (auto& slot : slots_) {
      slot = std::make_unique<BatchSlot>();
      slot->slices.resize(planners);
      for (auto& s : slot->slices) s = std::make_unique<SliceState>();
      slot->digest_deltas.assign(executors, 0);
      slot->written_keys.resize(executors);
      slot->written_images.resize(executors);
    }
  }
  BatchRing(const BatchRing&) = delete;
  BatchRing& operator=(const BatchRing&) = delete;

  const uint32_t planners;     // slices per batch
  const uint32_t executors;    // key ranges = executor threads
  const uint64_t first_batch;  // the first batch id fed
  // A row leader with followers (docs/partitioned-rows.md 9.4, Rule 2): batch b commits only once
  // its batch-end record is replicated too (BatchSlot::end_confirmed).
  const bool batch_end_gate;

  // The slot of batch b (it holds b only while slot.batch == b). The ring itself never changes
  // after construction, so this needs no lock; the slot's fields do (see BatchSlot).
  BatchSlot& Slot(uint64_t b) { return *slots_[b % slots_.size()]; }
  uint64_t size() const { return slots_.size(); }  // batches in flight at most
  const std::vector<std::unique_ptr<BatchSlot>>& slots() const { return slots_; }

  bool Halted() const REQUIRES(mu) { return stop || !health.ok(); }
  bool PastEnd(uint64_t b) const REQUIRES(mu) { return end_known && b >= end; }
  // Slot `slot` holds batch b, executed, and replicated (Invariant 1: every slice, and with the
  // gate the batch-end record).
  bool Committable(const BatchSlot& slot, uint64_t b) const REQUIRES(mu) {
    return slot.batch == b && slot.executed && slot.replicated_slices == planners && (!batch_end_gate || slot.end_confirmed);
  }
  // Wakes every waiter (a halt, the end of input).
  void NotifyAllLocked() REQUIRES(mu) {
    votes_cv.notify_all();
    admit_cv.notify_all();
    published_cv.notify_all();
    executed_cv.notify_all();
    delivered_cv.notify_all();
  }

  mutable Mutex mu;
  // Who waits on each, and who notifies it (besides a halt or the end of input):
  std::condition_variable admit_cv;      // front-end (BeginSlice) <- commit stage: a batch committed
  std::condition_variable published_cv;  // executors <- front-end: a slice published (or replicated, sync)
  std::condition_variable executed_cv;   // committers, logging executors <- executors: a batch executed
                                         //   and resolved; <- front-end: a slice replicated
  std::condition_variable delivered_cv;  // committers (tickets), WaitIdle, Fail <- commit stage: a slice
                                         //   delivered, a batch committed
  std::condition_variable votes_cv;      // the resolving executor of a row node <- front-end: votes came
  bool stop GUARDED_BY(mu) = false;       // Stop was called
  Status health GUARDED_BY(mu);           // the first Fail's error
  bool end_known GUARDED_BY(mu) = false;  // batches [first_batch, end) are all there will be
  uint64_t end GUARDED_BY(mu) = 0;
  // Written by the commit stage: batches [first_batch, committed) are fully delivered (and
  // batch b's slot is free for b + size() once committed > b).
  uint64_t committed GUARDED_BY(mu);

 private:
  std::vector<std::unique_ptr<BatchSlot>> slots_;
};

}  // namespace qrstore::executor
