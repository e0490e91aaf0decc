// CommitStage (commit/commit_stage.h) on its own: the test is the front-end and the executor
// stage around a BatchRing (executor/batch_ring.h), filling each slot with executed slices and
// their fates and confirming replication last. Several commit threads must deliver every slice
// only once its batch is executed AND replicated (Invariant 1), in planned order across threads
// (Invariant 3), call the hook after each batch's last slice with the digest so far plus the
// batch's deltas, and free each slot (`committed`) for the next batch.
#include <catch2/catch.hpp>

#include <chrono>
#include <mutex>
#include <vector>

#include "commit/commit_stage.h"
#include "common/mutex.h"
#include "executor/batch_ring.h"
#include "storage/table.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using commit::TxnStatus;
using executor::Fate;

namespace {

// Halts the ring when the test leaves its scope, also through a failed REQUIRE: the stage's
// destructor joins its threads, which leave only once the ring is halted (a failure, not a hang).
struct HaltOnExit {
  executor::BatchRing& ring;
  ~HaltOnExit() {
    MutexLock lk(ring.mu);
    ring.stop = true;
    ring.NotifyAllLocked();
  }
};
}  // namespace

TEST_CASE("commit stage: slices are delivered in planned order once executed and replicated, hooks in batch order",
          "[stage]") {
  const storage::RecordLayout layout{4, 8};
  storage::Table table(layout, 16);
  testing::LoadTable(&table, 16, 7);
  const uint64_t initial_digest = table.Digest();
  constexpr uint32_t kPlanners = 2;
  constexpr uint64_t kFirst = 3, kEnd = 12;

  // What the commit threads saw, in the order they made their calls (which never overlap).
  struct Event {
    bool hook = false;
    uint64_t batch = 0;
    commit::PlannedPos pos;
    TxnStatus status = TxnStatus::kCommitted;
    uint64_t replicated_end = 0;  // batches [kFirst, this) were fully replicated at the call
    commit::BatchInfo info;
  };
  std::mutex mu;
  std::vector<Event> events;     // guarded by mu
  uint64_t replicated_end = kFirst;  // guarded by mu: set before a batch's last slice is marked replicated
  auto sink = [&](const std::vector<commit::TxnOutcome>& v) {
    std::lock_guard<std::mutex> lk(mu);
    for (const commit::TxnOutcome& o : v) {
      Event e;
      e.batch = o.pos.batch;
      e.pos = o.pos;
      e.status = o.status;
      e.replicated_end = replicated_end;
      events.push_back(e);
    }
  };
  auto hook = [&](const commit::BatchInfo& info) {
    std::lock_guard<std::mutex> lk(mu);
    Event e;
    e.hook = true;
    e.batch = info.batch;
    e.info = info;
    events.push_back(e);
  };

  executor::BatchRing ring(/*batches_in_flight=*/2, kPlanners, /*ranges=*/2, kFirst);
  commit::CommitStageOptions opt;
  opt.committers = 3;  // slice (b, p) is ticket 2b + p: every thread holds some, in turn
  opt.track_digest = true;
  commit::CommitStage stage(opt, &ring, &table, sink, hook);
  stage.Start();
  HaltOnExit halt_on_exit{ring};  // after `stage`: runs first

  // Txn i of slice (b, p): b % 3 + p + 1 txns per slice; in even batches txn 1 aborted.
  auto txns_of = [](uint64_t b, uint32_t p) { return static_cast<uint32_t>(b % 3 + p + 1); };
  auto aborts = [](uint64_t b, uint32_t i) { return b % 2 == 0 && i == 1; };
  for (uint64_t b = kFirst; b < kEnd; ++b) {
    executor::BatchSlot& slot = ring.Slot(b);
    {
      MutexUniqueLock lk(ring.mu);
      const bool admitted = ring.admit_cv.wait_for(lk.native(), std::chrono::seconds(30),
                                                   [&]() REQUIRES(ring.mu) {
                                                     return ring.committed + ring.size() > b;
                                                   });
      REQUIRE(admitted);  // bounded: a failure, not a hang
      slot.Claim(b);
    }
    // The executor stage's part: slices run, fates and digest deltas written, then `executed`.
    slot.fates.any_abort = b % 2 == 0;
    slot.fates.fates.assign(kPlanners, {});
    for (uint32_t p = 0; p < kPlanners; ++p) {
      planner::PlannedSlice& plan = slot.slices[p]->plan;
      plan.Reset(b, p, 2);
      for (uint32_t i = 0; i < txns_of(b, p); ++i) {
        planner::TxnContext tc;
        tc.txn_id = b * 100 + p * 10 + i;
        tc.home_index = i;
        plan.txns.push_back(tc);
        slot.fates.fates[p].push_back(aborts(b, i) ? Fate::kLogic : Fate::kCommit);
      }
    }
    slot.digest_deltas = {b, 2 * b};
    slot.resolver_delta = 1000 * b;
    {
      MutexLock lk(ring.mu);
      for (auto& ss : slot.slices) ss->begun = ss->published = true;
      slot.exec_done = 2;
      slot.executed = true;
      slot.slices[1]->replicated = true;  // slice 1 replicated, slice 0 not yet: nothing may commit
      slot.replicated_slices = 1;
    }
    ring.executed_cv.notify_all();
    {
      std::lock_guard<std::mutex> lk(mu);
      replicated_end = b + 1;
    }
    {
      MutexLock lk(ring.mu);
      slot.slices[0]->replicated = true;
      slot.replicated_slices = 2;
    }
    ring.executed_cv.notify_all();
  }
  {
    MutexUniqueLock lk(ring.mu);
    ring.end_known = true;
    ring.end = kEnd;
    ring.NotifyAllLocked();
    const bool done = ring.delivered_cv.wait_for(lk.native(), std::chrono::seconds(30), [&]() REQUIRES(ring.mu) {
      return ring.committed == kEnd;
    });
    REQUIRE(done);
  }
  commit::CommitTotals totals;
  {
    MutexLock lk(ring.mu);
    MutexAlias held(ring.mu, stage.ring_mu());
    totals = stage.TotalsLocked();
    ring.stop = true;
    ring.NotifyAllLocked();
  }
  stage.Join();

  std::lock_guard<std::mutex> lk(mu);
  uint64_t digest = initial_digest, committed = 0, aborted = 0;
  uint64_t next_batch = kFirst;  // the batch whose outcomes come next
  commit::PlannedPos next{kFirst, 0, 0};
  uint64_t batch_committed = 0, batch_aborted = 0;
  for (const Event& e : events) {
    if (e.hook) {
      INFO("hook of batch " << e.batch);
      REQUIRE(e.batch == next_batch);
      REQUIRE(next == (commit::PlannedPos{e.batch + 1, 0, 0}));  // after the batch's last outcome
      digest += e.batch + 2 * e.batch + 1000 * e.batch;
      CHECK(e.info.digest == digest);
      CHECK(e.info.committed == batch_committed);
      CHECK(e.info.aborted == batch_aborted);
      committed += batch_committed;
      aborted += batch_aborted;
      batch_committed = batch_aborted = 0;
      ++next_batch;
      continue;
    }
    INFO("outcome (" << e.pos.batch << ", " << e.pos.planner << ", " << e.pos.index << ")");
    REQUIRE(e.pos == next);  // every txn once, in planned order
    CHECK(e.replicated_end > e.batch);  // Invariant 1
    CHECK(e.status == (aborts(e.batch, e.pos.index) ? TxnStatus::kAbortedLogic : TxnStatus::kCommitted));
    (e.status == TxnStatus::kCommitted ? batch_committed : batch_aborted) += 1;
    next.index++;
    if (next.index == txns_of(next.batch, next.planner)) {
      next.index = 0;
      if (++next.planner == kPlanners) next = commit::PlannedPos{next.batch + 1, 0, 0};
    }
  }
  CHECK(next_batch == kEnd);
  CHECK(totals.committed == committed);
  CHECK(totals.aborted == aborted);
  CHECK(totals.last_digest == digest);
  CHECK(aborted > 0);
}
