#include "cluster/pipeline.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "commit/committer.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/thread.h"
#include "executor/abort_resolver.h"
#include "executor/dep_board.h"
#include "executor/range_executor.h"
#include "executor/row_resolver.h"

namespace qrstore::cluster {

// The pipeline's state. Threads and what they own:
//   front-end threads: slice (b, p) between BeginSlice and PublishSlice.
//   executor-<r>: its RangeExecutor (ExecLog, digest delta); reads published slices; the last
//                 executor of a batch runs the AbortResolver and writes the batch's fates.
//   commit-<c>:   its outcome buffer; reads executed slices; delivers in ticket order; the
//                 holder of a batch's last ticket folds its digest and calls the batch hook.
// Everything marked "guarded by mu_" is only touched under mu_. Stage hand-offs (published,
// executed, delivered) happen under mu_, which orders the plain-data writes of one stage before
// the reads of the next. mu_ is taken a few times per slice, never per txn or op.
class PipelineImpl {
 public:
  PipelineImpl(PipelineOptions opt, storage::Table* table, commit::CommitSink sink, BatchHook hook)
      : opt_(opt), table_(table), sink_(std::move(sink)), hook_(std::move(hook)) {
    QR_CHECK(opt_.planners >= 1 && opt_.executors >= 1 && opt_.committers >= 1 && opt_.batches_in_flight >= 1);
    QR_CHECK_EQ(opt_.ranges.buckets(), opt_.executors);
    record_bytes_ = table_->layout().size();
    slots_.resize(opt_.batches_in_flight);
    for (auto& slot : slots_) {
      slot = std::make_unique<BatchSlot>();
      slot->slices.resize(opt_.planners);
      for (auto& s : slot->slices) s = std::make_unique<SliceState>();
      slot->digest_deltas.assign(opt_.executors, 0);
    }
    for (uint32_t r = 0; r < opt_.executors; ++r) {
      executors_.push_back(std::make_unique<executor::RangeExecutor>(table_, r, opt_.track_digest));
      executors_.back()->set_row_sender(opt_.row_sender);
      // A row node's resolver reads each key's accesses only (cascade): logged slices may park.
      executors_.back()->set_park_when_logging(opt_.row_sender != nullptr);
    }
    committed_ = opt_.first_batch;
    executed_ = opt_.first_batch;
    ticket_ = opt_.first_batch * opt_.planners;
    if (opt_.track_digest) digest_ = table_->Digest();
  }

  ~PipelineImpl() { Stop(); }

  Status Start() {
    std::lock_guard<std::mutex> control(control_mu_);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (started_) return Status::InvalidArgument("pipeline: Start called twice");
      if (stop_) return Status::Aborted("pipeline: Start after Stop");
      started_ = true;
    }
    // Downstream first, so every stage finds its consumer running.
    for (uint32_t c = 0; c < opt_.committers; ++c) {
      threads_.emplace_back("commit-" + std::to_string(c), [this, c] { CommitLoop(c); });
    }
    for (uint32_t r = 0; r < opt_.executors; ++r) {
      threads_.emplace_back("executor-" + std::to_string(r), [this, r] { ExecutorLoop(r); });
    }
    return Status::Ok();
  }

  planner::PlannedSlice* BeginSlice(uint64_t b, uint32_t p) {
    QR_CHECK_LT(p, opt_.planners);
    std::unique_lock<std::mutex> lk(mu_);
    QR_CHECK_GE(b, committed_);
    const uint64_t in_flight = slots_.size();
    admit_cv_.wait(lk, [&] { return Halted() || PastEnd(b) || committed_ + in_flight > b; });
    if (Halted() || PastEnd(b)) return nullptr;
    BatchSlot& slot = Slot(b);
    if (slot.batch != b) {
      // The first slice of batch b to arrive claims the slot: batch b - in_flight committed, so
      // no executor or committer touches it any more.
      slot.batch = b;
      slot.exec_done = 0;
      slot.executed = false;
      slot.replicated_slices = 0;
      slot.first_published_ns = 0;
      slot.exec_start_ns = 0;
      slot.executed_ns = 0;
      slot.replicated_ns = 0;
      slot.resolver_delta = 0;
      slot.committed = 0;
      slot.aborted = 0;
      for (auto& s : slot.slices) {
        s->begun = false;
        s->published = false;
        s->replicated = false;
      }
    }
    SliceState& ss = *slot.slices[p];
    QR_CHECK(!ss.begun, "slice (%llu, %u) begun twice", static_cast<unsigned long long>(b), p);
    ss.begun = true;
    return &ss.plan;
  }

