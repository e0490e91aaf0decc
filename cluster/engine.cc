#include "cluster/engine.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "commit/committer.h"
#include "common/bounded_queue.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/thread.h"
#include "executor/abort_resolver.h"
#include "executor/dep_board.h"
#include "executor/range_executor.h"
#include "planner/eq.h"
#include "planner/planner.h"
#include "storage/key_map.h"

namespace qrstore::cluster {

namespace {

struct EngineOptions {
  uint32_t batch_txns = 10000;
  int64_t batch_timeout_ns = 10'000'000;
  uint32_t planners = 1;
  uint32_t executors = 2;
  uint32_t committers = 1;
  bool node_sync = false;
  uint32_t client_queue_txns = 40000;
  uint32_t batches_in_flight = 3;
  storage::KeyMapper ranges;
  uint32_t partitions = 1;
};

}  // namespace

// The engine's state. Threads and what they own:
//   planner-<i>:  its Planner; the (b, i) SliceState between taking the token and `planned`.
//   executor-<r>: its RangeExecutor (and ExecLog); reads planned slices; the last executor of
//                 a batch runs the AbortResolver and writes the batch's fates.
//   commit-<c>:   its outcome buffer; reads executed slices; delivers in ticket order.
// Everything marked "guarded by mu_" is only touched under mu_. Stage hand-offs (planned,
// executed, delivered) happen under mu_, which orders the plain-data writes of one stage
// before the reads of the next. mu_ is taken a few times per slice, never per txn or op.
class EngineImpl {
 public:
  EngineImpl(EngineOptions opt, storage::Table* table, CommitSink sink)
      : opt_(opt),
        table_(table),
        sink_(std::move(sink)),
        queue_(opt.client_queue_txns) {
    const uint32_t nslots = opt_.node_sync ? 1 : opt_.batches_in_flight;
    slots_.resize(nslots);
    for (auto& slot : slots_) {
      slot = std::make_unique<BatchSlot>();
      slot->slices.resize(opt_.planners);
      for (auto& s : slot->slices) s = std::make_unique<SliceState>();
    }
    for (uint32_t r = 0; r < opt_.executors; ++r) {
      executors_.push_back(std::make_unique<executor::RangeExecutor>(table_, r));
    }
  }

  ~EngineImpl() { Stop(); }

  Status Start() {
    std::lock_guard<std::mutex> control(control_mu_);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (started_) return Status::InvalidArgument("engine: Start called twice");
      if (stop_) return Status::Aborted("engine: Start after Stop");
      started_ = true;
    }
    Logger("engine")->info("starting: {} planner(s), {} executor(s), {} committer(s), batch {} txns / {} ms, sync={}",
                           opt_.planners, opt_.executors, opt_.committers, opt_.batch_txns,
                           opt_.batch_timeout_ns / 1'000'000, opt_.node_sync ? "node" : "thread");
    // Downstream first, so every stage finds its consumer running.
    for (uint32_t c = 0; c < opt_.committers; ++c) {
      threads_.emplace_back("commit-" + std::to_string(c), [this, c] { CommitLoop(c); });
    }
    for (uint32_t r = 0; r < opt_.executors; ++r) {
      threads_.emplace_back("executor-" + std::to_string(r), [this, r] { ExecutorLoop(r); });
    }
    for (uint32_t p = 0; p < opt_.planners; ++p) {
      threads_.emplace_back("planner-" + std::to_string(p), [this, p] { PlannerLoop(p); });
    }
    return Status::Ok();
  }

  bool Submit(storage::Txn txn) { return queue_.Push(std::move(txn)); }

  void Finish() {
    // Closing the queue ends the input: planners drain it, close the open batch, and the
    // first planner to find it closed and empty marks the end batch.
    queue_.Close();
    std::unique_lock<std::mutex> lk(mu_);
    if (!started_) return;
    delivered_cv_.wait(lk, [&] { return stop_ || (end_known_ && committed_batches_ >= end_batch_); });
  }

  void Stop() {
    std::lock_guard<std::mutex> control(control_mu_);
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    queue_.Close();
    token_cv_.notify_all();
    planned_cv_.notify_all();
    executed_cv_.notify_all();
    delivered_cv_.notify_all();
    // Reverse start order: planners, executors, committers. Executors first finish every
    // slice already planned (see ExecutorLoop), which bounds the time this takes.
    for (auto it = threads_.rbegin(); it != threads_.rend(); ++it) it->Join();
    threads_.clear();
  }

