#include "engine/pipeline.h"

#include <string>
#include <vector>

#include "commit/commit_stage.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "executor/batch_ring.h"
#include "executor/executor_stage.h"

namespace qrstore::engine {

// The wiring. Threads and what they own:
//   front-end threads: slice (b, p) between BeginSlice and PublishSlice.
//   executor-<r>:      the executor stage's (executor/executor_stage.h).
//   commit-<c>:        the commit stage's (commit/commit_stage.h).
// Everything shared lives in the ring (executor/batch_ring.h) or is "guarded by ring->mu" in a
// stage; the front-end's hand-offs (a slot claimed, a slice published or replicated) happen
// under ring_.mu like every other, which orders the front-end's writes of a slice before the
// executors' reads. ring_.mu is taken a few times per slice, never per txn or op.
class PipelineImpl {
 public:
  PipelineImpl(PipelineOptions opt, storage::Table* table, commit::CommitSink sink, BatchHook hook)
      : opt_(Checked(opt)),
        ring_(opt_.batches_in_flight, opt_.planners, opt_.executors, opt_.first_batch, opt_.batch_end_gate),
        executors_(ExecutorOptions(opt_), &ring_, table),
        commit_(CommitOptions(opt_), &ring_, table, std::move(sink), std::move(hook)) {}

  ~PipelineImpl() { Stop(); }

  Status Start() EXCLUDES(control_mu_) {
    MutexLock control(control_mu_);
    {
      MutexLock lk(ring_.mu);
      if (started_) return Status::InvalidArgument("pipeline: Start called twice");
      if (ring_.stop) return Status::Aborted("pipeline: Start after Stop");
      started_ = true;
    }
    // Downstream first, so every stage finds its consumer running.
    commit_.Start();
    executors_.Start();
    return Status::Ok();
  }

  planner::PlannedSlice* BeginSlice(uint64_t b, uint32_t p) {
    QR_CHECK_LT(p, opt_.planners);
    MutexUniqueLock lk(ring_.mu);
    QR_CHECK_GE(b, ring_.committed);
    if (!WaitAdmittedLocked(lk, b)) return nullptr;
    executor::BatchSlot& slot = ring_.Slot(b);
    // The first slice of batch b to arrive claims the slot.
    if (slot.batch != b) slot.Claim(b);
    executor::SliceState& ss = *slot.slices[p];
    QR_CHECK(!ss.begun, "slice (%llu, %u) begun twice", static_cast<unsigned long long>(b), p);
    ss.begun = true;
    return &ss.plan;
  }

  void PublishSlice(uint64_t b, uint32_t p, int64_t plan_ns, bool replicated, int64_t cut_ns) {
    executor::BatchSlot& slot = ring_.Slot(b);
    executor::SliceState& ss = *slot.slices[p];
    // Still the caller's: executors look at it only once `published`.
    QR_CHECK(ss.plan.batch == b && ss.plan.planner == p, "slice (%llu, %u) filled with (%llu, %u)",
             static_cast<unsigned long long>(b), p, static_cast<unsigned long long>(ss.plan.batch), ss.plan.planner);
    QR_CHECK_EQ(ss.plan.eqs.size(), opt_.executors);
    const bool row = opt_.row_sender != nullptr;
    QR_CHECK(ss.plan.row == row, "slice (%llu, %u): %s", static_cast<unsigned long long>(b), p,
             row ? "not a row sub-slice on a row node" : "a row sub-slice on a node outside a row");
    executors_.PrepareSlice(ss);
    const int64_t now = NowNanos();
    Status error;
    {
      MutexLock lk(ring_.mu);
      QR_CHECK(slot.batch == b && ss.begun && !ss.published);
      // Once halted, executors leave at the first slice they cannot run; a slice that became
      // runnable after some left would make the others wait forever for dependency values only
      // the leavers would publish. So nothing becomes runnable after a halt.
      if (ring_.Halted()) return;
      if (row) {  // values that came before it
        MutexAlias held(ring_.mu, executors_.ring_mu());
        error = executors_.TakeEarlyValuesLocked(ss, b, p);
      }
      if (error.ok()) {
        ss.published = true;
        ss.plan_ns = plan_ns;
        ss.cut_ns = cut_ns;
        if (slot.first_published_ns == 0) slot.first_published_ns = now;
        if (replicated) MarkReplicatedLocked(slot, ss, now);
      }
    }
    if (!error.ok()) {
      Fail(std::move(error));
      return;
    }
    ring_.published_cv.notify_all();
    if (replicated) ring_.executed_cv.notify_all();
  }

