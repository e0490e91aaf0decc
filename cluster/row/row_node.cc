#include "cluster/row/row_node.h"

#include <algorithm>
#include <thread>
#include <tuple>
#include <utility>

#include "common/clock.h"
#include "common/logging.h"
#include "planner/eq.h"
#include "planner/row_planner.h"

namespace qrstore::cluster {

namespace {
// Dependency values held back for one destination before they go out as one message.
constexpr size_t kMaxHeldValues = 4096;
}  // namespace

RowNode::RowNode(RowNodeOptions options, storage::Table* table, commit::CommitSink sink, BatchHook on_batch,
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
  PipelineOptions po = opt_.pipeline;
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
      std::lock_guard<std::mutex> lk(rec_mu_);
      rec_resolved_[b] = {fired, aborted};
    };
    po.on_batch_executed = [this](uint64_t b) { OnBatchExecuted(b); };
  }
  // Homes answer their clients' reads from every partition's report; a follower builds the same
  // reports for its leader's peers (kept, see above).
  po.capture_reads = true;
  po.deliver_outcomes = true;
  po.executors_wait_for_replication = po.executors_wait_for_replication && opt_.replicate != nullptr;
  pipeline_ = std::make_unique<Pipeline>(
      po, table, [this](const std::vector<commit::TxnOutcome>& v) { OnSubSliceOutcomes(v); },
      [this](const BatchInfo& info) { OnBatch(info); });
  if (!opt_.follower) {
    LocalPlannerOptions lpo = opt_.planner;
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
    planner_ = std::make_unique<LocalPlanner>(lpo, nullptr);
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
        EmitHomeSlice(b, t, &subs, 0);
      }
    }
  }
  return planner_->Start();
}

// ---- the home's side: planning ----------------------------------------------------------------

bool RowNode::BeginHomeSlice(uint64_t b, uint32_t) {
  // The node's batch window: batch b is planned once b - batches_in_flight committed here.
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return Halted() || committed_ + opt_.pipeline.batches_in_flight > b; });
  return !Halted();
}

bool RowNode::PeerOpened(uint64_t b) const { return peer_opened_fast_.load() >= static_cast<int64_t>(b); }

void RowNode::HomeSlicePlanned(uint64_t b, uint32_t planner, std::vector<planner::PlannedSlice>* subs,
                               std::vector<storage::Txn>* txns, int64_t plan_ns) {
  commit_->Plan(b, opt_.partition * per_home_ + planner, std::move(*txns));
  EmitHomeSlice(b, planner, subs, plan_ns);
}

void RowNode::EmitHomeSlice(uint64_t b, uint32_t planner, std::vector<planner::PlannedSlice>* subs, int64_t plan_ns) {
  const uint32_t s = opt_.partition * per_home_ + planner;
  if (!opt_.replicate) {
    // No followers: nothing to make durable first; the parts go out at once.
    for (uint32_t p = 0; p < nparts_; ++p) {
      if (p == opt_.partition) continue;
      transport_->Send(p, EncodeRowMessage(RowSubSlice{b, s, opt_.partition, planner::EncodeSlice((*subs)[p])}));
    }
  }
  // Rule 1: the whole home slice goes to this home's group first; its parts leave for the peers
  // once that is confirmed (MarkReplicated). Its own part runs at once, speculatively.
  std::string bundle;
  HomeSend send;
  if (opt_.replicate) {
    RowHomeBundle hb{b, s, opt_.partition, std::vector<std::string>(nparts_)};
    send.batch = b;
    send.frames.resize(nparts_);
    for (uint32_t p = 0; p < nparts_; ++p) {
      const planner::PlannedSlice& sub = (*subs)[p];
      if (p == opt_.partition) {
        // Reads count in the cascade when the slice may abort: followers need them then.
        hb.parts[p] = planner::EncodeSlice(sub, sub.may_abort ? planner::SliceEncoding::kFull : planner::SliceEncoding::kWithoutReads);
      } else {
        hb.parts[p] = planner::EncodeSlice(sub);  // as the peer gets it (a later leader re-sends these bytes)
        send.frames[p] = EncodeRowMessage(RowSubSlice{b, s, opt_.partition, hb.parts[p]});
      }
    }
    bundle = EncodeRowMessage(hb);
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    Inbound& in = inbox_[{b, s}];
    std::swap(in.slice, (*subs)[opt_.partition]);
    in.plan_ns = plan_ns;
    if (opt_.replicate) held_[{b, s}] = std::move(send);
  }
  cv_.notify_all();
  if (opt_.replicate) {
    MaybeCrash("before_bundle", b);
    opt_.replicate(b, s, std::move(bundle));  // this stream's batches come in order: one planner
    MaybeCrash("bundle_proposed", b);
  }
}

