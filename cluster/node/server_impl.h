// ServerImpl: the inside of cluster/node/server.h, shared by its two files:
//   server.cc        config, start, the clean stop, the dump;
//   server_status.cc what the node says of itself: status reply, ready and stats lines;
//   server_roles.cc  the role a node plays, driven by the replication backend (below).
// Internal to cluster/: nothing outside includes this.
//
// Roles (one partition: every single-partition config). The backend decides who leads;
// `row: 0` only says who leads a fresh cluster (raft: the member that campaigns at once;
// zookeeper: the configured leader). Every node starts as a follower: a FollowerFeed replays
// the group's streams into its pipeline and a DigestReporter sends its digests to the leader.
//   follower  --(the backend makes it leader)-->  promoting  -->  leader
//   leader    --(the backend says it no longer leads)-->  deposed (fail-stop)
// Promotion (on the "watch" thread, or in Start for row 0 of a fresh cluster): read where each
// stream ends (NextBatchId), let the feed apply every batch below that and stop, cancel the
// receives posted beyond it, pad the streams that stopped short with empty slices (replicated
// like any other) so all reach the same batch N, deliver outcomes from N on (the replayed
// batches' clients were another process's), then plan from N on over the same table. Nothing
// in the log is re-planned. The digest monitor has the node's own digests of every batch it
// applied, so the surviving followers' reports are checked across the change.
// Deposition: a leader that stops leading while alive (deposed by a higher term, cut off,
// paused and resumed) stops admitting, answers every unacknowledged txn `failed` (outcome
// unknown), never acknowledges another, and stops; its table may hold speculative batches no
// one else executed, so it writes no dump and no checkpoint. qrstore-server then rejoins: it
// executes itself again (server.rejoin_when_deposed, at most once per
// server.rejoin_interval_ms), and the new process (ServerLaunch::rejoins > 0) starts as a
// follower from its newest checkpoint (which holds only committed batches) or the initial
// table, and the group's log; with the rejoin off it exits with kExitDeposed.
// A partitioned row (P > 1): row 0 leads each partition at the start; a follower the backend
// makes leader takes its partition's place in the row (PromoteRow, RowServer::Promote), unless
// the row ended already (its leaders stopped cleanly); a row leader that stops leading is
// deposed as above. A row 0 started again after its group elected another member starts as that
// member's follower (JoinRowGroup), like any other, and may be elected again later.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/config/cluster_config.h"
#include "cluster/config/topology.h"
#include "cluster/follow/follower_feed.h"
#include "cluster/follow/replica_monitor.h"
#include "cluster/node/server.h"
#include "cluster/port/client_service.h"
#include "cluster/port/protocol.h"
#include "cluster/recovery/checkpoint_transfer.h"
#include "cluster/recovery/checkpointer.h"
#include "cluster/row/row_server.h"
#include "cluster/sessions/session_store.h"
#include "common/config.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread.h"
#include "engine/engine.h"
#include "engine/local_planner.h"
#include "engine/pipeline.h"
#include "replication/replication.h"
#include "storage/table.h"
#include "workloads/workload.h"

namespace qrstore::cluster {

// Each process hosts one replication group: its own partition's (replication.groups=1).
constexpr uint32_t kGroup = 0;
// How long a checkpoint fetch keeps, on the leader, the batches after that checkpoint
// (Replicator::HoldFrom): a transfer, a restart from the file and the first reads.
constexpr int64_t kFetchHoldMs = 60'000;

enum class NodeRole : int { kFollower = 0, kPromoting = 1, kLeader = 2, kDeposed = 3 };
const char* NodeRoleName(NodeRole r);

class ServerImpl {
 public:
  Status Init(const Config& config, const std::string& node, const ServerLaunch& launch);
  Status Start();
  Status Shutdown();
  std::string ReadyLine() const;
  std::string StatsLine() const;
  proto::NodeStatus NodeStatusNow() const;
  Status health() const;
  // Non-OK once this node must stop by itself (deposed, or a promotion that failed while the
  // backend made it leader): the reason; *deposed tells which.
  Status fail_stop(bool* deposed) const;
  // True once fail_stop says the node stops to restart itself: it fetched a checkpoint from a
  // peer (its group could not catch it up from the log) and loads it at the restart.
  bool restart_requested() const;

