#include "engine/local_planner.h"

#include <chrono>
#include <optional>
#include <string>

#include "common/clock.h"
#include "planner/planner.h"
#include "planner/replica_encoder.h"
#include "planner/row_planner.h"

namespace qrstore::cluster {

LocalPlanner::LocalPlanner(LocalPlannerOptions options, Pipeline* pipeline, PlannedHook hook)
    : opt_(options), pipeline_(pipeline), hook_(std::move(hook)), queue_(options.client_queue_txns) {
  QR_CHECK(opt_.planners >= 1 && opt_.planners <= opt_.batch_txns);
  QR_CHECK((pipeline_ == nullptr) == (opt_.row != nullptr), "a planner feeds a pipeline or a row home, exactly one");
  token_batch_ = opt_.first_batch;
}

LocalPlanner::~LocalPlanner() { Stop(); }

Status LocalPlanner::Start() {
  {
    std::lock_guard<std::mutex> lk(mu_);
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
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  queue_.Close();
  token_cv_.notify_all();
}

uint64_t LocalPlanner::batches_closed_by_timeout() const {
  std::lock_guard<std::mutex> lk(mu_);
  return closed_by_timeout_;
}
bool LocalPlanner::ended() const {
  std::lock_guard<std::mutex> lk(mu_);
  return end_known_;
}
uint64_t LocalPlanner::end_batch() const {
  std::lock_guard<std::mutex> lk(mu_);
  return end_batch_;
}

void LocalPlanner::PlannerLoop(uint32_t me) {
  planner::Planner planner(opt_.ranges);
  RowHome* const row = opt_.row;
  planner::RowPlanner row_planner(row != nullptr ? opt_.partitions : storage::KeyMapper(), opt_.ranges, opt_.row_partition);
  std::vector<planner::PlannedSlice> subs;
  planner::ReplicaEncoder replica;
  planner::ReplicaEncoder* const encode = opt_.encode_for_replicas ? &replica : nullptr;
  // Slices of one batch add up to exactly batch_txns, whatever the planner count.
  const size_t slice_max = opt_.batch_txns / opt_.planners + (me < opt_.batch_txns % opt_.planners ? 1 : 0);
  std::vector<storage::Txn> txns;
  txns.reserve(slice_max);
  uint64_t b = opt_.first_batch;
  // After a pop into txns[before..]: the session check (it may take some out again).
  auto admit = [&](size_t before) {
    if (opt_.admit && txns.size() > before) opt_.admit(b, me, &txns, before);
  };
  for (;; ++b) {
    bool closed = false;
    int64_t deadline = 0;
    {
      std::unique_lock<std::mutex> lk(mu_);
      token_cv_.wait(lk, [&] { return stop_ || end_known_ || (token_batch_ == b && token_planner_ == me); });
      // The token reaches (end_batch_, 0) last, so a planner still waiting is past the end.
      if (stop_ || end_known_) return;
      if (me == 0) {
        batch_closed_ = false;
        batch_deadline_ns_ = 0;
      }
      closed = batch_closed_;
      deadline = batch_deadline_ns_;
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
    bool end_of_input = false;
    bool timed_out = false;
    if (!closed) {
      if (me == 0 && row == nullptr) {
        // A batch starts with its first txn; idle planners block here (Close wakes them).
        std::optional<storage::Txn> first = queue_.Pop();
        if (first) {
          txns.push_back(std::move(*first));
          admit(0);
          deadline = NowNanos() + opt_.batch_timeout_ns;
        } else {
          end_of_input = true;
        }
      } else if (me == 0) {
        // A row home: the batch starts with its first txn or when a peer planned it already.
        uint64_t seen = queue_.kicks();
        for (;;) {
          if (queue_.closed() && queue_.size() == 0) {
            // Input over: say so once, then plan empty batches while a peer needs them.
            if (!input_ended_) {
              input_ended_ = true;
              row->InputEnded(b);
            }
            if (row->NeedBatch(b)) {
              closed = true;
            } else {
              end_of_input = true;
            }
            break;
          }
          if (row->PeerOpened(b)) {
            queue_.TryPopMany(&txns, slice_max);
            admit(0);
            closed = true;
            break;
          }
          std::optional<storage::Txn> first = queue_.PopUnlessKicked(&seen, std::chrono::seconds(1));
          if (first) {
            txns.push_back(std::move(*first));
            admit(0);
            deadline = NowNanos() + opt_.batch_timeout_ns;
            break;
          }
        }
      }
      while (!end_of_input && !closed && txns.size() < slice_max) {
        // Take whatever is queued in one go; block (up to the deadline) only when empty.
        const size_t before = txns.size();
        if (queue_.TryPopMany(&txns, slice_max - txns.size()) > 0) {
          admit(before);
          continue;
        }
        const int64_t left = deadline - NowNanos();
        if (row != nullptr && row->PeerOpened(b)) {
          closed = true;  // a peer planned this batch: close it with what is here
          break;
        }
        std::optional<storage::Txn> t;
        if (left <= 0) {
          t = queue_.TryPop();
        } else if (row != nullptr) {
          uint64_t seen = queue_.kicks();
          t = queue_.PopUnlessKicked(&seen, std::chrono::nanoseconds(left));
          if (!t && !queue_.closed() && NowNanos() < deadline) continue;  // kicked: look again
        } else {
          // Sleep until the slice can be filled or the deadline: woken once, not per request.
          const size_t need = slice_max - txns.size();
          if (queue_.PopManyFor(&txns, need, need, std::chrono::nanoseconds(left)) > 0) {
            admit(before);
            continue;
          }
        }
        if (t) {
          txns.push_back(std::move(*t));
          admit(before);
          continue;
        }
        if (queue_.closed()) {
          closed = true;  // CloseInput/Stop: input closed and drained
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
      } else {
        if (me == 0) batch_deadline_ns_ = deadline;
        if (closed && !batch_closed_) {
          batch_closed_ = true;
          if (timed_out) ++closed_by_timeout_;
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
    if (end_of_input) {
      if (row == nullptr) pipeline_->EndInput(b);  // a row's end is the RowHome's to tell
      return;
    }

    // Planning runs in parallel with the next planner's popping.
    const int64_t t0 = NowNanos();
    if (row != nullptr) {
      row_planner.PlanSlices(b, opt_.row_partition * opt_.planners + me, txns, &subs);
      row->HomeSlicePlanned(b, me, &subs, &txns, NowNanos() - t0);
      txns.clear();
      if (txns.capacity() < slice_max) txns.reserve(slice_max);
      continue;
    }
    planner.PlanSlice(b, me, txns, out, encode);
    const int64_t plan_ns = NowNanos() - t0;
    txns.clear();
    pipeline_->PublishSlice(b, me, plan_ns, /*replicated=*/!hook_);
    // `out` is read-only from here on: executors may be running it (Finish only reads it).
    if (hook_) hook_(*out, encode != nullptr ? encode->Finish(*out) : std::string());
  }
}

}  // namespace qrstore::cluster
