#include "cluster/follow/follower_feed.h"

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "common/codec.h"
#include "common/logging.h"
#include "executor/abort_resolver.h"
#include "planner/eq.h"
#include "planner/input_slice.h"
#include "planner/write_slice.h"

namespace qrstore::cluster {

namespace {
constexpr char kEndMagic[4] = {'Q', 'E', 'N', 'D'};
}  // namespace

std::string EncodeEndMarker(uint64_t end) {
  Writer w(16);
  w.PutRaw(kEndMagic, sizeof kEndMagic);
  w.PutU64(end);
  return w.Release();
}

bool DamageEntryForTest(std::string* bytes) {
  if (bytes->size() <= 8) return false;
  (*bytes)[bytes->size() / 2] ^= 0x5a;
  bytes->resize(bytes->size() - 5);
  return true;
}

bool DecodeEndMarker(std::string_view bytes, uint64_t* end) {
  if (bytes.size() != sizeof kEndMagic + 8 || bytes.substr(0, sizeof kEndMagic) != std::string_view(kEndMagic, 4)) {
    return false;
  }
  Reader r(bytes.substr(sizeof kEndMagic));
  return r.GetU64(end);
}

FollowerFeed::FollowerFeed(FollowerFeedOptions options, engine::Pipeline* pipeline, replication::Replicator* replicator,
                           std::function<void(uint64_t end)> on_end, std::function<void()> on_resume)
    : opt_(options),
      pipeline_(pipeline),
      replicator_(replicator),
      on_end_(std::move(on_end)),
      on_resume_(std::move(on_resume)),
      planner_(opt_.ranges) {
  QR_CHECK(opt_.planners >= 1 && opt_.window >= 1);
  QR_CHECK(!((opt_.plan_input || opt_.apply_writes) && opt_.row), "a row's streams carry planned sub-slices");
  QR_CHECK(!(opt_.plan_input && opt_.apply_writes), "a stream carries inputs or writes, not both");
  QR_CHECK(!opt_.row_writes || (opt_.row && opt_.batch_end_stream), "row_writes is a row follower's with records");
  for (uint32_t p = 0; p < opt_.planners; ++p) {
    streams_.push_back(std::make_unique<Stream>());
    streams_.back()->applied = opt_.first_batch;
  }
  limit_.assign(opt_.planners, UINT64_MAX);
  complete_ = opt_.first_batch;
}

FollowerFeed::~FollowerFeed() { Stop(); }

Status FollowerFeed::Start() {
  for (uint32_t p = 0; p < opt_.planners; ++p) {
    for (uint64_t b = opt_.first_batch; b < opt_.first_batch + opt_.window; ++b) Request(p, b);
    streams_[p]->thread = NamedThread("replay-" + std::to_string(p), [this, p] { Loop(p); });
  }
  return Status::Ok();
}

void FollowerFeed::Stop() {
  {
    MutexLock lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& s : streams_) s->thread.Join();
}

Status FollowerFeed::health() const {
  MutexLock lk(mu_);
  return health_;
}

bool FollowerFeed::ended(uint64_t* end) const {
  MutexLock lk(mu_);
  return EndedLocked(end);
}

bool FollowerFeed::EndedLocked(uint64_t* end) const {
  if (opt_.continue_after_end) {
    // Every stream's last applied batch is the marker, the same batch on each.
    for (const auto& s : streams_) {
      if (!s->at_marker || s->applied != streams_[0]->applied) return false;
    }
    if (end != nullptr) *end = streams_[0]->applied - 1;
    return true;
  }
  if (ended_ && end != nullptr) *end = end_;
  return ended_;
}

bool FollowerFeed::WaitEnded(int64_t timeout_ms, uint64_t* end) {
  MutexUniqueLock lk(mu_);
  cv_.wait_for(lk.native(), std::chrono::milliseconds(timeout_ms),
               [&]() REQUIRES(mu_) { return stop_ || !health_.ok() || EndedLocked(nullptr); });
  return EndedLocked(end);
}

bool FollowerFeed::ApplyMarker(uint32_t p, uint64_t b) {
  planner::PlannedSlice* slice = pipeline_->BeginSlice(b, p);
  if (slice == nullptr) return false;  // the pipeline failed, stopped or ended
  slice->Reset(b, p, opt_.executors);
  pipeline_->PublishSlice(b, p, 0, /*replicated=*/true);
  bool now_ended = false;
  uint64_t end = 0;
  {
    MutexLock lk(mu_);
    streams_[p]->applied = b + 1;
    streams_[p]->at_marker = true;
    now_ended = EndedLocked(&end);
  }
  cv_.notify_all();  // WaitEnded, DrainTo
  if (now_ended) {
    Logger("follower")->info("the leader's input ended at batch {}: applied as an empty batch; the group goes on "
                             "after it under whoever leads next",
                             end);
    if (on_end_) on_end_(end);
  }
  return true;
}

uint64_t FollowerFeed::received_batches() const {
  MutexLock lk(mu_);
  uint64_t least = UINT64_MAX;
  for (const auto& s : streams_) least = std::min(least, s->applied);
  return least;
}

Status FollowerFeed::LimitLocked(const std::vector<uint64_t>& next) {
  for (uint32_t p = 0; p < opt_.planners; ++p) {
    if (streams_[p]->applied > next[p]) {
      return Status::Corruption("stream " + std::to_string(p) + " applied batches up to " +
                                std::to_string(streams_[p]->applied) + ", past the end of the replicated log (" +
                                std::to_string(next[p]) + ")");
    }
  }
  limit_ = next;
  return Status::Ok();
}

Status FollowerFeed::DrainTo(const std::vector<uint64_t>& next, int64_t timeout_ms) {
  QR_CHECK_EQ(next.size(), streams_.size());
  MutexUniqueLock lk(mu_);
  QR_RETURN_IF_ERROR(LimitLocked(next));
  cv_.notify_all();
  auto done = [&]() REQUIRES(mu_) {
    for (uint32_t p = 0; p < opt_.planners; ++p) {
      if (streams_[p]->applied < limit_[p]) return false;
    }
    return true;
  };
  cv_.wait_for(lk.native(), std::chrono::milliseconds(timeout_ms),
               [&]() REQUIRES(mu_) { return stop_ || !health_.ok() || ended_ || done(); });
  if (!health_.ok()) return health_;
  if (ended_ && !opt_.continue_after_end) return Status::Unavailable("the leader's end marker (batch " + std::to_string(end_) + ") arrived: "
                                                "the group was stopping");
  if (done()) return Status::Ok();
  if (stop_) return Status::Aborted("the feed stopped");
  std::string shortfall;
  for (uint32_t p = 0; p < opt_.planners; ++p) {
    if (streams_[p]->applied < limit_[p]) {
      shortfall += (shortfall.empty() ? "" : ", ") + std::string("stream ") + std::to_string(p) + " at batch " +
                   std::to_string(streams_[p]->applied) + " of " + std::to_string(limit_[p]);
    }
  }
  return Status::Timeout("the replicated batches did not all arrive within " + std::to_string(timeout_ms) + " ms (" +
                         shortfall + ")");
}

Status FollowerFeed::CollectFrom(const std::vector<uint64_t>& next, int64_t timeout_ms, uint64_t* first,
                                 std::vector<std::vector<std::string>>* entries) {
  QR_CHECK(opt_.batch_end_stream, "CollectFrom on a feed without batch-end records");
  QR_CHECK_EQ(next.size(), streams_.size());
  const uint64_t d = std::max(opt_.first_batch, *std::min_element(next.begin(), next.end()));
  std::vector<uint64_t> requested(opt_.planners);
  {
    MutexLock lk(mu_);
    QR_RETURN_IF_ERROR(LimitLocked(next));
    // Loop(p) asked for [applied, applied + window) so far.
    for (uint32_t p = 0; p < opt_.planners; ++p) requested[p] = streams_[p]->applied + opt_.window;
  }
  cv_.notify_all();
  // The entries beyond the feed's window: every one the log holds.
  for (uint32_t p = 0; p < opt_.planners; ++p) {
    for (uint64_t b = requested[p]; b < next[p]; ++b) Request(p, b);
  }
  MutexUniqueLock lk(mu_);
  auto done = [&]() REQUIRES(mu_) {
    for (uint32_t p = 0; p < opt_.planners; ++p) {
      const Stream& s = *streams_[p];
      // Every batch below d applied (the records' stream may apply further: its values and
      // results of batches >= d reach a pipeline that will not run them), every entry from
      // there to the log's end here.
      if (s.applied < d) return false;
      for (uint64_t b = std::max(s.applied, d); b < next[p]; ++b) {
        if (s.inbox.count(b) == 0) return false;
      }
    }
    return true;
  };
  cv_.wait_for(lk.native(), std::chrono::milliseconds(timeout_ms),
               [&]() REQUIRES(mu_) { return stop_ || !health_.ok() || ended_ || done(); });
  if (!health_.ok()) return health_;
  if (ended_) return Status::Unavailable("the leader's end marker (batch " + std::to_string(end_) + ") arrived: the group was stopping");
  if (stop_) return Status::Aborted("the feed stopped");
  if (!done()) {
    std::string shortfall;
    for (uint32_t p = 0; p < opt_.planners; ++p) {
      shortfall += (p == 0 ? "" : ", ") + std::string("stream ") + std::to_string(p) + " applied " +
                   std::to_string(streams_[p]->applied) + " of " + std::to_string(next[p]);
    }
    return Status::Timeout("the replicated batches did not all arrive within " + std::to_string(timeout_ms) + " ms (" +
                           shortfall + ")");
  }
  entries->assign(opt_.planners, {});
  for (uint32_t p = 0; p < opt_.planners; ++p) {
    Stream& s = *streams_[p];
    for (uint64_t b = d; b < next[p]; ++b) {
      if (b < s.applied) continue;  // the records' stream: applied here already, yet logged
      const auto& got = s.inbox.at(b);
      if (!got.first.ok()) {
        const std::string what = "receiving batch " + std::to_string(b) + " of stream " + std::to_string(p) + ": " +
                                 got.first.message();
        return got.first.code() == StatusCode::kCorruption ? Status::Corruption(what) : Status::Unavailable(what);
      }
      (*entries)[p].emplace_back(got.second.view());
    }
  }
  *first = d;
  return Status::Ok();
}

void FollowerFeed::Request(uint32_t p, uint64_t batch) {
  replication::ReplicateMeta meta;
  meta.group = opt_.group;
  meta.planner = p;
  meta.batch_id = batch;
  // Library thread: store and notify, nothing else.
  replicator_->ReceiveData(meta, [this, p](const replication::ReplicateMeta& m, Status status, SharedBytes bytes) {
    {
      MutexLock lk(mu_);
      if (streams_[p]->inbox.emplace(m.batch_id, std::make_pair(std::move(status), std::move(bytes))).second &&
          opt_.batch_end_stream && m.batch_id >= complete_) {
        // Batch b is complete once every stream's entry of it arrived (each arrives once).
        if (++arrived_[m.batch_id] == opt_.planners) {
          while (!arrived_.empty() && arrived_.begin()->first == complete_ && arrived_.begin()->second == opt_.planners) {
            arrived_.erase(arrived_.begin());
            ++complete_;
          }
        }
      }
    }
    cv_.notify_all();
  });
}

void FollowerFeed::StopWith(Status status) {
  Logger("follower")->error("{}", status.ToString());
  // The pipeline first: whoever sees the feed's error sees the apply stopped too.
  pipeline_->Fail(status);
  {
    MutexLock lk(mu_);
    if (health_.ok()) health_ = std::move(status);
  }
  cv_.notify_all();
}

void FollowerFeed::Loop(uint32_t p) {
  Stream& s = *streams_[p];
  for (uint64_t b = opt_.first_batch;; ++b) {
    std::pair<Status, SharedBytes> got;
    std::shared_ptr<Given> given;  // row_writes: batch b's record
    {
      MutexUniqueLock lk(mu_);
      // A row follower's sub-slices of batch b wait until every stream's entry of b arrived,
      // its leader's record included (written after b executed there): every batch this node
      // starts is one its leader finished and its log holds whole, so a follower that starts
      // leading (docs/partitioned-rows.md 9.5) has run exactly the batches below some D (the
      // first its log lacks a part of) and nothing of D or later.
      const bool gated = opt_.batch_end_stream && !RecordStream(p);
      // Under writes a sub-slice takes its fates from its batch's record: it waits for it too.
      const bool needs_record = gated && opt_.row_writes;
      cv_.wait(lk.native(), [&]() REQUIRES(mu_) {
        return stop_ || !health_.ok() || b >= limit_[p] ||
               (s.inbox.count(b) != 0 && (!gated || complete_ > b) && (!needs_record || given_.count(b) != 0));
      });
      if (stop_ || !health_.ok() || b >= limit_[p]) return;
      auto it = s.inbox.find(b);
      got = std::move(it->second);
      s.inbox.erase(it);
      if (needs_record) given = given_.at(b);
    }
    const std::string where = "batch " + std::to_string(b) + ", planner " + std::to_string(p);
    if (!got.first.ok()) {
      if (got.first.code() == StatusCode::kAborted) return;  // the replicator is stopping
      StopWith(Status(got.first.code() == StatusCode::kCorruption
                          ? Status::Corruption("follower: receiving " + where + ": " + got.first.message())
                          : Status::Unavailable("follower: receiving " + where + ": " + got.first.message())));
      return;
    }
    uint64_t end = 0;
    if (DecodeEndMarker(got.second.view(), &end)) {
      if (end != b) {
        StopWith(Status::Corruption("follower: end marker for batch " + std::to_string(end) + " delivered as " + where));
        return;
      }
      if (opt_.continue_after_end) {
        if (!ApplyMarker(p, b)) return;
        Request(p, b + opt_.window);
        continue;
      }
      bool first = false;
      {
        MutexLock lk(mu_);
        first = !ended_;
        ended_ = true;
        end_ = end;
      }
      Logger("follower")->info("leader's input ended at batch {} (stream {})", end, p);
      pipeline_->EndInput(end);
      if (first && on_end_) on_end_(end);
      return;
    }
    if (RecordStream(p)) {
      if (!ApplyBatchEnd(b, got.second.view())) return;
      {
        MutexLock lk(mu_);
        s.applied = b + 1;
      }
      Request(p, b + opt_.window);
      continue;
    }
    planner::PlannedSlice* slice = pipeline_->BeginSlice(b, p);
    if (slice == nullptr) return;  // the pipeline failed, stopped or ended
    const int64_t t0 = NowNanos();
    std::string_view bytes = got.second.view();
    std::string part;  // a row's own part of a home bundle: `bytes` points into it
    Status st;
    if (opt_.row && opt_.row_part) {
      bool replaced = false;
      st = opt_.row_part(b, p, bytes, &part, &replaced);
      if (st.ok() && replaced) bytes = part;
    }
    if (st.ok() && opt_.plan_input) {
      st = PlanInput(p, b, bytes, slice);
    } else if (st.ok() && opt_.apply_writes) {
      st = planner::DecodeWriteSlice(bytes, opt_.record_bytes, opt_.ranges, b, p, slice);
    } else if (st.ok()) {
      st = planner::DecodeSlice(bytes, slice);
      if (st.ok()) st = planner::ValidateSlice(*slice, opt_.ranges, b, p, opt_.row ? &opt_.place : nullptr);
    }
    if (st.ok() && given != nullptr) {
      MakeGiven(given->rec, p == 0, slice);
      MutexLock lk(mu_);
      if (++given->taken + 1 == opt_.planners) given_.erase(b);  // every sub-slice took its part
    }
    if (!st.ok()) {
      StopWith(Status::Corruption("follower: bad " +
                                  std::string(opt_.plan_input ? "input" : opt_.apply_writes ? "writes" : "slice") + " (" + where +
                                  "), apply stopped: " + st.message()));
      return;
    }
    pipeline_->PublishSlice(b, p, NowNanos() - t0, /*replicated=*/true);
    bool draining = false, resumed = false;
    {
      MutexLock lk(mu_);
      resumed = EndedLocked(nullptr);
      s.applied = b + 1;
      s.at_marker = false;
      draining = limit_[p] != UINT64_MAX;
    }
    if (draining) cv_.notify_all();  // DrainTo waits for this
    if (resumed) {
      Logger("follower")->info("batch {} followed the leader's end marker: the group went on", b);
      if (on_resume_) on_resume_();
    }
    Request(p, b + opt_.window);
  }
}

Status FollowerFeed::PlanInput(uint32_t p, uint64_t b, std::string_view bytes, planner::PlannedSlice* slice) {
  std::vector<storage::Txn>& txns = streams_[p]->txns;
  uint64_t batch = 0;
  uint32_t planner = 0;
  QR_RETURN_IF_ERROR(planner::DecodeInputSlice(bytes, &batch, &planner, &txns));
  if (batch != b || planner != p) {
    return Status::Corruption("it is the input of batch " + std::to_string(batch) + ", planner " + std::to_string(planner));
  }
  // Any decoded input plans into a slice that passes ValidateSlice here: the keys are mapped by
  // this node's own ranges, and the slots are the planner's.
  planner_.PlanSlice(b, p, txns, slice);
  return Status::Ok();
}

bool FollowerFeed::ApplyBatchEnd(uint64_t b, std::string_view bytes) {
  FeedBatchEnd rec;
  Status st = opt_.row_record ? opt_.row_record(b, bytes, &rec) : Status::Corruption("no decoder for batch-end records");
  const uint32_t slices = opt_.planners - 1;
  for (size_t i = 0; st.ok() && i < rec.values.size(); ++i) {
    if (rec.values[i].slice >= slices) st = Status::Corruption("a value for slice " + std::to_string(rec.values[i].slice));
  }
  if (st.ok() && opt_.row_writes != rec.writes) {
    st = Status::Corruption(rec.writes ? "an entry of writes (this node runs another replication.point)"
                                       : "not an entry of writes (replication.point is writes: every node of the "
                                         "row must run it)");
  }
  if (st.ok() && rec.writes) {
    if (rec.record_bytes != opt_.record_bytes) {
      st = Status::Corruption("records of " + std::to_string(rec.record_bytes) + " bytes, this node's are " +
                              std::to_string(opt_.record_bytes));
    } else if (!rec.keys.empty() && rec.keys.size() != opt_.ranges.buckets()) {
      st = Status::Corruption(std::to_string(rec.keys.size()) + " ranges of images for " +
                              std::to_string(opt_.ranges.buckets()) + " executor ranges");
    }
    for (uint32_t r = 0; st.ok() && r < rec.keys.size(); ++r) {
      for (const storage::Key k : rec.keys[r]) {
        if (opt_.ranges.Of(k) != r || opt_.place.partitions.Of(k) != opt_.place.partition) {
          st = Status::Corruption("key " + std::to_string(k) + " is not in executor range " + std::to_string(r) +
                                  " of partition " + std::to_string(opt_.place.partition));
          break;
        }
      }
    }
  }
  if (!st.ok()) {
    StopWith(Status::Corruption("follower: bad batch-end record of batch " + std::to_string(b) +
                                ", apply stopped: " + st.message()));
    return false;
  }
  if (rec.writes) {
    // Its sub-slices take their fates and images from it (MakeGiven); nothing is delivered.
    {
      MutexLock lk(mu_);
      auto g = std::make_shared<Given>();
      g->rec = std::move(rec);
      given_[b] = std::move(g);
    }
    cv_.notify_all();
    // The next record only once b may enter the pipeline: what waits in given_ stays bounded.
    if (!pipeline_->AwaitBatch(b)) return false;
    return pipeline_->health().ok();
  }
  // Within the pipeline's window for values and results: b may enter.
  if (!pipeline_->AwaitBatch(b)) return false;
  // A value may come before its sub-slice is published (the pipeline keeps it); the pipeline
  // checks each against its slot (a kDepRecv's, filled once) and fails on any other.
  for (const FeedBatchEnd::Value& v : rec.values) pipeline_->DeliverDepValue(b, v.slice, v.slot, v.value);
  // Every record, also a batch that turns out not to need one (it may have committed already:
  // the result is then dropped).
  pipeline_->DeliverResolved(b, std::move(rec.fired), std::move(rec.aborted));
  return pipeline_->health().ok();
}

void FollowerFeed::MakeGiven(const FeedBatchEnd& rec, bool images, planner::PlannedSlice* slice) {
  // Its txns stay (the commit stage's outcomes, sessions); nothing is left to run.
  for (auto& eq : slice->eqs) eq.clear();
  slice->dep_slots = 0;
  slice->read_slots = 0;
  slice->may_abort = false;
  planner::SliceWrites& w = slice->writes;
  w.given = true;
  w.fates.assign(slice->txns.size(), static_cast<uint8_t>(executor::Fate::kCommit));
  for (size_t i = 0; i < slice->txns.size(); ++i) {
    planner::TxnContext& t = slice->txns[i];
    const executor::RowTxn id{slice->planner, t.home_index};
    if (std::binary_search(rec.fired.begin(), rec.fired.end(), id)) {
      w.fates[i] = static_cast<uint8_t>(executor::Fate::kLogic);
    } else if (std::binary_search(rec.aborted.begin(), rec.aborted.end(), id)) {
      w.fates[i] = static_cast<uint8_t>(executor::Fate::kCascade);
    }
    t.fragments = 0;
    t.dep_begin = t.deps = 0;
    t.read_begin = t.reads = 0;
    t.may_abort = false;
  }
  w.keys.clear();
  w.images.clear();
  if (images) {
    w.keys = rec.keys;
    w.images = rec.images;
  }
}

}  // namespace qrstore::cluster