  void PublishSlice(uint64_t b, uint32_t p, int64_t plan_ns, bool replicated) {
    BatchSlot& slot = Slot(b);
    SliceState& ss = *slot.slices[p];
    // Still the caller's: executors look at it only once `published`.
    QR_CHECK(ss.plan.batch == b && ss.plan.planner == p, "slice (%llu, %u) filled with (%llu, %u)",
             static_cast<unsigned long long>(b), p, static_cast<unsigned long long>(ss.plan.batch), ss.plan.planner);
    QR_CHECK_EQ(ss.plan.eqs.size(), opt_.executors);
    const bool row = opt_.row_sender != nullptr;
    QR_CHECK(ss.plan.row == row, "slice (%llu, %u): %s", static_cast<unsigned long long>(b), p,
             row ? "not a row sub-slice on a row node" : "a row sub-slice on a node outside a row");
    ss.deps.Reset(ss.plan.dep_slots);
    if (row) {
      // Which slots the row fills (a kDepRecv's), for DeliverDepValue's checks.
      ss.recv.assign(ss.plan.dep_slots, kLocalSlot);
      for (const auto& eq : ss.plan.eqs) {
        for (const planner::Fragment& f : eq) {
          if (f.kind == planner::FragKind::kDepRecv) ss.recv[f.slot] = kRowWaiting;
        }
      }
    }
    if (opt_.capture_reads) ss.read_values.resize(uint64_t{ss.plan.read_slots} * record_bytes_);
    const int64_t now = NowNanos();
    Status error;
    {
      std::lock_guard<std::mutex> lk(mu_);
      QR_CHECK(slot.batch == b && ss.begun && !ss.published);
      // Once halted, executors leave at the first slice they cannot run; a slice that became
      // runnable after some left would make the others wait forever for dependency values only
      // the leavers would publish. So nothing becomes runnable after a halt.
      if (Halted()) return;
      if (row) {
        // Values that came before the sub-slice did.
        auto it = pending_.find({b, p});
        if (it != pending_.end()) {
          for (const auto& [dep_slot, value] : it->second) {
            Status st = FillLocked(ss, b, p, dep_slot, value);
            if (!st.ok()) {
              error = std::move(st);
              break;
            }
          }
          pending_values_ -= it->second.size();
          pending_.erase(it);
        }
      }
      if (error.ok()) {
        ss.published = true;
        ss.plan_ns = plan_ns;
        if (slot.first_published_ns == 0) slot.first_published_ns = now;
        if (replicated) MarkReplicatedLocked(slot, ss, now);
      }
    }
    if (!error.ok()) {
      Fail(std::move(error));
      return;
    }
    published_cv_.notify_all();
    if (replicated) executed_cv_.notify_all();
  }

