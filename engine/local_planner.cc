#include "engine/local_planner.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "common/clock.h"
#include "planner/input_slice.h"
#include "planner/planner.h"
#include "planner/replica_encoder.h"
#include "planner/row_planner.h"

namespace qrstore::engine {

LocalPlanner::LocalPlanner(LocalPlannerOptions options, Pipeline* pipeline, PlannedHook hook)
    : opt_(options), pipeline_(pipeline), hook_(std::move(hook)), queue_(options.client_queue_txns),
      spare_(options.recycle_ops ? options.batch_txns : 0) {
  QR_CHECK(opt_.planners >= 1 && opt_.planners <= opt_.batch_txns);
  QR_CHECK((pipeline_ == nullptr) == (opt_.row != nullptr), "a planner feeds a pipeline or a row home, exactly one");
  QR_CHECK(!(opt_.encode_input && (opt_.encode_for_replicas || opt_.row != nullptr)),
           "replicating the input is one payload, of a pipeline's slices");
  token_batch_ = opt_.first_batch;
}

LocalPlanner::~LocalPlanner() { Stop(); }

Status LocalPlanner::Start() {
  {
    MutexLock lk(mu_);
    if (started_) return Status::InvalidArgument("planner: Start called twice");
    if (stop_) return Status::Aborted("planner: Start after Stop");
    started_ = true;
  }
  for (uint32_t p = 0; p < opt_.planners; ++p) {
    threads_.emplace_back("planner-" + std::to_string(p), [this, p] { PlannerLoop(p); });
  }
  return Status::Ok();
}

bool LocalPlanner::Submit(storage::Txn txn) { return queue_.Push(std::move(txn)); }
size_t LocalPlanner::SubmitMany(std::vector<storage::Txn>& txns, size_t first) { return queue_.PushMany(txns, first); }
bool LocalPlanner::TrySubmit(storage::Txn& txn) { return queue_.TryPush(txn); }

void LocalPlanner::CloseInput() {
  // Planners drain the queue, close the open batch, and the first planner to find it closed
  // and empty at the start of a batch marks the end.
  queue_.Close();
}

void LocalPlanner::Stop() {
  Halt();
  for (auto it = threads_.rbegin(); it != threads_.rend(); ++it) it->Join();
  threads_.clear();
}

void LocalPlanner::Halt() {
  {
    MutexLock lk(mu_);
    stop_ = true;
  }
  queue_.Close();
  token_cv_.notify_all();
}

uint64_t LocalPlanner::batches_closed_by_timeout() const {
  MutexLock lk(mu_);
  return closed_by_timeout_;
}
bool LocalPlanner::ended() const {
  MutexLock lk(mu_);
  return end_known_;
}
uint64_t LocalPlanner::end_batch() const {
  MutexLock lk(mu_);
  return end_batch_;
}

namespace {

// The state of the batch a planner takes with the token and hands on with it.
struct BatchState {
  bool closed = false;        // the batch is closed: pop nothing more into it
  int64_t deadline = 0;       // when the open batch closes by timeout
  bool end_of_input = false;  // planner 0: the input ended before this batch
  bool timed_out = false;     // this planner closed the batch at its deadline
};

// One planner thread's own state, reused batch after batch: the txns it pops into its slice
// and the planners that turn them into slices. Used without LocalPlanner's lock: the token
// decides who pops, and planning touches only this thread's slice.
class PlannerThread {
 public:
  PlannerThread(const LocalPlannerOptions& opt, BoundedQueue<storage::Txn>& queue, SpareOps* spare,
                Pipeline* pipeline, const PlannedHook& hook, uint32_t me)
      : opt_(opt),
        queue_(queue),
        spare_(spare),
        pipeline_(pipeline),
        hook_(hook),
        row_(opt.row),
        me_(me),
        planner_(opt.ranges),
        row_planner_(row_ != nullptr ? opt.partitions : storage::KeyMapper(), opt.ranges, opt.row_partition),
        encode_(opt.encode_for_replicas ? &replica_ : nullptr),
        // Slices of one batch add up to exactly batch_txns, whatever the planner count.
        slice_max_(opt.batch_txns / opt.planners + (me < opt.batch_txns % opt.planners ? 1 : 0)) {
    txns_.reserve(slice_max_);
  }

