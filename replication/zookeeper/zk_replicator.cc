// ZkReplicator's life cycle and the calls of its user-facing contract: Start (connect, create
// the paths, the role's start-up scan) and Stop, the calls that queue work for the worker
// thread, NextBatchId, stats; then the factory and the test hooks of zk_replicator.h.
#include "replication/zookeeper/zk_replicator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "common/logging.h"
#include "replication/zookeeper/zk_layout.h"
#include "replication/zookeeper/zk_replicator_impl.h"
#include "replication/zookeeper/zk_session.h"

namespace qrstore::replication::zookeeper {

// ------------------------------------------------------------------------------------------
// Start / Stop and the user-facing calls.

Status ZkReplicator::WaitConnected(int64_t deadline_nanos) {
  std::deque<ZkEvent> events;
  while (NowNanos() < deadline_nanos) {
    inbox_.WaitAndTake(&events, deadline_nanos);
    for (auto& ev : events) {
      if (ev.kind != ZkEvent::Kind::kSession || ev.generation != session_.generation()) continue;
      if (ev.state == ZOO_CONNECTED_STATE) return Status::Ok();
      if (ev.state == ZOO_EXPIRED_SESSION_STATE || ev.state == ZOO_AUTH_FAILED_STATE) {
        return Status::Unavailable(ident_ + "ZooKeeper session rejected while connecting to " + opts_.hosts);
      }
    }
    events.clear();
  }
  return Status::Unavailable(ident_ + "could not connect to ZooKeeper at " + opts_.hosts + " within " +
                             std::to_string(opts_.connect_timeout_ms) +
                             " ms (is a server running? scripts/zk-server.sh start DIR)");
}

Status ZkReplicator::SyncRetry(const char* what, const std::string& path, int64_t deadline_nanos,
                               const std::function<int()>& op, std::initializer_list<int> accepted, int* rc_out) {
  while (true) {
    int rc = op();
    if (rc == ZOK || std::find(accepted.begin(), accepted.end(), rc) != accepted.end()) {
      if (rc_out != nullptr) *rc_out = rc;
      return Status::Ok();
    }
    if (!IsRetryable(rc) || NowNanos() >= deadline_nanos) {
      return Status::Unavailable(ident_ + what + " " + path + " failed: " + ZkErrorName(rc));
    }
    // Start-up only, on the caller's thread: a short bounded back-off before retrying.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status ZkReplicator::EnsurePath(const std::string& path, int64_t deadline_nanos) {
  for (const auto& prefix : PathPrefixes(path)) {
    QR_RETURN_IF_ERROR(SyncRetry(
        "create", prefix, deadline_nanos,
        [&] { return zoo_create(session_.handle(), prefix.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0); },
        {ZNODEEXISTS}));
  }
  return Status::Ok();
}

void ZkReplicator::PublishNext(const StreamKey& key, uint64_t next) {
  MutexLock lock(next_mu_);
  next_ids_[key] = next;
}

Status ZkReplicator::Start() {
  QR_CHECK(!running_.load(std::memory_order_acquire) && !thread_.joinable(), "ZkReplicator::Start twice");
  if (stopping_.load(std::memory_order_acquire)) return Status::Aborted(ident_ + "Start after Stop");
  const int64_t deadline = NowNanos() + static_cast<int64_t>(opts_.connect_timeout_ms) * 1'000'000;
  QR_RETURN_IF_ERROR(session_.Open(opts_.hosts, opts_.session_timeout_ms));
  counters_.sessions.fetch_add(1, std::memory_order_relaxed);
  Status st = WaitConnected(deadline);
  if (st.ok()) st = EnsurePath(ConsumersPath(opts_.root), deadline);
  if (st.ok()) st = EnsurePath(LivePath(opts_.root), deadline);
  static std::atomic<uint64_t> auto_ids{0};
  follower_id_ = opts_.follower_id;
  if (follower_id_.empty()) {
    follower_id_ = "auto-" + std::to_string(::getpid()) + "-" + std::to_string(auto_ids.fetch_add(1));
    if (!opts_.leader) {
      log_->warn("{}replication.zookeeper.follower_id is empty: using '{}' (progress is not resumed after a restart)",
                 ident_, follower_id_);
    }
  }
  registered_ = !opts_.leader || (opts_.election && !opts_.follower_id.empty());
  elections_.assign(opts_.groups, GroupElection{});
  {
    MutexLock lock(view_mu_);
    views_.assign(opts_.groups, LeaderView{});
  }
  if (st.ok() && opts_.leader && !opts_.election) {
    for (uint32_t g = 0; g < opts_.groups && st.ok(); ++g) {
      for (uint32_t p = 0; p < opts_.planners && st.ok(); ++p) {
        st = EnsurePath(StreamPath(opts_.root, g, p), deadline);
        if (st.ok()) st = ScanStream(g, p, deadline);
      }
    }
  }
  if (st.ok() && registered_) {
    st = LoadProgress(deadline);
    if (st.ok()) st = CreateLiveSync(deadline);  // after the progress znode: live implies registered
  }
  if (st.ok() && opts_.election) {
    // Every member is a candidate, but a follower only once the group has had a leader (its
    // epoch znode exists): a fresh group is led by the configured leader, which joins at once
    // and, first in line, wins here, before Start returns. A leader that finds the group led
    // (a restart after a failover) waits in line like any candidate.
    for (uint32_t g = 0; g < opts_.groups && st.ok(); ++g) {
      st = EnsurePath(ElectionPath(opts_.root, g), deadline);
      GroupElection& e = elections_[g];
      e.step = true;
      e.phase = opts_.leader ? ElectionPhase::kJoin : ElectionPhase::kAwaitEpoch;
      if (st.ok() && opts_.leader) st = StepElection(g, deadline);
    }
  }
  if (!st.ok()) {
    session_.Close();
    return st;
  }
  connected_ = true;
  log_->info("{}started: hosts {} groups {} planners {} chunk_bytes {} max_inflight {}", ident_, opts_.hosts,
             opts_.groups, opts_.planners, opts_.chunk_bytes, opts_.max_inflight);
  running_.store(true, std::memory_order_release);
  thread_ = NamedThread(opts_.leader ? "zk-leader" : "zk-follower", [this] { Run(); });
  return Status::Ok();
}

void ZkReplicator::Stop() {
  if (stopping_.exchange(true, std::memory_order_acq_rel)) {
    thread_.Join();
    return;
  }
  running_.store(false, std::memory_order_release);
  requests_.Close();
  inbox_.Wake();
  thread_.Join();
  if (session_.is_open()) session_.Close();  // Start failed half-way or never ran the thread
}

void ZkReplicator::ReplicateData(const ReplicateMeta& meta, std::string bytes, ReplicateCallback cb) {
  if (!opts_.election && !opts_.leader) {
    cb(meta, Status::Unavailable(ident_ + "ReplicateData on a follower (replication.role=follower)"));
    return;
  }
  if (opts_.election && InRange(meta) && !IsLeader(meta.group)) {
    LeaderView v = Leader(meta.group);
    cb(meta, Status::Unavailable(ident_ + "not the leader of group " + std::to_string(meta.group) +
                                 (v.known ? " (leader: '" + v.id + "', epoch " + std::to_string(v.term) + ")"
                                          : " (no leader known)")));
    return;
  }
  if (!running_.load(std::memory_order_acquire)) {
    cb(meta, Status::Aborted(ident_ + "not running"));
    return;
  }
  ReplicateCallback keep = cb;
  Request r;
  r.replicate = true;
  r.meta = meta;
  r.bytes = std::move(bytes);
  r.replicate_cb = std::move(cb);
  // Blocks while kRequestQueueCapacity requests wait: back-pressure on the caller.
  if (!requests_.Push(std::move(r))) {
    keep(meta, Status::Aborted(ident_ + "stopped"));
    return;
  }
  inbox_.Wake();
}

void ZkReplicator::ReceiveData(const ReplicateMeta& meta, ReceiveCallback cb) {
  // With elections any member reads: a promoted follower still receives what its predecessor
  // wrote, and a configured leader that lost the election reads as a follower.
  if (opts_.leader && !opts_.election) {
    cb(meta, Status::Unavailable(ident_ + "ReceiveData on the leader (replication.role=leader)"), {});
    return;
  }
  if (!running_.load(std::memory_order_acquire)) {
    cb(meta, Status::Aborted(ident_ + "not running"), {});
    return;
  }
  ReceiveCallback keep = cb;
  Request r;
  r.replicate = false;
  r.meta = meta;
  r.receive_cb = std::move(cb);
  if (!requests_.Push(std::move(r))) {
    keep(meta, Status::Aborted(ident_ + "stopped"), {});
    return;
  }
  inbox_.Wake();
}

void ZkReplicator::CancelReceives(uint32_t group) {
  if (!running_.load(std::memory_order_acquire)) return;  // Stop fails every receive anyway
  Request r;
  r.replicate = false;
  r.cancel = true;
  r.meta.group = group;
  if (requests_.Push(std::move(r))) inbox_.Wake();
}

Result<uint64_t> ZkReplicator::NextBatchId(uint32_t group, uint32_t planner) const {
  if (group >= opts_.groups || planner >= opts_.planners) {
    return Status::InvalidArgument(ident_ + "stream " + StreamName(group, planner) + " out of range (groups " +
                                   std::to_string(opts_.groups) + ", planners " + std::to_string(opts_.planners) +
                                   ")");
  }
  MutexLock lock(next_mu_);
  if (broken_.count({group, planner}) != 0) {
    return Status::Unavailable(ident_ + "stream " + StreamName(group, planner) +
                               " failed; restart the replicator to resume");
  }
  auto it = next_ids_.find({group, planner});
  return it == next_ids_.end() ? 0 : it->second;
}

GroupHealth ZkReplicator::Health(uint32_t group) const {
  MutexLock lock(health_mu_);
  auto it = health_.find(group);
  return it == health_.end() ? GroupHealth{} : it->second;
}

ZkStats ZkReplicator::stats() const {
  ZkStats s;
  s.batches_acked = counters_.acked.load(std::memory_order_relaxed);
  s.batches_delivered = counters_.delivered.load(std::memory_order_relaxed);
  s.requests_retried = counters_.retried.load(std::memory_order_relaxed);
  s.exists_verified = counters_.verified.load(std::memory_order_relaxed);
  s.sessions_created = counters_.sessions.load(std::memory_order_relaxed);
  s.connection_losses = counters_.losses.load(std::memory_order_relaxed);
  s.batches_deleted = counters_.deleted.load(std::memory_order_relaxed);
  s.stale_markers = counters_.stale.load(std::memory_order_relaxed);
  s.batches_evicted = counters_.evicted.load(std::memory_order_relaxed);
  s.batches_gone = counters_.gone.load(std::memory_order_relaxed);
  s.rounds_held_back = counters_.held.load(std::memory_order_relaxed);
  s.elections_won = counters_.won.load(std::memory_order_relaxed);
  s.writes_fenced = counters_.fenced.load(std::memory_order_relaxed);
  s.depositions = counters_.deposed.load(std::memory_order_relaxed);
  return s;
}

namespace {

void NoopWatcher(zhandle_t*, int, int, const char*, void*) {}

}  // namespace

Status ZkReplicator::ForceSessionExpiry() {
  // Test hook only (polls with short sleeps rather than plumbing callbacks for throw-away
  // handles). A second handle attaches to our session and closes it, which ends the session on
  // the server. Our own client may reconnect in between and take the session back before the
  // close, so repeat until the worker has really created a new session.
  const uint64_t sessions_before = counters_.sessions.load(std::memory_order_relaxed);
  for (int attempt = 0; attempt < 5; ++attempt) {
    clientid_t id;
    int64_t deadline = NowNanos() + 10'000'000'000;
    while (!session_.ClientId(&id)) {
      if (NowNanos() > deadline) return Status::Unavailable(ident_ + "no connected session to expire");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    zhandle_t* zh = zookeeper_init(opts_.hosts.c_str(), NoopWatcher, opts_.session_timeout_ms, &id, nullptr, 0);
    if (zh == nullptr) return Status::Internal(ident_ + "zookeeper_init for the expiry hook failed");
    deadline = NowNanos() + 10'000'000'000;
    while (zoo_state(zh) != ZOO_CONNECTED_STATE && NowNanos() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    zookeeper_close(zh);  // closing the attached handle ends the session on the server
    deadline = NowNanos() + 3'000'000'000;
    while (NowNanos() < deadline) {
      if (counters_.sessions.load(std::memory_order_relaxed) > sessions_before) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return Status::Unavailable(ident_ + "expiry hook: the session did not expire after 5 attempts");
}

// ------------------------------------------------------------------------------------------
// The factory and the test hooks of zk_replicator.h.

Result<std::unique_ptr<Replicator>> CreateZkReplicator(const ZkOptions& options) {
  if (options.hosts.empty()) {
    return Status::InvalidArgument("replication.zookeeper.hosts: empty and $QRSTORE_ZK_HOSTS unset");
  }
  QR_RETURN_IF_ERROR(ValidateRoot(options.root));
  if (!options.follower_id.empty()) QR_RETURN_IF_ERROR(ValidateFollowerId(options.follower_id));
  if (options.chunk_bytes == 0 || options.chunk_bytes > kMaxChunkBytes - kMarkerHeaderBytes) {
    return Status::InvalidArgument("replication.zookeeper.chunk_bytes: must be in [1, " +
                                   std::to_string(kMaxChunkBytes - kMarkerHeaderBytes) + "]");
  }
  if (options.max_inflight < 1) return Status::InvalidArgument("replication.zookeeper.max_inflight: must be >= 1");
  if (options.groups < 1 || options.planners < 1) {
    return Status::InvalidArgument("replication.groups and replication.planners must be >= 1");
  }
  return std::unique_ptr<Replicator>(new ZkReplicator(options));
}

Result<std::unique_ptr<Replicator>> CreateZkReplicator(const Config& config) {
  Result<ZkOptions> o = OptionsFromConfig(config);
  if (!o.ok()) return o.status();
  return CreateZkReplicator(o.value());
}

bool GetZkStats(const Replicator& replicator, ZkStats* stats) {
  const auto* zk = dynamic_cast<const ZkReplicator*>(&replicator);
  if (zk == nullptr) return false;
  *stats = zk->stats();
  return true;
}

std::string CurrentServerForTest(const Replicator& replicator) {
  const auto* zk = dynamic_cast<const ZkReplicator*>(&replicator);
  return zk == nullptr ? std::string() : zk->CurrentServer();
}

Status MuteEpochWatchForTest(Replicator* replicator, bool muted) {
  auto* zk = dynamic_cast<ZkReplicator*>(replicator);
  if (zk == nullptr) return Status::InvalidArgument("MuteEpochWatchForTest: not a ZooKeeper replicator");
  zk->MuteEpochWatch(muted);
  return Status::Ok();
}

Status ForceSessionExpiryForTest(Replicator* replicator) {
  auto* zk = dynamic_cast<ZkReplicator*>(replicator);
  if (zk == nullptr) return Status::InvalidArgument("ForceSessionExpiryForTest: not a ZooKeeper replicator");
  return zk->ForceSessionExpiry();
}

}  // namespace qrstore::replication::zookeeper
