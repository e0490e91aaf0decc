// RowNode, the exchange with the pipeline: sub-slices fed in row order, dependency values and
// votes sent to the peers, outcomes reported to each home, and a leader's batch-end records.
#include "cluster/row/row_node.h"

#include <algorithm>
#include <thread>
#include <tuple>
#include <utility>

#include "commit/committer.h"
#include "common/clock.h"
#include "common/logging.h"
#include "planner/eq.h"
#include "planner/row_planner.h"

namespace qrstore::cluster {

namespace {
// Dependency values held back for one destination before they go out as one message.
constexpr size_t kMaxHeldValues = 4096;
}  // namespace

// ---- the pipeline's side ------------------------------------------------------------------------

void RowNode::FeedLoop() {
  for (uint64_t b = opt_.pipeline.first_batch;; ++b) {
    for (uint32_t s = 0; s < slices_; ++s) {
      Inbound in;
      {
        MutexUniqueLock lk(mu_);
        fed_batch_ = b;
        fed_slice_ = s;
        cv_.wait(lk.native(), [&]() REQUIRES(mu_) {
          return Halted() || inbox_.count({b, s}) != 0 || (row_end_known_ && b >= row_end_);
        });
        if (Halted()) return;
        auto it = inbox_.find({b, s});
        if (it == inbox_.end()) return;  // the row ended
        in = std::move(it->second);
        inbox_.erase(it);
        auto& e = empty_[b];
        if (e.empty()) e.assign(slices_, 0);
        e[s] = in.slice.txns.empty() ? 1 : 0;
      }
      planner::PlannedSlice* slot = pipeline_->BeginSlice(b, s);
      if (slot == nullptr) return;  // failed or stopped
      std::swap(*slot, in.slice);
      pipeline_->PublishSlice(b, s, in.plan_ns, /*replicated=*/!opt_.replicate);
      if (opt_.replicate && s < logged_next_.size() && b < logged_next_[s]) {
        // A successor's entry from its group's log: replicated already.
        pipeline_->MarkReplicated(b, s);
      } else if (opt_.replicate && OwnStream(s)) {
        // Its bundle was proposed when it was planned; its confirmation may have come already.
        bool replicated = false;
        {
          MutexLock lk(mu_);
          replicated = replicated_early_.erase({b, s}) != 0;
          if (!replicated) published_own_.insert({b, s});
        }
        if (replicated) pipeline_->MarkReplicated(b, s);
      } else if (opt_.replicate) {
        // The slice may be executing already: only the bytes, which the pipeline never reads, go on.
        opt_.replicate(b, s, std::move(in.bytes));
      }
    }
  }
}

void RowNode::SendDep(uint32_t partition, uint64_t batch, uint32_t slice, uint32_t slot, int64_t value) {
  Outbox& o = *outbox_[partition];
  MutexLock lk(o.mu);
  if (!o.msg.values.empty() && (o.msg.batch != batch || o.msg.slice != slice)) FlushLocked(partition, o);
  o.msg.batch = batch;
  o.msg.slice = slice;
  o.msg.values.push_back(RowDepValue{slot, value});
  if (o.msg.values.size() >= kMaxHeldValues) FlushLocked(partition, o);
}

void RowNode::FlushLocked(uint32_t to, Outbox& o) {
  if (o.msg.values.empty()) return;
  values_sent_.fetch_add(o.msg.values.size(), std::memory_order_relaxed);
  if (opt_.replicate_writes && opt_.replicate && !opt_.follower) {
    // Its batch's entry carries it, for a follower that takes this node's place.
    MutexLock lk(rec_mu_);
    auto& v = rec_sent_[o.msg.batch];
    for (const RowDepValue& d : o.msg.values) v.push_back(RowSentValue{to, o.msg.slice, d.slot, d.value});
  }
  SendToPeer(to, o.msg.batch, EncodeRowMessage(o.msg));
  o.msg.values.clear();
}

void RowNode::Flush() {
  for (uint32_t p = 0; p < nparts_; ++p) {
    if (p == opt_.partition) continue;
    Outbox& o = *outbox_[p];
    MutexLock lk(o.mu);
    FlushLocked(p, o);
  }
}

void RowNode::SendVotes(uint32_t partition, uint64_t batch, uint32_t round, const std::vector<executor::RowTxn>& ids) {
  if (opt_.replicate && !opt_.follower) {
    // The batch's record carries this node's votes round by round (the same ids go to every
    // peer: recorded at the first): a follower that takes its place re-sends them (9.5).
    MutexLock lk(rec_mu_);
    auto& v = rec_votes_[batch];
    if (v.size() == round) v.push_back(ids);
  }
  SendToPeer(partition, batch, EncodeRowMessage(RowVotes{batch, opt_.partition, round, ids}));
}

void RowNode::OnSubSliceOutcomes(const std::vector<commit::TxnOutcome>& v) {
  if (v.empty()) return;
  if (opt_.own_outcomes && OwnStream(v.front().pos.planner)) opt_.own_outcomes(v);
  // Under writes a follower ran no reads: the reports it keeps are its leader's (KeepWrites).
  if (opt_.follower && opt_.replicate_writes) return;
  if (opt_.follower) {
    MutexLock lk(mu_);
    auto& r = reported_[v.front().pos.batch];
    if (r.empty()) r.assign(slices_, 0);
    r[v.front().pos.planner] = 1;
  }
  commit::RowSliceReport r;
  r.txns.reserve(v.size());
  size_t bytes = 0;
  for (const auto& o : v) bytes += o.values.size();
  r.values.reserve(bytes);
  for (const auto& o : v) r.Add(o.home_index, o.status, o.values);
  Report(v.front().pos.planner, v.front().pos.batch, std::move(r));
}

void RowNode::Report(uint32_t slice, uint64_t b, commit::RowSliceReport report) {
  const uint32_t home = slice / per_home_;
  if (home == opt_.partition && !opt_.follower) {
    commit_->Report(opt_.partition, b, slice, std::move(report));
    if (Status st = commit_->health(); !st.ok()) Fail(st);
    return;
  }
  SendToPeer(home, b, EncodeRowMessage(RowReport{b, slice, opt_.partition, std::move(report)}));
}

void RowNode::OnBatch(const commit::BatchInfo& info) {
  std::vector<uint8_t> empties;
  {
    MutexLock lk(mu_);
    auto it = empty_.find(info.batch);
    if (it != empty_.end()) {
      empties = std::move(it->second);
      empty_.erase(it);
    }
    if (opt_.follower) {
      // A follower's feed is not this node's: the sub-slices of the batch that got no sink call
      // are the empty ones.
      empties.assign(slices_, 1);
      if (auto r = reported_.find(info.batch); r != reported_.end()) {
        for (uint32_t s = 0; s < slices_; ++s) empties[s] = r->second[s] != 0 ? 0 : 1;
        reported_.erase(r);
      }
    }
    committed_ = info.batch + 1;
  }
  cv_.notify_all();
  // Sub-slices that listed no txn got no sink call: their (empty) reports go now (a follower
  // under writes keeps its leader's instead).
  if (opt_.follower && opt_.replicate_writes) empties.clear();
  for (uint32_t s = 0; s < empties.size(); ++s) {
    if (empties[s] != 0) Report(s, info.batch, commit::RowSliceReport{});
  }
  if (on_batch_) on_batch_(info);
  if (opt_.follower) {
    // What a successor may owe its peers for batches it ran as a follower: a peer is at most a
    // couple of batch windows behind the batch its leader executed last (section 9.5).
    const uint64_t keep = 4 * uint64_t{opt_.pipeline.batches_in_flight} + 8;
    if (info.batch + 1 > keep) {
      for (uint32_t p = 0; p < nparts_; ++p) TrimRetained(p, info.batch + 1 - keep);
    }
  }
  MaybeSendDurable();
  MaybeFinish();
}

void RowNode::MaybeFinish() {
  uint64_t end = 0;
  {
    MutexLock lk(mu_);
    if (!row_end_known_ || committed_ < row_end_ || Halted()) return;
    end = row_end_;
  }
  if (!opt_.follower) {
    MutexLock lk(home_mu_);
    if (next_home_batch_ < end) return;
  }
  if (finished_sent_.exchange(true)) return;
  Logger("row")->info("[partition {}] finished: every batch before {} committed and answered", opt_.partition, end);
  Broadcast(EncodeRowMessage(RowControl{opt_.partition, RowControlKind::kFinished, end}));
  {
    MutexLock lk(mu_);  // orders the flag before a waiter's predicate check
  }
  cv_.notify_all();
}

void RowNode::OnHomeSlice(uint64_t b, uint32_t slice, commit::RowHomeSlice&& v) {
  DeliverHomeSlice(b, slice, std::move(v));
  MaybeFinish();
}

void RowNode::DeliverHomeSlice(uint64_t b, uint32_t slice, commit::RowHomeSlice&& v) {
  const uint32_t t = slice - opt_.partition * per_home_;
  MutexLock lk(home_mu_);
  if (b != next_home_batch_ || t != next_home_planner_) {
    early_.emplace(std::make_pair(b, t), std::move(v));  // completed before an earlier one: held (bounded by RowCommit's pending)
    return;
  }
  auto deliver = [&](uint64_t batch, uint32_t planner, const commit::RowHomeSlice& h) REQUIRES(home_mu_) {
    outcomes_.clear();
    outcomes_.reserve(h.txns.size());
    for (uint32_t i = 0; i < h.txns.size(); ++i) {
      const commit::RowHomeOutcome& o = h.txns[i];
      commit::TxnOutcome x;
      x.txn_id = o.txn_id;
      x.client = o.client;
      x.status = o.status;
      x.pos = commit::PlannedPos{batch, opt_.partition * per_home_ + planner, i};
      x.reads = opt_.record_bytes == 0 ? 0 : o.values_size / opt_.record_bytes;
      x.values = h.ValuesOf(o);
      x.home_index = i;
      if (o.status == commit::TxnStatus::kCommitted) {
        ++home_committed_;
      } else {
        ++home_aborted_;
      }
      outcomes_.push_back(x);
    }
    ++home_slices_;
    if (!outcomes_.empty()) sink_(outcomes_);
    if (++next_home_planner_ == per_home_) {
      next_home_planner_ = 0;
      ++next_home_batch_;
    }
  };
  deliver(b, t, v);
  for (auto it = early_.begin(); it != early_.end() && it->first == std::make_pair(next_home_batch_, next_home_planner_);
       it = early_.erase(it)) {
    deliver(it->first.first, it->first.second, it->second);
  }
}

// ---- Rule 2: the batch-end record (a leader with followers) -----------------------------------

Status RowNode::RecordValues(const RowDepValues& m) {
  // Only batches the pipeline may still take a value for (it fails the node on any other).
  const uint64_t committed = pipeline_->committed_batches();
  if (repeats_.load()) {
    // After a resume a peer's successor re-sends values this node has: those of a batch whose
    // record is built are not recorded again (the pipeline checks they repeat what it used).
    MutexLock lk(rec_mu_);
    if (m.batch < rec_done_) return Status::Ok();
  }
  if (m.batch < committed || m.batch >= committed + 2 * uint64_t{opt_.pipeline.batches_in_flight}) {
    return Status::Corruption("dependency values for batch " + std::to_string(m.batch) + ", outside the window from " +
                              std::to_string(committed));
  }
  if (m.slice >= slices_) return Status::Corruption("dependency values for slice " + std::to_string(m.slice));
  MutexLock lk(rec_mu_);
  auto& v = rec_values_[m.batch];
  for (const RowDepValue& d : m.values) v.push_back(RowBatchEndValue{m.slice, d.slot, d.value});
  return Status::Ok();
}

void RowNode::OnBatchExecuted(uint64_t b) {
  MaybeCrash("executed", b);
  // Executor thread. Every kDepRecv slot of batch b was filled before its executors finished,
  // and RecordValues ran before each value was delivered: the record has every value.
  RowBatchEnd rec;
  rec.batch = b;
  rec.partition = opt_.partition;
  {
    MutexLock lk(rec_mu_);
    rec_done_ = b + 1;
    if (auto it = rec_values_.find(b); it != rec_values_.end()) {
      rec.values = std::move(it->second);
      rec_values_.erase(it);
    }
    if (auto it = rec_resolved_.find(b); it != rec_resolved_.end()) {
      rec.fired = std::move(it->second.first);
      rec.aborted = std::move(it->second.second);
      rec_resolved_.erase(it);
    }
    if (auto it = rec_votes_.find(b); it != rec_votes_.end()) {
      rec.votes = std::move(it->second);
      rec_votes_.erase(it);
    }
  }
  std::sort(rec.values.begin(), rec.values.end(),
            [](const RowBatchEndValue& x, const RowBatchEndValue& y) { return std::tie(x.slice, x.slot) < std::tie(y.slice, y.slot); });
  if (repeats_.load()) {
    // A repeat of a value (the same slot, the same value) is recorded once; a different one
    // stays, and fails below (the pipeline refuses it too).
    rec.values.erase(std::unique(rec.values.begin(), rec.values.end(),
                                 [](const RowBatchEndValue& x, const RowBatchEndValue& y) {
                                   return x.slice == y.slice && x.slot == y.slot && x.value == y.value;
                                 }),
                     rec.values.end());
  }
  for (size_t i = 1; i < rec.values.size(); ++i) {
    if (rec.values[i].slice == rec.values[i - 1].slice && rec.values[i].slot == rec.values[i - 1].slot) {
      // The pipeline refuses the second one (filled twice) and fails the node; it may not have
      // yet when this batch finished, and the record must not carry it (nor would it encode).
      Fail(Status::Corruption("batch " + std::to_string(b) + ": a dependency value received twice for slice " +
                              std::to_string(rec.values[i].slice) + " slot " + std::to_string(rec.values[i].slot)));
      return;
    }
  }
  RowBatchWrites writes;
  if (opt_.replicate_writes) {
    MutexLock lk(rec_mu_);
    if (auto it = rec_writes_.find(b); it != rec_writes_.end()) {
      writes = std::move(it->second);
      rec_writes_.erase(it);
    }
    if (auto it = rec_sent_.find(b); it != rec_sent_.end()) {
      writes.sent = std::move(it->second);
      rec_sent_.erase(it);
    }
  }
  const uint32_t rs = batch_end_stream();
  if (rs < logged_next_.size() && b < logged_next_[rs]) {
    // A successor re-executed a batch whose record its group's log holds already (its
    // predecessor logged it; a part of the batch was missing from the log): not logged again.
    MarkReplicated(b, rs);
    RecordHanded(b);
    return;
  }
  if (opt_.replicate_writes) {
    // Under writes the entry is all a follower gets of the batch: every batch waits for it.
    std::sort(writes.sent.begin(), writes.sent.end(), [](const RowSentValue& x, const RowSentValue& y) {
      return std::tie(x.to, x.slice, x.slot) < std::tie(y.to, y.slice, y.slot);
    });
    writes.end = std::move(rec);
    batch_end_records_.fetch_add(1, std::memory_order_relaxed);
    opt_.replicate(b, batch_end_stream(), EncodeRowMessage(writes));
    RecordHanded(b);
    return;
  }
  // Votes alone do not make it wait: a follower needs them only for a batch it ran, whose record
  // its log holds by then (one whose record was lost is run again by the successor, voting).
  const bool empty = rec.values.empty() && rec.fired.empty() && rec.aborted.empty();
  // Every batch has a record, so a follower's stream has no gaps; an empty one tells it nothing
  // it could not work out, so the batch need not wait for it (docs/partitioned-rows.md 9.4).
  if (empty) {
    pipeline_->MarkBatchEnd(b);
  } else {
    batch_end_records_.fetch_add(1, std::memory_order_relaxed);
  }
  opt_.replicate(b, batch_end_stream(), EncodeRowMessage(rec));
  RecordHanded(b);
}

void RowNode::OnBatchWrites(const executor::ExecutorStageOptions::BatchWrites& w) {
  RowBatchWrites e;
  e.record_bytes = opt_.record_bytes;
  // Nothing written: no ranges (the entry stays small).
  bool any = false;
  for (const auto& k : *w.keys) any = any || !k.empty();
  if (any) {
    e.keys = *w.keys;
    e.images = *w.images;
  }
  // The reports of the peers' home slices, as OnSubSliceOutcomes will build and send them at
  // commit (and an empty one for a sub-slice that listed no txn, as OnBatch sends).
  std::vector<commit::TxnOutcome> outcomes;
  for (uint32_t s = 0; s < w.slices.size(); ++s) {
    if (s / per_home_ == opt_.partition) continue;
    commit::BuildSliceOutcomes(*w.slices[s], *w.fates, 0, &outcomes, s < w.reads.size() ? w.reads[s] : std::string_view(),
                               opt_.record_bytes);
    commit::RowSliceReport r;
    for (const auto& o : outcomes) r.Add(o.home_index, o.status, o.values);
    e.reports.push_back(EncodeRowMessage(RowReport{w.batch, s, opt_.partition, std::move(r)}));
  }
  MutexLock lk(rec_mu_);
  rec_writes_[w.batch] = std::move(e);
}

void RowNode::RecordHanded(uint64_t b) {
  {
    MutexLock lk(mu_);
    if (b + 1 > records_handed_.load()) records_handed_.store(b + 1);
  }
  cv_.notify_all();
}

}  // namespace qrstore::cluster
