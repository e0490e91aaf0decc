// CommitStage: the commit threads of a node (paper section 3.5), commit-<c>. A batch commits
// once the executor stage marked it executed (its aborts resolved) AND every slice of it is
// replicated (Invariant 1); its outcomes are then built per slice (commit/committer.h) and
// delivered to the CommitSink in global planned order (Invariant 3): slice (b, p) is ticket
// b * P + p, built by committer (b * P + p) mod C and delivered only when every earlier ticket
// was. The holder of a batch's last ticket finishes the batch: its state digest (the previous
// one plus every range's and the resolver's delta: no table scan), its phase times (BatchInfo),
// the hook call, and `committed` = b + 1 in the ring, which frees the slot for batch b + size().
//
// Owns: the commit threads and their outcome buffers, the delivery tickets, the digest after
// the last committed batch and the totals. Not owned: the BatchRing (executor/batch_ring.h) and
// the table (the Pipeline's), the sink and hook (given, called from the commit threads).
//
// Threads: Start and Join from the controlling thread (the Pipeline's, under its control lock);
// the *Locked functions with ring->mu held, from any thread. The commit threads run Loop. Sink
// and hook calls are serialized (the ticket holder makes them) and made outside ring->mu.
//
// Locking: the ring's mu guards every shared field here (GUARDED_BY(ring_->mu)); a slice's outcomes are built
// from what the executor stage handed over by `executed` (under mu); `committed` and the ticket
// are handed on under mu (admit_cv, delivered_cv).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "commit/outcome.h"
#include "common/mutex.h"
#include "common/thread.h"
#include "common/thread_annotations.h"
#include "executor/batch_ring.h"

namespace qrstore::storage {
class Table;
}

namespace qrstore::commit {

// Per-batch phase durations (ns), the paper's latency model terms.
struct BatchPhases {
  int64_t cut_ns = 0;        // T_cut: the batch open, its first txn taken -> its last slice closed (a planner's; 0 elsewhere)
  int64_t plan_ns = 0;       // T_pl: planning (or decoding) time summed over the batch's slices
  int64_t deliver_ns = 0;    // T_deliv: first slice published -> first executor started on it
  int64_t exec_ns = 0;       // T_ex: first executor start -> batch executed and resolved
  int64_t repl_ns = 0;       // T_repl: first slice published -> last slice replicated
  int64_t repl_wait_ns = 0;  // executed -> replicated (0 when replication finished first)
  int64_t commit_ns = 0;     // T_c: executed and replicated -> last outcome delivered
};

struct BatchInfo {
  uint64_t batch = 0;
  uint64_t digest = 0;  // state digest after the batch (track_digest; else 0)
  uint64_t committed = 0;
  uint64_t aborted = 0;
  BatchPhases phases;
};
// Called once per committed batch, in batch order, after the batch's last sink call, on a
// commit thread, outside the pipeline's lock. Must return quickly; of the pipeline it may call
// only Fail (as the sink may).
using BatchHook = std::function<void(const BatchInfo&)>;

struct CommitStageOptions {
  uint32_t committers = 1;
  bool capture_reads = false;     // give the sink the values read (a node that answers clients)
  bool deliver_outcomes = true;   // call the sink (false: a follower, whose outcomes nobody reads)
  bool track_digest = false;      // keep the state digest per batch
};

// What the commit stage has counted (ring->mu held to read it).
struct CommitTotals {
  uint64_t committed = 0;    // txns
  uint64_t aborted = 0;      // txns, logic and cascade
  uint64_t last_digest = 0;  // after the last committed batch (the table's initial digest before any)
  BatchPhases phase_sums;    // sums over committed batches
};

class CommitStage {
 public:
  // With track_digest, computes the table's digest once (a full scan) as the starting point.
  CommitStage(CommitStageOptions options, executor::BatchRing* ring, storage::Table* table, CommitSink sink,
              BatchHook hook);
  ~CommitStage() { Join(); }
  CommitStage(const CommitStage&) = delete;
  CommitStage& operator=(const CommitStage&) = delete;

  // Starts commit-0 .. commit-<C-1>. Once.
  void Start();
  // Joins the threads, last started first. They leave once the ring is halted or past its end,
  // so the caller halts the ring first.
  void Join();

  // ring->mu held by `lk`: waits until no sink or hook call is in progress, unless it is the
  // calling thread's own (a sink or hook failing the pipeline: waiting for itself would hang).
  // After a halt, no call starts once this returns.
  void WaitOutDeliveryLocked(MutexUniqueLock& lk) const REQUIRES(ring_->mu);
  // With deliver_outcomes: the sink gets the outcomes of batches b and later only (a follower
  // that starts leading at b: the outcomes of the batches it replayed belong to clients of
  // another process). Any thread; a batch whose slices are being built may go either way, so
  // call it before batch b's first slice is published.
  void DeliverOutcomesFrom(uint64_t b) { deliver_from_.store(b, std::memory_order_release); }
  CommitTotals TotalsLocked() const REQUIRES(ring_->mu) { return totals_; }
  // The ring's mutex, for a caller that holds it under its own name for the ring: MutexAlias
  // (common/mutex.h) tells the analysis that it is ring_->mu, which the *Locked functions require.
  Mutex& ring_mu() const RETURN_CAPABILITY(ring_->mu) { return ring_->mu; }

 private:
  // Commit thread `me`, from the ring's first batch until halt or end.
  void Loop(uint32_t me);
  // The batch's digest and phase times (the last ticket's holder, after its sink call).
  BatchInfo FinishBatch(uint64_t b, const executor::BatchSlot& slot);
  void AddPhases(const BatchPhases& p) REQUIRES(ring_->mu);

  const CommitStageOptions opt_;
  executor::BatchRing* const ring_;
  const uint32_t record_bytes_;
  const CommitSink sink_;
  const BatchHook hook_;

  std::atomic<uint64_t> deliver_from_{0};  // batches below it: counted, not delivered
  uint64_t ticket_ GUARDED_BY(ring_->mu);                    // next slice b*P+p to deliver
  bool delivering_ GUARDED_BY(ring_->mu) = false;            // a sink or hook call is in progress
  std::thread::id delivering_thread_ GUARDED_BY(ring_->mu);  // the thread making it
  CommitTotals totals_ GUARDED_BY(ring_->mu);

  std::vector<NamedThread> threads_;  // start order; Start and Join only (the controlling thread)
};

}  // namespace qrstore::commit