  // Holding the token for batch b: pops this planner's share of it from the client queue.
  void Pop(uint64_t b, BatchState* s, bool* input_ended) {
    if (s->closed) return;
    if (me_ == 0 && row_ == nullptr) {
      // A batch starts with its first txn; idle planners block here (Close wakes them).
      std::optional<storage::Txn> first = queue_.Pop();
      if (first) {
        txns_.push_back(std::move(*first));
        Admit(b, 0);
        s->deadline = NowNanos() + opt_.batch_timeout_ns;
      } else {
        s->end_of_input = true;
      }
    } else if (me_ == 0) {
      OpenRowBatch(b, s, input_ended);
    }
    Fill(b, s);
  }

  // Plans the popped txns as slice (b, me) and hands it on: to the row home as one sub-slice
  // per partition, or published in `out` (claimed from the pipeline) and then to the hook.
  void Plan(uint64_t b, planner::PlannedSlice* out, int64_t cut_ns) {
    const int64_t t0 = NowNanos();
    if (row_ != nullptr) {
      row_planner_.PlanSlices(b, opt_.row_partition * opt_.planners + me_, txns_, &subs_);
      row_->HomeSlicePlanned(b, me_, &subs_, &txns_, NowNanos() - t0);
      txns_.clear();
      if (txns_.capacity() < slice_max_) txns_.reserve(slice_max_);
      return;
    }
    planner_.PlanSlice(b, me_, txns_, out, encode_);
    // The input goes out as planned: the txns are about to lend their op vectors back.
    std::string input = opt_.encode_input ? planner::EncodeInputSlice(b, me_, txns_) : std::string();
    const int64_t plan_ns = NowNanos() - t0;
    spare_->Keep(txns_);
    txns_.clear();
    pipeline_->PublishSlice(b, me_, plan_ns, /*replicated=*/!hook_, cut_ns);
    // `out` is read-only from here on: executors may be running it (Finish only reads it).
    if (hook_) hook_(*out, encode_ != nullptr ? encode_->Finish(*out) : std::move(input));
  }

 private:
  // After a pop into txns_[before..]: the session check (it may take some out again).
  void Admit(uint64_t b, size_t before) {
    if (opt_.admit && txns_.size() > before) opt_.admit(b, me_, &txns_, before);
  }

  // Planner 0 of a row home: the batch starts with its first txn or when a peer planned it
  // already. Once the input is over it says so once, then plans empty batches while a peer
  // needs them.
  void OpenRowBatch(uint64_t b, BatchState* s, bool* input_ended) {
    uint64_t seen = queue_.kicks();
    for (;;) {
      if (queue_.closed() && queue_.size() == 0) {
        if (!*input_ended) {
          *input_ended = true;
          row_->InputEnded(b);
        }
        if (row_->NeedBatch(b)) {
          s->closed = true;
        } else {
          s->end_of_input = true;
        }
        return;
      }
      if (row_->PeerOpened(b)) {
        queue_.TryPopMany(&txns_, slice_max_);
        Admit(b, 0);
        s->closed = true;
        return;
      }
      std::optional<storage::Txn> first = queue_.PopUnlessKicked(&seen, std::chrono::seconds(1));
      if (first) {
        txns_.push_back(std::move(*first));
        Admit(b, 0);
        s->deadline = NowNanos() + opt_.batch_timeout_ns;
        return;
      }
    }
  }

