// A node of a partitioned row: joining its partition's group (JoinRowGroup: whether it leads or
// follows the member its group elected), and the row's start (StartRow: the RowServer around
// this node's RowNode). The single partition's start is in server.cc.
#include <algorithm>
#include <string>
#include <utility>

#include "cluster/config/cluster_config.h"
#include "cluster/config/topology.h"
#include "cluster/follow/replica_monitor.h"
#include "cluster/node/server_impl.h"
#include "cluster/port/client_service.h"
#include "cluster/recovery/checkpointer.h"
#include "cluster/row/row_server.h"
#include "common/clock.h"
#include "common/logging.h"
#include "storage/checkpoint.h"
#include "storage/table.h"

namespace qrstore::cluster {

int64_t ServerImpl::RowLeaderWaitMs() const {
  // Raft: a group that lost its leader elects one within a few election timeouts (each is
  // randomized in [E, 2E), then a pre-vote and a vote). ZooKeeper: once the dead leader's session
  // expired (its election znode goes with it) the next candidate takes over.
  const Config& r = *repl_config_;
  // (Raft: a restarted member times its leader out after catch_up_election_ticks.)
  const int64_t election_ticks =
      std::max(r.GetInt("replication.raft.election_ticks"), r.GetInt("replication.raft.catch_up_election_ticks"));
  const int64_t ms = backend_ == "raft" ? 5 * election_ticks * r.GetInt("replication.raft.tick_ms")
                                        : 2 * r.GetInt("replication.zookeeper.session_timeout_ms");
  return std::min(ms, config_->GetInt("server.start_timeout_ms"));
}

Status ServerImpl::RowCheckpointRefusal(const std::string& why) const {
  return Status::InvalidArgument(
      "node " + me_.name + " (row 0 of partition " + std::to_string(me_.partition) +
      " of a partitioned row) holds a checkpoint in " + NodeCheckpointDir(*config_, me_.name) + " and " + why +
      ": it would have to lead from its checkpoint without replaying its group's log as a follower first, which a "
      "row's leader cannot do; start the cluster with `cluster.sh up --fresh` (it deletes them), or start this node "
      "with its group's other members running (it then follows from its checkpoint, or, elected, replays and leads)");
}

Status ServerImpl::JoinRowGroup() {
  const int64_t wait_ms = restored_ ? RowLeaderWaitMs() : config_->GetInt("server.start_timeout_ms");
  const int64_t deadline = NowNanos() + wait_ms * 1'000'000;
  for (;;) {
    if (replicator_->IsLeader(kGroup)) {
      bool still = true, fresh = !restored_;
      for (uint32_t s = 0; still && s < Streams(); ++s) {
        auto n = replicator_->NextBatchId(kGroup, s);
        still = n.ok();  // not: it lost the lead meanwhile; look again
        if (still && n.value() != 0) fresh = false;
      }
      if (still && fresh) return Status::Ok();  // a fresh cluster's leader
      if (still && backend_ != "raft") {
        // (ZooKeeper: it won its group's election inside ZkReplicator::Start, nobody else in
        // line; a leader that won there is not fed the log it would replay: it refuses.)
        if (restored_) return RowCheckpointRefusal("its group made it leader");
        return Status::InvalidArgument("node " + me_.name + " leads partition " + std::to_string(me_.partition) +
                                       " of a partitioned row whose log holds batches of an earlier run: a row's "
                                       "leaders cannot resume a row's log yet; start the cluster with "
                                       "`cluster.sh up --fresh`");
      }
      if (still) {
        // Other partitions whose members take no row connection yet (followers listen on none):
        // the whole row is starting again. Its promotion below then waits (server.start_timeout_ms)
        // for their leaders, which resume together with it (each a successor answering the others).
        std::string idle;
        const std::unique_ptr<net::StreamNet> probe = net::MakePosixStreamNet();
        for (uint32_t q = 0; q < topo_->partitions(); ++q) {
          if (q == me_.partition) continue;
          bool up = false;
          for (const NodeInfo* m : topo_->Group(q)) up = up || probe->Connect(m->row_address(), 300) != nullptr;
          if (!up) idle += (idle.empty() ? "" : ", ") + std::to_string(q);
        }
        if (!idle.empty()) {
          Logger("server")->warn("{} no member of partition(s) {} takes row connections yet: the whole row is "
                                 "starting again; it resumes once their leaders do",
                                 Identity(), idle);
        }
        // Its group made it leader again after a restart, before another member was elected: it
        // replays its group's log as a follower first (from its checkpoint, or batch 0), then the
        // watch thread promotes it and it takes its place in the row as any elected follower does
        // (RowServer::Promote), with the row's other leaders: successors too when the whole row
        // started again (its promotion fails naming them if they do not come within the time-out).
        leader_ = false;
        {
          MutexLock lk(hint_mu_);
          hint_node_ = me_.name;
          hint_address_ = me_.client_address();
          hint_term_ = replicator_->Leader(kGroup).term;
        }
        Logger("server")->warn("{} its group made it leader again (term {}) while its log holds batches of the run "
                               "before its restart: it replays the log as a follower from batch {} first, then "
                               "takes its place in the row",
                               Identity(), replicator_->Leader(kGroup).term, restored_ ? restored_next_ : 0);
        return Status::Ok();
      }
    }
    const replication::LeaderView v = replicator_->Leader(kGroup);
    // (A leader named as this node but not `self` is this node before its restart: its session or
    // term not over yet.)
    if (const NodeInfo* ln = LeaderNode(v); ln != nullptr && ln->name != me_.name) {
      leader_ = false;
      {
        MutexLock lk(hint_mu_);
        hint_node_ = ln->name;
        hint_address_ = ln->client_address();
        hint_term_ = v.term;
      }
      Logger("server")->warn("{} {} leads partition {} (term {}): this node, its leader before a restart, starts as "
                             "its follower and replays the group's log from batch {}",
                             Identity(), ln->name, me_.partition, v.term, restored_ ? restored_next_ : 0);
      return Status::Ok();
    }
    if (NowNanos() >= deadline) {
      if (restored_) {
        return RowCheckpointRefusal("no other member of its group led within " + std::to_string(wait_ms) + " ms");
      }
      return Status::Unavailable("replication (" + backend_ + "): this node (row 0) neither became leader of " +
                                 "partition " + std::to_string(me_.partition) + " nor saw another member lead "
                                 "within server.start_timeout_ms (" + std::to_string(wait_ms) +
                                 " ms): are the other members of cluster.nodes up?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status ServerImpl::StartRow() {
  const bool replicated = topo_->replication_factor() > 0;
  // Replication first: row 0 learns there whether it leads its group or, started again after its
  // group elected another member, follows it (JoinRowGroup); what is built below depends on it.
  // The client port opens after (its handlers ask the role, and status reads the RowServer).
  if (replicated) QR_RETURN_IF_ERROR(StartReplication());
  role_.store(leader_ ? NodeRole::kLeader : NodeRole::kFollower, std::memory_order_release);
  // Every node keeps its own digests (a promoted follower checks the others at once); with rf = 0
  // a monitor of no followers, as on one partition.
  MakeMonitor();
  if (!leader_) MakeReporter();
  RowServerContext rc;
  rc.config = config_.get();
  rc.topo = topo_.get();
  rc.me = &me_;
  rc.leader = leader_;
  rc.mode = mode_;
  rc.input = point_ == ReplicationPoint::kInput;
  rc.writes = point_ == ReplicationPoint::kWrites;
  rc.engine = &engine_;
  rc.partition_map = partition_map_;
  rc.record_bytes = workload_.Layout().size();
  rc.streams = Streams();
  rc.group = kGroup;
  rc.table = table_.get();
  rc.service = service_.get();
  rc.replicator = replicator_.get();
  rc.monitor = monitor_.get();
  rc.reporter = reporter_.get();
  rc.replicated_bytes = &replicated_bytes_;
  rc.on_failure = [this](Status st) { NoteFailure(std::move(st)); };
  rc.on_row_ending = [this] {
    {
      MutexLock lk(mu_);
      row_ending_ = true;
    }
    cv_.notify_all();
  };
  rc.on_replicated = [this](uint64_t b, uint32_t s, Status st) { OnReplicated(b, s, st); };
  // Checkpoints: a follower restarts from its newest one (restored_: its group's log from the
  // batch after it on); a leader's serve its followers' transfers.
  QR_RETURN_IF_ERROR(StartCheckpointer());
  rc.checkpointer = checkpointer_.get();
  rc.first_batch = restored_ ? restored_next_ : 0;
  rc.sessions = sessions_.get();
  row_ = std::make_unique<RowServer>(std::move(rc));
  if (Status st = service_->Start(); !st.ok()) {
    return Status::Unavailable("cluster.nodes[" + std::to_string(me_.index) + "].client_port: " + st.message());
  }
  if (checkpointer_ && replicated) replicator_->RetainFrom(kGroup, restored_ ? restored_next_ : 0);
  QR_RETURN_IF_ERROR(row_->Start());
  if (!leader_) QR_RETURN_IF_ERROR(reporter_->Start());
  watch_ = NamedThread("watch", [this] { WatchLoop(); });
  Logger("server")->info("{} serving: partition {} row {} of a {} x {} grid, clients on {}, row peers on {}, backend {} ({}), "
                         "{} planner(s), {} executor(s)",
                         Identity(), me_.partition, me_.row, topo_->partitions(), topo_->rows(), me_.client_address(),
                         me_.row_address(), replicated ? backend_ : "none", mode_, engine_.planner.planners,
                         engine_.pipeline.executors);
  if (partition_map_.kind() == storage::KeyMapper::Kind::kHash) {
    Logger("server")->info("{} holds {} records of its partition; with engine.range_function hash every page of the "
                           "table also spans other partitions' keys, so its resident memory is the whole table's "
                           "(range keeps it to its own key range)",
                           Identity(), table_->size());
  }
  return Status::Ok();
}

}  // namespace qrstore::cluster
