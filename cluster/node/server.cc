#include "cluster/node/server.h"
#include "cluster/node/server_impl.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "cluster/config/cluster_config.h"
#include "cluster/config/topology.h"
#include "cluster/follow/follower_feed.h"
#include "cluster/follow/replica_monitor.h"
#include "cluster/port/client_service.h"
#include "cluster/recovery/data_identity.h"
#include "cluster/row/row_server.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/logging.h"
#include "common/net/stream_net.h"
#include "common/report.h"
#include "common/thread.h"
#include "engine/engine.h"
#include "engine/local_planner.h"
#include "engine/pipeline.h"
#include "planner/eq.h"
#include "planner/session_table.h"
#include "replication/factory.h"
#include "storage/checkpoint.h"
#include "storage/table.h"
#include "workloads/workload.h"

namespace qrstore::cluster {

namespace {
// What a replication point cannot do (docs/replication-points.md), refused at start.
Status CheckReplicationPoint(ReplicationPoint point, const std::string& mode, bool session_values) {
  if (point == ReplicationPoint::kWrites && mode == "sync") {
    return Status::InvalidArgument(
        "replication.point: writes replicates what executing a batch wrote, so its executors cannot wait for "
        "replication (replication.mode: sync): use replication.mode: speculative (commit still waits for it)");
  }
  if (point == ReplicationPoint::kWrites && session_values) {
    return Status::InvalidArgument(
        "server.session_read_values keeps read values on the followers, which run the reads; under "
        "replication.point: writes they run nothing: turn one of them off");
  }
  return Status::Ok();
}
}  // namespace

Status ServerImpl::Init(const Config& config, const std::string& node, const ServerLaunch& launch) {
  config_ = std::make_unique<Config>(config);
  rejoins_ = launch.rejoins;
  auto topo = Topology::FromConfig(config);
  if (!topo.ok()) return topo.status();
  topo_ = std::make_unique<Topology>(std::move(topo).value());
  auto me = topo_->Find(node);
  if (!me.ok()) return me.status();
  me_ = *me.value();
  // Row 0 leads a fresh cluster; a node rejoining after it was deposed never does.
  leader_ = me_.row == 0 && rejoins_ == 0;
  std::vector<std::string> errors;
  auto partition_map = PartitionMapFor(config, *topo_);
  if (!partition_map.ok()) errors.push_back(partition_map.status().message());
  for (const std::string& k : DerivedReplicationKeys()) {
    if (config.IsSet(k)) errors.push_back(k + ": derived from cluster.nodes and --node; remove it from the config");
  }
  auto engine = engine::Engine::OptionsFromConfig(config);
  if (!engine.ok()) errors.push_back(engine.status().message());
  auto workload = partition_map.ok() && topo_->partitions() > 1
                      ? workloads::OptionsFromConfig(config, partition_map.value())
                      : workloads::OptionsFromConfig(config);
  if (!workload.ok()) errors.push_back(workload.status().message());
  // Checked before anything is allocated or started: the table must fit in memory, and the
  // dump directory must be writable (a clean stop writes there after the whole run).
  if (workload.ok()) {
    const uint64_t txns_in_flight = static_cast<uint64_t>(config.GetInt("batch.txns")) *
                                    static_cast<uint64_t>(config.GetInt("engine.batches_in_flight"));
    // A checkpoint's copy of the table is a second table.
    const uint64_t tables = config.GetString("server.checkpoint_dir").empty() ? 1 : 2;
    if (Status s = workloads::CheckMemoryFits(workload.value(), tables, txns_in_flight); !s.ok()) {
      errors.push_back(s.message());
    }
  }
  if (const std::string& dir = config.GetString("server.dump_state_dir");
      !dir.empty() && ::access(dir.c_str(), W_OK | X_OK) != 0) {
    errors.push_back("server.dump_state_dir: cannot write in '" + dir + "': " + std::strerror(errno));
  }
  if (!errors.empty()) {
    std::string msg = "invalid config for node " + node + ":";
    for (const auto& e : errors) msg += "\n  " + e;
    return Status::InvalidArgument(msg);
  }
  engine_ = engine.value();
  workload_ = workload.value();
  partition_map_ = partition_map.value();
  if (topo_->partitions() > 1) {
    // Executor ranges split this partition's keys (whatever the partition function did).
    engine_.pipeline.ranges = storage::KeyMapper::Within(partition_map_, engine_.pipeline.executors);
  }
  {
    const NodeInfo& l = topo_->Leader(me_.partition);  // row 0 leads a fresh cluster
    MutexLock lk(hint_mu_);  // no other thread runs yet: taken so the analysis sees the writes guarded
    hint_node_ = l.name;
    hint_address_ = l.client_address();
  }
  backend_ = config.GetString("replication.backend");
  mode_ = config.GetString("replication.mode");
  point_ = ReplicationPointOf(config);
  QR_RETURN_IF_ERROR(CheckReplicationPoint(point_, mode_, config.GetBool("server.session_read_values")));
  drain_timeout_ms_ = config.GetInt("server.drain_timeout_ms");
  rejoin_when_deposed_ = config.GetBool("server.rejoin_when_deposed");
  corrupt_batch_ = config.GetInt("server.test_corrupt_slice_batch");
  if (const std::string& f = config.GetString("server.test_kill_before_reply_file"); !f.empty()) {
    kill_before_reply_file_ = f + "." + node;
  }
  if (auto crash = ParseRowCrash(config.GetString("server.test_row_crash")); !crash.ok()) return crash.status();
  session_values_ = config.GetBool("server.session_read_values");
  session_limits_ = SessionLimitsFromConfig(config);

  // The initial table: the workload's records; a node of a row holds its own partition's only
  // (the table's dense region is allocated untouched, so with range partitioning the other
  // partitions' pages are never resident; with hash partitioning every page holds keys of
  // every partition).
  // A restart: the newest valid checkpoint, if server.checkpoint_dir holds one (docs/recovery.md).
  // Row 0 of a partitioned row too: whether it may start from its checkpoint (as the follower of
  // another member that leads its group now) is known only once replication started
  // (JoinRowGroup); it refuses there if it would have to lead from it.
  // The data must be this config's: a node whose checkpoints or raft log were made with
  // another table, cluster or node place refuses to start (bad input: exit 2) rather than
  // refuse its checkpoints and become another database.
  // Folders without an identity get it once the node serves (Start), so a start that fails
  // for another reason does not tie the data to its config.
  if (Status st = CheckDataIdentity(NodeDataFolders(config, me_.name), NodeDataIdentity(config, *topo_, me_), config,
                                    me_.name, /*record=*/false, &unrecorded_);
      !st.ok()) {
    return st.code() == StatusCode::kInvalidArgument ? st
                                                     : Status::IoError("the data identity of node " + node + ": " + st.message());
  }
  if (!NodeCheckpointDir(config, me_.name).empty()) RestoreCheckpoint();
  if (!table_) {
    table_ = std::make_unique<storage::Table>(workload_.Layout(), workload_.RecordCount());
    std::function<bool(storage::Key)> mine;
    if (topo_->partitions() > 1) {
      mine = [map = partition_map_, p = me_.partition](storage::Key k) { return map.Of(k) == p; };
    }
    QR_RETURN_IF_ERROR(workloads::LoadTable(workload_, table_.get(), mine));
  }
  if (topo_->partitions() > 1 && topo_->replication_factor() == 0) return Status::Ok();  // nothing to replicate

  // The replication backend's member list, role and ids, from cluster.nodes.
  const auto group = topo_->Group(me_.partition);
  std::string members;
  for (const NodeInfo* n : group) members += (members.empty() ? "" : ",") + n->peer_address();
  std::vector<std::string> derived = {
      "replication.groups=1",
      "replication.planners=" + std::to_string(Streams()),
      std::string("replication.role=") + (leader_ ? "leader" : "follower"),
      "replication.raft.members=" + members,
      "replication.raft.node_id=" + std::to_string(me_.row),
      // Row 0 campaigns at once in a fresh group; a rejoining node never does (another leads).
      std::string("replication.raft.preferred_leader=") + (rejoins_ > 0 ? "-1" : "0"),
      "replication.zookeeper.followers=" + std::to_string(topo_->replication_factor()),
      "replication.zookeeper.follower_id=" + me_.name,
  };
  // A memory-log member restarted from a checkpoint may have voted and acknowledged before, and
  // forgotten it: it votes again only once a leader has caught it up (crash-stop model).
  // A rejoining node lost its memory log with its process in the same way.
  if ((restored_ || rejoins_ > 0) && config.GetString("replication.raft.log") == "memory") {
    derived.push_back("replication.raft.vote_after_catch_up=true");
  }

  // One config serves every node: each keeps its raft disk log in its own folder below the dir.
  if (const std::string& d = config.GetString("replication.raft.dir"); !d.empty()) {
    derived.push_back("replication.raft.dir=" + d + "/" + me_.name);
  }
  if (topo_->partitions() > 1 && backend_ == "zookeeper") {
    // One stream of znodes per (partition, source): each partition's group under its own root.
    derived.push_back("replication.zookeeper.root=" + config.GetString("replication.zookeeper.root") + "/p" +
                      std::to_string(me_.partition));
  }
  auto rc = config.WithOverrides(derived);
  if (!rc.ok()) return Status::InvalidArgument("replication keys derived for node " + node + ": " + rc.status().message());
  repl_config_ = std::make_unique<Config>(std::move(rc).value());
  auto repl = replication::CreateReplicator(*repl_config_);
  if (!repl.ok()) {
    // Row 0 of a row with a checkpoint could not find out whether another member leads its group.
    if (leader_ && restored_ && topo_->partitions() > 1) {
      return RowCheckpointRefusal("its group's replication cannot be set up (" + repl.status().message() + ")");
    }
    return repl.status();
  }
  replicator_ = std::move(repl).value();
  return Status::Ok();
}

Status ServerImpl::Start() {
  // 1. The client port's options and handlers (one set for both shapes); it opens in the shape's
  // start, once what its handlers use exists: a port in use fails there, naming the key.
  const Config& c = *config_;
  ClientServiceOptions so;
  so.node = me_.name;
  so.listen_address = me_.client_address();
  so.max_connections = static_cast<uint32_t>(c.GetInt("server.max_connections"));
  so.max_message_bytes = static_cast<uint32_t>(c.GetInt("server.max_message_bytes"));
  so.max_inflight_txns = static_cast<uint64_t>(c.GetInt("server.max_inflight_txns_per_connection"));
  so.record_bytes = workload_.Layout().size();
  so.records = workload_.RecordCount();
  if (topo_->partitions() > 1) {
    // Client sessions live at their home (docs/sessions.md, rows): read values are not kept (a
    // retry of a committed txn that read something is answered committed-no-values).
    sessions_ = std::make_unique<SessionStore>(session_limits_, workload_.Layout().size(), /*keep_values=*/false);
    sessions_->ForRowHome();
  } else {
    sessions_ = std::make_unique<SessionStore>(session_limits_, workload_.Layout().size(), session_values_);
  }
  if (restored_) sessions_->Restore(std::move(restored_sessions_));
  service_ = std::make_unique<ClientService>(so, MakeHandlers());
  if (topo_->partitions() > 1) {
    QR_RETURN_IF_ERROR(StartRow());
    return RecordDataIdentity();
  }
  return StartOnePartition();
}

ClientServiceHandler ServerImpl::MakeHandlers() {
  // The role follows the backend (server_impl.h): every handler asks it. A partitioned row's row 0
  // leads its partition's group at the start; with followers the backend may later make a
  // follower leader, which takes its dead leader's place in the row (RoleTick,
  // RowServer::Promote). role_ is set in StartRow / Promote, once this node knows it leads.
  const bool rows = topo_->partitions() > 1;
  ClientServiceHandler h;
  h.status = [this] { return NodeStatusNow(); };
  if (const std::string dir = NodeCheckpointDir(*config_, me_.name); !dir.empty()) {
    // Peers that fell behind their group's log fetch this node's checkpoints.
    // While one fetches, this node (as leader) keeps the batches after that checkpoint for a
    // while, even if it checkpoints again meanwhile (more than once, when checkpoints come
    // faster than a transfer and a restart): the member would otherwise find them deleted
    // (ZooKeeper) and fetch again, perhaps forever.
    h.checkpoint_fetch = [this, dir](const proto::CheckpointFetch& req) {
      uint64_t b = 0;
      Result<std::string> chunk = ServeCheckpointChunk(dir, req, &b);
      if (chunk.ok() && replicator_) replicator_->HoldFrom(kGroup, b + 1, kFetchHoldMs);
      return chunk;
    };
  }
  // A row's leader admits through its RowNode; one partition's through the planner it runs
  // (set once its promotion is complete).
  h.submit = [this, rows](std::vector<storage::Txn>& t) -> size_t {
    if (rows) return role() == NodeRole::kLeader ? row_->node()->SubmitMany(t) : 0;
    engine::LocalPlanner* p = live_planner_.load(std::memory_order_acquire);
    return p != nullptr ? p->SubmitMany(t) : 0;
  };
  h.not_leader = [this, rows](proto::NotLeaderReply* r) {
    const bool serving =
        role() == NodeRole::kLeader && (rows || live_planner_.load(std::memory_order_acquire) != nullptr);
    if (serving) return false;
    uint64_t term = 0;
    LeaderHint(&r->leader_node, &r->leader_address, &term);
    if (rows && r->leader_node.empty() && term == 0) {
      const NodeInfo& l = topo_->Leader(me_.partition);  // nothing heard from the backend yet
      r->leader_node = l.name;
      r->leader_address = l.client_address();
    }
    if (r->leader_node == me_.name) r->leader_node.clear(), r->leader_address.clear();  // not serving yet
    return true;
  };
  h.report = [this](const proto::FollowerReport& r) {
    if (role() != NodeRole::kLeader) {
      return Status::Unavailable(me_.name + " does not lead (it is " + NodeRoleName(role()) + "): report ignored");
    }
    return monitor_->OnReport(r);
  };
  h.report_connection = [this](const std::string& n, bool up) { monitor_->SetConnected(n, up); };
  h.sessions = true;
  return h;
}

Status ServerImpl::StartOnePartition() {
  auto log = Logger("server");
  const Config& c = *config_;
  const bool replicated = topo_->replication_factor() > 0;
  // The pieces the handlers use exist before the port opens.
  engine::PipelineOptions po = engine_.pipeline;
  po.first_batch = restored_ ? restored_next_ : 0;
  // Replayed slices carry no plain reads (nothing to capture); outcomes go to clients from the
  // batch this node starts planning at (Promote), none before.
  po.capture_reads = true;
  po.deliver_outcomes = true;
  po.track_digest = true;
  po.executors_wait_for_replication = mode_ == "sync";
  // Under replication.point = writes a follower never executes, so it has no write history to
  // serve its predecessor's retries from: none are kept (such a retry is answered
  // committed-no-values).
  po.history_bytes = session_values_ || point_ == ReplicationPoint::kWrites ? 0 : static_cast<uint64_t>(c.GetInt("server.session_history_bytes"));
  if (replicated && point_ == ReplicationPoint::kWrites) {
    po.capture_writes = true;
    po.on_batch_writes = [this](const executor::ExecutorStageOptions::BatchWrites& w) { ReplicateWrites(w); };
  }
  QR_RETURN_IF_ERROR(StartCheckpointer());
  po.image_sink = checkpointer_.get();
  if (po.history_bytes > 0) {
    // Which keys the table holds never changes once loaded (writes to absent keys do nothing):
    // reading its index from the planner and commit threads is safe.
    sessions_->EnableHistory(
        workload_.Layout(), [this](uint64_t b) { return pipeline_->HistoryCovers(b); },
        [this](storage::Key k) { return std::as_const(*table_).Find(k) != nullptr; });
  }
  MakeMonitor();
  if (replicated) MakeReporter();
  MakePipeline(po);
  if (replicated) {
    FollowerFeedOptions fo;
    fo.group = kGroup;
    fo.planners = engine_.planner.planners;
    fo.ranges = po.ranges;
    fo.window = po.batches_in_flight + 2;
    fo.first_batch = po.first_batch;
    // A leader's clean stop is not the group's end: its markers are an empty batch, and the
    // group goes on after them when it is started again (or when the others elect a leader).
    fo.continue_after_end = true;
    fo.executors = po.executors;
    fo.plan_input = point_ == ReplicationPoint::kInput;
    fo.apply_writes = point_ == ReplicationPoint::kWrites;
    fo.record_bytes = workload_.Layout().size();
    feed_ = std::make_unique<FollowerFeed>(
        fo, pipeline_.get(), replicator_.get(), [this](uint64_t) { reporter_->MarkEnded(true); },
        [this] { reporter_->MarkEnded(false); });
  }
  if (Status st = service_->Start(); !st.ok()) {
    return Status::Unavailable("cluster.nodes[" + std::to_string(me_.index) + "].client_port: " + st.message());
  }

  // 2. Replication; row 0 waits until the backend makes it leader of a fresh stream.
  QR_RETURN_IF_ERROR(StartReplication());
  // With checkpoints, the log keeps what a restart replays: everything after the checkpoint
  // this node started from (none: all of it) until the next one is written.
  if (checkpointer_ && replicated) replicator_->RetainFrom(kGroup, restored_ ? restored_next_ : 0);

  // 3. The pipeline and the front-end: every node starts as a follower; row 0 of a fresh
  // cluster is promoted at once (every stream empty), the others when the backend says so.
  QR_RETURN_IF_ERROR(pipeline_->Start());
  if (leader_ && !resuming_ && replicator_->IsLeader(kGroup)) {
    // (its feed and reporter never start: every stream is empty)
    QR_RETURN_IF_ERROR(Promote(/*initial=*/true));
  } else if (replicated) {
    QR_RETURN_IF_ERROR(feed_->Start());
    QR_RETURN_IF_ERROR(reporter_->Start());
  }
  watch_ = NamedThread("watch", [this] { WatchLoop(); });
  QR_RETURN_IF_ERROR(RecordDataIdentity());
  log->info("{} serving: partition {} row {}, clients on {}, backend {} ({}), {} planner(s), {} executor(s)",
            Identity(), me_.partition, me_.row, me_.client_address(), backend_, mode_, engine_.planner.planners,
            engine_.pipeline.executors);
  if (backend_ == "zookeeper" && point_ == ReplicationPoint::kWrites) {
    log->warn("{} replication.point writes over ZooKeeper: each batch's entry carries every record it wrote, and "
              "ZooKeeper keeps its last 500 transactions in its heap twice; at full load a 1 GB-heap server ran out "
              "of memory (docs/replication-points.md): give it more heap, smaller batches, or use raft",
              Identity());
  }
  if (backend_ == "raft" && topo_->replication_factor() == 1) {
    log->warn("{} raft with rf = 1 (two members) cannot fail over: a majority of two is both, so with either "
              "member lost the group stops; rf = 2 (three members) survives a lost node", Identity());
  }
  return Status::Ok();
}

void ServerImpl::MakePipeline(const engine::PipelineOptions& po) {
  const Config& c = *config_;
  const bool wrong = c.GetString("server.test_wrong_digest_node") == me_.name;
  const uint64_t wrong_from = static_cast<uint64_t>(c.GetInt("server.test_wrong_digest_batch"));
  // Every node's sink applies the session entries of every slice (in planned order); outcomes go
  // to clients only from the batch this node started planning at.
  auto sink = [this](const std::vector<commit::TxnOutcome>& o) {
    sink_opened_.clear();
    sink_answers_.clear();
    sessions_->Apply(o, &sink_opened_, &sink_answers_);
    if (o.empty() || o.front().pos.batch < client_from_.load(std::memory_order_acquire)) return;
    if (!kill_before_reply_file_.empty() && ::access(kill_before_reply_file_.c_str(), F_OK) == 0) {
      // The test hook: committed and replicated, not answered.
      Logger("server")->warn("{} test hook: killing itself before answering batch {} (committed, replicated)",
                             Identity(), o.front().pos.batch);
      ::raise(SIGKILL);
    }
    service_->Answer(sink_answers_);  // duplicates that waited for these outcomes, first
    service_->OnOutcomes(o, sink_opened_);
  };
  pipeline_ = std::make_unique<engine::Pipeline>(
      po, table_.get(), std::move(sink), [this, wrong, wrong_from](const commit::BatchInfo& b) {
        // The session table is replicated state: its digest goes into the one replicas compare.
        const uint64_t d = b.digest ^ Mix64(sessions_->Digest());
        monitor_->RecordOwn(b.batch, d);
        if (checkpointer_) checkpointer_->OnCommitted(b.batch, d);
        if (const uint64_t from = history_from_.load(std::memory_order_acquire);
            from != kNoHistory && !pipeline_->HistoryCovers(from)) {
          // A promoted leader's histories no longer reach the batch it started leading at: no
          // retry of its predecessor's txns can be served from them any more.
          history_from_.store(kNoHistory, std::memory_order_release);
          pipeline_->StopHistory();
          Logger("server")->info("{} write histories stopped at batch {}: they no longer reach batch {}, where it "
                                 "started leading",
                                 Identity(), b.batch, from);
        }
        // The test hook lies about the digest, so tests can see the leader notice.
        if (reporter_ && role() != NodeRole::kLeader) reporter_->RecordApplied(b.batch, wrong && b.batch >= wrong_from ? ~d : d);
      });
}

Status ServerImpl::RecordDataIdentity() {
  if (unrecorded_.empty()) return Status::Ok();
  std::vector<std::string> recorded;
  QR_RETURN_IF_ERROR(CheckDataIdentity(unrecorded_, NodeDataIdentity(*config_, *topo_, me_), *config_, me_.name,
                                       /*record=*/true, &recorded));
  for (const std::string& f : recorded) {
    Logger("server")->info("{} recorded what its data is made with in {}/{}", Identity(), f, kIdentityFileName);
  }
  unrecorded_.clear();
  return Status::Ok();
}

Status ServerImpl::StartCheckpointer() {
  const Config& c = *config_;
  const std::string dir = NodeCheckpointDir(c, me_.name);
  if (dir.empty()) return Status::Ok();
  CheckpointerOptions co;
  co.dir = dir;
  co.every_batches = static_cast<uint64_t>(c.GetInt("server.checkpoint_every_batches"));
  co.phase = CheckpointPhase(co.every_batches, me_.row, topo_->rows(), c.GetBool("server.checkpoint_stagger"));
  co.keep = static_cast<int>(c.GetInt("server.checkpoint_keep"));
  co.copy_on_write = c.GetBool("server.checkpoint_copy_on_write");
  co.direct_io = c.GetBool("server.checkpoint_direct_io");
  co.write_bytes_per_s = static_cast<uint64_t>(c.GetInt("server.checkpoint_write_mb_per_s")) * 1'000'000;
  const storage::CheckpointExpect id = NodeCheckpointIdentity(*topo_, me_.partition, workload_);
  co.base.cluster_id = id.cluster_id;
  co.base.partition = id.partition;
  co.base.partitions = id.partitions;
  co.base.record_size = id.record_size;
  co.base.capacity = id.capacity;
  co.base.stream_next.assign(Streams(), 0);
  co.identity = [this] { return Identity(); };
  // A restart replays the raft disk log from the batch after the newest checkpoint on.
  co.on_written = [this](uint64_t b) {
    if (replicator_) replicator_->RetainFrom(kGroup, b + 1);
  };
  checkpointer_ = std::make_unique<Checkpointer>(co, *table_, [this] {
    return sessions_ ? sessions_->Encode() : planner::SessionTable(session_limits_).Encode();
  });
  return checkpointer_->Start();
}

void ServerImpl::RestoreCheckpoint() {
  auto log = Logger("server");
  const std::string dir = NodeCheckpointDir(*config_, me_.name);
  auto files = storage::ListCheckpoints(dir);
  if (!files.ok() || files->empty()) {
    log->info("{} no checkpoint in {}: starting from the initial table", Identity(), dir);
    return;
  }
  const storage::CheckpointExpect expect = NodeCheckpointIdentity(*topo_, me_.partition, workload_);
  for (const std::string& path : files.value()) {
    std::unique_ptr<storage::Table> t;
    planner::SessionTable sessions(session_limits_);
    storage::CheckpointMeta meta;
    bool meta_known = false;
    if (Status st = ValidateNodeCheckpoint(path, expect, workload_.Layout(), session_limits_, &t, &sessions, &meta,
                                           &meta_known);
        !st.ok()) {
      log->warn("{} refused checkpoint {}", Identity(), st.message());
      continue;
    }
    table_ = std::move(t);
    restored_sessions_ = std::move(sessions);
    restored_ = true;
    restored_next_ = meta.batch + 1;
    log->warn("{} restored from {}: the state after batch {} ({} records, {} sessions, digest {}); applying the "
              "group's batches from {} on",
              Identity(), path, meta.batch, table_->size(), restored_sessions_.sessions(), Hex(meta.digest),
              restored_next_);
    return;
  }
  log->warn("{} no valid checkpoint in {} ({} refused): starting from the initial table", Identity(), dir,
            files->size());
}

Status ServerImpl::StartReplication() {
  if (Status st = replicator_->Start(); !st.ok()) {
    const bool disk_log = st.code() == StatusCode::kCorruption || st.code() == StatusCode::kIoError;
    std::string where = backend_ != "raft" ? "replication (" + backend_ + "): "
                        : disk_log ? "replication.raft.dir (the raft disk log): "
                                   : "cluster.nodes[" + std::to_string(me_.index) + "].peer_port (raft, " +
                                         me_.peer_address() + "): ";
    const Status out = st.code() == StatusCode::kInvalidArgument ? Status::InvalidArgument(where + st.message())
                                                                   : Status::Unavailable(where + st.message());
    // Row 0 of a row with a checkpoint cannot tell whether another member leads its group.
    if (leader_ && restored_ && topo_->partitions() > 1) {
      return RowCheckpointRefusal("its group's replication did not start (" + out.message() + ")");
    }
    return out;
  }
  // A node that starts from the initial table replays its group from batch 0: its own log
  // must still hold it (else the state between is lost here: it would serve nothing, or with
  // the whole group in this state the group would say serving and never serve).
  if (!restored_ && !replicator_->LogFromStart(kGroup)) {
    const std::string ckpt = NodeCheckpointDir(*config_, me_.name);
    return Status::Corruption(
        "node " + me_.name + " has no valid checkpoint" + (ckpt.empty() ? std::string(" (no server.checkpoint_dir)") : " in " + ckpt) +
        " and its raft log (" + repl_config_->GetString("replication.raft.dir") +
        ") no longer starts at batch 0 (compacted after a checkpoint): the state before its log's first entry is "
        "lost on this node, so it cannot start from the initial table. Restore its checkpoint files, or start "
        "the cluster anew with `scripts/cluster.sh up CONFIG --fresh` (it deletes the data)");
  }
  // A restored node joins as a follower whatever its row; the backend may promote it later.
  resuming_ = restored_;
  if (leader_ && topo_->partitions() > 1) return JoinRowGroup();
  return leader_ && !restored_ ? WaitForLeadership() : Status::Ok();
}

void ServerImpl::MakeMonitor() {
  std::vector<std::string> followers;
  for (const NodeInfo* n : topo_->Group(me_.partition)) {
    // The group's other members: whoever leads watches the rest.
    if (n->name != me_.name) followers.push_back(n->name);
  }
  monitor_ = std::make_unique<DigestMonitor>(followers,
                                             static_cast<size_t>(config_->GetInt("server.digest_history_batches")));
}

void ServerImpl::MakeReporter() {
  DigestReporter::Options ro;
  ro.node = me_.name;
  // Row 0 leads a fresh cluster; a follower reports to the leader it knows of (the config's row 0,
  // or in a row the member that led when this node started: JoinRowGroup); later the role thread
  // follows the backend (SetLeader).
  std::string leader, address;
  LeaderHint(&leader, &address, nullptr);
  ro.leader_address = leader_ || leader == me_.name ? "" : address;
  ro.interval_ms = config_->GetInt("server.report_interval_ms");
  reporter_ = std::make_unique<DigestReporter>(ro);
}

void ServerImpl::NoteFailure(Status st) {
  {
    MutexLock lk(mu_);
    if (!failure_.ok()) return;
    failure_ = std::move(st);
  }
  cv_.notify_all();
}

Status ServerImpl::WaitForLeadership() {
  const int64_t deadline = NowNanos() + config_->GetInt("server.start_timeout_ms") * 1'000'000;
  for (;;) {
    bool ready = replicator_->IsLeader(kGroup);
    std::vector<uint64_t> next;
    for (uint32_t p = 0; ready && p < Streams(); ++p) {
      auto n = replicator_->NextBatchId(kGroup, p);
      ready = n.ok();
      if (ready) next.push_back(n.value());
    }
    if (ready) {
      for (uint32_t p = 0; p < next.size(); ++p) {
        if (next[p] != 0) {
          // A restart (a disk log, or a ZooKeeper root that holds an earlier run's batches): this
          // node applies them as a follower from the initial table first; the watch thread then
          // promotes it as after any election (server_roles.cc).
          Logger("server")->warn("{} stream {} already holds batches up to {} from an earlier run: this node "
                                 "applies them as a follower first, then takes over",
                                 Identity(), p, next[p] - 1);
          resuming_ = true;
          return Status::Ok();
        }
      }
      return Status::Ok();
    }
    if (const replication::LeaderView v = replicator_->Leader(kGroup); v.known && !v.self) {
      // Another member won the first election (this one started late): it plans; this node
      // follows, as any other.
      const NodeInfo* n = LeaderNode(v);
      Logger("server")->warn("{} {} leads the group already (term {}): this node starts as a follower", Identity(),
                             n != nullptr ? n->name : "another member", v.term);
      return Status::Ok();
    }
    if (NowNanos() >= deadline) {
      return Status::Unavailable("replication (" + backend_ + "): this node (row 0) did not become leader within " +
                                 "server.start_timeout_ms (" + std::to_string(config_->GetInt("server.start_timeout_ms")) +
                                 " ms): are the other members of cluster.nodes up?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void ServerImpl::OnReplicated(uint64_t b, uint32_t p, const Status& st) {
  // A library thread: hand over only.
  if (st.ok()) {
    if (row_) {
      row_->node()->MarkReplicated(b, p);
    } else {
      pipeline_->MarkReplicated(b, p);
    }
    return;
  }
  NoteFailure(Status::Unavailable("replication failed at batch " + std::to_string(b) + ", planner " +
                                  std::to_string(p) + ": " + st.ToString()));
}

void ServerImpl::WatchLoop() {
  // With followers the role follows the backend, looked at every kRolePollMs (a partitioned row
  // too: a follower whose group elects it takes its dead leader's place in the row).
  const bool roles = topo_->replication_factor() > 0;
  // A follower of a partitioned row with checkpoints: whether its group can still catch it up
  // from the log, or it must fetch its leader's checkpoint (RecoveryTick), looked at as often.
  const bool recovery = row_ && !leader_ && checkpointer_ && topo_->replication_factor() > 0;
  constexpr int kRolePollMs = 10;
  MutexUniqueLock lk(mu_);
  for (;;) {
    auto pending = [&]() REQUIRES(mu_) {
      return watch_stop_ || (!failure_.ok() && !failure_handled_) || (row_ending_ && !row_ending_handled_);
    };
    if (roles || recovery) {
      cv_.wait_for(lk.native(), std::chrono::milliseconds(kRolePollMs), pending);
    } else {
      cv_.wait(lk.native(), pending);
    }
    if (watch_stop_) return;
    if (roles || recovery) {
      lk.Unlock();
      if (roles) RoleTick();
      RecoveryTick();
      lk.Lock();
      if (watch_stop_) return;
    }
    if (row_ending_ && !row_ending_handled_ && failure_.ok()) {
      // A peer's input ended (it is stopping): the row ends together, so this home ends its
      // input too; what it admitted is still answered.
      row_ending_handled_ = true;
      lk.Unlock();
      Logger("server")->warn("{} a row peer is stopping: stops admitting; the row ends once the batches in flight "
                             "are done", Identity());
      service_->StopAdmitting(Status::Unavailable("the row is stopping (a peer's input ended)"));
      row_->node()->CloseInput();
      lk.Lock();
      continue;
    }
    if (failure_.ok() || failure_handled_) continue;
    failure_handled_ = true;
    const Status st = failure_;
    lk.Unlock();
    Logger("server")->error("{} {}: stops admitting; every unacknowledged txn is answered 'failed'", Identity(),
                            st.message());
    if (row_) {
      row_->node()->Fail(st);
    } else {
      pipeline_->Fail(st);  // no outcome is delivered after this returns
    }
    service_->StopAdmitting(st);
    service_->FailPending(st);
    lk.Lock();
  }
}

Status ServerImpl::fail_stop(bool* deposed) const {
  MutexLock lk(mu_);
  if (deposed != nullptr) *deposed = deposed_;
  return fail_stop_;
}

bool ServerImpl::restart_requested() const {
  MutexLock lk(mu_);
  return restart_;
}

Status ServerImpl::health() const {
  {
    MutexLock lk(mu_);
    if (!failure_.ok()) return failure_;
  }
  if (feed_) {
    if (Status st = feed_->health(); !st.ok()) return st;
  }
  return PipeHealth();
}

// ---------------------------------------------------------------------------------------------

Result<std::unique_ptr<Server>> Server::Create(const Config& config, const std::string& node,
                                               const ServerLaunch& launch) {
  auto impl = std::make_unique<ServerImpl>();
  QR_RETURN_IF_ERROR(impl->Init(config, node, launch));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}
Server::Server(std::unique_ptr<ServerImpl> impl) : impl_(std::move(impl)) {}
Server::~Server() = default;
Status Server::Start() { return impl_->Start(); }
std::string Server::ReadyLine() const { return impl_->ReadyLine(); }
std::string Server::StatsLine() const { return impl_->StatsLine(); }
proto::NodeStatus Server::NodeStatusNow() const { return impl_->NodeStatusNow(); }
Status Server::Shutdown() { return impl_->Shutdown(); }
Status Server::health() const { return impl_->health(); }
Status Server::fail_stop(bool* deposed) const { return impl_->fail_stop(deposed); }
bool Server::restart_requested() const { return impl_->restart_requested(); }

}  // namespace qrstore::cluster