  // Fills the slice until it is full, the batch's deadline passes, the input closes or (a row
  // home) a peer planned the batch.
  void Fill(uint64_t b, BatchState* s) {
    while (!s->end_of_input && !s->closed && txns_.size() < slice_max_) {
      // Take whatever is queued in one go; block (up to the deadline) only when empty.
      const size_t before = txns_.size();
      if (queue_.TryPopMany(&txns_, slice_max_ - txns_.size()) > 0) {
        Admit(b, before);
        continue;
      }
      const int64_t left = s->deadline - NowNanos();
      if (row_ != nullptr && row_->PeerOpened(b)) {
        s->closed = true;  // a peer planned this batch: close it with what is here
        break;
      }
      std::optional<storage::Txn> t;
      if (left <= 0) {
        t = queue_.TryPop();
      } else if (row_ != nullptr) {
        uint64_t seen = queue_.kicks();
        t = queue_.PopUnlessKicked(&seen, std::chrono::nanoseconds(left));
        if (!t && !queue_.closed() && NowNanos() < s->deadline) continue;  // kicked: look again
      } else {
        // Sleep until the slice can be filled or the deadline: woken once, not per request.
        const size_t need = slice_max_ - txns_.size();
        if (queue_.PopManyFor(&txns_, need, need, std::chrono::nanoseconds(left)) > 0) {
          Admit(b, before);
          continue;
        }
      }
      if (t) {
        txns_.push_back(std::move(*t));
        Admit(b, before);
        continue;
      }
      if (queue_.closed()) {
        s->closed = true;  // CloseInput/Stop: input closed and drained
        break;
      }
      if (NowNanos() >= s->deadline) {
        s->closed = s->timed_out = true;
        break;
      }
    }
  }

  const LocalPlannerOptions& opt_;
  BoundedQueue<storage::Txn>& queue_;
  SpareOps* const spare_;
  Pipeline* const pipeline_;
  const PlannedHook& hook_;
  RowHome* const row_;
  const uint32_t me_;
  planner::Planner planner_;
  planner::RowPlanner row_planner_;
  std::vector<planner::PlannedSlice> subs_;
  planner::ReplicaEncoder replica_;
  planner::ReplicaEncoder* const encode_;
  const size_t slice_max_;
  std::vector<storage::Txn> txns_;
};

}  // namespace

void LocalPlanner::PlannerLoop(uint32_t me) {
  PlannerThread thread(opt_, queue_, &spare_, pipeline_, hook_, me);
  RowHome* const row = opt_.row;
  for (uint64_t b = opt_.first_batch;; ++b) {
    BatchState s;
    {
      MutexUniqueLock lk(mu_);
      token_cv_.wait(lk.native(), [&]() REQUIRES(mu_) { return stop_ || end_known_ || (token_batch_ == b && token_planner_ == me); });
      // The token reaches (end_batch_, 0) last, so a planner still waiting is past the end.
      if (stop_ || end_known_) return;
      if (me == 0) {
        batch_closed_ = false;
        batch_deadline_ns_ = 0;
      }
      s.closed = batch_closed_;
      s.deadline = batch_deadline_ns_;
    }
    // Holding the token, claim the slice: while batches_in_flight batches are in flight this
    // waits, nobody pops, and Submit blocks on the full queue (back-pressure).
    planner::PlannedSlice* out = nullptr;
    if (row != nullptr) {
      if (!row->BeginHomeSlice(b, me)) {
        Halt();  // the node failed or stopped: take no more input
        return;
      }
    } else if ((out = pipeline_->BeginSlice(b, me)) == nullptr) {
      Halt();  // the pipeline failed or stopped: take no more input
      return;
    }

    // This planner alone pops from the client queue now.
    thread.Pop(b, &s, &input_ended_);
    // The batch opened when its first txn was taken (planner 0 set the deadline then).
    const int64_t cut_ns = s.deadline > 0 ? std::max<int64_t>(0, NowNanos() - (s.deadline - opt_.batch_timeout_ns)) : 0;

    {
      MutexLock lk(mu_);
      if (stop_) return;
      if (s.end_of_input) {
        end_known_ = true;
        end_batch_ = b;
      } else {
        if (me == 0) batch_deadline_ns_ = s.deadline;
        if (s.closed && !batch_closed_) {
          batch_closed_ = true;
          if (s.timed_out) ++closed_by_timeout_;
        }
        if (me + 1 < opt_.planners) {
          token_planner_ = me + 1;
        } else {
          token_planner_ = 0;
          token_batch_ = b + 1;
        }
      }
    }
    token_cv_.notify_all();
    if (s.end_of_input) {
      if (row == nullptr) pipeline_->EndInput(b);  // a row's end is the RowHome's to tell
      return;
    }

    // Planning runs in parallel with the next planner's popping.
    thread.Plan(b, out, cut_ns);
  }
}

}  // namespace qrstore::engine
