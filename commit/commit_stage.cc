#include "commit/commit_stage.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "commit/committer.h"
#include "common/clock.h"
#include "executor/batch_ring.h"
#include "storage/table.h"

namespace qrstore::commit {

CommitStage::CommitStage(CommitStageOptions options, executor::BatchRing* ring, storage::Table* table, CommitSink sink,
                         BatchHook hook)
    : opt_(options),
      ring_(ring),
      record_bytes_(table->layout().size()),
      sink_(std::move(sink)),
      hook_(std::move(hook)) {
  ticket_ = ring_->first_batch * ring_->planners;
  deliver_from_.store(opt_.deliver_outcomes ? 0 : UINT64_MAX, std::memory_order_relaxed);
  if (opt_.track_digest) totals_.last_digest = table->Digest();
}

void CommitStage::Start() {
  for (uint32_t c = 0; c < opt_.committers; ++c) {
    threads_.emplace_back("commit-" + std::to_string(c), [this, c] { Loop(c); });
  }
}

void CommitStage::Join() {
  for (auto it = threads_.rbegin(); it != threads_.rend(); ++it) it->Join();
  threads_.clear();
}

void CommitStage::WaitOutDeliveryLocked(MutexUniqueLock& lk) const {
  const std::thread::id me = std::this_thread::get_id();
  ring_->delivered_cv.wait(lk.native(), [&]() REQUIRES(ring_->mu) { return !delivering_ || delivering_thread_ == me; });
}

void CommitStage::Loop(uint32_t me) {
  std::vector<TxnOutcome> outcomes;
  const uint32_t P = ring_->planners;
  for (uint64_t b = ring_->first_batch;; ++b) {
    executor::BatchSlot& slot = ring_->Slot(b);
    // Slice (b, p) belongs to committer (b*P + p) mod C.
    bool mine = false;
    for (uint32_t p = 0; p < P; ++p) mine |= (b * P + p) % opt_.committers == me;
    {
      MutexUniqueLock lk(ring_->mu);
      if (ring_->Halted() || ring_->PastEnd(b)) return;
      if (!mine) continue;
      // Invariant 1: commit only what is executed AND replicated.
      ring_->executed_cv.wait(lk.native(), [&]() REQUIRES(ring_->mu) {
        return ring_->Halted() || ring_->PastEnd(b) || ring_->Committable(slot, b);
      });
      if (ring_->Halted() || !ring_->Committable(slot, b)) return;
    }
    for (uint32_t p = 0; p < P; ++p) {
      if ((b * P + p) % opt_.committers != me) continue;
      const executor::SliceState& ss = *slot.slices[p];
      const bool deliver = b >= deliver_from_.load(std::memory_order_acquire);
      const SliceTally tally =
          deliver ? BuildSliceOutcomes(ss.plan, slot.fates, NowNanos(), &outcomes,
                                       opt_.capture_reads ? std::string_view(ss.read_values) : "", record_bytes_)
                  : CountSliceOutcomes(ss.plan, slot.fates);
      if (!deliver) outcomes.clear();
      const uint64_t ticket = b * P + p;
      {
        MutexUniqueLock lk(ring_->mu);
        ring_->delivered_cv.wait(lk.native(), [&]() REQUIRES(ring_->mu) {
          return ring_->Halted() || ticket_ == ticket;
        });
        if (ring_->Halted()) return;
        // Counted before delivery, so Stats() never lags what a sink has seen.
        totals_.committed += tally.committed;
        totals_.aborted += tally.aborted_logic + tally.aborted_cascade;
        slot.committed += tally.committed;
        slot.aborted += tally.aborted_logic + tally.aborted_cascade;
        delivering_ = true;
        delivering_thread_ = std::this_thread::get_id();
      }
      // Only the ticket holder delivers: sink calls are serialized and in planned order.
      if (!outcomes.empty()) sink_(outcomes);
      BatchInfo info;
      const bool last = p + 1 == P;
      if (last) info = FinishBatch(b, slot);
      bool call_hook = false;
      if (last && hook_) {
        MutexLock lk(ring_->mu);
        call_hook = ring_->health.ok();
      }
      // Still the ticket holder (delivering_): hooks run in batch order, and a Fail waits for
      // this call, so a Fail that returned has no hook call after it. Outside mu: a hook may
      // fail the pipeline itself (a row node's OnBatch sends to its peers).
      if (call_hook) hook_(info);
      {
        MutexLock lk(ring_->mu);
        delivering_ = false;
        ++ticket_;
        if (last) {
          ring_->committed = b + 1;
          totals_.last_digest = info.digest;
          AddPhases(info.phases);
        }
      }
      ring_->delivered_cv.notify_all();
      if (last) ring_->admit_cv.notify_all();
    }
  }
}

BatchInfo CommitStage::FinishBatch(uint64_t b, const executor::BatchSlot& slot) {
  MutexLock lk(ring_->mu);
  BatchInfo info;
  info.batch = b;
  uint64_t digest = totals_.last_digest;
  if (opt_.track_digest) {
    for (uint64_t d : slot.digest_deltas) digest += d;
    digest += slot.resolver_delta;
  }
  info.digest = digest;
  info.committed = slot.committed;
  info.aborted = slot.aborted;
  const int64_t now = NowNanos();
  BatchPhases& ph = info.phases;
  for (const auto& s : slot.slices) {
    ph.cut_ns = std::max(ph.cut_ns, s->cut_ns);
    ph.plan_ns += s->plan_ns;
  }
  ph.deliver_ns = slot.exec_start_ns - slot.first_published_ns;
  ph.exec_ns = slot.executed_ns - slot.exec_start_ns;
  ph.repl_ns = slot.replicated_ns - slot.first_published_ns;
  ph.repl_wait_ns = std::max<int64_t>(0, slot.replicated_ns - slot.executed_ns);
  ph.commit_ns = now - std::max(slot.executed_ns, slot.replicated_ns);
  return info;
}

void CommitStage::AddPhases(const BatchPhases& p) {
  BatchPhases& s = totals_.phase_sums;
  s.cut_ns += p.cut_ns;
  s.plan_ns += p.plan_ns;
  s.deliver_ns += p.deliver_ns;
  s.exec_ns += p.exec_ns;
  s.repl_ns += p.repl_ns;
  s.repl_wait_ns += p.repl_wait_ns;
  s.commit_ns += p.commit_ns;
}

}  // namespace qrstore::commit
