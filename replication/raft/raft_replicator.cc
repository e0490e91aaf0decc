#include "replication/raft/raft_replicator.h"

#include <algorithm>

#include "common/codec.h"
#include "common/logging.h"
#include "replication/raft/stream_transport.h"

namespace qrstore::replication::raft {
namespace {
constexpr uint8_t kBatchEntryVersion = 1;
}  // namespace

// ---------------------------------------------------------------------------------------------
// Config


Result<RaftReplicatorOptions> RaftOptionsFromConfig(const Config& config) {
  std::vector<std::string> errors;
  RaftReplicatorOptions o;
  o.addresses = config.GetList("replication.raft.members");
  const int64_t node_id = config.GetInt("replication.raft.node_id");
  const int64_t preferred = config.GetInt("replication.raft.preferred_leader");
  const auto n = static_cast<int64_t>(o.addresses.size());
  if (n == 0) errors.push_back("replication.raft.members: at least one member is required");
  if (node_id >= n) {
    errors.push_back("replication.raft.node_id: " + std::to_string(node_id) + " but only " + std::to_string(n) +
                     " member(s) listed");
  }
  if (preferred >= n) {
    errors.push_back("replication.raft.preferred_leader: " + std::to_string(preferred) + " but only " +
                     std::to_string(n) + " member(s) listed");
  }
  for (size_t i = 0; i < o.addresses.size(); ++i) {
    std::string host;
    int port = 0;
    if (Status st = SplitHostPort(o.addresses[i], &host, &port); !st.ok()) {
      errors.push_back("replication.raft.members[" + std::to_string(i) + "]: " + st.message());
    }
    for (size_t j = 0; j < i; ++j) {
      if (o.addresses[j] == o.addresses[i]) {
        errors.push_back("replication.raft.members: '" + o.addresses[i] + "' listed twice");
      }
    }
  }
  DriverOptions& d = o.driver;
  d.node_id = static_cast<NodeId>(node_id);
  for (int64_t i = 0; i < n; ++i) d.members.push_back(static_cast<NodeId>(i));
  d.groups = static_cast<uint32_t>(config.GetInt("replication.groups"));
  d.tick_ms = static_cast<int>(config.GetInt("replication.raft.tick_ms"));
  d.election_ticks = static_cast<int>(config.GetInt("replication.raft.election_ticks"));
  d.heartbeat_ticks = static_cast<int>(config.GetInt("replication.raft.heartbeat_ticks"));
  if (d.heartbeat_ticks >= d.election_ticks) {
    errors.push_back("replication.raft.heartbeat_ticks: must be below replication.raft.election_ticks (" +
                     std::to_string(d.election_ticks) + ")");
  }
  d.preferred_leader = preferred < 0 ? kNoNode : static_cast<NodeId>(preferred);
  d.seed = static_cast<uint64_t>(config.GetInt("replication.raft.seed"));
  d.pre_vote = config.GetBool("replication.raft.pre_vote");
  d.vote_after_catch_up = config.GetBool("replication.raft.vote_after_catch_up");
  if (const std::string& f = config.GetString("replication.raft.test_isolate_file"); !f.empty()) {
    d.isolate_file = f + "." + std::to_string(config.GetInt("replication.raft.node_id"));
  }
  d.max_append_bytes = static_cast<size_t>(config.GetInt("replication.raft.max_append_bytes"));
  d.max_inflight_appends = static_cast<size_t>(config.GetInt("replication.raft.max_inflight_appends"));
  o.max_payload_bytes = static_cast<uint64_t>(config.GetInt("replication.max_payload_bytes"));
  const auto uncommitted = static_cast<uint64_t>(config.GetInt("replication.raft.max_uncommitted_bytes"));
  o.max_uncommitted_bytes = uncommitted;
  // The replicator defers proposals at `uncommitted` (see ProposeOnRaft); the core's own,
  // harder limit sits above it so the core refuses only in pathological cases.
  d.max_uncommitted_bytes = static_cast<size_t>(2 * uncommitted + o.max_payload_bytes);
  d.max_apply_bytes = static_cast<size_t>(std::max<uint64_t>(uncommitted, 4 << 20));
  d.max_log_bytes = static_cast<uint64_t>(config.GetInt("replication.raft.max_log_bytes"));
  o.max_lag_bytes = static_cast<uint64_t>(config.GetInt("replication.raft.max_lag_bytes"));
  // A live follower may lack max_lag_bytes plus the proposals already accepted; all of that
  // must still be in the leader's log, or compaction strands it.
  if (o.max_lag_bytes + uncommitted + o.max_payload_bytes > d.max_log_bytes) {
    errors.push_back("replication.raft.max_lag_bytes: " + std::to_string(o.max_lag_bytes) +
                     " + max_uncommitted_bytes + replication.max_payload_bytes must not exceed "
                     "replication.raft.max_log_bytes (" + std::to_string(d.max_log_bytes) +
                     "), or a live follower could fall out of the log");
  }
  d.stats_interval_ms = static_cast<int>(config.GetInt("replication.raft.stats_interval_ms"));
  d.identity = "n" + std::to_string(node_id);
  Result<FsyncPolicy> fsync = ParseFsyncPolicy(config.GetString("replication.raft.fsync"));
  if (fsync.ok()) d.fsync = fsync.value();
  o.planners = static_cast<uint32_t>(config.GetInt("replication.planners"));
  o.disk_log = config.GetString("replication.raft.log") == "disk";
  o.dir = config.GetString("replication.raft.dir");
  if (o.disk_log && o.dir.empty()) errors.push_back("replication.raft.dir: required when replication.raft.log=disk");
  o.segment_bytes = static_cast<uint64_t>(config.GetInt("replication.raft.segment_bytes"));
  o.direct_io = config.GetBool("replication.raft.direct_io");
  o.max_buffered_bytes = static_cast<uint64_t>(config.GetInt("replication.raft.max_buffered_bytes"));
  o.send_buffer_messages = static_cast<int>(config.GetInt("replication.raft.send_buffer_messages"));
  o.nng_transport = config.GetString("replication.raft.transport") == "nng";
  o.catch_up_election_ticks = static_cast<int>(
      std::max<int64_t>(config.GetInt("replication.raft.catch_up_election_ticks"), d.election_ticks));
  if (!errors.empty()) {
    std::string msg = "invalid raft config:";
    for (const auto& e : errors) msg += "\n  " + e;
    return Status::InvalidArgument(msg);
  }
  return o;
}

Result<std::unique_ptr<Replicator>> CreateRaftReplicator(const Config& config) {
  Result<RaftReplicatorOptions> options = RaftOptionsFromConfig(config);
  if (!options.ok()) return options.status();
  return std::unique_ptr<Replicator>(std::make_unique<RaftReplicator>(std::move(options).value()));
}

// ---------------------------------------------------------------------------------------------
// Entry encoding

std::string EncodeBatchEntry(const ReplicateMeta& meta, std::string payload) {
  char header[1 + 2 * Writer::kMaxVarintBytes];
  char* p = header;
  *p++ = static_cast<char>(kBatchEntryVersion);
  p = Writer::EncodeVarint(p, meta.planner);
  p = Writer::EncodeVarint(p, meta.batch_id);
  payload.insert(0, header, static_cast<size_t>(p - header));  // in place when the capacity has the room
  return payload;
}

Status DecodeBatchEntryHeader(std::string_view data, ReplicateMeta* meta, size_t* payload_offset) {
  Reader r(data);
  uint8_t version = 0;
  uint64_t planner = 0, batch = 0;
  r.GetU8(&version);
  r.GetVarint(&planner);
  r.GetVarint(&batch);
  if (!r.ok() || version != kBatchEntryVersion || planner > UINT32_MAX) {
    return Status::Corruption("malformed raft batch entry header");
  }
  meta->planner = static_cast<uint32_t>(planner);
  meta->batch_id = batch;
  *payload_offset = data.size() - r.remaining();
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// RaftReplicator

RaftReplicator::RaftReplicator(RaftReplicatorOptions options)
    : options_(std::move(options)), identity_(options_.driver.identity) {
  groups_.resize(options_.driver.groups);
  views_.resize(options_.driver.groups);
}

RaftReplicator::~RaftReplicator() { Stop(); }

Status RaftReplicator::Start() {
  MutexLock lock(lifecycle_mu_);
  if (started_) return Status::InvalidArgument("raft replicator already started");
  started_ = true;
  const uint32_t ngroups = options_.driver.groups;
  std::vector<std::unique_ptr<LogStorage>> storages;
  for (uint32_t g = 0; g < ngroups; ++g) {
    std::unique_ptr<LogStorage> storage;
    if (options_.disk_log) {
      DiskLogOptions dopt;
      dopt.dir = options_.dir + "/group-" + std::to_string(g);
      dopt.segment_bytes = options_.segment_bytes;
      dopt.direct_io = options_.direct_io;
      dopt.fsync = options_.driver.fsync;
      dopt.identity = identity_ + " g" + std::to_string(g);
      Result<std::unique_ptr<DiskLogStorage>> opened = DiskLogStorage::Open(dopt);
      if (!opened.ok()) return opened.status();
      storage = std::move(opened).value();
    } else {
      storage = std::make_unique<MemoryLogStorage>(/*retain_entries=*/false);
    }
    // Seed the stream positions from the recovered log (the driver never re-announces it).
    PersistentState recovered = storage->Recovered();
    Group& grp = groups_[g];
    grp.log_starts_at_one = recovered.first_index == 1;
    log_from_start_.push_back(recovered.first_index == 1);
    for (const Entry& e : recovered.entries) NotePersistedEntry(grp, e);
    grp.last_persisted = recovered.first_index + recovered.entries.size() - 1;
    // A member that restarts with a log replays it (and more) before it is in step: it times
    // its leader out more patiently until then (OnTick). A fresh member has nothing to replay.
    grp.catching_up = options_.catch_up_election_ticks > options_.driver.election_ticks &&
                      (recovered.hard.term > 0 || grp.last_persisted > 0);
    PublishView(g);
    storages.push_back(std::move(storage));
  }
  TransportOptions topt;
  topt.self = options_.driver.node_id;
  topt.addresses = options_.addresses;
  topt.max_frame_bytes = options_.max_payload_bytes + options_.driver.max_append_bytes + (1 << 20);
  topt.send_queue_messages = static_cast<size_t>(options_.send_buffer_messages);
  topt.identity = identity_;
  std::unique_ptr<Transport> transport =
      std::make_unique<StreamTransport>(topt, options_.nng_transport ? MakeNngStreamNet() : MakePosixStreamNet());
  driver_ = std::make_unique<Driver>(options_.driver, std::move(storages), std::move(transport),
                                     static_cast<DriverListener*>(this));
  Logger("raft")->info("[{}] raft replicator: {} group(s), {} member(s), log={}, fsync={}, tick {} ms", identity_,
                       ngroups, options_.addresses.size(), options_.disk_log ? "disk" : "memory",
                       FsyncPolicyName(options_.driver.fsync), options_.driver.tick_ms);
  return driver_->Start();
}

void RaftReplicator::Stop() {
  MutexLock lock(lifecycle_mu_);
  if (stopped_) return;
  stopped_ = true;
  if (!driver_) return;
  driver_->Stop();  // joins the raft thread: the group state is ours from here on
  const Status aborted = Status::Aborted("raft replicator stopped");
  for (Group& g : groups_) {
    for (auto& [index, p] : g.pending) p.cb(p.meta, aborted);
    g.pending.clear();
    for (auto& [planner, s] : g.streams) {
      for (auto& [batch, cb] : s.waiting) {
        ReplicateMeta meta{static_cast<uint32_t>(&g - groups_.data()), planner, batch};
        cb(meta, aborted, SharedBytes());
      }
      s.waiting.clear();
    }
  }
}

Status RaftReplicator::CheckMeta(const ReplicateMeta& meta) const {
  if (meta.group >= options_.driver.groups) {
    return Status::InvalidArgument("group " + std::to_string(meta.group) + " >= replication.groups (" +
                                   std::to_string(options_.driver.groups) + ")");
  }
  if (meta.planner >= options_.planners) {
    return Status::InvalidArgument("planner " + std::to_string(meta.planner) + " >= replication.planners (" +
                                   std::to_string(options_.planners) + ")");
  }
  return Status::Ok();
}

void RaftReplicator::ReplicateData(const ReplicateMeta& meta, std::string bytes, ReplicateCallback cb) {
  if (Status st = CheckMeta(meta); !st.ok()) return cb(meta, st);
  if (bytes.size() > options_.max_payload_bytes) {
    return cb(meta, Status::InvalidArgument("payload of " + std::to_string(bytes.size()) +
                                            " bytes exceeds replication.max_payload_bytes"));
  }
  if (!driver_) return cb(meta, Status::Aborted("raft replicator not started"));
  // Encoded and checksummed here, on the caller's thread, so the raft thread pays for neither.
  EntryData data(EncodeBatchEntry(meta, std::move(bytes)));
  driver_->Submit(Driver::Lane::kProposal,
                  [this, meta, data = std::move(data), cb = std::move(cb)](Status st) mutable -> bool {
                    if (!st.ok()) {
                      cb(meta, st);
                      return true;
                    }
                    return ProposeOnRaft(meta, data, cb);
                  });
}

bool RaftReplicator::ProposeOnRaft(const ReplicateMeta& meta, EntryData& data, ReplicateCallback& cb) {
  Group& g = groups_[meta.group];
  Core& core = driver_->core(meta.group);
  if (!LeaderReady(g) || core.role() != Role::kLeader || core.term() != g.term) {
    const NodeId leader = core.leader();
    cb(meta, Status::Unavailable(core.role() == Role::kLeader
                                     ? std::string("raft leader not ready yet (its first entry has not committed)")
                                     : leader == kNoNode ? std::string("not the raft leader; no leader known")
                                                         : "not the raft leader; leader is member " +
                                                               std::to_string(leader)));
    return true;
  }
  Stream& s = g.streams[meta.planner];
  if (meta.batch_id != s.log_next) {
    cb(meta, Status::InvalidArgument("batch " + std::to_string(meta.batch_id) + " of stream (" +
                                     std::to_string(meta.group) + "," + std::to_string(meta.planner) +
                                     ") out of sequence: next is " + std::to_string(s.log_next)));
    return true;
  }
  // Our own budget, below the core's hard limit: wait (the driver retries every iteration)
  // instead of failing, so a burst of ReplicateData just queues.
  if (g.pending_bytes > 0 && g.pending_bytes + data.size() > options_.max_uncommitted_bytes) return false;
  // Flow control: wait while the followers the quorum needs are too far behind (they still
  // need every byte after their match; beyond the log budget they could never catch up, there
  // are no snapshots). A follower the quorum does not need never holds the group back.
  const uint64_t lag = core.quorum_lag_bytes();
  if (lag > 0 && lag + data.size() > options_.max_lag_bytes) {
    if (!g.lag_waiting) {
      g.lag_waiting = true;
      ++g.lag_waits;
      PublishView(meta.group);
    }
    return false;
  }
  g.lag_waiting = false;
  const uint64_t size = data.size();
  Result<Index> index = core.Propose(std::move(data));
  if (!index.ok()) {
    cb(meta, index.status());
    return true;
  }
  g.pending.emplace(index.value(), Pending{meta, std::move(cb), core.term(), size});
  g.pending_bytes += size;
  s.log_next = meta.batch_id + 1;
  g.unapplied[index.value()] = {meta.planner, meta.batch_id};
  {
    MutexLock lock(view_mu_);
    views_[meta.group].log_next[meta.planner] = s.log_next;
  }
  return true;
}

void RaftReplicator::ReceiveData(const ReplicateMeta& meta, ReceiveCallback cb) {
  if (Status st = CheckMeta(meta); !st.ok()) return cb(meta, st, SharedBytes());
  if (!driver_) return cb(meta, Status::Aborted("raft replicator not started"), SharedBytes());
  driver_->Submit(Driver::Lane::kControl, [this, meta, cb = std::move(cb)](Status st) mutable -> bool {
    if (!st.ok()) {
      cb(meta, st, SharedBytes());
    } else {
      ReceiveOnRaft(meta, cb);
    }
    return true;
  });
}

void RaftReplicator::CancelReceives(uint32_t group) {
  if (group >= groups_.size() || !driver_) return;
  driver_->Submit(Driver::Lane::kControl, [this, group](Status st) -> bool {
    if (!st.ok()) return true;  // stopping: Stop fails every waiting receive itself
    for (auto& [planner, s] : groups_[group].streams) {
      std::map<uint64_t, ReceiveCallback> waiting;
      waiting.swap(s.waiting);
      for (auto& [batch, cb] : waiting) {
        cb(ReplicateMeta{group, planner, batch}, Status::Aborted("receive cancelled: this member leads now"),
           SharedBytes());
      }
    }
    return true;
  });
}

LeaderView RaftReplicator::Leader(uint32_t group) const {
  LeaderView v;
  if (group >= options_.driver.groups) return v;  // views_ has one per group
  MutexLock lock(view_mu_);
  const RaftGroupStatus& st = views_[group].status;
  v.known = st.leader != kNoNode;
  v.member = st.leader;
  v.term = st.term;
  v.self = st.leader_ready;
  return v;
}

void RaftReplicator::ReceiveOnRaft(const ReplicateMeta& meta, ReceiveCallback& cb) {
  Group& g = groups_[meta.group];
  Stream& s = g.streams[meta.planner];
  auto it = s.buffered.find(meta.batch_id);
  if (it != s.buffered.end()) {
    // Anything older was skipped by the application: it will never be asked for.
    DropBufferedBelow(g, s, it);
    SharedBytes bytes = std::move(it->second);
    g.buffered_bytes -= bytes.size();
    s.buffered.erase(it);
    MaybeUnpause(meta.group);
    PublishView(meta.group);  // the status's buffered_bytes
    cb(meta, Status::Ok(), std::move(bytes));
    return;
  }
  if (s.commit_started && meta.batch_id < s.commit_next) {
    cb(meta,
       Status::InvalidArgument("batch " + std::to_string(meta.batch_id) + " of stream (" +
                               std::to_string(meta.group) + "," + std::to_string(meta.planner) +
                               ") was already delivered, proposed by this member, or compacted away"),
       SharedBytes());
    return;
  }
  if (s.waiting.count(meta.batch_id) > 0) {
    cb(meta, Status::InvalidArgument("batch " + std::to_string(meta.batch_id) + " already requested"), SharedBytes());
    return;
  }
  // What is buffered of older batches will never be asked for either (the application asks in
  // order; one resuming from a checkpoint starts past them). Dropped now: buffered before the
  // application asked (a restarted member applies its log from the start at once), they could
  // fill the buffer and pause applying before the batch asked for, for good.
  if (auto older = s.buffered.lower_bound(meta.batch_id); older != s.buffered.begin()) {
    DropBufferedBelow(g, s, older);
    MaybeUnpause(meta.group);
    PublishView(meta.group);  // the status's buffered_bytes
  }
  s.waiting.emplace(meta.batch_id, std::move(cb));
}

void RaftReplicator::DropBufferedBelow(Group& g, Stream& s, std::map<uint64_t, SharedBytes>::iterator end) {
  for (auto it = s.buffered.begin(); it != end; ++it) g.buffered_bytes -= it->second.size();
  g.skipped += static_cast<uint64_t>(std::distance(s.buffered.begin(), end));
  s.buffered.erase(s.buffered.begin(), end);
}

Result<uint64_t> RaftReplicator::NextBatchId(uint32_t group, uint32_t planner) const {
  if (Status st = CheckMeta(ReplicateMeta{group, planner, 0}); !st.ok()) return st;
  MutexLock lock(view_mu_);
  const View& v = views_[group];
  if (!v.status.leader_ready) {
    return Status::Unavailable(v.status.role == Role::kLeader ? "raft leader not ready yet"
                                                              : "not the raft leader of group " + std::to_string(group));
  }
  auto it = v.log_next.find(planner);
  return it == v.log_next.end() ? 0 : it->second;
}

bool RaftReplicator::IsLeader(uint32_t group) const {
  if (group >= options_.driver.groups) return false;
  MutexLock lock(view_mu_);
  return views_[group].status.leader_ready;
}

RaftGroupStatus RaftReplicator::GroupStatus(uint32_t group) const {
  QR_CHECK_LT(group, options_.driver.groups);
  MutexLock lock(view_mu_);
  return views_[group].status;
}

Status RaftReplicator::health() const { return driver_ ? driver_->health() : Status::Ok(); }

LogSyncTotals RaftReplicator::LogSyncs() const {
  if (!driver_) return {};
  return {driver_->counters().syncs.load(std::memory_order_relaxed),
          driver_->counters().sync_ns.load(std::memory_order_relaxed)};
}

void RaftReplicator::PublishView(uint32_t group) {
  const Group& g = groups_[group];
  MutexLock lock(view_mu_);
  View& v = views_[group];
  v.status.role = g.role;
  v.status.term = g.term;
  v.status.leader_ready = LeaderReady(g);
  v.status.duplicates_dropped = g.duplicates;
  v.status.buffered_bytes = g.buffered_bytes;
  v.status.lag_waits = g.lag_waits;
  v.log_next.clear();
  for (const auto& [planner, s] : g.streams) v.log_next[planner] = s.log_next;
}

void RaftReplicator::NotePersistedEntry(Group& g, const Entry& e) {
  if (e.data.empty()) return;  // a leader's no-op
  ReplicateMeta meta;
  size_t offset = 0;
  if (!DecodeBatchEntryHeader(e.data, &meta, &offset).ok()) {
    Logger("raft")->error("[{}] raft entry {} has a malformed batch header; ignored", identity_, e.index);
    return;
  }
  g.unapplied[e.index] = {meta.planner, meta.batch_id};
  Stream& s = g.streams[meta.planner];
  s.log_next = std::max(s.log_next, meta.batch_id + 1);
}

void RaftReplicator::RecomputeLogNext(Group& g) {
  for (auto& [planner, s] : g.streams) s.log_next = s.commit_started ? s.commit_next : 0;
  for (const auto& [index, pb] : g.unapplied) {
    Stream& s = g.streams[pb.first];
    s.log_next = std::max(s.log_next, pb.second + 1);
  }
}

void RaftReplicator::OnPersisted(uint32_t group, const std::vector<Entry>& entries) {
  Group& g = groups_[group];
  const Index first = entries.front().index;
  if (first <= g.last_persisted) {
    // A new leader overwrote our suffix from `first`.
    g.unapplied.erase(g.unapplied.lower_bound(first), g.unapplied.end());
    for (auto it = g.pending.lower_bound(first); it != g.pending.end();) {
      it->second.cb(it->second.meta, Status::Unavailable("raft entry overwritten by a new leader"));
      g.pending_bytes -= it->second.bytes;
      it = g.pending.erase(it);
    }
    RecomputeLogNext(g);
  }
  for (const Entry& e : entries) NotePersistedEntry(g, e);
  g.last_persisted = entries.back().index;
  PublishView(group);
}

void RaftReplicator::OnCommitted(uint32_t group, std::vector<Entry>& committed) {
  Group& g = groups_[group];
  Core& core = driver_->core(group);
  for (Entry& e : committed) {
    g.unapplied.erase(g.unapplied.begin(), g.unapplied.upper_bound(e.index));
    bool own = false;
    while (!g.pending.empty() && g.pending.begin()->first <= e.index) {
      auto it = g.pending.begin();
      const Index index = it->first;
      Pending p = std::move(it->second);
      g.pending_bytes -= p.bytes;
      g.pending.erase(it);
      if (index == e.index && p.term == e.term) {
        own = true;
        p.cb(p.meta, Status::Ok());
      } else {
        p.cb(p.meta, Status::Unavailable("raft entry overwritten by a new leader"));
      }
    }
    // A leader may take proposals once an entry of its own term committed: its log then
    // holds every committed batch, so the stream positions in it are final.
    if (core.role() == Role::kLeader && e.term == core.term()) g.ready_term = e.term;
    if (e.data.empty()) continue;  // no-op
    ReplicateMeta meta;
    meta.group = group;
    size_t offset = 0;
    if (!DecodeBatchEntryHeader(e.data, &meta, &offset).ok()) continue;  // logged at persist
    if (g.retain_from != UINT64_MAX) g.above_ceiling.emplace_back(e.index, meta.batch_id);
    g.log_batches.push_back({e.index, meta.planner, meta.batch_id});
    Stream& s = g.streams[meta.planner];
    if (!s.commit_started) {
      s.commit_started = true;
      // A log restored after compaction starts mid-stream: take its first batch as the start.
      s.commit_next = g.log_starts_at_one ? 0 : meta.batch_id;
    }
    if (meta.batch_id < s.commit_next) {
      ++g.duplicates;  // the same batch committed again after a leader change
      continue;
    }
    QR_CHECK(meta.batch_id == s.commit_next, "[%s] raft stream (%u,%u) gap: committed batch %llu, expected %llu",
             identity_.c_str(), group, meta.planner, static_cast<unsigned long long>(meta.batch_id),
             static_cast<unsigned long long>(s.commit_next));
    s.commit_next = meta.batch_id + 1;
    auto w = s.waiting.find(meta.batch_id);
    if (w == s.waiting.end() && own) continue;  // the application has its own batch
    if (w == s.waiting.end() && !s.waiting.empty() && meta.batch_id < s.waiting.begin()->first) {
      // The application asks for later batches only (it resumes from a checkpoint): it will
      // never ask for this one, so it is not buffered (a long log replayed from its start
      // would otherwise fill the buffer and pause applying before the batches it wants).
      ++g.skipped;
      continue;
    }
    // The payload is a view into the entry's buffer (shared with the log): no copy.
    SharedBytes payload = e.data.bytes().Substr(offset);
    if (w != s.waiting.end()) {
      ReceiveCallback cb = std::move(w->second);
      s.waiting.erase(w);
      cb(meta, Status::Ok(), std::move(payload));
    } else {
      g.buffered_bytes += payload.size();
      s.buffered.emplace(meta.batch_id, std::move(payload));
    }
  }
  if (g.buffered_bytes > options_.max_buffered_bytes) driver_->SetApplyPaused(group, true);
  if (g.retain_from != UINT64_MAX) AdvanceCeiling(group);
  PublishView(group);
}

void RaftReplicator::RetainFrom(uint32_t group, uint64_t batch) {
  if (group >= groups_.size() || !driver_) return;
  driver_->Submit(Driver::Lane::kControl, [this, group, batch](Status st) -> bool {
    if (!st.ok()) return true;  // stopping
    Group& g = groups_[group];
    if (g.retain_from == UINT64_MAX) {
      // From now on: nothing committed before this call is known here, so keep it all (the
      // ceiling starts at the log's first entry) until committed entries move it.
      g.ceiling = driver_->core(group).first_index() > 0 ? driver_->core(group).first_index() - 1 : 0;
      g.retain_from = batch;
    } else {
      g.retain_from = std::max(g.retain_from, batch);
    }
    AdvanceCeiling(group);
    UpdateSnapshotTag(group);  // the rule may have just been set (the tag only depends on it and the log start)
    return true;
  });
}

void RaftReplicator::AdvanceCeiling(uint32_t group) {
  Group& g = groups_[group];
  // Entries of different streams interleave: the ceiling stops at the first entry of a batch to
  // keep (a later entry of an older batch of another stream is kept too: harmless).
  while (!g.above_ceiling.empty() && g.above_ceiling.front().second < g.retain_from) {
    g.ceiling = g.above_ceiling.front().first;
    g.above_ceiling.pop_front();
  }
  driver_->SetCompactCeiling(group, g.ceiling);
}

void RaftReplicator::OnCompacted(uint32_t group, Index first_index) {
  Group& g = groups_[group];
  while (!g.log_batches.empty() && g.log_batches.front().index < first_index) g.log_batches.pop_front();
  UpdateSnapshotTag(group);
}

void RaftReplicator::UpdateSnapshotTag(uint32_t group) {
  Group& g = groups_[group];
  Core& core = driver_->core(group);
  uint64_t tag = 0;
  // Only with checkpoints (RetainFrom): compaction then never passes the batch after this
  // member's newest one, so that checkpoint is always recent enough for the tag.
  if (g.retain_from != UINT64_MAX) {
    std::map<uint32_t, uint64_t> first;  // by planner: its first batch at or after first_index
    for (const Group::LogBatch& b : g.log_batches) {
      if (b.index < core.first_index()) continue;
      first.emplace(b.planner, b.batch);
      if (first.size() == options_.planners) break;
    }
    for (uint32_t p = 0; p < options_.planners; ++p) {
      auto it = first.find(p);
      const Stream& s = g.streams[p];
      // A stream with no committed entry in the log: what it commits next.
      tag = std::max(tag, it != first.end() ? it->second : (s.commit_started ? s.commit_next : 0));
    }
    // Batch ids start at 0 and 0 means "no offers": a tag of 0 would be a log that still holds
    // every batch, which strands nobody.
    tag = std::max<uint64_t>(tag, 1);
  }
  driver_->SetSnapshotTag(group, tag);
}

bool RaftReplicator::OnSnapshotOffer(uint32_t group, const SnapshotOffer* offer) {
  Group& g = groups_[group];
  const uint64_t tag = offer != nullptr ? offer->tag : 0;
  bool ready = offer != nullptr && tag > 0;
  for (uint32_t p = 0; ready && p < options_.planners; ++p) {
    const Stream& s = g.streams[p];
    ready = !s.waiting.empty() && s.waiting.begin()->first >= tag;
  }
  if (!ready) {
    if (offer != nullptr && g.offer_tag_logged != tag) {
      g.offer_tag_logged = tag;
      Logger("raft")->warn("[{} g{}] the leader (member {}) offers to continue this member after index {} once it "
                           "holds the state before batch {} (a checkpoint of batch {} or later); this member's "
                           "application is not there yet",
                           identity_, group, offer->leader, offer->index, tag, tag - 1);
    }
    MutexLock lock(view_mu_);
    views_[group].status.offer_next_batch = offer != nullptr ? tag : 0;
    return false;
  }
  // Taken: the log restarts after offer->index, and each stream's next committed batch is the
  // one its application waits for (the leader's log holds every batch >= tag after the point;
  // older ones that come along are dropped as already applied).
  for (auto& [planner, s] : g.streams) {
    for (auto& [batch, bytes] : s.buffered) g.buffered_bytes -= bytes.size();
    s.buffered.clear();
    s.commit_started = true;
    s.commit_next = s.waiting.empty() ? 0 : s.waiting.begin()->first;
    s.log_next = s.commit_next;
  }
  g.unapplied.clear();
  g.log_batches.clear();
  g.log_starts_at_one = false;
  g.last_persisted = offer->index;
  g.above_ceiling.clear();
  g.ceiling = offer->index;
  g.offer_tag_logged = 0;
  ++g.snapshots_installed;
  if (g.retain_from != UINT64_MAX) AdvanceCeiling(group);
  UpdateSnapshotTag(group);
  MaybeUnpause(group);
  Logger("raft")->info("[{} g{}] takes the leader's snapshot offer: continues after index {}, its application "
                       "waiting for batch {} or later",
                       identity_, group, offer->index, tag);
  {
    MutexLock lock(view_mu_);
    views_[group].status.offer_next_batch = 0;
    views_[group].status.snapshots_installed = g.snapshots_installed;
  }
  PublishView(group);
  return true;
}

void RaftReplicator::MaybeUnpause(uint32_t group) {
  if (groups_[group].buffered_bytes <= options_.max_buffered_bytes / 2) driver_->SetApplyPaused(group, false);
}

void RaftReplicator::OnTick() {
  for (uint32_t group = 0; group < groups_.size(); ++group) {
    Group& g = groups_[group];
    if (!g.catching_up) continue;
    Core& core = driver_->core(group);
    if (!g.catch_up_set) {
      g.catch_up_set = true;
      core.SetElectionTicks(options_.catch_up_election_ticks);
      Logger("raft")->info("[{} g{}] restarted with a log: elections after {} ticks (not {}) until its application "
                           "is in step with the group", identity_, group, options_.catch_up_election_ticks,
                           options_.driver.election_ticks);
      continue;
    }
    // (Under load the commit moves ahead of what was applied every iteration: a few entries
    // between them are in step.)
    constexpr Index kInStepEntries = 8;
    const bool in_step = core.leader() != kNoNode && core.commit_index() > 0 &&
                         core.applied_index() + kInStepEntries >= core.commit_index() &&
                         g.buffered_bytes <= options_.driver.max_append_bytes &&
                         (core.role() != Role::kLeader || LeaderReady(g));
    if (!in_step) continue;
    g.catching_up = false;
    core.SetElectionTicks(options_.driver.election_ticks);
    Logger("raft")->info("[{} g{}] in step with the group (commit {}, applied {}): elections after {} ticks again",
                         identity_, group, core.commit_index(), core.applied_index(), options_.driver.election_ticks);
  }
}

void RaftReplicator::OnFailed(const Status& st) {
  // Raft thread, once, as the driver stops: no pending proposal will commit here and no
  // waiting receive will be delivered. Fail them now (they would wait until Stop otherwise:
  // a leader whose disk filled up stalled its clients until they timed out).
  const Status failed = Status::IoError("the raft log storage of this member failed: " + st.ToString());
  for (Group& g : groups_) {
    for (auto& [index, p] : g.pending) p.cb(p.meta, failed);
    g.pending.clear();
    g.pending_bytes = 0;
    for (auto& [planner, s] : g.streams) {
      for (auto& [batch, cb] : s.waiting) {
        ReplicateMeta meta{static_cast<uint32_t>(&g - groups_.data()), planner, batch};
        cb(meta, failed, SharedBytes());
      }
      s.waiting.clear();
    }
  }
}

void RaftReplicator::OnStrandedChanged(uint32_t group, const std::vector<MemberProgress>& stranded, Index log_start) {
  MutexLock lock(view_mu_);
  RaftGroupStatus& st = views_[group].status;
  st.stranded_members.clear();
  st.stranded_matches.clear();
  for (const MemberProgress& m : stranded) {
    st.stranded_members.push_back(m.id);
    st.stranded_matches.push_back(m.match);
  }
  st.log_start = log_start;
}

void RaftReplicator::OnSelfStrandedChanged(uint32_t group, NodeId leader, Index leader_log_start, Index last_index) {
  MutexLock lock(view_mu_);
  RaftGroupStatus& st = views_[group].status;
  st.stranded_leader_log_start = leader_log_start;
  st.stranded_last_index = last_index;
  st.stranded_leader = leader;
}

GroupHealth RaftReplicator::Health(uint32_t group) const {
  GroupHealth h;
  if (group >= options_.driver.groups) return h;
  MutexLock lock(view_mu_);
  const RaftGroupStatus& st = views_[group].status;
  const std::string budget = "replication.raft.max_log_bytes " + std::to_string(options_.driver.max_log_bytes);
  for (size_t i = 0; i < st.stranded_members.size(); ++i) {
    StrandedMember m;
    m.member = st.stranded_members[i];
    m.reason = "the leader's raft log starts at index " + std::to_string(st.log_start) + ", past this member's " +
               "last known entry " + std::to_string(st.stranded_matches[i]) + " (" + budget +
               "): it cannot be caught up from the log, only from a checkpoint";
    h.stranded.push_back(std::move(m));
  }
  if (st.stranded_leader_log_start > 0) {
    h.self_stranded = "the raft leader (member " + std::to_string(st.stranded_leader) + ") no longer holds the entries this " +
                      "member needs: its log starts at index " + std::to_string(st.stranded_leader_log_start) +
                      ", this member's ends at " + std::to_string(st.stranded_last_index) + " (" + budget +
                      (st.offer_next_batch > 0 ? "; it continues this member from a checkpoint of batch " +
                                                     std::to_string(st.offer_next_batch - 1) + " or later)"
                                               : "; it has no checkpoint to continue it from)");
  }
  h.resume_needs_next = st.offer_next_batch;
  return h;
}

void RaftReplicator::OnRoleChanged(uint32_t group, Role role, Term term, NodeId leader) {
  (void)leader;
  Group& g = groups_[group];
  if (role != Role::kLeader || term != g.term) {
    // Leadership lost: our proposals may or may not commit under the new leader; the contract
    // lets us fail them now (the application re-plans with NextBatchId).
    for (auto& [index, p] : g.pending) {
      p.cb(p.meta, Status::Unavailable("raft leadership lost before the batch committed"));
    }
    g.pending.clear();
    g.pending_bytes = 0;
  }
  g.role = role;
  g.term = term;
  if (role == Role::kLeader) UpdateSnapshotTag(group);
  {
    MutexLock lock(view_mu_);
    views_[group].status.leader = leader;
  }
  PublishView(group);
}

}  // namespace qrstore::replication::raft