  ~ServerImpl() { StopAll(); }

 private:
  void OnReplicated(uint64_t b, uint32_t p, const Status& st);
  void WatchLoop();
  void StopAll();
  Status WaitForLeadership();
  Status Dump();
  NodeRole role() const { return role_.load(std::memory_order_acquire); }
  std::string Identity() const { return "[" + me_.name + " " + NodeRoleName(role()) + "]"; }
  Status StartRow();
  // Start's parts: the client port's handlers (one set for rows and for one partition), a single
  // partition's start, and its pipeline (sink and batch hook).
  ClientServiceHandler MakeHandlers();
  Status StartOnePartition();
  void MakePipeline(const engine::PipelineOptions& po);
  // Starts the replication backend (errors name the key at fault); row 0 then waits until it
  // leads a fresh stream (a partitioned row's: JoinRowGroup).
  Status StartReplication();
  // Row 0 of a partitioned row, replication started: leads its group if the backend makes it
  // leader of empty streams, or starts as the follower of another member that leads (a former
  // leader started again after a failover: leader_ turns false, and it replays the group's log
  // from batch 0 or its checkpoint like any follower). Bounded by server.start_timeout_ms (with a
  // checkpoint, RowLeaderWaitMs). Errors: it would have to lead from a checkpoint or resume a
  // log of an earlier run (kInvalidArgument: a row cannot resume together yet), no leader.
  Status JoinRowGroup();
  // How long row 0 with a checkpoint waits for another member of its group to lead.
  int64_t RowLeaderWaitMs() const;
  // Row 0 of a row with a checkpoint that cannot follow another leader (`why`): the refusal.
  Status RowCheckpointRefusal(const std::string& why) const;
  // Init: loads the newest valid checkpoint of server.checkpoint_dir/<node> into table_ (the
  // refused ones are logged); none: table_ stays empty (the initial table is loaded).
  void RestoreCheckpoint();
  // The digest monitor over the group's other members (every node keeps its own digests, so a
  // promoted leader checks its followers at once); a follower's reporter to its leader.
  void MakeMonitor();
  void MakeReporter();
  // Records the node's first failure for the watch thread (any thread; hand over only).
  void NoteFailure(Status st);
  // Replication streams of this node's group: one per planner, or in a partitioned row one per
  // (home, planner) of the row, since a partition's group carries every sub-slice addressed to it.
  // The group's replication streams: one per (home, planner) of the row, and in a row with
  // followers one more for its leader's batch-end records (docs/partitioned-rows.md 9.4).
  // With server.checkpoint_dir: the node's checkpointer, started (its image sink goes into the
  // pipeline's options). Nothing without it.
  Status StartCheckpointer();
  // Start, once the node serves: writes the data identity into its folders that have none.
  Status RecordDataIdentity();
  // The session table's digest (an empty table's before there is one).
  uint64_t SessionsDigest() const {
    return sessions_ ? sessions_->Digest() : planner::SessionTable(session_limits_).Digest();
  }
  uint32_t Streams() const {
    const bool records = topo_->partitions() > 1 && topo_->replication_factor() > 0;
    return engine_.planner.planners * topo_->partitions() + (records ? 1 : 0);
  }
  // A leader's clean end of replication: end markers at batch `end` on every stream, then a
  // bounded wait for connected followers to apply everything.
  Status EndReplication(uint64_t end);
  // A raft follower that failed (it applies nothing more) and is told to stop: its vote still
  // counts in its group's majority, so it stays a member until the leader it follows is gone
  // (another term, or none known) or `deadline` (NowNanos), letting that leader's end markers
  // commit when the whole group stops at once (cluster.sh down). Its report connection closes
  // first: the leader does not wait for it to apply.
  void StayAVoter(int64_t deadline);
  // Leader: the followers of its group the replication backend has given up on (stranded:
  // what they lack is gone from the backend), by node name, with the backend's reason.
  std::map<std::string, std::string> StrandedFollowers() const;
  // Follower: why the backend can no longer bring this node up to date ("" if it can).
  std::string SelfStranded() const;
  // Batches [0, this) committed here, counted from the group's start (a node restored from a
  // checkpoint starts at restored_next_).
  // A row node's pipeline knows where it started (a checkpoint, or a promotion's resume batch).
  uint64_t AbsoluteCommittedBatches() const {
    return row_ ? row_->node()->pipeline()->committed_batches()
                : (restored_ ? restored_next_ : 0) + PipeStats().committed_batches;
  }
  // The node's pipeline state, whichever front-end runs it.
  engine::PipelineStats PipeStats() const { return row_ ? row_->node()->Stats() : pipeline_->Stats(); }
  Status PipeHealth() const { return row_ ? row_->health() : (pipeline_ ? pipeline_->health() : Status::Ok()); }