  EngineStats Stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    EngineStats s = stats_;
    if (s.batches > 0) {
      s.mean_plan_ms = static_cast<double>(plan_ns_total_) / 1e6 / static_cast<double>(s.batches);
      s.mean_exec_ms = static_cast<double>(exec_ns_total_) / 1e6 / static_cast<double>(s.batches);
      s.mean_commit_ms = static_cast<double>(commit_ns_total_) / 1e6 / static_cast<double>(s.batches);
    }
    return s;
  }

 private:
  struct SliceState {
    planner::PlannedSlice plan;   // written by its planner before `planned`, then read-only
    executor::DepBoard deps;      // reset by its planner; executors publish/wait
    bool planned = false;         // guarded by mu_
    int64_t plan_ns = 0;          // guarded by mu_
  };
  // One batch in flight. Slot b % slots_.size() holds batch b; planner 0 claims it for b once
  // batch b - slots_.size() is committed (the memory bound and the sync mode).
  struct BatchSlot {
    uint64_t batch = UINT64_MAX;  // guarded by mu_
    std::vector<std::unique_ptr<SliceState>> slices;  // [planner]
    // Batch closing, guarded by mu_ and passed along with the token.
    int64_t deadline_ns = 0;
    bool closed = false;
    // Execution, guarded by mu_.
    uint32_t exec_done = 0;
    bool executed = false;        // every executor done and aborts resolved
    // Invariant 1 hook: a batch commits only once replicated. Open in the single-node engine;
    // the replicated engine will clear it when the batch is claimed and set it from
    // ReplicateData's callback.
    bool replicated = true;
    int64_t exec_start_ns = 0;
    int64_t executed_ns = 0;
    // Written by the resolving executor before `executed`, read by committers after it.
    executor::BatchFates fates;
  };

  BatchSlot& Slot(uint64_t b) { return *slots_[b % slots_.size()]; }

  void PlannerLoop(uint32_t me) {
    planner::Planner planner(opt_.ranges);
    // Slices of one batch add up to exactly batch.txns, whatever the planner count.
    const size_t slice_max = opt_.batch_txns / opt_.planners + (me < opt_.batch_txns % opt_.planners ? 1 : 0);
    std::vector<storage::Txn> txns;
    txns.reserve(slice_max);
    const uint64_t in_flight = slots_.size();
    for (uint64_t b = 0;; ++b) {
      BatchSlot& slot = Slot(b);
      SliceState& ss = *slot.slices[me];
      bool closed = false;
      int64_t deadline = 0;
      {
        std::unique_lock<std::mutex> lk(mu_);
        token_cv_.wait(lk, [&] { return stop_ || end_known_ || (token_batch_ == b && token_planner_ == me); });
        // The token reaches (end_batch_, 0) last, so a planner still waiting is past the end.
        if (stop_ || end_known_) return;
        if (me == 0) {
          // Bounded memory (thread sync: a few batches in flight) or the node-sync barrier
          // (one slot: batch b is planned only after batch b-1 committed).
          delivered_cv_.wait(lk, [&] { return stop_ || committed_batches_ + in_flight > b; });
          if (stop_) return;
          slot.batch = b;
          slot.deadline_ns = 0;
          slot.closed = false;
          slot.exec_done = 0;
          slot.executed = false;
          slot.replicated = true;
          slot.exec_start_ns = 0;
          slot.executed_ns = 0;
          for (auto& s : slot.slices) s->planned = false;
        }
        closed = slot.closed;
        deadline = slot.deadline_ns;
      }

      // Holding the token: this planner alone pops from the client queue now.
      bool end_of_input = false;
      bool timed_out = false;
      if (!closed) {
        if (me == 0) {
          // A batch starts with its first txn; idle planners block here (Close wakes them).
          std::optional<storage::Txn> first = queue_.Pop();
          if (first) {
            txns.push_back(std::move(*first));
            deadline = NowNanos() + opt_.batch_timeout_ns;
          } else {
            end_of_input = true;
          }
        }
        while (!end_of_input && txns.size() < slice_max) {
          // Take whatever is queued in one go; block (up to the deadline) only when empty.
          if (queue_.TryPopMany(&txns, slice_max - txns.size()) > 0) continue;
          const int64_t left = deadline - NowNanos();
          std::optional<storage::Txn> t =
              left > 0 ? queue_.PopFor(std::chrono::nanoseconds(left)) : queue_.TryPop();
          if (t) {
            txns.push_back(std::move(*t));
            continue;
          }
          if (queue_.closed()) {
            closed = true;  // Finish/Stop: input closed and drained
            break;
          }
          if (NowNanos() >= deadline) {
            closed = timed_out = true;
            break;
          }
        }
      }

      {
        std::lock_guard<std::mutex> lk(mu_);
        if (stop_) return;
        if (end_of_input) {
          end_known_ = true;
          end_batch_ = b;
          NotifyAllLocked();
          return;
        }
        if (me == 0) slot.deadline_ns = deadline;
        if (closed && !slot.closed) {
          slot.closed = true;
          if (timed_out) ++stats_.batches_closed_by_timeout;
        }
        if (me + 1 < opt_.planners) {
          token_planner_ = me + 1;
        } else {
          token_planner_ = 0;
          token_batch_ = b + 1;
        }
      }
      token_cv_.notify_all();

      // Planning runs in parallel with the next planner's popping.
      const int64_t t0 = NowNanos();
      planner.PlanSlice(b, me, txns, &ss.plan);
      ss.deps.Reset(ss.plan.dep_slots);
      const int64_t plan_ns = NowNanos() - t0;
      txns.clear();
      {
        std::lock_guard<std::mutex> lk(mu_);
        ss.planned = true;
        ss.plan_ns = plan_ns;
      }
      planned_cv_.notify_all();
    }
  }

  void ExecutorLoop(uint32_t me) {
    executor::RangeExecutor& ex = *executors_[me];
    for (uint64_t b = 0;; ++b) {
      BatchSlot& slot = Slot(b);
      ex.log().Clear();
      // Logging starts at the first slice with abortable ops: only from there on can a
      // transaction abort or be affected by an abort (effects only flow forward).
      bool log = false;
      for (uint32_t p = 0; p < opt_.planners; ++p) {
        SliceState& ss = *slot.slices[p];
        {
          std::unique_lock<std::mutex> lk(mu_);
          planned_cv_.wait(lk, [&] {
            return stop_ || (end_known_ && b >= end_batch_) || (slot.batch == b && ss.planned);
          });
          // A planned slice is run even when stopping: another executor may already be
          // waiting for one of its dependency values, and that wait has no timeout.
          if (!(slot.batch == b && ss.planned)) return;
          if (slot.exec_start_ns == 0) slot.exec_start_ns = NowNanos();
        }
        log = log || ss.plan.may_abort;
        ex.RunEq(ss.plan, &ss.deps, log);
      }
      std::unique_lock<std::mutex> lk(mu_);
      if (++slot.exec_done == opt_.executors) {
        // Last one out resolves the batch. The others that logged are waiting below, so the
        // logs and the records of every range are this thread's until `executed`.
        slot.fates.any_abort = false;
        if (log) {
          lk.unlock();
          std::vector<const planner::PlannedSlice*> slices;
          for (auto& s : slot.slices) slices.push_back(&s->plan);
          std::vector<executor::ExecLog*> logs;
          for (auto& e : executors_) logs.push_back(&e->log());
          resolver_.Resolve(slices, logs, table_, &slot.fates);
          lk.lock();
          stats_.reexecuted += slot.fates.reexecuted;
        }
        slot.executed = true;
        slot.executed_ns = NowNanos();
        // Batches finish execution in order: a logging batch holds every executor until it is
        // resolved, and otherwise the last executor marks it within the same critical section.
        QR_CHECK_EQ(executed_batches_, b);
        executed_batches_ = b + 1;
        lk.unlock();
        executed_cv_.notify_all();
      } else if (log) {
        // Batch b+1 must not run before b's aborts are undone.
        // The monotonic counter, not slot.executed: once b is committed its slot may already be
        // reclaimed (and its flags reset) before this thread wakes up.
        executed_cv_.wait(lk, [&] { return stop_ || executed_batches_ > b; });
        if (executed_batches_ <= b) return;
      }
    }
  }

  void CommitLoop(uint32_t me) {
    std::vector<TxnOutcome> outcomes;
    const uint32_t P = opt_.planners;
    for (uint64_t b = 0;; ++b) {
      BatchSlot& slot = Slot(b);
      // Slice (b, p) belongs to committer (b*P + p) mod C.
      bool mine = false;
      for (uint32_t p = 0; p < P; ++p) mine |= (b * P + p) % opt_.committers == me;
      {
        std::unique_lock<std::mutex> lk(mu_);
        if (stop_ || (end_known_ && b >= end_batch_)) return;
        if (!mine) continue;
        executed_cv_.wait(lk, [&] {
          return stop_ || (end_known_ && b >= end_batch_) || (slot.batch == b && slot.executed && slot.replicated);
        });
        if (stop_ || !(slot.batch == b && slot.executed)) return;
      }
      for (uint32_t p = 0; p < P; ++p) {
        if ((b * P + p) % opt_.committers != me) continue;
        const SliceState& ss = *slot.slices[p];
        const commit::SliceTally tally = commit::BuildSliceOutcomes(ss.plan, slot.fates, NowNanos(), &outcomes);
        const uint64_t ticket = b * P + p;
        {
          std::unique_lock<std::mutex> lk(mu_);
          delivered_cv_.wait(lk, [&] { return stop_ || deliver_ticket_ == ticket; });
          if (stop_) return;
          // Counted before delivery, so Stats() never lags what a sink has seen.
          stats_.committed += tally.committed;
          stats_.aborted += tally.aborted_logic;
        }
        // Only the ticket holder delivers: sink calls are serialized and in planned order.
        if (!outcomes.empty()) sink_(outcomes);
        {
          std::lock_guard<std::mutex> lk(mu_);
          ++deliver_ticket_;
          plan_ns_total_ += ss.plan_ns;
          if (p + 1 == P) {
            committed_batches_ = b + 1;
            ++stats_.batches;
            exec_ns_total_ += slot.executed_ns - slot.exec_start_ns;
            commit_ns_total_ += NowNanos() - slot.executed_ns;
          }
        }
        delivered_cv_.notify_all();
      }
    }
  }

  void NotifyAllLocked() {
    token_cv_.notify_all();
    planned_cv_.notify_all();
    executed_cv_.notify_all();
    delivered_cv_.notify_all();
  }

  const EngineOptions opt_;
  storage::Table* const table_;
  const CommitSink sink_;
  BoundedQueue<storage::Txn> queue_;

  std::vector<std::unique_ptr<BatchSlot>> slots_;
  std::vector<std::unique_ptr<executor::RangeExecutor>> executors_;  // [range], one per executor thread
  executor::AbortResolver resolver_;  // used by the last executor of a batch only (batches resolve in turn)

  std::mutex control_mu_;  // serializes Start and Stop
  mutable std::mutex mu_;
  std::condition_variable token_cv_;      // token moves, end of input
  std::condition_variable planned_cv_;    // a slice was planned
  std::condition_variable executed_cv_;   // a batch was executed and resolved
  std::condition_variable delivered_cv_;  // a slice was delivered (tickets, batch committed)
  bool started_ = false;                  // guarded by mu_
  bool stop_ = false;                     // guarded by mu_
  uint64_t token_batch_ = 0;              // guarded by mu_: who may pop next
  uint32_t token_planner_ = 0;            // guarded by mu_
  bool end_known_ = false;                // guarded by mu_: input ended; batches [0, end_batch_)
  uint64_t end_batch_ = 0;                // guarded by mu_
  uint64_t deliver_ticket_ = 0;           // guarded by mu_: next slice b*P+p to deliver
  uint64_t executed_batches_ = 0;         // guarded by mu_: batches [0, this) executed and resolved
  uint64_t committed_batches_ = 0;        // guarded by mu_: batches [0, this) fully delivered
  EngineStats stats_;                     // guarded by mu_ (means computed in Stats())
  int64_t plan_ns_total_ = 0;             // guarded by mu_
  int64_t exec_ns_total_ = 0;             // guarded by mu_
  int64_t commit_ns_total_ = 0;           // guarded by mu_

  std::vector<NamedThread> threads_;  // start order; guarded by control_mu_
};