  void DeliverVotes(uint64_t b, uint32_t from, uint32_t round, std::vector<executor::RowTxn> ids) {
    QR_CHECK(opt_.row_sender != nullptr, "DeliverVotes on a node outside a partitioned row");
    Status error;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (Halted()) return;
      const std::string what = "abort votes of batch " + std::to_string(b) + " round " + std::to_string(round) +
                               " from partition " + std::to_string(from) + ": ";
      auto& got = votes_[{b, round}];
      if (from >= opt_.row_partitions || from == opt_.row_partition) {
        error = Status::Corruption(what + "not a peer of partition " + std::to_string(opt_.row_partition) + " in a row of " +
                                   std::to_string(opt_.row_partitions));
      } else if (b < committed_ || b >= committed_ + 2 * slots_.size()) {
        error = Status::Corruption(what + "batch out of the window [" + std::to_string(committed_) + ", " +
                                   std::to_string(committed_ + 2 * slots_.size()) + ")");
      } else if (std::any_of(got.begin(), got.end(), [&](const auto& g) { return g.first == from; })) {
        error = Status::Corruption(what + "given twice");
      } else {
        got.emplace_back(from, std::move(ids));
      }
    }
    if (!error.ok()) {
      Fail(std::move(error));
      return;
    }
    votes_cv_.notify_all();
  }

  void DeliverDepValue(uint64_t b, uint32_t p, uint32_t dep_slot, int64_t value) {
    QR_CHECK(opt_.row_sender != nullptr, "DeliverDepValue on a node outside a partitioned row");
    Status error;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (Halted()) return;
      const std::string what = "dependency value for slice (" + std::to_string(b) + ", " + std::to_string(p) +
                               ") slot " + std::to_string(dep_slot) + ": ";
      BatchSlot& slot = Slot(b);
      if (p >= opt_.planners) {
        error = Status::Corruption(what + "no such slice (" + std::to_string(opt_.planners) + " per batch)");
      } else if (b < committed_) {
        error = Status::Corruption(what + "the batch committed already");
      } else if (b >= committed_ + 2 * slots_.size()) {
        // A sender runs at most batches_in_flight batches ahead of the slowest node of its row
        // (its feed admits no more), so this is a broken peer, not a fast one.
        error = Status::Corruption(what + "more than " + std::to_string(2 * slots_.size()) +
                                   " batches ahead of the last committed one (" + std::to_string(committed_) + ")");
      } else if (slot.batch == b && slot.slices[p]->published) {
        error = FillLocked(*slot.slices[p], b, p, dep_slot, value);
      } else if (pending_values_ >= kMaxPendingValues) {
        error = Status::Corruption(what + "more than " + std::to_string(kMaxPendingValues) +
                                   " values wait for their sub-slices");
      } else {
        pending_[{b, p}].emplace_back(dep_slot, value);
        ++pending_values_;
      }
    }
    if (!error.ok()) Fail(std::move(error));
  }

  void MarkReplicated(uint64_t b, uint32_t p) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      BatchSlot& slot = Slot(b);
      if (slot.batch != b) {
        // Only possible after a failure or stop (a batch cannot commit unreplicated, so its slot
        // cannot have been reused).
        QR_CHECK(Halted(), "replication confirmed for batch %llu whose slot holds %llu",
                 static_cast<unsigned long long>(b), static_cast<unsigned long long>(slot.batch));
        return;
      }
      SliceState& ss = *slot.slices[p];
      // After a halt nothing may become runnable (see PublishSlice), nor does anything commit.
      if (ss.replicated || Halted()) return;
      MarkReplicatedLocked(slot, ss, NowNanos());
    }
    // Executors wait on published_cv_ for their next slice; only in sync mode can replication
    // be what they wait for (speculatively they would wake for nothing, twice a batch each).
    if (opt_.executors_wait_for_replication) published_cv_.notify_all();
    executed_cv_.notify_all();
  }

  void EndInput(uint64_t end) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (end_known_ && end >= end_) return;
      end_known_ = true;
      end_ = end;
    }
    NotifyAll();
  }

  void Fail(Status status) {
    QR_CHECK(!status.ok());
    std::unique_lock<std::mutex> lk(mu_);
    if (health_.ok()) {
      health_ = std::move(status);
      Logger("pipeline")->error("stopped: {}", health_.ToString());
    }
    ReleaseRowWaitsLocked();
    NotifyAllLocked();
    // No sink or hook call may start after this returns; wait out one in progress, unless it
    // is this thread's own (a sink or hook that fails the pipeline, e.g. a row node whose send
    // to a dead peer fails: waiting for itself would hang the thread for good).
    const std::thread::id me = std::this_thread::get_id();
    delivered_cv_.wait(lk, [&] { return !delivering_ || delivering_thread_ == me; });
  }

  Status WaitIdle(int64_t timeout_ms) {
    std::unique_lock<std::mutex> lk(mu_);
    auto done = [&] { return Halted() || (end_known_ && committed_ >= end_); };
    if (timeout_ms < 0) {
      delivered_cv_.wait(lk, done);
    } else if (!delivered_cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), done)) {
      return Status::Timeout("batches in flight not committed within " + std::to_string(timeout_ms) + " ms (" +
                             std::to_string(committed_) + " committed" +
                             (end_known_ ? ", input ends at " + std::to_string(end_) : ", input end not known") + ")");
    }
    if (!health_.ok()) return health_;
    if (stop_ && !(end_known_ && committed_ >= end_)) return Status::Aborted("pipeline stopped");
    return Status::Ok();
  }

  void Stop() {
    std::lock_guard<std::mutex> control(control_mu_);
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      ReleaseRowWaitsLocked();
    }
    NotifyAll();
    // Reverse start order: executors, then committers. Executors first finish every slice
    // already published (see ExecutorLoop), which bounds the time this takes.
    for (auto it = threads_.rbegin(); it != threads_.rend(); ++it) it->Join();
    threads_.clear();
  }

  PipelineStats Stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    PipelineStats s = stats_;
    s.committed_batches = committed_ - opt_.first_batch;
    s.last_digest = digest_;
    return s;
  }
  Status health() const {
    std::lock_guard<std::mutex> lk(mu_);
    return health_;
  }
  uint64_t committed_batches() const {
    std::lock_guard<std::mutex> lk(mu_);
    return committed_;
  }

 private:
  struct SliceState {
    planner::PlannedSlice plan;   // written by its front-end thread before `published`, then read-only
    executor::DepBoard deps;      // reset at publish; executors publish/wait
    std::string read_values;      // capture_reads: plan.read_slots records (executors write own slots)
    // Row nodes: per dependency slot, kLocalSlot / kRowWaiting / kRowFilled. Set by the
    // front-end before `published`, then guarded by mu_.
    std::vector<uint8_t> recv;
    bool begun = false;           // guarded by mu_
    bool published = false;       // guarded by mu_
    bool replicated = false;      // guarded by mu_
    int64_t plan_ns = 0;          // guarded by mu_
  };
  // One batch in flight. Slot b % slots_.size() holds batch b, claimed by the first BeginSlice
  // of b once batch b - slots_.size() committed (the memory bound and the sync mode).
  struct BatchSlot {
    uint64_t batch = UINT64_MAX;  // guarded by mu_
    std::vector<std::unique_ptr<SliceState>> slices;  // [planner]
    // Guarded by mu_.
    uint32_t exec_done = 0;
    bool executed = false;        // every executor done and aborts resolved
    uint32_t replicated_slices = 0;
    int64_t first_published_ns = 0;
    int64_t exec_start_ns = 0;
    int64_t executed_ns = 0;
    int64_t replicated_ns = 0;    // when the last slice was replicated
    uint64_t committed = 0;
    uint64_t aborted = 0;
    // Written by each executor (its own entry) before it counts itself in exec_done, by the
    // resolving executor before `executed`; read by the committer of the last ticket after.
    std::vector<uint64_t> digest_deltas;  // [range]
    uint64_t resolver_delta = 0;
    executor::BatchFates fates;
  };

  BatchSlot& Slot(uint64_t b) { return *slots_[b % slots_.size()]; }

  static constexpr uint8_t kLocalSlot = 0, kRowWaiting = 1, kRowFilled = 2;
  static constexpr size_t kMaxPendingValues = size_t{1} << 24;

  // Batch b of a row node may abort somewhere in the row: vote with the peers in rounds until
  // no node adds an aborted txn, then undo (executor/row_resolver.h). Run by the batch's last
  // executor, the others waiting. False if the pipeline halted meanwhile.
  bool RowResolve(uint64_t b, BatchSlot& slot, uint64_t* digest_delta) {
    std::vector<const planner::PlannedSlice*> slices;
    for (auto& s : slot.slices) slices.push_back(&s->plan);
    std::vector<executor::ExecLog*> logs;
    for (auto& e : executors_) logs.push_back(&e->log());
    row_resolver_.Begin(slices, logs, table_);
    std::vector<executor::RowTxn> mine = row_resolver_.FiredHere();
    std::vector<executor::RowTxn> fired = mine;  // round 0 is every node's fired votes
    row_resolver_.Add(mine);
    for (uint32_t round = 0;; ++round) {
      QR_CHECK_LE(round, opt_.planners * uint64_t{planner::kMaxSliceTxns});  // each round adds a txn
      for (uint32_t q = 0; q < opt_.row_partitions; ++q) {
        if (q != opt_.row_partition) opt_.row_sender->SendVotes(q, b, round, mine);
      }
      std::vector<std::pair<uint32_t, std::vector<executor::RowTxn>>> peers;
      {
        std::unique_lock<std::mutex> lk(mu_);
        auto key = std::make_pair(b, round);
        votes_cv_.wait(lk, [&] { return Halted() || votes_[key].size() + 1 == opt_.row_partitions; });
        if (Halted()) return false;
        peers = std::move(votes_[key]);
        votes_.erase(key);
      }
      bool any = !mine.empty();
      for (auto& [from, ids] : peers) {
        any = any || !ids.empty();
        row_resolver_.Add(ids);
        if (round == 0) fired.insert(fired.end(), ids.begin(), ids.end());
      }
      if (!any) break;  // nobody added a txn this round: every node stops here, same set
      mine = row_resolver_.Cascade();
    }
    row_resolver_.Undo(fired, &slot.fates, digest_delta);
    return true;
  }

  // Fills row slot `dep_slot` of sub-slice ss = (b, p). mu_ held.
  Status FillLocked(SliceState& ss, uint64_t b, uint32_t p, uint32_t dep_slot, int64_t value) {
    if (dep_slot >= ss.recv.size() || ss.recv[dep_slot] != kRowWaiting) {
      return Status::Corruption("dependency value for slice (" + std::to_string(b) + ", " + std::to_string(p) +
                                ") slot " + std::to_string(dep_slot) + ": " +
                                (dep_slot >= ss.recv.size()   ? "past its " + std::to_string(ss.recv.size()) + " slots"
                                 : ss.recv[dep_slot] == kRowFilled ? "filled twice"
                                                                   : "not a slot the row fills"));
    }
    ss.recv[dep_slot] = kRowFilled;
    ss.deps.Publish(dep_slot, value);
    return Status::Ok();
  }

  // On a halt: an executor may wait for a row value that will not come now (its sender
  // stopped); fill every such slot with 0 so it finishes the sub-slice it holds and leaves
  // (nothing is delivered after a halt, so the value does not matter). mu_ held.
  void ReleaseRowWaitsLocked() {
    if (opt_.row_sender == nullptr) return;
    for (auto& slot : slots_) {
      for (auto& ss : slot->slices) {
        if (!ss->published) continue;
        for (uint32_t i = 0; i < ss->recv.size(); ++i) {
          if (ss->recv[i] == kRowWaiting) {
            ss->recv[i] = kRowFilled;
            ss->deps.Publish(i, 0);
          }
        }
      }
    }
  }
  bool Halted() const { return stop_ || !health_.ok(); }  // mu_ held
  bool PastEnd(uint64_t b) const { return end_known_ && b >= end_; }  // mu_ held

  void MarkReplicatedLocked(BatchSlot& slot, SliceState& ss, int64_t now) {
    ss.replicated = true;
    if (++slot.replicated_slices == opt_.planners) slot.replicated_ns = now;
  }

  // May executors take slice ss of batch b now? (mu_ held)
  bool Runnable(const BatchSlot& slot, const SliceState& ss, uint64_t b) const {
    return slot.batch == b && ss.published && (!opt_.executors_wait_for_replication || ss.replicated);
  }

  void ExecutorLoop(uint32_t me) {
    executor::RangeExecutor& ex = *executors_[me];
    for (uint64_t b = opt_.first_batch;; ++b) {
      BatchSlot& slot = Slot(b);
      ex.log().Clear();
      // Logging starts at the first slice with abortable ops: only from there on can a
      // transaction abort or be affected by an abort (effects only flow forward).
      bool log = false;
      for (uint32_t p = 0; p < opt_.planners; ++p) {
        SliceState& ss = *slot.slices[p];
        {
          std::unique_lock<std::mutex> lk(mu_);
          published_cv_.wait(lk, [&] { return Halted() || PastEnd(b) || Runnable(slot, ss, b); });
          // A published slice is run even when stopping: another executor may already be
          // waiting for one of its dependency values, and that wait has no timeout. For the
          // same reason what is parked runs before leaving.
          if (!Runnable(slot, ss, b)) {
            lk.unlock();
            ex.Drain();
            return;
          }
          if (slot.exec_start_ns == 0) slot.exec_start_ns = NowNanos();
        }
        log = log || ss.plan.may_abort;
        // Fragments parked behind a dependency value may wait while the next slices run
        // (all of them are published, so alive, until the batch commits): a row node goes on
        // with its next sub-slice while a peer's values are outstanding.
        ex.RunEq(ss.plan, &ss.deps, log, opt_.capture_reads ? ss.read_values.data() : nullptr, /*drain=*/false);
      }
      ex.Drain();
      std::unique_lock<std::mutex> lk(mu_);
      slot.digest_deltas[me] = ex.TakeDigestDelta();
      if (++slot.exec_done == opt_.executors) {
        // Last one out resolves the batch. The others that logged are waiting below, so the
        // logs and the records of every range are this thread's until `executed`.
        slot.fates.any_abort = false;
        if (log && opt_.row_sender != nullptr) {
          lk.unlock();
          uint64_t delta = 0;
          if (!RowResolve(b, slot, opt_.track_digest ? &delta : nullptr)) return;  // halted meanwhile
          lk.lock();
          slot.resolver_delta = delta;
        } else if (log) {
          lk.unlock();
          std::vector<const planner::PlannedSlice*> slices;
          std::vector<char*> reads;
          for (auto& s : slot.slices) {
            slices.push_back(&s->plan);
            reads.push_back(opt_.capture_reads ? s->read_values.data() : nullptr);
          }
          std::vector<executor::ExecLog*> logs;
          for (auto& e : executors_) logs.push_back(&e->log());
          uint64_t delta = 0;
          resolver_.Resolve(slices, logs, table_, &slot.fates, reads, opt_.track_digest ? &delta : nullptr);
          lk.lock();
          slot.resolver_delta = delta;
          stats_.reexecuted += slot.fates.reexecuted;
        }
        slot.executed = true;
        slot.executed_ns = NowNanos();
        // Batches finish execution in order: a logging batch holds every executor until it is
        // resolved, and otherwise the last executor marks it within the same critical section.
        QR_CHECK_EQ(executed_, b);
        executed_ = b + 1;
        lk.unlock();
        executed_cv_.notify_all();
      } else if (log) {
        // Batch b+1 must not run before b's aborts are undone.
        // The monotonic counter, not slot.executed: once b is committed its slot may already be
        // reclaimed (and its flags reset) before this thread wakes up.
        executed_cv_.wait(lk, [&] { return Halted() || executed_ > b; });
        if (executed_ <= b) return;
      }
    }
  }

  void CommitLoop(uint32_t me) {
    std::vector<commit::TxnOutcome> outcomes;
    const uint32_t P = opt_.planners;
    for (uint64_t b = opt_.first_batch;; ++b) {
      BatchSlot& slot = Slot(b);
      // Slice (b, p) belongs to committer (b*P + p) mod C.
      bool mine = false;
      for (uint32_t p = 0; p < P; ++p) mine |= (b * P + p) % opt_.committers == me;
      {
        std::unique_lock<std::mutex> lk(mu_);
        if (Halted() || PastEnd(b)) return;
        if (!mine) continue;
        // Invariant 1: commit only what is executed AND replicated.
        executed_cv_.wait(lk, [&] {
          return Halted() || PastEnd(b) || (slot.batch == b && slot.executed && slot.replicated_slices == P);
        });
        if (Halted() || !(slot.batch == b && slot.executed && slot.replicated_slices == P)) return;
      }
      for (uint32_t p = 0; p < P; ++p) {
        if ((b * P + p) % opt_.committers != me) continue;
        const SliceState& ss = *slot.slices[p];
        const commit::SliceTally tally =
            opt_.deliver_outcomes
                ? commit::BuildSliceOutcomes(ss.plan, slot.fates, NowNanos(), &outcomes,
                                             opt_.capture_reads ? std::string_view(ss.read_values) : "", record_bytes_)
                : commit::CountSliceOutcomes(ss.plan, slot.fates);
        if (!opt_.deliver_outcomes) outcomes.clear();
        const uint64_t ticket = b * P + p;
        {
          std::unique_lock<std::mutex> lk(mu_);
          delivered_cv_.wait(lk, [&] { return Halted() || ticket_ == ticket; });
          if (Halted()) return;
          // Counted before delivery, so Stats() never lags what a sink has seen.
          stats_.committed += tally.committed;
          stats_.aborted += tally.aborted_logic + tally.aborted_cascade;
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
          std::lock_guard<std::mutex> lk(mu_);
          call_hook = health_.ok();
        }
        // Still the ticket holder (delivering_): hooks run in batch order, and a Fail waits for
        // this call, so a Fail that returned has no hook call after it. Outside mu_: a hook may
        // fail the pipeline itself (a row node's OnBatch sends to its peers).
        if (call_hook) hook_(info);
        {
          std::lock_guard<std::mutex> lk(mu_);
          delivering_ = false;
          ++ticket_;
          if (last) {
            committed_ = b + 1;
            digest_ = info.digest;
            AddPhases(info.phases);
          }
        }
        delivered_cv_.notify_all();
        if (last) admit_cv_.notify_all();
      }
    }
  }

  // The batch's digest and phase times (the last ticket's holder, after its sink call).
  BatchInfo FinishBatch(uint64_t b, const BatchSlot& slot) {
    std::lock_guard<std::mutex> lk(mu_);
    BatchInfo info;
    info.batch = b;
    uint64_t digest = digest_;
    if (opt_.track_digest) {
      for (uint64_t d : slot.digest_deltas) digest += d;
      digest += slot.resolver_delta;
    }
    info.digest = digest;
    info.committed = slot.committed;
    info.aborted = slot.aborted;
    const int64_t now = NowNanos();
    BatchPhases& ph = info.phases;
    for (const auto& s : slot.slices) ph.plan_ns += s->plan_ns;
    ph.deliver_ns = slot.exec_start_ns - slot.first_published_ns;
    ph.exec_ns = slot.executed_ns - slot.exec_start_ns;
    ph.repl_ns = slot.replicated_ns - slot.first_published_ns;
    ph.repl_wait_ns = std::max<int64_t>(0, slot.replicated_ns - slot.executed_ns);
    ph.commit_ns = now - std::max(slot.executed_ns, slot.replicated_ns);
    return info;
  }

  void AddPhases(const BatchPhases& p) {  // mu_ held
    BatchPhases& s = stats_.phase_sums;
    s.plan_ns += p.plan_ns;
    s.deliver_ns += p.deliver_ns;
    s.exec_ns += p.exec_ns;
    s.repl_ns += p.repl_ns;
    s.repl_wait_ns += p.repl_wait_ns;
    s.commit_ns += p.commit_ns;
  }

  void NotifyAll() {
    std::lock_guard<std::mutex> lk(mu_);
    NotifyAllLocked();
  }
  void NotifyAllLocked() {
    votes_cv_.notify_all();
    admit_cv_.notify_all();
    published_cv_.notify_all();
    executed_cv_.notify_all();
    delivered_cv_.notify_all();
  }

  const PipelineOptions opt_;
  storage::Table* const table_;
  const commit::CommitSink sink_;
  const BatchHook hook_;
  uint32_t record_bytes_ = 0;

  std::vector<std::unique_ptr<BatchSlot>> slots_;
  std::vector<std::unique_ptr<executor::RangeExecutor>> executors_;  // [range], one per executor thread
  executor::AbortResolver resolver_;  // used by the last executor of a batch only (batches resolve in turn)

  std::mutex control_mu_;  // serializes Start and Stop
  mutable std::mutex mu_;
  std::condition_variable admit_cv_;      // a batch committed (slots free), halt, end
  std::condition_variable published_cv_;  // a slice was published or replicated
  std::condition_variable executed_cv_;   // a batch was executed and resolved, or replicated
  std::condition_variable delivered_cv_;  // a slice was delivered (tickets, batch committed)
  bool started_ = false;                  // guarded by mu_
  bool stop_ = false;                     // guarded by mu_
  Status health_;                         // guarded by mu_: first Fail
  bool end_known_ = false;                // guarded by mu_: batches [first, end_) are all
  uint64_t end_ = 0;                      // guarded by mu_
  bool delivering_ = false;               // guarded by mu_: a sink or hook call is in progress
  std::thread::id delivering_thread_;     // guarded by mu_: the thread making it
  uint64_t ticket_ = 0;                   // guarded by mu_: next slice b*P+p to deliver
  uint64_t executed_ = 0;                 // guarded by mu_: batches [first, this) executed and resolved
  uint64_t committed_ = 0;                // guarded by mu_: batches [first, this) fully delivered
  uint64_t digest_ = 0;                   // guarded by mu_: state digest after batch committed_ - 1
  PipelineStats stats_;                   // guarded by mu_
  // Row nodes: abort votes by (batch, round): (from partition, txns) per peer so far.
  std::map<std::pair<uint64_t, uint32_t>, std::vector<std::pair<uint32_t, std::vector<executor::RowTxn>>>>
      votes_;                                                 // guarded by mu_
  std::condition_variable votes_cv_;                          // votes came, or halt
  executor::RowResolver row_resolver_;                        // the resolving executor's (batches resolve in turn)
  // Row nodes: dependency values that came before their sub-slice, by (batch, slice).
  std::map<std::pair<uint64_t, uint32_t>, std::vector<std::pair<uint32_t, int64_t>>> pending_;  // guarded by mu_
  size_t pending_values_ = 0;                                                                     // guarded by mu_

  std::vector<NamedThread> threads_;  // start order; guarded by control_mu_
};