  // --- recovery (server_roles.cc) ---
  // Watch thread, a follower with checkpoints: when the backend can no longer catch this node
  // up from its log (GroupHealth::resume_needs_next, for 1 s and past this node's position),
  // fetches the leader's checkpoint (CheckpointFetcher), then asks for a restart (fail_stop).
  void RecoveryTick();

  // --- roles (server_roles.cc) ---
  // One look at the backend (watch thread, every kRolePollMs): follows a new leader, promotes
  // this node when the backend made it leader, deposes it when it no longer leads.
  void RoleTick();
  // Follower -> leader, as described at the top. `initial`: row 0 of a fresh cluster, in
  // Start (every stream must be empty). Errors: the backend changed its mind (not leader any
  // more: stay a follower), or the promotion failed (the caller fails the node).
  Status Promote(bool initial);
  // A follower of a partitioned row that the backend made leader: takes its partition's place in
  // the row (RowServer::Promote; docs/partitioned-rows.md 9.5), then serves as its home.
  Status PromoteRow();
  // Empty slices (b, p) for b in [next[p], end) on every stream, replicated and published.
  Status PadStreams(const std::vector<uint64_t>& next, uint64_t end);
  // The replicate hook of this node's planner (nullptr with rf = 0: nothing to replicate).
  engine::PlannedHook ReplicateHook();
  // replication.point = writes, the leader: replicates batch w.batch's images and fates, one
  // entry per planner stream (an executor thread, once the batch is executed).
  void ReplicateWrites(const executor::ExecutorStageOptions::BatchWrites& w);
  // The backend's view of who leads, as a node of this group (nullptr: none known).
  const NodeInfo* LeaderNode(const replication::LeaderView& v) const;
  // Leader hint for "not leader" replies and status (under hint_mu_).
  void LeaderHint(std::string* node, std::string* address, uint64_t* term) const;

  std::unique_ptr<Config> config_;
  std::unique_ptr<Config> repl_config_;
  std::unique_ptr<Topology> topo_;
  NodeInfo me_;
  // Row 0: leads a fresh cluster. A partitioned row: leads, full stop, unless another member led
  // its group when it started (JoinRowGroup makes it a follower; then fixed).
  bool leader_ = false;
  std::string backend_, mode_;
  engine::EngineConfig engine_;
  workloads::WorkloadOptions workload_;
  int64_t drain_timeout_ms_ = 0;
  int64_t corrupt_batch_ = -1;  // server.test_corrupt_slice_batch
  std::string kill_before_reply_file_;  // server.test_kill_before_reply_file + "." + node

  // The node's data folders without a data identity yet: recorded once it serves.
  std::vector<std::string> unrecorded_;
  // ServerLaunch::rejoins: > 0 when this process rejoins its group after a deposition.
  uint32_t rejoins_ = 0;
  // server.rejoin_when_deposed: a deposed node says `rejoining` while it stops.
  bool rejoin_when_deposed_ = false;