// ---------------------------------------------------------------------------------------------

void Engine::AddConfigKeys(ConfigSchema* schema) {
  schema->AddInt("batch.txns", 10000, 1, 1'000'000, "transactions per batch (split among the planners)");
  schema->AddInt("batch.timeout_ms", 10, 0, 60'000,
                 "a batch closes this long after its first txn even if not full (0: take what is queued)");
  schema->AddInt("threads.planners", 1, 1, 64, "planner threads (planner-<i>, priority i)");
  schema->AddInt("threads.executors", 2, 1, 256, "executor threads, one per key range (executor-<i>)");
  schema->AddInt("threads.committers", 1, 1, 16, "commit threads (commit-<i>)");
  schema->AddString("engine.sync", "thread",
                    "thread: planning of batch b+1 overlaps execution of b; node: a barrier per batch",
                    {"thread", "node"});
  schema->AddInt("engine.client_queue_txns", 40000, 1, 10'000'000,
                 "capacity of the client txn queue (Submit blocks while it is full)");
  schema->AddInt("engine.batches_in_flight", 3, 1, 16,
                 "batches planned/executing/committing at once with engine.sync=thread (memory bound)");
  schema->AddString("engine.range_function", "hash",
                    "key -> executor range: hash (Mix64) or range (contiguous ranges of [0, engine.key_space))",
                    {"hash", "range"});
  schema->AddInt("engine.key_space", 1'000'000, 1, INT64_MAX,
                 "keys are expected in [0, key_space) (for engine.range_function=range)");
  schema->AddInt("engine.partitions", 1, 1, 4096,
                 "partitions (distributed engine); a single node holds them all and ignores it");
}