  void AcceptRepeats() { executors_.AcceptRepeats(); }
  size_t ForgetFrom(uint32_t from, uint64_t first_batch, std::vector<executor::ExecutorStage::Forgotten>* values) {
    return executors_.ForgetFrom(from, first_batch, values);
  }

  void DeliverVotes(uint64_t b, uint32_t from, uint32_t round, std::vector<executor::RowTxn> ids) {
    Status error = executors_.DeliverVotes(b, from, round, std::move(ids));
    if (!error.ok()) Fail(std::move(error));
  }

  void DeliverResolved(uint64_t b, std::vector<executor::RowTxn> fired, std::vector<executor::RowTxn> aborted) {
    Status error = executors_.DeliverResolved(b, std::move(fired), std::move(aborted));
    if (!error.ok()) Fail(std::move(error));
  }

  void DeliverDepValue(uint64_t b, uint32_t p, uint32_t dep_slot, int64_t value, uint32_t from) {
    Status error = executors_.DeliverDepValue(b, p, dep_slot, value, from);
    if (!error.ok()) Fail(std::move(error));
  }

  void MarkReplicated(uint64_t b, uint32_t p) {
    {
      MutexLock lk(ring_.mu);
      executor::BatchSlot& slot = ring_.Slot(b);
      if (slot.batch != b) {
        // Only possible after a failure or stop (a batch cannot commit unreplicated, so its slot
        // cannot have been reused).
        QR_CHECK(ring_.Halted(), "replication confirmed for batch %llu whose slot holds %llu",
                 static_cast<unsigned long long>(b), static_cast<unsigned long long>(slot.batch));
        return;
      }
      executor::SliceState& ss = *slot.slices[p];
      // After a halt nothing may become runnable (see PublishSlice), nor does anything commit.
      if (ss.replicated || ring_.Halted()) return;
      MarkReplicatedLocked(slot, ss, NowNanos());
    }
    // Executors wait on published_cv for their next slice; only in sync mode can replication
    // be what they wait for (speculatively they would wake for nothing, twice a batch each).
    if (opt_.executors_wait_for_replication) ring_.published_cv.notify_all();
    ring_.executed_cv.notify_all();
  }

  void MarkBatchEnd(uint64_t b) {
    QR_CHECK(opt_.batch_end_gate, "MarkBatchEnd on a pipeline without the batch-end gate");
    {
      MutexLock lk(ring_.mu);
      executor::BatchSlot& slot = ring_.Slot(b);
      // Batch b cannot commit without it, so its slot still holds it unless the pipeline halted.
      if (slot.batch != b || ring_.Halted()) return;
      slot.end_confirmed = true;
    }
    ring_.executed_cv.notify_all();
  }

  bool AwaitBatch(uint64_t b) {
    MutexUniqueLock lk(ring_.mu);
    return WaitAdmittedLocked(lk, b);
  }

  void EndInput(uint64_t end) {
    {
      MutexLock lk(ring_.mu);
      if (ring_.end_known && end >= ring_.end) return;
      ring_.end_known = true;
      ring_.end = end;
    }
    NotifyAll();
  }

  void Fail(Status status) {
    QR_CHECK(!status.ok());
    MutexUniqueLock lk(ring_.mu);
    MutexAlias executors_held(ring_.mu, executors_.ring_mu());
    MutexAlias commit_held(ring_.mu, commit_.ring_mu());
    if (ring_.health.ok()) {
      ring_.health = std::move(status);
      Logger("pipeline")->error("stopped: {}", ring_.health.ToString());
    }
    executors_.ReleaseRowWaitsLocked();
    ring_.NotifyAllLocked();
    // No sink or hook call may start after this returns; wait out one in progress, unless it
    // is this thread's own (a sink or hook that fails the pipeline, e.g. a row node whose send
    // to a dead peer fails: waiting for itself would hang the thread for good).
    commit_.WaitOutDeliveryLocked(lk);
  }