  std::unique_ptr<storage::Table> table_;
  // A restart from a checkpoint (Init, RestoreCheckpoint): the node starts at restored_next_
  // as a follower, with the checkpoint's session table.
  bool restored_ = false;
  uint64_t restored_next_ = 0;
  planner::SessionTable restored_sessions_;
  // The node does not start as a fresh cluster's leader: restored, or the streams hold an
  // earlier run's batches (it follows first; the backend may promote it).
  bool resuming_ = false;
  // server.checkpoint_dir: writes checkpoints in the background (a row's nodes too). Declared
  // before the pipeline, whose executors call it: it outlives them.
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<replication::Replicator> replicator_;
  std::unique_ptr<engine::Pipeline> pipeline_;
  std::unique_ptr<engine::LocalPlanner> planner_;  // created by a promotion (watch thread), then fixed
  std::unique_ptr<FollowerFeed> feed_;
  std::unique_ptr<ClientService> service_;
  std::unique_ptr<DigestMonitor> monitor_;
  std::unique_ptr<DigestReporter> reporter_;
  // One partition: the replicated client-session table (every node applies the log to it; the
  // leader checks txns against it while planning). Created in Start.
  planner::SessionLimits session_limits_;
  // A promoted leader's write histories serve its predecessor's retries from this batch on
  // (Promote); kNoHistory: not (any more).
  static constexpr uint64_t kNoHistory = UINT64_MAX;
  std::atomic<uint64_t> history_from_{kNoHistory};
  ReplicationPoint point_ = ReplicationPoint::kPlan;  // replication.point
  bool session_values_ = false;  // server.session_read_values: slices go to followers with reads
  std::unique_ptr<SessionStore> sessions_;
  // Outcomes of batches from here on go to clients (Promote sets it; the batches before were
  // another process's clients'). The sink's scratch (sink calls are serialized).
  std::atomic<uint64_t> client_from_{UINT64_MAX};
  std::vector<std::pair<size_t, uint64_t>> sink_opened_;
  std::vector<SessionAnswer> sink_answers_;
  // A node of a partitioned row (P > 1): its row half (cluster/row/row_server.h).
  std::unique_ptr<RowServer> row_;
  storage::KeyMapper partition_map_;
  bool row_ending_ GUARDED_BY(mu_) = false;  // a peer's input ended; this home stops too
  bool row_ending_handled_ GUARDED_BY(mu_) = false;

  // Roles. role_ changes on the watch thread (and in Start); the client port reads it.
  std::atomic<NodeRole> role_{NodeRole::kFollower};
  std::atomic<engine::LocalPlanner*> live_planner_{nullptr};  // planner_ once it plans (submit path)
  mutable Mutex hint_mu_;
  std::string hint_node_ GUARDED_BY(hint_mu_);     // who leads, as the backend says
  std::string hint_address_ GUARDED_BY(hint_mu_);
  uint64_t hint_term_ GUARDED_BY(hint_mu_) = 0;
  bool roles_frozen_ GUARDED_BY(mu_) = false;   // Shutdown began; no more role changes
  bool role_changing_ GUARDED_BY(mu_) = false;  // a promotion is running
  Status fail_stop_ GUARDED_BY(mu_);
  bool deposed_ GUARDED_BY(mu_) = false;
  bool restart_ GUARDED_BY(mu_) = false;        // fail_stop_ is a restart to load a fetched checkpoint
  bool row_end_leadership_logged_ = false;      // watch thread only
  std::string recovery_note_ GUARDED_BY(mu_);   // what the recovery is doing, for status ("" none)
  // Recovery (watch thread only).
  std::unique_ptr<net::StreamNet> fetch_net_;
  std::unique_ptr<CheckpointFetcher> fetcher_;
  std::string fetch_source_;
  int64_t behind_since_ns_ = 0;   // resume_needs_next first seen (0: not now)
  int64_t next_fetch_ns_ = 0;     // after a failed transfer: not before

  // Replication failures reported by callbacks, acted on by the watch thread.
  mutable Mutex mu_;
  std::condition_variable cv_;
  Status failure_ GUARDED_BY(mu_);
  bool failure_handled_ GUARDED_BY(mu_) = false;
  bool watch_stop_ GUARDED_BY(mu_) = false;
  uint32_t markers_done_ GUARDED_BY(mu_) = 0;
  Status marker_status_ GUARDED_BY(mu_);
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> replicated_bytes_{0};
  NamedThread watch_;
  bool stopped_ = false;
};

}  // namespace qrstore::cluster