Pipeline::Pipeline(PipelineOptions options, storage::Table* table, commit::CommitSink sink, BatchHook on_batch)
    : impl_(std::make_unique<PipelineImpl>(options, table, std::move(sink), std::move(on_batch))) {}
Pipeline::~Pipeline() { Stop(); }
Status Pipeline::Start() { return impl_->Start(); }
planner::PlannedSlice* Pipeline::BeginSlice(uint64_t b, uint32_t p) { return impl_->BeginSlice(b, p); }
void Pipeline::PublishSlice(uint64_t b, uint32_t p, int64_t plan_ns, bool replicated) {
  impl_->PublishSlice(b, p, plan_ns, replicated);
}
void Pipeline::MarkReplicated(uint64_t b, uint32_t p) { impl_->MarkReplicated(b, p); }
void Pipeline::DeliverDepValue(uint64_t b, uint32_t p, uint32_t slot, int64_t value) {
  impl_->DeliverDepValue(b, p, slot, value);
}
void Pipeline::DeliverVotes(uint64_t b, uint32_t from, uint32_t round, std::vector<executor::RowTxn> ids) {
  impl_->DeliverVotes(b, from, round, std::move(ids));
}
void Pipeline::EndInput(uint64_t end) { impl_->EndInput(end); }
void Pipeline::Fail(Status status) { impl_->Fail(std::move(status)); }
Status Pipeline::WaitIdle(int64_t timeout_ms) { return impl_->WaitIdle(timeout_ms); }
void Pipeline::Stop() {
  if (impl_) impl_->Stop();
}
PipelineStats Pipeline::Stats() const { return impl_->Stats(); }
Status Pipeline::health() const { return impl_->health(); }
uint64_t Pipeline::committed_batches() const { return impl_->committed_batches(); }

}  // namespace qrstore::cluster