  Status WaitIdle(int64_t timeout_ms) {
    MutexUniqueLock lk(ring_.mu);
    auto done = [&]() REQUIRES(ring_.mu) { return ring_.Halted() || (ring_.end_known && ring_.committed >= ring_.end); };
    if (timeout_ms < 0) {
      ring_.delivered_cv.wait(lk.native(), done);
    } else if (!ring_.delivered_cv.wait_for(lk.native(), std::chrono::milliseconds(timeout_ms), done)) {
      const std::string end =
          ring_.end_known ? ", input ends at " + std::to_string(ring_.end) : ", input end not known";
      return Status::Timeout("batches in flight not committed within " + std::to_string(timeout_ms) + " ms (" +
                             std::to_string(ring_.committed) + " committed" + end + ")");
    }
    if (!ring_.health.ok()) return ring_.health;
    if (ring_.stop && !(ring_.end_known && ring_.committed >= ring_.end)) return Status::Aborted("pipeline stopped");
    return Status::Ok();
  }

  void Stop() EXCLUDES(control_mu_) {
    MutexLock control(control_mu_);
    {
      MutexLock lk(ring_.mu);
      MutexAlias held(ring_.mu, executors_.ring_mu());
      ring_.stop = true;
      executors_.ReleaseRowWaitsLocked();
    }
    NotifyAll();
    // Reverse start order: executors, then committers. Executors first finish every slice
    // already published (see ExecutorStage::Loop), which bounds the time this takes.
    executors_.Join();
    commit_.Join();
  }

  PipelineStats Stats() const {
    MutexLock lk(ring_.mu);
    MutexAlias executors_held(ring_.mu, executors_.ring_mu());
    MutexAlias commit_held(ring_.mu, commit_.ring_mu());
    const commit::CommitTotals t = commit_.TotalsLocked();
    PipelineStats s;
    s.committed_batches = ring_.committed - opt_.first_batch;
    s.committed = t.committed;
    s.aborted = t.aborted;
    s.reexecuted = executors_.reexecuted_locked();
    s.last_digest = t.last_digest;
    s.phase_sums = t.phase_sums;
    return s;
  }
  Status health() const {
    MutexLock lk(ring_.mu);
    return ring_.health;
  }
  void DeliverOutcomesFrom(uint64_t b) {
    QR_CHECK(opt_.deliver_outcomes, "DeliverOutcomesFrom without deliver_outcomes");
    commit_.DeliverOutcomesFrom(b);
  }
  uint64_t committed_batches() const {
    MutexLock lk(ring_.mu);
    return ring_.committed;
  }
  uint64_t executed_batches() const { return executors_.executed_batches(); }
  bool HistoryCovers(uint64_t batch) const { return executors_.HistoryCovers(batch); }
  void StopHistory() { executors_.StopHistory(); }

 private:
  static PipelineOptions Checked(const PipelineOptions& opt) {
    QR_CHECK(opt.planners >= 1 && opt.executors >= 1 && opt.committers >= 1 && opt.batches_in_flight >= 1);
    QR_CHECK_EQ(opt.ranges.buckets(), opt.executors);
    return opt;
  }
  static executor::ExecutorStageOptions ExecutorOptions(const PipelineOptions& opt) {
    executor::ExecutorStageOptions o;
    o.wait_for_replication = opt.executors_wait_for_replication;
    o.capture_reads = opt.capture_reads;
    o.track_digest = opt.track_digest;
    o.row_sender = opt.row_sender;
    o.row_partitions = opt.row_partitions;
    o.row_partition = opt.row_partition;
    o.on_row_resolved = opt.on_row_resolved;
    o.row_resolved_by_leader = opt.row_resolved_by_leader;
    o.on_batch_executed = opt.on_batch_executed;
    o.image_sink = opt.image_sink;
    o.history_bytes = opt.history_bytes;
    o.capture_writes = opt.capture_writes;
    o.on_batch_writes = opt.on_batch_writes;
    return o;
  }
  static commit::CommitStageOptions CommitOptions(const PipelineOptions& opt) {
    commit::CommitStageOptions o;
    o.committers = opt.committers;
    o.capture_reads = opt.capture_reads;
    o.deliver_outcomes = opt.deliver_outcomes;
    o.track_digest = opt.track_digest;
    return o;
  }

