// What a node says about itself (server_impl.h): its status reply, the ready line, the stats
// line, and which followers the replication backend gave up on.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>

#include "cluster/node/server_impl.h"
#include "common/report.h"

namespace qrstore::cluster {

namespace {

uint64_t ProcessCpuNanos() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& t) { return uint64_t(t.tv_sec) * 1'000'000'000ull + uint64_t(t.tv_usec) * 1000ull; };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

}  // namespace

proto::NodeStatus ServerImpl::NodeStatusNow() const {
  proto::NodeStatus s;
  s.node = me_.name;
  const NodeRole role = this->role();
  s.role = NodeRoleName(role);
  LeaderHint(&s.leader, nullptr, &s.term);
  // A node that does not lead never names itself: a former leader starting again holds the
  // config's row 0 (itself) as its hint until its backend speaks, and a client asking the group
  // who leads would take that for a leader its group named.
  if (role != NodeRole::kLeader && s.leader == me_.name) s.leader.clear();
  const Status h = health();
  s.state = !h.ok() ? "failed" : (stopping_.load() ? "stopping" : "serving");
  s.error = h.ok() ? "" : h.message();
  // Deposed, it stops to execute itself again as a follower (server_main.cc).
  if (role == NodeRole::kDeposed && rejoin_when_deposed_) s.state = "rejoining";
  s.rejoins = rejoins_;
  if (role != NodeRole::kLeader) {
    // Stranded comes first: with zookeeper, the batch it can no longer read also fails its
    // apply, and "stranded" is the reason, not a second problem.
    if (std::string why = SelfStranded(); !why.empty()) {
      std::string note;
      {
        MutexLock lk(mu_);
        note = recovery_note_;
      }
      s.state = note.empty() ? "stranded" : "recovering";
      s.error = "stranded: " + why + "; the group goes on without it" +
                (note.empty() ? (checkpointer_ ? std::string(" until it continues from a checkpoint")
                                               : std::string(" (no server.checkpoint_dir: nothing brings it back)"))
                              : "; " + note);
    }
  }
  s.backend = backend_;
  s.mode = mode_;
  s.loaded = TableKeys(*config_);
  s.partition = me_.partition;
  s.row = me_.row;
  const engine::PipelineStats ps = PipeStats();
  // Absolute (the next batch id to commit), also after a restart from a checkpoint: what the
  // followers' digest reports and the monitor count in.
  s.committed_batches = AbsoluteCommittedBatches();
  s.last_digest = ps.last_digest;
  s.committed_txns = ps.committed;
  s.aborted_txns = ps.aborted;
  if (row_) {
    // This home's clients' txns (the pipeline counts every sub-slice txn it ran, so a
    // multi-partition txn on each partition it touched).
    const RowNodeStats rs = row_->node()->row_stats();
    s.committed_txns = rs.home_committed;
    s.aborted_txns = rs.home_aborted;
  }
  if (sessions_) {
    s.sessions = sessions_->sessions();
    s.session_outcomes = sessions_->outcomes();
  }
  if (checkpointer_) {
    const CheckpointStats cs = checkpointer_->Stats();
    if (cs.any) {
      const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
      s.has_checkpoint = true;
      s.checkpoint_batch = cs.last_batch;
      s.checkpoint_age_s = static_cast<uint64_t>(std::max<int64_t>(0, now_ms - cs.last_unix_ms) / 1000);
    }
  }
  const ClientServiceCounters cc = service_->counters();
  s.rejected_txns = cc.rejected_txns;
  s.failed_txns = cc.failed_txns;
  s.times.replies = cc.replies;
  s.times.reply_ns = cc.reply_ns;
  s.times.request_ns = cc.request_ns;
  if (replicator_) {
    const replication::LogSyncTotals ls = replicator_->LogSyncs();
    s.times.log_syncs = ls.syncs;
    s.times.log_sync_ns = ls.sync_ns;
  }
  s.cpu_ns = ProcessCpuNanos();
  s.point = ReplicationPointName(point_);
  s.replicated_bytes = replicated_bytes_.load(std::memory_order_relaxed);
  if (ps.committed_batches > 0) {
    const double n = static_cast<double>(ps.committed_batches) * 1e6;
    s.phases.cut_ms = static_cast<double>(ps.phase_sums.cut_ns) / n;
    s.phases.plan_ms = static_cast<double>(ps.phase_sums.plan_ns) / n;
    s.phases.deliver_ms = static_cast<double>(ps.phase_sums.deliver_ns) / n;
    s.phases.exec_ms = static_cast<double>(ps.phase_sums.exec_ns) / n;
    s.phases.repl_ms = static_cast<double>(ps.phase_sums.repl_ns) / n;
    s.phases.repl_wait_ms = static_cast<double>(ps.phase_sums.repl_wait_ns) / n;
    s.phases.commit_ms = static_cast<double>(ps.phase_sums.commit_ns) / n;
  }
  if (monitor_ && role == NodeRole::kLeader) {
    s.digest_mismatches = monitor_->mismatches();
    s.followers = monitor_->Views(s.committed_batches);
    const std::map<std::string, std::string> stranded = StrandedFollowers();
    for (proto::FollowerView& f : s.followers) {
      if (auto it = stranded.find(f.node); it != stranded.end()) {
        f.stranded = true;
        f.note = it->second;
      }
    }
  }
  return s;
}

std::map<std::string, std::string> ServerImpl::StrandedFollowers() const {
  std::map<std::string, std::string> out;
  if (!replicator_ || role() != NodeRole::kLeader) return out;
  const auto group = topo_->Group(me_.partition);
  for (const replication::StrandedMember& m : replicator_->Health(kGroup).stranded) {
    // raft names members by node id (the row: replication.raft.node_id), zookeeper by
    // follower id (the node's name): both derived from cluster.nodes in Init.
    std::string name = m.follower_id;
    if (name.empty() && m.member < group.size()) name = group[m.member]->name;
    if (!name.empty()) out[name] = m.reason;
  }
  return out;
}

std::string ServerImpl::SelfStranded() const {
  return replicator_ ? replicator_->Health(kGroup).self_stranded : std::string();
}

std::string ServerImpl::ReadyLine() const {
  std::string leader;
  uint64_t term = 0;
  LeaderHint(&leader, nullptr, &term);
  // The hint starts at the config's row 0 and the watch thread follows the backend from then on;
  // at start the backend is asked itself, so a former leader that rejoins does not name itself.
  const NodeRole r = role();
  if (replicator_) {
    const replication::LeaderView v = replicator_->Leader(kGroup);
    if (v.known || v.term > 0) {
      const NodeInfo* ln = LeaderNode(v);
      leader = ln != nullptr ? ln->name : "";
    }
  }
  // Elected but not yet promoted (the watch thread promotes it): it follows nobody yet.
  if (r != NodeRole::kLeader && leader == me_.name) leader.clear();
  // "(partition 0, row 1, follower of n0)": the live role and the leader it follows.
  const std::string role_text =
      r == NodeRole::kLeader ? "leader" : NodeRoleName(r) + std::string(" of ") + (leader.empty() ? "no leader yet" : leader);
  return "qrstore-server ready: node " + me_.name + " (partition " + std::to_string(me_.partition) + ", row " +
         std::to_string(me_.row) + ", " + role_text + ") clients " + me_.client_address() + " backend " + backend_ +
         " mode " + mode_ + " records " + std::to_string(table_->size());
}

std::string ServerImpl::StatsLine() const {
  const proto::NodeStatus s = NodeStatusNow();
  std::string line = Identity() + " " + s.state + " batches=" + std::to_string(s.committed_batches) +
                     " committed=" + std::to_string(s.committed_txns) + " aborted=" + std::to_string(s.aborted_txns) +
                     " rejected=" + std::to_string(s.rejected_txns) + " failed=" + std::to_string(s.failed_txns) +
                     " digest=" + Hex(s.last_digest) + " cpu_s=" + std::to_string(static_cast<double>(s.cpu_ns) / 1e9);
  if (!s.leader.empty() && s.leader != me_.name) line += " leader=" + s.leader + " term=" + std::to_string(s.term);
  if (sessions_) {
    const SessionStoreCounters sc = sessions_->counters();
    line += " sessions=" + std::to_string(s.sessions) + " session_outcomes=" + std::to_string(s.session_outcomes);
    if (s.role == "leader") {
      line += " duplicates=" + std::to_string(sc.duplicates) + " expired=" + std::to_string(sc.expired) +
              " refused=" + std::to_string(sc.refused) + " history_reads=" + std::to_string(sc.history_reads) +
              " history_misses=" + std::to_string(sc.history_misses);
    }
  }
  if (checkpointer_) {
    const CheckpointStats cs = checkpointer_->Stats();
    line += " checkpoints=" + std::to_string(cs.written);
    if (s.has_checkpoint) {
      line += " checkpoint_batch=" + std::to_string(s.checkpoint_batch) +
              " checkpoint_age_s=" + std::to_string(s.checkpoint_age_s);
    }
    if (cs.skipped > 0) line += " checkpoints_skipped=" + std::to_string(cs.skipped);
    if (!cs.last_error.empty()) line += " checkpoint_error=\"" + cs.last_error + "\"";
  }
  if (s.role == "leader") {
    line += " replicated_mb=" + std::to_string(static_cast<double>(replicated_bytes_.load()) / 1e6);
    if (row_ && topo_->replication_factor() > 0) {
      // Rule 2: the batches that waited for a batch-end record (values received or aborts).
      line += " batch_end_records=" + std::to_string(row_->node()->row_stats().batch_end_records);
    }
    for (const auto& f : s.followers) {
      line += " [" + f.node + (f.connected ? "" : " disconnected") + (f.stranded ? " STRANDED" : "") +
              " lag=" + std::to_string(f.lag_batches) +
              " checked=" + std::to_string(f.checked_batches) + " mismatches=" + std::to_string(f.mismatches) + "]";
    }
  }
  return line;
}

}  // namespace qrstore::cluster
