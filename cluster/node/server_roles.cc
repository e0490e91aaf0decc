// The role a node of one partition plays, driven by the replication backend (server_impl.h).
#include <algorithm>
#include <chrono>
#include <thread>
#include <string>
#include <vector>

#include "cluster/node/server_impl.h"
#include "common/clock.h"
#include "common/logging.h"
#include "planner/eq.h"
#include "planner/input_slice.h"
#include "planner/write_slice.h"

namespace qrstore::cluster {

const char* NodeRoleName(NodeRole r) {
  switch (r) {
    case NodeRole::kFollower:
      return "follower";
    case NodeRole::kPromoting:
      return "promoting";
    case NodeRole::kLeader:
      return "leader";
    case NodeRole::kDeposed:
      return "deposed";
  }
  return "?";
}

const NodeInfo* ServerImpl::LeaderNode(const replication::LeaderView& v) const {
  if (!v.known) return nullptr;
  for (const NodeInfo* n : topo_->Group(me_.partition)) {
    // zookeeper names the leader by its member id (the node's name), raft by its member id
    // (the node's row): both derived from cluster.nodes in Init.
    if (!v.id.empty() ? n->name == v.id : n->row == v.member) return n;
  }
  return nullptr;
}

Status ServerImpl::PromoteRow() {
  auto log = Logger("server");
  const uint64_t term = replicator_->Leader(kGroup).term;
  role_.store(NodeRole::kPromoting, std::memory_order_release);
  log->warn("{} the replication backend made this node leader of partition {} (term {}): taking its leader's place "
            "in the row",
            Identity(), me_.partition, term);
  const int64_t t0 = NowNanos();
  QR_RETURN_IF_ERROR(row_->Promote(term, drain_timeout_ms_));
  if (reporter_) reporter_->Stop(0);
  role_.store(NodeRole::kLeader, std::memory_order_release);
  log->warn("{} leads partition {} in the row (term {}), {} ms after the backend made it leader", Identity(),
            me_.partition, term, (NowNanos() - t0) / 1'000'000);
  return Status::Ok();
}

void ServerImpl::LeaderHint(std::string* node, std::string* address, uint64_t* term) const {
  MutexLock lk(hint_mu_);
  if (node != nullptr) *node = hint_node_;
  if (address != nullptr) *address = hint_address_;
  if (term != nullptr) *term = hint_term_;
}

void ServerImpl::RoleTick() {
  auto log = Logger("server");
  const replication::LeaderView v = replicator_->Leader(kGroup);
  const NodeInfo* ln = LeaderNode(v);
  // A backend that says nothing of leaders (no term, no leader: fixed roles) leaves the hint
  // as it is (the config's row 0); one that runs elections is followed, "no leader" included.
  if (v.known || v.term > 0) {
    MutexLock lk(hint_mu_);
    if ((ln != nullptr ? ln->name : "") != hint_node_ || v.term != hint_term_) {
      if (ln != nullptr && ln->name != hint_node_) {
        log->info("{} the group's leader is {} (term {})", Identity(), ln->name, v.term);
      }
      hint_node_ = ln != nullptr ? ln->name : "";
      hint_address_ = ln != nullptr ? ln->client_address() : "";
      hint_term_ = v.term;
    }
  }
  const NodeRole role = this->role();
  if (role == NodeRole::kFollower) {
    // Reports go to the leader the backend names; while it names none, to the last one.
    if (reporter_ && ln != nullptr && ln->name != me_.name) reporter_->SetLeader(ln->client_address());
    if (!replicator_->IsLeader(kGroup)) return;
    uint64_t row_end = 0;
    if (row_ && row_->node()->row_end_known(&row_end)) {
      // The row's leaders stopped cleanly (end markers): nothing to take over; this node stops
      // with its row.
      if (!row_end_leadership_logged_) {
        row_end_leadership_logged_ = true;
        log->info("{} the backend made this node leader after the row ended at batch {}: nothing to take over",
                  Identity(), row_end);
      }
      return;
    }
    // (An old leader that stopped cleanly left end markers: an empty batch, and this node goes
    // on after it: a group stopped and started again, or the old leader alone stopped.)
    bool failed = false;
    {
      MutexLock lk(mu_);
      if (roles_frozen_ || !fail_stop_.ok()) return;
      failed = !failure_.ok();
      if (failed) {
        // A node that failed (a bad slice, a stranded follower) must not lead: it stops, so that
        // another member is elected.
        fail_stop_ = Status::Unavailable("the replication backend made this node leader, but it failed earlier (" +
                                         failure_.message() + "): it stops so that another member leads");
      } else {
        role_changing_ = true;
      }
    }
    if (failed) {
      log->error("{} {}", Identity(), fail_stop(nullptr).message());
      return;
    }
    Status st = row_ ? PromoteRow() : Promote(/*initial=*/false);
    {
      MutexLock lk(mu_);
      role_changing_ = false;
      if (!st.ok() && this->role() != NodeRole::kFollower) {
        fail_stop_ = Status::Unavailable("promotion to leader failed: " + st.message());
      }
    }
    cv_.notify_all();
    if (st.ok()) return;
    if (this->role() == NodeRole::kFollower) {
      // The backend changed its mind before anything was touched: still a follower.
      log->info("{} not promoted after all: {}", Identity(), st.message());
      return;
    }
    log->error("{} promotion to leader failed: {}; this node stops so that another member leads", Identity(),
               st.message());
    NoteFailure(Status::Unavailable("promotion to leader failed: " + st.message()));
    return;
  }
  if (role == NodeRole::kLeader && !replicator_->IsLeader(kGroup)) {
    // Fail-stop: nothing more is acknowledged (replication callbacks of a deposed leader fail;
    // the failure below stops the pipeline and answers everything pending `failed`).
    live_planner_.store(nullptr, std::memory_order_release);
    role_.store(NodeRole::kDeposed, std::memory_order_release);
    const std::string why =
        "this node no longer leads the group (" +
        (ln != nullptr && ln->name != me_.name ? ln->name + " leads in term " + std::to_string(v.term)
                                                : std::string("its backend says it lost leadership; no successor known "
                                                              "yet")) +
        "): deposed; every unacknowledged txn's outcome is unknown";
    {
      MutexLock lk(mu_);
      deposed_ = true;
      fail_stop_ = Status::Unavailable(why);
    }
    log->error("{} {}", Identity(), why);
    NoteFailure(Status::Unavailable(why));
  }
}

Status ServerImpl::Promote(bool initial) {
  auto log = Logger("server");
  const int64_t t0 = NowNanos();
  const bool replicated = topo_->replication_factor() > 0;
  std::vector<uint64_t> next(Streams(), 0);
  if (replicated) {
    for (uint32_t p = 0; p < Streams(); ++p) {
      auto n = replicator_->NextBatchId(kGroup, p);
      if (!n.ok()) return n.status();  // not leader (yet, or any more): nothing touched
      next[p] = n.value();
    }
  }
  const uint64_t term = replicator_->Leader(kGroup).term;
  role_.store(NodeRole::kPromoting, std::memory_order_release);
  if (const uint64_t end = *std::max_element(next.begin(), next.end()); restored_ && end < restored_next_) {
    // This node's checkpoint holds batches the group's log does not: they were committed (a
    // checkpoint is written only then), so the log lost them. The node fails (it must not
    // serve that state), and so will any other member that restored past the log.
    return Status::Corruption("the group's log holds batches below " + std::to_string(end) +
                              " only, but this node restored the state after batch " +
                              std::to_string(restored_next_ - 1) +
                              " from its checkpoint: the log lost committed batches (a raft memory log does not "
                              "survive a restart of the whole group: use replication.raft.log: disk)");
  }
  if (!initial) {
    log->warn("{} the replication backend made this node leader (term {}): applying every replicated batch first",
              Identity(), term);
  }
  // 1. Every batch the group replicated, on every stream, then no more from the feed.
  if (feed_) {
    if (Status st = feed_->DrainTo(next, drain_timeout_ms_); !st.ok()) {
      return Status::Unavailable("applying the replicated batches: " + st.ToString());
    }
    feed_->Stop();
  }
  // 2. The receives posted beyond them would be satisfied by this node's own batches.
  if (replicated) replicator_->CancelReceives(kGroup);
  if (reporter_) reporter_->Stop(0);
  // 3. Streams that stopped short (the old leader died between its planners' slices) get empty
  // slices, so every stream reaches the same batch; planning starts there. Outcomes of the
  // batches before it belong to the old leader's clients: they go nowhere.
  const uint64_t start = *std::max_element(next.begin(), next.end());
  client_from_.store(start, std::memory_order_release);
  // The write histories serve the retries of txns planned before this node led
  // (docs/sessions.md): a first leader has none to serve, a promoted one until they no longer
  // reach back to `start` (the batch hook stops them then).
  if (initial) {
    pipeline_->StopHistory();
  } else {
    history_from_.store(start, std::memory_order_release);
  }
  uint64_t padded = 0;
  for (uint32_t p = 0; p < Streams(); ++p) padded += start - next[p];
  QR_RETURN_IF_ERROR(PadStreams(next, start));
  // 4. The session table must hold every txn of the log before the first check (else a txn of
  // the old leader's that committed but is not applied yet would look new): wait until every
  // batch below `start` committed here.
  const int64_t deadline = NowNanos() + drain_timeout_ms_ * 1'000'000;
  while (pipeline_->committed_batches() < start) {
    if (Status h = pipeline_->health(); !h.ok()) return Status::Unavailable("applying the replicated batches: " + h.ToString());
    if (NowNanos() >= deadline) {
      return Status::Timeout("batches below " + std::to_string(start) + " not committed within server.drain_timeout_ms (" +
                             std::to_string(pipeline_->committed_batches()) + " committed)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // 5. Plan from `start` on over the same table; session txns are checked as they are popped.
  engine::LocalPlannerOptions lpo = engine_.planner;
  lpo.first_batch = start;
  lpo.admit = [this](uint64_t b, uint32_t p, std::vector<storage::Txn>* txns, size_t from) {
    std::vector<SessionAnswer> answers;
    sessions_->Admit(b, p, txns, from, &answers);
    if (!answers.empty()) service_->Answer(answers);
  };
  // Followers return no read values, so they get the slice without its plain reads, encoded
  // by the planner as it plans (EncodeSlice(s, kWithoutReads), without a second pass). Under
  // replication.point = input they get each slice's input instead, and plan it themselves.
  lpo.encode_input = replicated && point_ == ReplicationPoint::kInput;
  lpo.encode_for_replicas = replicated && !session_values_ && !lpo.encode_input;  // (else the hook encodes with reads)
  planner_ = std::make_unique<engine::LocalPlanner>(lpo, pipeline_.get(), ReplicateHook());
  QR_RETURN_IF_ERROR(planner_->Start());
  live_planner_.store(planner_.get(), std::memory_order_release);
  role_.store(NodeRole::kLeader, std::memory_order_release);
  {
    MutexLock lk(hint_mu_);
    hint_node_ = me_.name;
    hint_address_ = me_.client_address();
    hint_term_ = term;
  }
  if (!initial) {
    std::string streams;
    for (uint64_t n : next) streams += (streams.empty() ? "" : ",") + std::to_string(n);
    log->warn("{} leads from batch {} (term {}): the streams ended at [{}], {} empty slice(s) padded, {:.1f} ms",
              Identity(), start, term, streams, padded, static_cast<double>(NowNanos() - t0) / 1e6);
  }
  return Status::Ok();
}

Status ServerImpl::PadStreams(const std::vector<uint64_t>& next, uint64_t end) {
  for (uint32_t p = 0; p < next.size(); ++p) {
    for (uint64_t b = next[p]; b < end; ++b) {
      planner::PlannedSlice* s = pipeline_->BeginSlice(b, p);
      if (s == nullptr) return Status::Aborted("the pipeline stopped while padding stream " + std::to_string(p));
      s->Reset(b, p, engine_.pipeline.executors);
      std::string bytes = point_ == ReplicationPoint::kInput    ? planner::EncodeInputSlice(b, p, {})
                          : point_ == ReplicationPoint::kWrites ? planner::EncodeWriteSlice(*s, {}, nullptr, nullptr, workload_.Layout().size())
                                               : planner::EncodeSlice(*s, planner::SliceEncoding::kWithoutReads);
      pipeline_->PublishSlice(b, p, 0, /*replicated=*/false);
      replicated_bytes_.fetch_add(bytes.size(), std::memory_order_relaxed);
      replicator_->ReplicateData(replication::ReplicateMeta{kGroup, p, b}, std::move(bytes),
                                 [this, b, p](const replication::ReplicateMeta&, Status st) { OnReplicated(b, p, st); });
    }
  }
  return Status::Ok();
}

engine::PlannedHook ServerImpl::ReplicateHook() {
  // With no followers (rf = 0: the Q-Store baseline) nothing is replicated, whatever the
  // backend: slices count as replicated at once and no bytes are encoded.
  if (topo_->replication_factor() == 0) return nullptr;
  // replication.point = writes: nothing goes out at planning; ReplicateWrites sends the batch's
  // result once it is executed (the slices stay unreplicated, their commit held, until then).
  if (point_ == ReplicationPoint::kWrites) return [](const planner::PlannedSlice&, std::string) {};
  return [this](const planner::PlannedSlice& s, std::string bytes) {
    // On the planner thread, outside every lock the executors need; the slice is read-only.
    // server.session_read_values: followers get the plain reads too, to keep the values.
    if (bytes.empty()) bytes = planner::EncodeSlice(s, planner::SliceEncoding::kFull);
    if (s.planner == 0 && static_cast<int64_t>(s.batch) == corrupt_batch_ && DamageEntryForTest(&bytes)) {
      Logger("server")->warn("{} test hook: damaged the slice of batch {}, planner 0", Identity(), s.batch);
    }
    replicated_bytes_.fetch_add(bytes.size(), std::memory_order_relaxed);
    const uint64_t b = s.batch;
    const uint32_t p = s.planner;
    replication::ReplicateMeta meta{kGroup, p, b};
    // `s` may be reused once the callback fired: nothing below touches it.
    replicator_->ReplicateData(meta, std::move(bytes),
                               [this, b, p](const replication::ReplicateMeta&, Status st) { OnReplicated(b, p, st); });
  };
}

void ServerImpl::ReplicateWrites(const executor::ExecutorStageOptions::BatchWrites& w) {
  // Batches before this node leads are its predecessor's (applied from the log, or padded).
  if (w.batch < client_from_.load(std::memory_order_acquire)) return;
  const uint32_t record_bytes = workload_.Layout().size();
  std::vector<uint8_t> fates;
  for (uint32_t p = 0; p < w.slices.size(); ++p) {
    const planner::PlannedSlice& s = *w.slices[p];
    fates.resize(s.txns.size());
    for (uint32_t i = 0; i < fates.size(); ++i) fates[i] = static_cast<uint8_t>(w.fates->Of(p, i));
    // The batch's images travel in stream 0's entry.
    std::string bytes = planner::EncodeWriteSlice(s, fates, p == 0 ? w.keys : nullptr, p == 0 ? w.images : nullptr,
                                                  record_bytes);
    if (p == 0 && static_cast<int64_t>(w.batch) == corrupt_batch_ && DamageEntryForTest(&bytes)) {
      Logger("server")->warn("{} test hook: damaged the writes of batch {}, planner 0", Identity(), w.batch);
    }
    replicated_bytes_.fetch_add(bytes.size(), std::memory_order_relaxed);
    const uint64_t b = w.batch;
    replicator_->ReplicateData(replication::ReplicateMeta{kGroup, p, b}, std::move(bytes),
                               [this, b, p](const replication::ReplicateMeta&, Status st) { OnReplicated(b, p, st); });
  }
}

void ServerImpl::RecoveryTick() {
  if (!checkpointer_ || role() != NodeRole::kFollower) return;
  auto log = Logger("server");
  if (fetcher_) {
    fetcher_->Tick();
    const CheckpointFetchProgress p = fetcher_->progress();
    std::optional<Result<uint64_t>> r = fetcher_->result();
    MutexLock lk(mu_);
    if (!r) {
      recovery_note_ = "fetching the checkpoint of batch " + std::to_string(p.batch) + " from " + fetch_source_ + ": " +
                       std::to_string(p.done_bytes >> 20) + " of " + std::to_string(p.file_bytes >> 20) + " MiB";
      return;
    }
    if (r->ok()) {
      if (roles_frozen_ || !fail_stop_.ok()) return;  // stopping anyway; the file is kept
      restart_ = true;
      recovery_note_ = "restarting to load the checkpoint of batch " + std::to_string(r->value()) + " fetched from " +
                       fetch_source_;
      fail_stop_ = Status::Unavailable(recovery_note_);
      log->warn("{} {}", Identity(), recovery_note_);
      return;
    }
    log->warn("{} the checkpoint transfer from {} failed: {}; trying again in 2 s", Identity(), fetch_source_,
              r->status().message());
    recovery_note_ = "the checkpoint transfer from " + fetch_source_ + " failed (" + r->status().message() +
                     "); trying again";
    next_fetch_ns_ = NowNanos() + 2'000'000'000;
    behind_since_ns_ = 0;
    // The fetcher's thread has ended (it has a result): dropping it only joins.
    fetcher_.reset();
    return;
  }
  const uint64_t need = replicator_->Health(kGroup).resume_needs_next;
  const uint64_t at = AbsoluteCommittedBatches();
  if (need == 0 || at >= need) {
    behind_since_ns_ = 0;
    return;
  }
  // The offer may be taken by itself in a moment (a restarted node whose own checkpoint is
  // recent enough posts its receives just after it starts): give it a second.
  const int64_t now = NowNanos();
  if (behind_since_ns_ == 0) behind_since_ns_ = now;
  if (now - behind_since_ns_ < 1'000'000'000 || now < next_fetch_ns_) return;
  const NodeInfo* src = LeaderNode(replicator_->Leader(kGroup));
  if (src == nullptr || src->name == me_.name) return;
  CheckpointFetchOptions o;
  if (!fetch_net_) fetch_net_ = net::MakeNngStreamNet();
  o.net = fetch_net_.get();
  o.source_node = src->name;
  o.source_address = src->client_address();
  o.dir = NodeCheckpointDir(*config_, me_.name);
  o.min_batch = need - 1;
  o.identity = Identity();
  fetch_source_ = src->name;
  log->warn("{} the group cannot catch this node up from its log (it is at batch {}; the leader {} continues it "
            "from a checkpoint of batch {} or later): fetching {}'s newest checkpoint",
            Identity(), at, src->name, need - 1, src->name);
  fetcher_ = std::make_unique<CheckpointFetcher>(std::move(o));
  fetcher_->Start();
}

}  // namespace qrstore::cluster