void RowNode::MarkReplicated(uint64_t batch, uint32_t slice) {
  if (opt_.replicate && slice == batch_end_stream()) {
    pipeline_->MarkBatchEnd(batch);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (batch >= records_next_) records_early_.insert(batch);
      while (!records_early_.empty() && *records_early_.begin() == records_next_) {
        records_early_.erase(records_early_.begin());
        ++records_next_;
      }
    }
    // The peers hear of it at the next commit (MaybeSendDurable): not from this thread, the
    // replication backend's, which must never wait on a row peer's socket.
    return;
  }
  if (!opt_.replicate || !OwnStream(slice)) {
    pipeline_->MarkReplicated(batch, slice);
    return;
  }
  bool published = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto h = held_.find({batch, slice}); h != held_.end()) {
      to_send_.push_back(std::move(h->second));
      held_.erase(h);
    }
    // The pipeline takes the confirmation only for a slice it holds: before the feed published
    // it, the feed passes it on.
    published = published_own_.erase({batch, slice}) != 0;
    if (!published) replicated_early_.insert({batch, slice});
  }
  cv_.notify_all();
  if (published) pipeline_->MarkReplicated(batch, slice);
}

void RowNode::SendLoop() {
  for (;;) {
    HomeSend hs;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return Halted() || !to_send_.empty(); });
      if (Halted()) return;
      hs = std::move(to_send_.front());
      to_send_.pop_front();
    }
    MaybeCrash("before_send", hs.batch);
    for (uint32_t p = 0; p < hs.frames.size(); ++p) {
      if (!hs.frames[p].empty() && !SendToPeer(p, hs.batch, std::move(hs.frames[p]))) return;  // failed or stopped
    }
    MaybeCrash("after_send", hs.batch);
  }
}

bool RowNode::NoteEndLocked(uint32_t who, uint64_t b) {
  ends_[who] = static_cast<int64_t>(b);
  if (row_end_known_) return false;
  int64_t end = 0;
  for (int64_t e : ends_) {
    if (e < 0) return false;
    end = std::max(end, e);
  }
  row_end_known_ = true;
  row_end_ = static_cast<uint64_t>(end);
  Logger("row")->info("[partition {}] the row ends at batch {}", opt_.partition, row_end_);
  return true;
}

void RowNode::InputEnded(uint64_t b) {
  // Stop() closes the planner's input too: a node that stops (or failed) tells the row nothing.
  if (Halted()) return;
  bool known = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    known = NoteEndLocked(opt_.partition, b);
  }
  cv_.notify_all();
  if (known) pipeline_->EndInput(row_end_);
  Logger("row")->info("[partition {}] input ended at batch {}: telling the row", opt_.partition, b);
  Broadcast(EncodeRowMessage(RowControl{opt_.partition, RowControlKind::kInputEnded, b}));
  MaybeFinish();
}

bool RowNode::NeedBatch(uint64_t b) {
  std::unique_lock<std::mutex> lk(mu_);
  const auto bb = static_cast<int64_t>(b);
  cv_.wait(lk, [&] { return Halted() || peer_opened_ >= bb || (row_end_known_ && row_end_ <= b); });
  return !Halted() && peer_opened_ >= bb;
}

void RowNode::Broadcast(const std::string& frame) {
  if (!transport_) return;  // a follower has no row peers
  for (uint32_t p = 0; p < nparts_; ++p) {
    if (p != opt_.partition) transport_->Send(p, frame);
  }
}

