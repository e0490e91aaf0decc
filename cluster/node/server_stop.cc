// How a node stops (server_impl.h): the end markers a leader's clean stop replicates, the
// ordered shutdown of every part, and the state dump of a clean stop.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <string>
#include <thread>

#include "cluster/follow/follower_feed.h"
#include "cluster/follow/replica_monitor.h"
#include "cluster/node/server_impl.h"
#include "cluster/port/client_service.h"
#include "cluster/row/row_server.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/logging.h"
#include "common/report.h"
#include "engine/local_planner.h"
#include "engine/pipeline.h"
#include "planner/eq.h"
#include "storage/table.h"
#include "workloads/workload.h"

namespace qrstore::cluster {

Status ServerImpl::EndReplication(uint64_t end) {
  // Tell every stream where the input ended, so followers know they have it all.
  auto log = Logger("server");
  Status result;
  for (uint32_t p = 0; p < Streams(); ++p) {
    replicator_->ReplicateData(replication::ReplicateMeta{kGroup, p, end}, EncodeEndMarker(end),
                               [this](const replication::ReplicateMeta&, Status st) {
                                 {
                                   MutexLock lk(mu_);
                                   ++markers_done_;
                                   if (!st.ok() && marker_status_.ok()) marker_status_ = st;
                                 }
                                 cv_.notify_all();
                               });
  }
  const int64_t deadline = NowNanos() + drain_timeout_ms_ * 1'000'000;
  {
    MutexUniqueLock lk(mu_);
    cv_.wait_for(lk.native(), std::chrono::milliseconds(drain_timeout_ms_),
                 [&]() REQUIRES(mu_) { return markers_done_ == Streams(); });
    if (markers_done_ < Streams()) {
      result = Status::Timeout("end markers not replicated within server.drain_timeout_ms");
    } else if (!marker_status_.ok()) {
      result = marker_status_;
    }
  }
  // Connected followers apply everything before replication stops (a raft follower that
  // lags behind gets the rest from this leader only). Not waited for: a stranded follower
  // (the backend can no longer bring it up to date), and one that makes no progress for 3 s
  // (it failed, is paused or stuck): the others stop cleanly whatever it does. Whom it gave up
  // on, and why, is logged.
  std::map<std::string, std::string> given_up;  // node -> why
  std::map<std::string, std::pair<uint64_t, int64_t>> progress;  // node -> (applied, since)
  while (result.ok() && NowNanos() < deadline) {
    const std::map<std::string, std::string> stranded = StrandedFollowers();
    std::map<std::string, uint64_t> applied;
    for (const auto& f : monitor_->Views(end)) applied[f.node] = f.applied_batches;
    bool waiting = false;
    for (const std::string& n : monitor_->ConnectedNotEnded()) {
      if (given_up.count(n) > 0) continue;
      if (auto it = stranded.find(n); it != stranded.end()) {
        given_up[n] = "stranded: " + it->second;
        continue;
      }
      auto [it, fresh] = progress.try_emplace(n, applied[n], NowNanos());
      if (!fresh && it->second.first != applied[n]) it->second = {applied[n], NowNanos()};
      if (NowNanos() - it->second.second > 3'000'000'000) {
        given_up[n] = "no progress for 3 s at batch " + std::to_string(applied[n]) + " of " + std::to_string(end) +
                      " (failed, paused or stuck)";
        continue;
      }
      waiting = true;
    }
    if (!waiting) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (result.ok() && NowNanos() >= deadline) {
    for (const std::string& n : monitor_->ConnectedNotEnded()) {
      if (given_up.count(n) == 0) given_up[n] = "not at batch " + std::to_string(end) + " within server.drain_timeout_ms";
    }
  }
  for (const auto& [n, why] : given_up) {
    log->warn("{} stopping without follower {}: {}", Identity(), n, why);
  }
  return result;
}

void ServerImpl::StayAVoter(int64_t deadline) {
  if (backend_ != "raft" || !replicator_) return;  // zookeeper: the servers hold the quorum
  const replication::LeaderView followed = replicator_->Leader(kGroup);
  if (!followed.known || followed.self) return;
  if (reporter_) reporter_->Stop(1000);  // its last report
  auto log = Logger("server");
  log->info("{} failed: staying a voter of the group until its leader (term {}) stops", Identity(), followed.term);
  const int64_t t0 = NowNanos();
  for (;;) {
    const replication::LeaderView v = replicator_->Leader(kGroup);
    if (!v.known || v.self || v.term != followed.term || v.member != followed.member) break;
    if (NowNanos() >= deadline) {
      log->warn("{} its leader still leads after server.drain_timeout_ms: leaving the group", Identity());
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  log->info("{} the leader it followed is gone after {} ms: leaving the group", Identity(), (NowNanos() - t0) / 1'000'000);
}

Status ServerImpl::Shutdown() {
  auto log = Logger("server");
  stopping_.store(true);
  Status result;
  // No dump of a stranded node (its table is a prefix of the others'), a deposed one (it may
  // hold speculative batches no one else executed) or one whose promotion failed.
  std::string skip_dump;
  NodeRole role = this->role();
  {
    // Freeze the role: no promotion starts from here on, and a running one finishes first.
    MutexUniqueLock lk(mu_);
    roles_frozen_ = true;
    cv_.wait(lk.native(), [&]() REQUIRES(mu_) { return !role_changing_; });
    role = this->role();
  }
  const bool row_leader = row_ && row_->leader();
  if (row_ && (role == NodeRole::kDeposed || role == NodeRole::kPromoting)) {
    bool deposed = false;
    result = fail_stop(&deposed);
    if (result.ok()) result = Status::Unavailable(std::string("stopped while ") + NodeRoleName(role));
    skip_dump = deposed ? "it was deposed: its table may hold speculative batches no other node executed"
                        : "its promotion to leader did not complete";
  } else if (row_) {
    if (row_leader) {
      service_->StopAdmitting(Status::Unavailable("node stopping (SIGTERM)"));
      row_->node()->CloseInput();
    }
    // A follower's end comes with its stream's end markers (from its leader's stop), unless its
    // group cannot bring it up to date (stranded) or it restarts to load a fetched checkpoint.
    const std::string stranded = row_leader ? std::string() : SelfStranded();
    if (!row_leader && (!stranded.empty() || restart_requested())) {
      result = Status::Unavailable("not waiting for the row's end (applied " +
                                   std::to_string(row_->node()->pipeline()->committed_batches()) + " batches): " +
                                   (stranded.empty() ? std::string("restarting to load a fetched checkpoint") : stranded));
      skip_dump = "this node is stranded or restarting";
    } else {
      // A failed follower stays a voter until the leader it followed is gone, as on one
      // partition: its group's leader still needs a majority for its end markers.
      if (!row_leader && !row_->health().ok()) StayAVoter(NowNanos() + drain_timeout_ms_ * 1'000'000);
      result = row_->node()->WaitFinished(drain_timeout_ms_);
    }
    uint64_t end = 0;
    if (result.ok() && row_->node()->row_end_known(&end)) {
      log->info("{} the row ended at batch {}; every row peer finished", Identity(), end);
      if (row_leader && topo_->replication_factor() > 0) {
        result = EndReplication(end);
        if (result.ok()) log->info("{} end markers replicated at batch {}", Identity(), end);
      }
    }
    if (reporter_) reporter_->Stop(1000);  // a follower's last report
  } else if (role == NodeRole::kDeposed || role == NodeRole::kPromoting) {
    bool deposed = false;
    result = fail_stop(&deposed);
    if (result.ok()) result = Status::Unavailable(std::string("stopped while ") + NodeRoleName(role));
    skip_dump = deposed ? "it was deposed: its table may hold speculative batches no other node executed"
                        : "its promotion to leader did not complete";
  } else if (role == NodeRole::kLeader) {
    service_->StopAdmitting(Status::Unavailable("node stopping (SIGTERM)"));
    planner_->CloseInput();
    Status idle = pipeline_->WaitIdle(drain_timeout_ms_);
    if (idle.ok() && planner_->ended() && topo_->replication_factor() > 0) {
      const uint64_t end = planner_->end_batch();
      result = EndReplication(end);
      log->info("{} input ended at batch {}; end markers replicated", Identity(), end);
    } else if (!idle.ok()) {
      result = idle;
    }
  } else if (std::string why = SelfStranded(); !why.empty() || restart_requested()) {
    // Its leader's end will never reach it: nothing to wait for.
    result = Status::Unavailable("stranded, not waiting for the leader's end (applied " +
                                 std::to_string(pipeline_->committed_batches()) + " batches): " + why);
    skip_dump = "this node is stranded";
    reporter_->Stop(1000);  // a last report
  } else {
    // The leader's end markers (an empty batch E on every stream) end this follower's input: it
    // applies everything before them and stops. Without them (its leader still runs, or is gone)
    // it waits server.drain_timeout_ms for them.
    const int64_t deadline = NowNanos() + drain_timeout_ms_ * 1'000'000;
    if (!PipeHealth().ok() || !feed_->health().ok()) StayAVoter(deadline);
    uint64_t end = 0;
    bool ended = false;
    while (!(ended = feed_->WaitEnded(100, &end)) && NowNanos() < deadline && PipeHealth().ok() &&
           feed_->health().ok()) {
    }
    Status idle;
    if (ended) {
      feed_->Stop();
      pipeline_->EndInput(end + 1);
      idle = pipeline_->WaitIdle(std::max<int64_t>((deadline - NowNanos()) / 1'000'000, 1000));
    } else if (Status h = feed_->health(); !h.ok()) {
      idle = h;
    } else if (Status ph = PipeHealth(); !ph.ok()) {
      idle = ph;
    } else {
      idle = Status::Timeout("no end marker");
    }
    if (!idle.ok()) {
      result = Status(idle.code() == StatusCode::kTimeout
                          ? Status::Timeout("the leader's end was not reached within server.drain_timeout_ms; "
                                            "applied " + std::to_string(pipeline_->committed_batches()) + " batches")
                          : idle);
    } else {
      log->info("{} applied every batch of the leader (its input ended at batch {})", Identity(), end);
    }
    reporter_->Stop(1000);  // a last report
  }
  StopAll();
  if (!skip_dump.empty()) {
    if (!config_->GetString("server.dump_state_dir").empty()) log->warn("{} no dump: {}", Identity(), skip_dump);
  } else {
    // A clean stop leaves a checkpoint of the last batch: a restart then needs no log.
    if (checkpointer_) checkpointer_->WriteFinal(*table_, SessionsDigest());
    if (Status d = Dump(); !d.ok() && result.ok()) result = d;
  }
  if (!result.ok()) log->warn("{} stopped: {}", Identity(), result.ToString());
  return result;
}

void ServerImpl::StopAll() {
  if (stopped_) return;
  stopped_ = true;
  {
    MutexLock lk(mu_);
    watch_stop_ = true;
  }
  cv_.notify_all();
  watch_.Join();
  // A client reader blocked on the full client queue must get out before the service joins it.
  if (planner_) planner_->CloseInput();
  if (service_) service_->Stop(5000);
  if (feed_) feed_->Stop();
  if (reporter_) reporter_->Stop(0);
  if (fetcher_) fetcher_->Stop();  // the watch thread, its only user, has stopped
  if (row_) row_->Stop();
  if (pipeline_) pipeline_->Stop();
  if (checkpointer_) checkpointer_->Stop();  // after the executors: a write in progress finishes
  if (planner_) planner_->Stop();
  if (replicator_) replicator_->Stop();
}

Status ServerImpl::Dump() {
  const std::string& dir = config_->GetString("server.dump_state_dir");
  if (dir.empty()) return Status::Ok();
  const std::string path = dir + "/" + me_.name + ".tsv";
  // A node of a row dumps its own partition's records: Init loaded no others.
  Status st = workloads::DumpState(*table_, path);
  if (st.ok()) {
    Logger("server")->info("{} wrote {} records to {} (digest {})", Identity(), table_->size(), path,
                           Hex(table_->Digest()));
  }
  return st;
}

}  // namespace qrstore::cluster