Result<std::unique_ptr<Engine>> Engine::Create(const Config& config, storage::Table* table, CommitSink sink) {
  std::vector<std::string> errors;
  if (table == nullptr) errors.push_back("engine: table is null");
  if (!sink) errors.push_back("engine: commit sink is empty");
  EngineOptions opt;
  opt.batch_txns = static_cast<uint32_t>(config.GetInt("batch.txns"));
  opt.batch_timeout_ns = config.GetInt("batch.timeout_ms") * 1'000'000;
  opt.planners = static_cast<uint32_t>(config.GetInt("threads.planners"));
  opt.executors = static_cast<uint32_t>(config.GetInt("threads.executors"));
  opt.committers = static_cast<uint32_t>(config.GetInt("threads.committers"));
  opt.node_sync = config.GetString("engine.sync") == "node";
  opt.client_queue_txns = static_cast<uint32_t>(config.GetInt("engine.client_queue_txns"));
  opt.batches_in_flight = static_cast<uint32_t>(config.GetInt("engine.batches_in_flight"));
  opt.partitions = static_cast<uint32_t>(config.GetInt("engine.partitions"));
  const bool range_fn = config.GetString("engine.range_function") == "range";
  const int64_t key_space = config.GetInt("engine.key_space");
  if (opt.planners > opt.batch_txns) {
    errors.push_back("threads.planners (" + std::to_string(opt.planners) + ") must be <= batch.txns (" +
                     std::to_string(opt.batch_txns) + "): every planner's slice needs room for a txn");
  }
  if (range_fn && key_space < static_cast<int64_t>(opt.executors)) {
    errors.push_back("engine.key_space (" + std::to_string(key_space) + ") must be >= threads.executors (" +
                     std::to_string(opt.executors) + ") when engine.range_function=range");
  }
  if (!opt.node_sync && opt.batches_in_flight < 2) {
    errors.push_back(
        "engine.batches_in_flight must be >= 2 with engine.sync=thread (1 would serialize batches: use "
        "engine.sync=node)");
  }
  if (!errors.empty()) {
    std::string msg = "invalid engine config:";
    for (const auto& e : errors) msg += "\n  " + e;
    return Status::InvalidArgument(msg);
  }
  opt.ranges = storage::KeyMapper(range_fn ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash,
                                  opt.executors, static_cast<uint64_t>(key_space));
  return std::unique_ptr<Engine>(new Engine(std::make_unique<EngineImpl>(opt, table, std::move(sink))));
}

Engine::Engine(std::unique_ptr<EngineImpl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() { Stop(); }
Status Engine::Start() { return impl_->Start(); }
bool Engine::Submit(storage::Txn txn) { return impl_->Submit(std::move(txn)); }
void Engine::Finish() { impl_->Finish(); }
void Engine::Stop() { impl_->Stop(); }
EngineStats Engine::Stats() const { return impl_->Stats(); }

}  // namespace qrstore::cluster
