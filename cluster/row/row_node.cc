// RowNode's lifecycle: construction, Start (the row's handshake), the watch thread (peers' silence,
// failover), and the end (WaitFinished, Fail, Stop). Its other sides: row_home.cc (a home's
// emission), row_exchange.cc (the pipeline's exchange with the peers, batch-end records),
// row_dispatch.cc (what the peers send), row_failover.cc (resuming after a lost peer).
#include "cluster/row/row_node.h"

#include <algorithm>
#include <thread>
#include <tuple>
#include <utility>

#include "common/clock.h"
#include "common/logging.h"
#include "planner/eq.h"
#include "planner/input_slice.h"
#include "planner/row_planner.h"

namespace qrstore::cluster {

RowNode::RowNode(RowNodeOptions options, storage::Table* table, commit::CommitSink sink, commit::BatchHook on_batch,
                 std::function<void(const Status&)> on_failure, std::function<void(uint32_t)> on_row_ending)
    : opt_(std::move(options)),
      nparts_(opt_.partitions.buckets()),
      per_home_(opt_.pipeline.planners),
      slices_(nparts_ * per_home_),
      sink_(std::move(sink)),
      on_batch_(std::move(on_batch)),
      on_failure_(std::move(on_failure)),
      on_row_ending_(std::move(on_row_ending)) {
  QR_CHECK(nparts_ >= 2 && opt_.partition < nparts_ && opt_.peer_addresses.size() == nparts_,
           "a row node needs >= 2 partitions and an address for each");
  engine::PipelineOptions po = opt_.pipeline;
  po.planners = slices_;
  po.row_sender = this;
  po.row_partitions = nparts_;
  po.row_partition = opt_.partition;
  if (opt_.follower) {
    // Rule 2 (docs/partitioned-rows.md 9.4): a follower replays its partition from its group's
    // log alone: its leader's batch-end records bring the values it received and its abort
    // results (the caller's FollowerFeed delivers them); it sends nothing and has no row peers.
    // What its run would send its leader's peers (dependency values, reports of their home
    // slices) it keeps for the last few batch windows instead (Retained, trimmed in OnBatch): if
    // it starts leading, it re-sends what its predecessor may not have (docs/partitioned-rows.md
    // 9.5). It never votes: its leader's records bring the abort results.
    po.row_resolved_by_leader = true;
  } else if (opt_.replicate) {
    // A leader with followers logs a batch-end record per batch (OnBatchExecuted); a batch
    // commits once that is replicated too (nothing to wait for when it is empty).
    po.batch_end_gate = true;
    po.on_row_resolved = [this](uint64_t b, const std::vector<executor::RowTxn>& fired,
                                const std::vector<executor::RowTxn>& aborted) {
      MutexLock lk(rec_mu_);
      rec_resolved_[b] = {fired, aborted};
    };
    po.on_batch_executed = [this](uint64_t b) { OnBatchExecuted(b); };
    if (opt_.replicate_writes) {
      po.capture_writes = true;
      po.on_batch_writes = [this](const executor::ExecutorStageOptions::BatchWrites& w) { OnBatchWrites(w); };
    }
  }
  // Homes answer their clients' reads from every partition's report; a follower builds the same
  // reports for its leader's peers (kept, see above).
  po.capture_reads = true;
  po.deliver_outcomes = true;
  po.executors_wait_for_replication = po.executors_wait_for_replication && opt_.replicate != nullptr;
  pipeline_ = std::make_unique<engine::Pipeline>(
      po, table, [this](const std::vector<commit::TxnOutcome>& v) { OnSubSliceOutcomes(v); },
      [this](const commit::BatchInfo& info) { OnBatch(info); });
  if (!opt_.follower) {
    engine::LocalPlannerOptions lpo = opt_.planner;
    lpo.planners = per_home_;
    lpo.ranges = opt_.pipeline.ranges;
    lpo.row = this;
    lpo.partitions = opt_.partitions;
    lpo.row_partition = opt_.partition;
    lpo.encode_for_replicas = false;
    if (opt_.successor) {
      // It plans from N: the first batch none of its own streams' logs holds (docs 9.5).
      QR_CHECK(opt_.resume.next.size() == slices_ + 1 && opt_.resume.entries.size() == slices_ + 1,
               "a successor's resume needs every stream of its group");
      first_own_ = opt_.pipeline.first_batch;
      for (uint32_t t = 0; t < per_home_; ++t) {
        first_own_ = std::max(first_own_, opt_.resume.next[opt_.partition * per_home_ + t]);
      }
      logged_next_ = opt_.resume.next;
      lpo.first_batch = first_own_;
    }
    planner_ = std::make_unique<engine::LocalPlanner>(lpo, nullptr);
    commit_ = std::make_unique<commit::RowCommit>(
        opt_.partitions, opt_.record_bytes,
        [this](uint64_t b, uint32_t s, commit::RowHomeSlice&& v) { OnHomeSlice(b, s, std::move(v)); });
  }
  if (!opt_.follower) {
    RowTransportOptions to;
    to.me = opt_.partition;
    to.addresses = opt_.peer_addresses;
    to.net = opt_.net;
    to.tolerate_peer_loss = opt_.failover_timeout_ms > 0;
    to.epoch = opt_.term;
    transport_ = std::make_unique<RowTransport>(
        to, [this](uint32_t from, std::string_view f) { OnFrame(from, f); }, [this](const Status& s) { Fail(s); },
        [this](uint32_t p, const Status& why) { OnPeerLost(p, why); });
  }
  for (uint32_t p = 0; p < nparts_; ++p) outbox_.push_back(std::make_unique<Outbox>());
  if (opt_.replicate || opt_.follower) {
    for (uint32_t p = 0; p < nparts_; ++p) retained_.push_back(std::make_unique<Retained>());
  }
  committed_ = records_next_ = durable_sent_ = fed_batch_ = opt_.pipeline.first_batch;
  // A successor's batches below D have their records in its group's log already: values a peer
  // re-sends for them (its own successor running them again) are not recorded (RecordValues).
  rec_done_ = opt_.pipeline.first_batch;
  records_handed_.store(opt_.pipeline.first_batch);
  lost_ns_.assign(nparts_, 0);
  peer_term_.assign(nparts_, 0);
  if (opt_.successor) {
    // Its predecessor's home slices are its clients' to retry: answered by nobody here; the
    // peers re-send what its predecessor had from them, and it re-executes from D: repeats.
    commit_->AcceptRepeats(first_own_);
    pipeline_->AcceptRepeats();
    repeats_.store(true);
    next_home_batch_ = first_own_;
    for (uint32_t p = 0; p < nparts_ && p < opt_.resume.kept.size(); ++p) {
      for (const auto& [b, frame] : opt_.resume.kept[p]) Retain(p, b, frame);
    }
  }
  ends_.assign(nparts_, -1);
  finished_.assign(nparts_, 0);
  last_heard_ns_ = std::make_unique<std::atomic<int64_t>[]>(nparts_);
}

RowNode::~RowNode() { Stop(); }

Status RowNode::Start() {
  QR_CHECK(!started_, "RowNode::Start twice");
  started_ = true;
  if (opt_.follower) return pipeline_->Start();  // fed by the caller's FollowerFeed; no row peers
  QR_RETURN_IF_ERROR(transport_->Listen());
  if (opt_.successor) {
    QR_RETURN_IF_ERROR(SeedFromLog());
    QR_RETURN_IF_ERROR(Handshake());
  } else {
    QR_RETURN_IF_ERROR(transport_->Connect(opt_.connect_timeout_ms));
  }
  const int64_t now = NowNanos();
  for (uint32_t p = 0; p < nparts_; ++p) last_heard_ns_[p].store(now);
  QR_RETURN_IF_ERROR(pipeline_->Start());
  watcher_ = NamedThread("row-watch", [this] { WatchLoop(); });
  feeder_ = NamedThread("row-feed", [this] { FeedLoop(); });
  if (opt_.replicate) sender_ = NamedThread("row-send", [this] { SendLoop(); });
  if (opt_.failover_timeout_ms > 0) resumer_ = NamedThread("row-resume", [this] { ResumeLoop(); });
  if (opt_.successor) {
    // Its own streams that stop short of N get empty home slices (replicated, then sent, as
    // Rule 1 says), so every stream of the row goes on from N; nobody answers them.
    planner::RowPlanner pads(opt_.partitions, opt_.pipeline.ranges, opt_.partition);
    for (uint32_t t = 0; t < per_home_; ++t) {
      const uint32_t s = opt_.partition * per_home_ + t;
      for (uint64_t b = logged_next_[s]; b < first_own_; ++b) {
        std::vector<planner::PlannedSlice> subs;
        pads.PlanSlices(b, s, {}, &subs);
        EmitHomeSlice(b, t, &subs, 0, opt_.replicate_input ? planner::EncodeInputSlice(b, s, {}) : std::string());
      }
    }
  }
  return planner_->Start();
}

void RowNode::WatchLoop() {
  const int64_t timeout_ns = opt_.peer_timeout_ms * 1'000'000;
  const auto beat = std::chrono::milliseconds(std::max<int64_t>(1, opt_.peer_timeout_ms / 5));
  std::vector<uint8_t> warned(nparts_, 0);
  MutexUniqueLock lk(mu_);
  while (!Halted()) {
    cv_.wait_for(lk.native(), beat, [&] { return Halted(); });
    if (Halted()) return;
    const uint64_t committed = committed_;
    std::vector<uint8_t> finished = finished_;
    lk.Unlock();
    Broadcast(EncodeRowMessage(RowControl{opt_.partition, RowControlKind::kHeartbeat, committed}));
    const int64_t now = NowNanos();
    std::vector<int64_t> lost;
    {
      MutexLock lk2(mu_);
      lost = lost_ns_;
    }
    for (uint32_t p = 0; p < nparts_; ++p) {
      if (p == opt_.partition || finished[p] != 0) continue;  // a finished peer may go quiet
      if (lost[p] != 0) {
        // Failover: its group elects a successor, which resumes (Resumed); bounded.
        if (now - lost[p] >= opt_.failover_timeout_ms * 1'000'000) {
          Fail(Status::Unavailable("row peer " + std::to_string(p) + " (" + opt_.peer_addresses[p] +
                                   ") was lost and no successor resumed its place within " +
                                   std::to_string(opt_.failover_timeout_ms) + " ms (row.failover_timeout_ms); batch " +
                                   std::to_string(committed) + " is the next to commit here"));
          lk.Lock();
          return;
        }
        continue;
      }
      const int64_t silent = now - last_heard_ns_[p].load(std::memory_order_relaxed);
      if (silent >= timeout_ns && opt_.failover_timeout_ms > 0) {
        OnPeerLost(p, Status::Unavailable("row peer " + std::to_string(p) + " (" + opt_.peer_addresses[p] +
                                          ") sent nothing for " + std::to_string(silent / 1'000'000) + " ms"));
        continue;
      }
      if (silent >= timeout_ns) {
        Fail(Status::Unavailable("row peer " + std::to_string(p) + " (" + opt_.peer_addresses[p] + ") sent nothing for " +
                                 std::to_string(silent / 1'000'000) + " ms (row.peer_timeout_ms " +
                                 std::to_string(opt_.peer_timeout_ms) + "): unreachable or hung; batch " +
                                 std::to_string(committed) + " is the next to commit here"));
        lk.Lock();
        return;
      }
      if (silent >= timeout_ns / 2 && warned[p] == 0) {
        warned[p] = 1;
        Logger("row")->warn("[partition {}] nothing from row peer {} ({}) for {} ms; batch {} next to commit here",
                            opt_.partition, p, opt_.peer_addresses[p], silent / 1'000'000, committed);
      } else if (silent < timeout_ns / 2) {
        warned[p] = 0;
      }
    }
    lk.Lock();
  }
}

// ---- the end ----------------------------------------------------------------------------------

Status RowNode::WaitFinished(int64_t timeout_ms) {
  const int64_t deadline = NowNanos() + timeout_ms * 1'000'000;
  auto left_ms = [&] { return std::max<int64_t>(0, (deadline - NowNanos()) / 1'000'000); };
  Status idle = pipeline_->WaitIdle(timeout_ms);
  if (!idle.ok()) {
    if (idle.code() != StatusCode::kTimeout) return health().ok() ? idle : health();
    std::string waiting;
    {
      MutexLock lk(mu_);
      for (uint32_t p = 0; p < nparts_; ++p) {
        if (ends_[p] < 0) waiting += (waiting.empty() ? "" : ", ") + std::to_string(p);
      }
    }
    return Status::Timeout("the row's end was not reached within " + std::to_string(timeout_ms) + " ms (" +
                           std::to_string(pipeline_->committed_batches()) + " batches committed" +
                           (waiting.empty() ? "" : "; partitions whose input has not ended: " + waiting) + ")");
  }
  {
    MutexUniqueLock lk(mu_);
    if (!cv_.wait_for(lk.native(), std::chrono::milliseconds(left_ms()),
                      [&] { return Halted() || finished_sent_.load(); }) ||
        Halted()) {
      lk.Unlock();
      if (!health().ok()) return health();
      uint64_t next = 0;
      {
        MutexLock hk(home_mu_);
        next = next_home_batch_;
      }
      return Status::Timeout("home slices of batch " + std::to_string(next) + " not reported by every partition in time");
    }
  }
  MutexUniqueLock lk(mu_);
  auto all_finished = [&]() REQUIRES(mu_) {
    if (opt_.follower) return true;  // no row peers
    for (uint32_t p = 0; p < nparts_; ++p) {
      if (p != opt_.partition && finished_[p] == 0) return false;
    }
    return true;
  };
  const bool woken = cv_.wait_for(lk.native(), std::chrono::milliseconds(left_ms()),
                                  [&]() REQUIRES(mu_) { return Halted() || all_finished(); });
  if (!woken || !all_finished()) {
    lk.Unlock();
    if (!health().ok()) return health();
    return Status::Timeout("not every row peer finished in time");
  }
  if (!opt_.follower && opt_.replicate) {
    // Every committed batch's record is on its way before the caller replicates end markers.
    const uint64_t committed = pipeline_->committed_batches();
    if (!cv_.wait_for(lk.native(), std::chrono::milliseconds(left_ms()),
                      [&] { return Halted() || records_handed_.load() >= committed; }) ||
        Halted()) {
      lk.Unlock();
      if (!health().ok()) return health();
      return Status::Timeout("batch-end records below batch " + std::to_string(committed) + " not handed over in time");
    }
  }
  return Status::Ok();
}

void RowNode::Fail(const Status& s) {
  if (failed_.exchange(true)) return;
  {
    MutexLock lk(mu_);
    health_ = s;
  }
  Logger("row")->error("[partition {}] {}", opt_.partition, s.ToString());
  cv_.notify_all();
  pipeline_->Fail(s);
  if (planner_) planner_->Kick();
  if (on_failure_) on_failure_(s);
}

void RowNode::Stop() {
  if (stop_.exchange(true)) return;
  {
    MutexLock lk(mu_);
  }
  cv_.notify_all();
  if (planner_) planner_->CloseInput();
  if (transport_) transport_->Stop();  // writers blocked on a peer and readers return
  pipeline_->Stop();   // executors waiting for a peer's values, the feed in BeginSlice
  if (planner_) planner_->Stop();
  feeder_.Join();
  watcher_.Join();
  sender_.Join();
  resumer_.Join();
}

Status RowNode::health() const {
  {
    MutexLock lk(mu_);
    if (!health_.ok()) return health_;
  }
  if (Status st = pipeline_->health(); !st.ok()) return st;
  return commit_ ? commit_->health() : Status::Ok();
}

void RowNode::SetEnd(uint64_t end) {
  QR_CHECK(opt_.follower, "SetEnd on a leader (its end comes from the homes)");
  {
    MutexLock lk(mu_);
    if (row_end_known_) return;
    row_end_known_ = true;
    row_end_ = end;
  }
  cv_.notify_all();
  MaybeFinish();
}

RowNodeStats RowNode::row_stats() const {
  RowNodeStats s;
  {
    MutexLock lk(home_mu_);
    s.home_committed = home_committed_;
    s.home_aborted = home_aborted_;
    s.home_slices = home_slices_;
  }
  if (transport_) {
    s.frames_sent = transport_->frames_sent();
    s.bytes_sent = transport_->bytes_sent();
  }
  s.values_sent = values_sent_.load();
  s.batch_end_records = batch_end_records_.load();
  s.resumes = resumes_done_.load();
  return s;
}

bool RowNode::row_end_known(uint64_t* end) const {
  MutexLock lk(mu_);
  if (row_end_known_) *end = row_end_;
  return row_end_known_;
}

}  // namespace qrstore::cluster