  // Waits (lk holds ring_.mu) until batch b may enter: batch b - batches_in_flight committed.
  // False if the pipeline halted or b is at or past the end.
  bool WaitAdmittedLocked(MutexUniqueLock& lk, uint64_t b) REQUIRES(ring_.mu) {
    const uint64_t in_flight = ring_.size();
    ring_.admit_cv.wait(lk.native(), [&]() REQUIRES(ring_.mu) {
      return ring_.Halted() || ring_.PastEnd(b) || ring_.committed + in_flight > b;
    });
    return !ring_.Halted() && !ring_.PastEnd(b);
  }

  // Slice ss of `slot` is replicated.
  void MarkReplicatedLocked(executor::BatchSlot& slot, executor::SliceState& ss, int64_t now) REQUIRES(ring_.mu) {
    ss.replicated = true;
    if (++slot.replicated_slices == opt_.planners) slot.replicated_ns = now;
  }

  void NotifyAll() {
    MutexLock lk(ring_.mu);
    ring_.NotifyAllLocked();
  }

  const PipelineOptions opt_;
  // Constructed in this order (the stages point at the ring), destroyed after Stop joined every
  // thread (~PipelineImpl).
  executor::BatchRing ring_;
  executor::ExecutorStage executors_;
  commit::CommitStage commit_;

  Mutex control_mu_;  // serializes Start and Stop (and so the stages' Start and Join)
  bool started_ GUARDED_BY(ring_.mu) = false;
};

Pipeline::Pipeline(PipelineOptions options, storage::Table* table, commit::CommitSink sink, BatchHook on_batch)
    : impl_(std::make_unique<PipelineImpl>(options, table, std::move(sink), std::move(on_batch))) {}
Pipeline::~Pipeline() { Stop(); }
Status Pipeline::Start() { return impl_->Start(); }
planner::PlannedSlice* Pipeline::BeginSlice(uint64_t b, uint32_t p) { return impl_->BeginSlice(b, p); }
void Pipeline::PublishSlice(uint64_t b, uint32_t p, int64_t plan_ns, bool replicated, int64_t cut_ns) {
  impl_->PublishSlice(b, p, plan_ns, replicated, cut_ns);
}
void Pipeline::MarkReplicated(uint64_t b, uint32_t p) { impl_->MarkReplicated(b, p); }
void Pipeline::DeliverDepValue(uint64_t b, uint32_t p, uint32_t slot, int64_t value, uint32_t from) {
  impl_->DeliverDepValue(b, p, slot, value, from);
}
void Pipeline::AcceptRepeats() { impl_->AcceptRepeats(); }
size_t Pipeline::ForgetFrom(uint32_t from, uint64_t first_batch,
                             std::vector<executor::ExecutorStage::Forgotten>* values) {
  return impl_->ForgetFrom(from, first_batch, values);
}
void Pipeline::DeliverVotes(uint64_t b, uint32_t from, uint32_t round, std::vector<executor::RowTxn> ids) {
  impl_->DeliverVotes(b, from, round, std::move(ids));
}
void Pipeline::DeliverResolved(uint64_t b, std::vector<executor::RowTxn> fired, std::vector<executor::RowTxn> aborted) {
  impl_->DeliverResolved(b, std::move(fired), std::move(aborted));
}
void Pipeline::MarkBatchEnd(uint64_t b) { impl_->MarkBatchEnd(b); }
bool Pipeline::AwaitBatch(uint64_t b) { return impl_->AwaitBatch(b); }
void Pipeline::DeliverOutcomesFrom(uint64_t b) { impl_->DeliverOutcomesFrom(b); }
uint64_t Pipeline::executed_batches() const { return impl_->executed_batches(); }
bool Pipeline::HistoryCovers(uint64_t batch) const { return impl_->HistoryCovers(batch); }
void Pipeline::StopHistory() { impl_->StopHistory(); }
void Pipeline::EndInput(uint64_t end) { impl_->EndInput(end); }
void Pipeline::Fail(Status status) { impl_->Fail(std::move(status)); }
Status Pipeline::WaitIdle(int64_t timeout_ms) { return impl_->WaitIdle(timeout_ms); }
void Pipeline::Stop() {
  if (impl_) impl_->Stop();
}
PipelineStats Pipeline::Stats() const { return impl_->Stats(); }
Status Pipeline::health() const { return impl_->health(); }
uint64_t Pipeline::committed_batches() const { return impl_->committed_batches(); }

}  // namespace qrstore::engine