// ---- the pipeline's side ------------------------------------------------------------------------

void RowNode::FeedLoop() {
  for (uint64_t b = opt_.pipeline.first_batch;; ++b) {
    for (uint32_t s = 0; s < slices_; ++s) {
      Inbound in;
      {
        std::unique_lock<std::mutex> lk(mu_);
        fed_batch_ = b;
        fed_slice_ = s;
        cv_.wait(lk, [&] {
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
          std::lock_guard<std::mutex> lk(mu_);
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
  std::lock_guard<std::mutex> lk(o.mu);
  if (!o.msg.values.empty() && (o.msg.batch != batch || o.msg.slice != slice)) FlushLocked(partition, o);
  o.msg.batch = batch;
  o.msg.slice = slice;
  o.msg.values.push_back(RowDepValue{slot, value});
  if (o.msg.values.size() >= kMaxHeldValues) FlushLocked(partition, o);
}

void RowNode::FlushLocked(uint32_t to, Outbox& o) {
  if (o.msg.values.empty()) return;
  values_sent_.fetch_add(o.msg.values.size(), std::memory_order_relaxed);
  SendToPeer(to, o.msg.batch, EncodeRowMessage(o.msg));
  o.msg.values.clear();
}

void RowNode::Flush() {
  for (uint32_t p = 0; p < nparts_; ++p) {
    if (p == opt_.partition) continue;
    Outbox& o = *outbox_[p];
    std::lock_guard<std::mutex> lk(o.mu);
    FlushLocked(p, o);
  }
}

void RowNode::SendVotes(uint32_t partition, uint64_t batch, uint32_t round, const std::vector<executor::RowTxn>& ids) {
  if (opt_.replicate && !opt_.follower) {
    // The batch's record carries this node's votes round by round (the same ids go to every
    // peer: recorded at the first): a follower that takes its place re-sends them (9.5).
    std::lock_guard<std::mutex> lk(rec_mu_);
    auto& v = rec_votes_[batch];
    if (v.size() == round) v.push_back(ids);
  }
  SendToPeer(partition, batch, EncodeRowMessage(RowVotes{batch, opt_.partition, round, ids}));
}

void RowNode::OnSubSliceOutcomes(const std::vector<commit::TxnOutcome>& v) {
  if (v.empty()) return;
  if (opt_.own_outcomes && OwnStream(v.front().pos.planner)) opt_.own_outcomes(v);
  if (opt_.follower) {
    std::lock_guard<std::mutex> lk(mu_);
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

void RowNode::OnBatch(const BatchInfo& info) {
  std::vector<uint8_t> empties;
  {
    std::lock_guard<std::mutex> lk(mu_);
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
  // Sub-slices that listed no txn got no sink call: their (empty) reports go now.
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
    std::lock_guard<std::mutex> lk(mu_);
    if (!row_end_known_ || committed_ < row_end_ || Halted()) return;
    end = row_end_;
  }
  if (!opt_.follower) {
    std::lock_guard<std::mutex> lk(home_mu_);
    if (next_home_batch_ < end) return;
  }
  if (finished_sent_.exchange(true)) return;
  Logger("row")->info("[partition {}] finished: every batch before {} committed and answered", opt_.partition, end);
  Broadcast(EncodeRowMessage(RowControl{opt_.partition, RowControlKind::kFinished, end}));
  {
    std::lock_guard<std::mutex> lk(mu_);  // orders the flag before a waiter's predicate check
  }
  cv_.notify_all();
}

void RowNode::OnHomeSlice(uint64_t b, uint32_t slice, commit::RowHomeSlice&& v) {
  DeliverHomeSlice(b, slice, std::move(v));
  MaybeFinish();
}

void RowNode::DeliverHomeSlice(uint64_t b, uint32_t slice, commit::RowHomeSlice&& v) {
  const uint32_t t = slice - opt_.partition * per_home_;
  std::lock_guard<std::mutex> lk(home_mu_);
  if (b != next_home_batch_ || t != next_home_planner_) {
    early_.emplace(std::make_pair(b, t), std::move(v));  // completed before an earlier one: held (bounded by RowCommit's pending)
    return;
  }
  auto deliver = [&](uint64_t batch, uint32_t planner, const commit::RowHomeSlice& h) {
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
    std::lock_guard<std::mutex> lk(rec_mu_);
    if (m.batch < rec_done_) return Status::Ok();
  }
  if (m.batch < committed || m.batch >= committed + 2 * uint64_t{opt_.pipeline.batches_in_flight}) {
    return Status::Corruption("dependency values for batch " + std::to_string(m.batch) + ", outside the window from " +
                              std::to_string(committed));
  }
  if (m.slice >= slices_) return Status::Corruption("dependency values for slice " + std::to_string(m.slice));
  std::lock_guard<std::mutex> lk(rec_mu_);
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
    std::lock_guard<std::mutex> lk(rec_mu_);
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
  const uint32_t rs = batch_end_stream();
  if (rs < logged_next_.size() && b < logged_next_[rs]) {
    // A successor re-executed a batch whose record its group's log holds already (its
    // predecessor logged it; a part of the batch was missing from the log): not logged again.
    MarkReplicated(b, rs);
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

void RowNode::RecordHanded(uint64_t b) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (b + 1 > records_handed_.load()) records_handed_.store(b + 1);
  }
  cv_.notify_all();
}

// ---- what the peers send ---------------------------------------------------------------------

void RowNode::OnFrame(uint32_t from, std::string_view frame) {
  last_heard_ns_[from].store(NowNanos(), std::memory_order_relaxed);
  if (Halted()) return;
  Status st = HandleFrame(from, frame);
  if (!st.ok()) {
    // Whatever the defect, the row cannot go on with this peer: the node fails, naming it.
    Fail(Status::Corruption("row peer " + std::to_string(from) + " (" + opt_.peer_addresses[from] + "): " + st.message()));
  }
}

Status RowNode::HandleFrame(uint32_t from, std::string_view frame) {
  auto kind = PeekRowMessage(frame);
  if (!kind.ok()) return kind.status();
  auto check_from = [&](uint32_t claimed) {
    return claimed == from ? Status::Ok()
                           : Status::Corruption("a message claiming to come from partition " + std::to_string(claimed));
  };
  switch (kind.value()) {
    case RowMsgKind::kSubSlice: {
      RowSubSlice m;
      QR_RETURN_IF_ERROR(DecodeRowMessage(frame, &m));
      QR_RETURN_IF_ERROR(check_from(m.from));
      const std::string what = "sub-slice (" + std::to_string(m.batch) + ", " + std::to_string(m.slice) + "): ";
      if (m.slice / per_home_ != from || m.slice >= slices_) return Status::Corruption(what + "not one of its slices");
      {
        std::lock_guard<std::mutex> lk(mu_);
        // A home plans batch b once b - batches_in_flight committed on it, which needs this
        // node's sub-slices of it, planned once b - 2 * batches_in_flight committed here.
        const uint64_t limit = committed_ + 2 * uint64_t{opt_.pipeline.batches_in_flight} + 2;
        if (m.batch >= limit) return Status::Corruption(what + "beyond the row's window (batches below " + std::to_string(limit) + ")");
        if (row_end_known_ && m.batch >= row_end_) return Status::Corruption(what + "at or past the row's end " + std::to_string(row_end_));
        const bool taken = m.batch < fed_batch_ || (m.batch == fed_batch_ && m.slice < fed_slice_);
        if (repeats_.load() && (taken || inbox_.count({m.batch, m.slice}) != 0)) {
          return Status::Ok();  // after a resume: a re-send of what this node has (the same bytes, by Rule 1)
        }
        if (m.batch < committed_ || inbox_.count({m.batch, m.slice}) != 0) return Status::Corruption(what + "sent twice");
      }
      Inbound in;
      const int64_t t0 = NowNanos();
      QR_RETURN_IF_ERROR(OpenRowSubSlice(m, opt_.pipeline.ranges, planner::RowPlace{opt_.partitions, opt_.partition}, &in.slice));
      in.plan_ns = NowNanos() - t0;
      if (opt_.replicate) in.bytes = std::move(m.slice_bytes);  // the followers get it as it came (reads included)
      {
        std::lock_guard<std::mutex> lk(mu_);
        inbox_.emplace(std::make_pair(m.batch, m.slice), std::move(in));
        if (static_cast<int64_t>(m.batch) > peer_opened_) {
          peer_opened_ = static_cast<int64_t>(m.batch);
          peer_opened_fast_.store(peer_opened_);
        }
      }
      cv_.notify_all();
      if (planner_) planner_->Kick();
      return Status::Ok();
    }
    case RowMsgKind::kHomeBundle:
      return Status::Corruption("a home bundle over the row transport (it is a home's log entry, never sent)");
    case RowMsgKind::kBatchEnd:
      return Status::Corruption("a batch-end record over the row transport (it is a leader's log entry, never sent)");
    case RowMsgKind::kResume: {
      RowResume m;
      QR_RETURN_IF_ERROR(DecodeRowMessage(frame, &m));
      QR_RETURN_IF_ERROR(check_from(m.from));
      if (opt_.failover_timeout_ms <= 0) return Status::Corruption("a resume, in a row without failover (no followers)");
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (m.answer) {
          if (!opt_.successor) return Status::Corruption("an answer to a resume this node never sent");
          answers_[from] = m;
        } else {
          if (resumes_.size() >= nparts_) return Status::Corruption("more resumes than the row has peers");
          resumes_.push_back(ResumeRequest{from, std::move(m)});
        }
      }
      cv_.notify_all();
      return Status::Ok();
    }
    case RowMsgKind::kDepValues: {
      RowDepValues m;
      QR_RETURN_IF_ERROR(DecodeRowMessage(frame, &m));
      if (opt_.replicate) QR_RETURN_IF_ERROR(RecordValues(m));  // before any executor can use one
      for (const RowDepValue& v : m.values) pipeline_->DeliverDepValue(m.batch, m.slice, v.slot, v.value, from);
      return Status::Ok();
    }
    case RowMsgKind::kVotes: {
      RowVotes m;
      QR_RETURN_IF_ERROR(DecodeRowMessage(frame, &m));
      QR_RETURN_IF_ERROR(check_from(m.from));
      pipeline_->DeliverVotes(m.batch, from, m.round, std::move(m.ids));
      return Status::Ok();
    }
    case RowMsgKind::kReport: {
      RowReport m;
      QR_RETURN_IF_ERROR(DecodeRowMessage(frame, &m));
      QR_RETURN_IF_ERROR(check_from(m.from));
      if (m.slice / per_home_ != opt_.partition || m.slice >= slices_) {
        return Status::Corruption("a report of slice " + std::to_string(m.slice) + ", not one this home planned");
      }
      commit_->Report(from, m.batch, m.slice, std::move(m.report));
      return commit_->health();
    }
    case RowMsgKind::kControl: {
      RowControl m;
      QR_RETURN_IF_ERROR(DecodeRowMessage(frame, &m));
      QR_RETURN_IF_ERROR(check_from(m.from));
      if (m.what == RowControlKind::kHeartbeat) return Status::Ok();
      if (m.what == RowControlKind::kDurable) {
        TrimRetained(from, m.batch);
        return Status::Ok();
      }
      if (m.what == RowControlKind::kFinished) {
        {
          std::lock_guard<std::mutex> lk(mu_);
          finished_[from] = 1;
        }
        transport_->ExpectClose(from);  // it closes once the whole row finished
        cv_.notify_all();
        return Status::Ok();
      }
      bool known = false;
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (ends_[from] >= 0) return Status::Corruption("its input ended twice");
        known = NoteEndLocked(from, m.batch);
      }
      cv_.notify_all();
      if (planner_) planner_->Kick();
      if (known) pipeline_->EndInput(row_end_);
      Logger("row")->info("[partition {}] partition {}'s input ended at batch {}", opt_.partition, from, m.batch);
      if (on_row_ending_) on_row_ending_(from);
      MaybeFinish();
      return Status::Ok();
    }
  }
  return Status::Corruption("unknown row message");
}

void RowNode::WatchLoop() {
  const int64_t timeout_ns = opt_.peer_timeout_ms * 1'000'000;
  const auto beat = std::chrono::milliseconds(std::max<int64_t>(1, opt_.peer_timeout_ms / 5));
  std::vector<uint8_t> warned(nparts_, 0);
  std::unique_lock<std::mutex> lk(mu_);
  while (!Halted()) {
    cv_.wait_for(lk, beat, [&] { return Halted(); });
    if (Halted()) return;
    const uint64_t committed = committed_;
    std::vector<uint8_t> finished = finished_;
    lk.unlock();
    Broadcast(EncodeRowMessage(RowControl{opt_.partition, RowControlKind::kHeartbeat, committed}));
    const int64_t now = NowNanos();
    std::vector<int64_t> lost;
    {
      std::lock_guard<std::mutex> lk2(mu_);
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
          lk.lock();
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
        lk.lock();
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
    lk.lock();
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
      std::lock_guard<std::mutex> lk(mu_);
      for (uint32_t p = 0; p < nparts_; ++p) {
        if (ends_[p] < 0) waiting += (waiting.empty() ? "" : ", ") + std::to_string(p);
      }
    }
    return Status::Timeout("the row's end was not reached within " + std::to_string(timeout_ms) + " ms (" +
                           std::to_string(pipeline_->committed_batches()) + " batches committed" +
                           (waiting.empty() ? "" : "; partitions whose input has not ended: " + waiting) + ")");
  }
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, std::chrono::milliseconds(left_ms()), [&] { return Halted() || finished_sent_.load(); }) ||
        Halted()) {
      lk.unlock();
      if (!health().ok()) return health();
      uint64_t next = 0;
      {
        std::lock_guard<std::mutex> hk(home_mu_);
        next = next_home_batch_;
      }
      return Status::Timeout("home slices of batch " + std::to_string(next) + " not reported by every partition in time");
    }
  }
  std::unique_lock<std::mutex> lk(mu_);
  auto all_finished = [&] {
    if (opt_.follower) return true;  // no row peers
    for (uint32_t p = 0; p < nparts_; ++p) {
      if (p != opt_.partition && finished_[p] == 0) return false;
    }
    return true;
  };
  if (!cv_.wait_for(lk, std::chrono::milliseconds(left_ms()), [&] { return Halted() || all_finished(); }) || !all_finished()) {
    lk.unlock();
    if (!health().ok()) return health();
    return Status::Timeout("not every row peer finished in time");
  }
  if (!opt_.follower && opt_.replicate) {
    // Every committed batch's record is on its way before the caller replicates end markers.
    const uint64_t committed = pipeline_->committed_batches();
    if (!cv_.wait_for(lk, std::chrono::milliseconds(left_ms()),
                      [&] { return Halted() || records_handed_.load() >= committed; }) ||
        Halted()) {
      lk.unlock();
      if (!health().ok()) return health();
      return Status::Timeout("batch-end records below batch " + std::to_string(committed) + " not handed over in time");
    }
  }
  return Status::Ok();
}

void RowNode::Fail(const Status& s) {
  if (failed_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
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
    std::lock_guard<std::mutex> lk(mu_);
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
    std::lock_guard<std::mutex> lk(mu_);
    if (!health_.ok()) return health_;
  }
  if (Status st = pipeline_->health(); !st.ok()) return st;
  return commit_ ? commit_->health() : Status::Ok();
}

void RowNode::SetEnd(uint64_t end) {
  QR_CHECK(opt_.follower, "SetEnd on a leader (its end comes from the homes)");
  {
    std::lock_guard<std::mutex> lk(mu_);
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
    std::lock_guard<std::mutex> lk(home_mu_);
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
  std::lock_guard<std::mutex> lk(mu_);
  if (row_end_known_) *end = row_end_;
  return row_end_known_;
}

}  // namespace qrstore::cluster
