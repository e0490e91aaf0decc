#include "replication/zookeeper/zk_replicator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "common/bounded_queue.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/logging.h"
#include "common/thread.h"
#include "replication/zookeeper/zk_layout.h"
#include "replication/zookeeper/zk_session.h"

namespace qrstore::replication::zookeeper {

void AddConfigKeys(ConfigSchema* schema) {
  schema->AddString("replication.zookeeper.hosts", "",
                    "ZooKeeper connect string host:port[,host:port...]; empty = $QRSTORE_ZK_HOSTS");
  schema->AddString("replication.zookeeper.root", "/qrstore", "znode root of this deployment's streams");
  schema->AddInt("replication.zookeeper.session_timeout_ms", 10000, 1000, 600000,
                 "ZooKeeper session timeout (the server clamps it to [2, 20] ticks)");
  schema->AddInt("replication.zookeeper.connect_timeout_ms", 15000, 100, 600000,
                 "Start() fails with kUnavailable if no session is established by then");
  schema->AddInt("replication.zookeeper.chunk_bytes", 900 * 1024, 1,
                 static_cast<int64_t>(kMaxChunkBytes - kMarkerHeaderBytes),
                 "payloads above this are split into chunks (ZooKeeper's znode limit is ~1 MB)");
  schema->AddInt("replication.zookeeper.max_inflight", 256, 1, 65536,
                 "outstanding asynchronous ZooKeeper requests per Replicator");
  schema->AddInt("replication.zookeeper.max_inflight_bytes", 8ll << 20, 1, 1ll << 40,
                 "payload bytes of outstanding requests per Replicator (ZooKeeper buffers them in its heap)");
  schema->AddInt("replication.zookeeper.op_deadline_ms", 30000, 100, 3600000,
                 "leader: a batch not durable after this long fails with kUnavailable");
  schema->AddInt("replication.zookeeper.followers", 0, 0, 1000,
                 "cleanup deletes consumed batches once this many followers registered progress (0 = keep all)");
  schema->AddString("replication.zookeeper.follower_id", "",
                    "follower: name of its progress znode ([A-Za-z0-9._-]); empty = auto (not stable across restarts)");
  schema->AddInt("replication.zookeeper.retain_bytes", 32ll << 20, 0, 1ll << 40,
                 "leader: payload bytes kept in ZooKeeper at most (its servers hold all data in memory): with "
                 "followers > 0 the leader waits for them to consume; with 0, the oldest are deleted (0 = no limit)");
  schema->AddInt("replication.zookeeper.cleanup_interval_ms", 100, 10, 600000,
                 "leader: how often consumed batches are looked for");
  schema->AddInt("replication.zookeeper.progress_interval_ms", 200, 1, 600000,
                 "follower: at most one progress write per interval (each stalls the session's reads)");
  schema->AddInt("replication.zookeeper.poll_ms", 1000, 10, 600000,
                 "follower: re-check of awaited batches (safety net behind watches)");
}

Result<ZkOptions> OptionsFromConfig(const Config& config) {
  ZkOptions o;
  std::vector<std::string> errors;
  o.hosts = config.GetString("replication.zookeeper.hosts");
  if (o.hosts.empty()) {
    const char* env = std::getenv("QRSTORE_ZK_HOSTS");
    if (env != nullptr) o.hosts = env;
  }
  if (o.hosts.empty()) {
    errors.push_back(
        "replication.zookeeper.hosts: empty and $QRSTORE_ZK_HOSTS unset (start a server: scripts/zk-server.sh "
        "start DIR)");
  } else if (o.hosts.find(':') == std::string::npos) {
    errors.push_back("replication.zookeeper.hosts: '" + o.hosts + "' is not a host:port[,host:port] list");
  }
  o.root = config.GetString("replication.zookeeper.root");
  if (Status s = ValidateRoot(o.root); !s.ok()) errors.push_back(s.message());
  const std::string& role = config.GetString("replication.role");
  if (role == "leader") {
    o.leader = true;
  } else if (role == "follower") {
    o.leader = false;
  } else {
    errors.push_back("replication.role: must be leader or follower for the zookeeper backend (got '" + role + "')");
  }
  int64_t groups = config.GetInt("replication.groups");
  int64_t planners = config.GetInt("replication.planners");
  if (groups < 1 || groups > 65536) errors.push_back("replication.groups: must be in [1, 65536]");
  if (planners < 1 || planners > 65536) errors.push_back("replication.planners: must be in [1, 65536]");
  if (groups * planners > 100000) {
    errors.push_back("replication.groups x replication.planners: at most 100000 streams for the zookeeper backend");
  }
  o.groups = static_cast<uint32_t>(std::clamp<int64_t>(groups, 1, 65536));
  o.planners = static_cast<uint32_t>(std::clamp<int64_t>(planners, 1, 65536));
  o.session_timeout_ms = static_cast<int>(config.GetInt("replication.zookeeper.session_timeout_ms"));
  o.connect_timeout_ms = static_cast<int>(config.GetInt("replication.zookeeper.connect_timeout_ms"));
  o.chunk_bytes = static_cast<uint64_t>(config.GetInt("replication.zookeeper.chunk_bytes"));
  o.max_inflight = static_cast<int>(config.GetInt("replication.zookeeper.max_inflight"));
  o.max_inflight_bytes = static_cast<uint64_t>(config.GetInt("replication.zookeeper.max_inflight_bytes"));
  o.op_deadline_ms = static_cast<int>(config.GetInt("replication.zookeeper.op_deadline_ms"));
  o.followers = static_cast<int>(config.GetInt("replication.zookeeper.followers"));
  o.follower_id = config.GetString("replication.zookeeper.follower_id");
  if (!o.follower_id.empty()) {
    if (Status s = ValidateFollowerId(o.follower_id); !s.ok()) errors.push_back(s.message());
  }
  o.cleanup_interval_ms = static_cast<int>(config.GetInt("replication.zookeeper.cleanup_interval_ms"));
  o.retain_bytes = static_cast<uint64_t>(config.GetInt("replication.zookeeper.retain_bytes"));
  o.poll_ms = static_cast<int>(config.GetInt("replication.zookeeper.poll_ms"));
  o.progress_interval_ms = static_cast<int>(config.GetInt("replication.zookeeper.progress_interval_ms"));
  if (!errors.empty()) {
    std::string msg;
    for (const auto& e : errors) msg += (msg.empty() ? "" : "; ") + e;
    return Status::InvalidArgument(msg);
  }
  return o;
}

namespace {

using StreamKey = std::pair<uint32_t, uint32_t>;  // (group, planner)

constexpr size_t kRequestQueueCapacity = 1024;
constexpr size_t kMaxRequestsPerStream = 4096;
constexpr size_t kMaxDeletesPerRound = 256;
constexpr int kMaxCorruptRetries = 3;
constexpr int64_t kStaleBackoffNanos = 50'000'000;    // refetch of a stale marker
constexpr int64_t kIdleWaitNanos = 1'000'000'000;     // nothing pending: wake once a second
constexpr int64_t kBusyTickNanos = 100'000'000;       // deadlines / reconnect checks
constexpr int64_t kStatsIntervalNanos = 10'000'000'000;

std::string StreamName(uint32_t g, uint32_t p) { return "g" + std::to_string(g) + "/p" + std::to_string(p); }

struct Request {
  bool replicate = true;  // else receive
  ReplicateMeta meta;
  std::string bytes;
  ReplicateCallback replicate_cb;
  ReceiveCallback receive_cb;
};

// ---- leader state (owned by the zk-leader thread) ----
enum class PartState : uint8_t { kNeed, kInFlight, kDone };
enum class MarkerState : uint8_t { kWaitChunks, kReady, kInFlight, kDone };

struct OutBatch {
  ReplicateMeta meta;
  std::string payload;
  MarkerHeader header;
  ReplicateCallback cb;
  std::vector<PartState> chunks;  // index 0 unused (inline in the marker)
  uint32_t chunks_done = 0;       // of chunks 1..n-1
  MarkerState marker = MarkerState::kWaitChunks;
  uint64_t marker_attempt = 0;  // bumped when an in-flight marker create is written off
  bool started = false;         // some request of it was issued
  int64_t deadline_nanos = 0;
};

struct OutStream {
  uint64_t next_id = 0;                // id the next ReplicateData must carry
  std::deque<OutBatch> batches;        // admitted, not yet acknowledged; consecutive ids
  struct Live {
    uint32_t chunks = 1;
    uint64_t bytes = 0;  // payload bytes; 0 when unknown (found by the Start scan)
  };
  std::map<uint64_t, Live> live;       // acknowledged batches still in ZooKeeper
  uint64_t live_bytes = 0;             // sum of live[].bytes
  // Leftovers of a crashed writer found by the Start scan, deleted before this process first
  // writes the stream (not at Start: only a process that actually writes the stream may
  // touch it). Batch writes wait until the fence is empty.
  std::set<std::string> fence;
  size_t fence_inflight = 0;
  bool broken = false;
  std::string broken_reason;
};

// ---- follower state (owned by the zk-follower thread) ----
enum class FetchState : uint8_t { kStart, kGetMarker, kExists, kWaitCreated, kChunks, kReady };

struct Fetch {
  ReplicateMeta meta;
  ReceiveCallback cb;
  FetchState state = FetchState::kStart;
  uint64_t attempt = 0;
  int64_t not_before_nanos = 0;
  MarkerHeader header;
  int64_t czxid = 0;
  std::vector<std::string> parts;
  std::vector<PartState> part_state;
  uint32_t parts_done = 0;
  std::string bytes;  // kReady
  int corrupt = 0;
};

struct InStream {
  std::map<uint64_t, Fetch> fetches;  // outstanding requests by batch id
  uint64_t next_needed = 0;           // last delivered + 1 (progress)
  bool have_last = false;
  uint64_t last_id = 0;               // last delivered id and its marker's creation zxid
  int64_t last_czxid = 0;
  uint64_t last_marker_bytes = 0;     // size of the last marker read (cost estimate)
};

class ZkReplicator final : public Replicator {
 public:
  explicit ZkReplicator(ZkOptions o)
      : opts_(std::move(o)),
        log_(Logger("zk")),
        ident_(std::string("[zk ") + (opts_.leader ? "leader" : "follower") + " " + opts_.root + "] "),
        requests_(kRequestQueueCapacity),
        session_(&inbox_) {}
  ~ZkReplicator() override { Stop(); }

  Status Start() override;
  void Stop() override;
  void ReplicateData(const ReplicateMeta& meta, std::string bytes, ReplicateCallback cb) override;
  void ReceiveData(const ReplicateMeta& meta, ReceiveCallback cb) override;
  Result<uint64_t> NextBatchId(uint32_t group, uint32_t planner) const override;
  bool IsLeader(uint32_t group) const override { return opts_.leader && group < opts_.groups; }
  std::string Name() const override { return "zookeeper"; }

  ZkStats stats() const;
  Status ForceSessionExpiry();
  std::string CurrentServer() const { return session_.CurrentServer(); }

 private:
  // Whether a request of `cost` bytes may go out now: both the count and the byte budget
  // bound what this process has outstanding at ZooKeeper (whose servers buffer it all in their
  // heap); one request always may, however large.
  bool CanIssue(uint64_t cost) const {
    return inflight_ < opts_.max_inflight &&
           (inflight_bytes_ == 0 || inflight_bytes_ + cost <= opts_.max_inflight_bytes);
  }
  void Charge(OpTag* t, uint64_t cost) {
    t->cost = cost;
    inflight_bytes_ += cost;
  }
  // Leader with registered followers: too much written that they have not consumed yet.
  bool HeldBack() const {
    return opts_.followers > 0 && opts_.retain_bytes > 0 && retained_bytes_ >= opts_.retain_bytes;
  }
  bool InRange(const ReplicateMeta& m) const { return m.group < opts_.groups && m.planner < opts_.planners; }
  Status WaitConnected(int64_t deadline_nanos);
  Status SyncRetry(const char* what, const std::string& path, int64_t deadline_nanos, const std::function<int()>& op,
                   std::initializer_list<int> accepted, int* rc_out = nullptr);
  Status EnsurePath(const std::string& path, int64_t deadline_nanos);
  Status ScanStream(uint32_t g, uint32_t p, int64_t deadline_nanos);
  Status LoadProgress(int64_t deadline_nanos);
  void PublishNext(const StreamKey& key, uint64_t next);

  void Run();
  void Shutdown();
  void HandleEvent(ZkEvent& ev);
  void HandleSession(const ZkEvent& ev);
  void Recreate(const char* why);
  void NoteRetry(int rc);
  int64_t OnTimers(int64_t now);

  // Leader.
  void AdmitReplicate(Request r);
  void PumpLeader();
  void LeaderCompletion(ZkEvent& ev);
  OutBatch* FindBatch(const OpTag& t);
  void AckFront(OutStream& s);
  void FailStream(const StreamKey& key, OutStream& s, const Status& status);
  void StartCleanup();
  void CleanupCompletion(ZkEvent& ev);
  void FinishCleanupRound();
  void DeleteBatch(const StreamKey& key, OutStream& s);  // the oldest live batch of s

  // Follower.
  void AdmitReceive(Request r);
  void PumpFollower();
  void FollowerCompletion(ZkEvent& ev);
  void FollowerWatch(const ZkEvent& ev);
  void RestartFetch(Fetch& f, int64_t not_before_nanos);
  void Assemble(InStream& s, Fetch& f);
  void DeliverReady(const StreamKey& key, InStream& s);
  void WriteProgress();
  std::string ProgressBytes() const;

  std::string MarkerPath(uint32_t g, uint32_t p, uint64_t id) const {
    return StreamPath(opts_.root, g, p) + "/" + MarkerName(id);
  }
  std::string ChunkPath(uint32_t g, uint32_t p, uint64_t id, uint32_t k) const {
    return StreamPath(opts_.root, g, p) + "/" + ChunkName(id, k);
  }

  const ZkOptions opts_;
  std::shared_ptr<spdlog::logger> log_;
  const std::string ident_;

  // Shared with user threads.
  Inbox inbox_;
  BoundedQueue<Request> requests_;
  std::atomic<bool> running_{false};   // Start succeeded and Stop not begun (acquire/release)
  std::atomic<bool> stopping_{false};  // release by Stop, acquire by the worker
  mutable std::mutex next_mu_;         // NextBatchId is read from any thread
  std::map<StreamKey, uint64_t> next_ids_;      // guarded by next_mu_
  std::set<StreamKey> broken_;                  // guarded by next_mu_
  struct Counters {
    std::atomic<uint64_t> acked{0}, delivered{0}, retried{0}, verified{0}, sessions{0}, losses{0}, deleted{0},
        stale{0}, evicted{0}, gone{0};
  } counters_;  // relaxed: statistics only

  // Owned by the worker thread (and by Start before the thread exists).
  ZkSession session_;
  bool connected_ = false;
  bool reopen_pending_ = false;
  int inflight_ = 0;  // requests of the current session without their completion yet
  uint64_t inflight_bytes_ = 0;  // their cost (payload bytes sent or expected back)
  std::map<StreamKey, OutStream> out_;
  size_t admitted_ = 0;  // OutBatches across streams
  int64_t next_cleanup_nanos_ = 0;
  uint64_t retained_bytes_ = 0;  // sum of out_[].live_bytes
  int64_t next_stats_nanos_ = 0;
  uint64_t last_stats_activity_ = 0;
  bool cleanup_inflight_ = false;
  uint64_t cleanup_round_ = 0;
  size_t consumers_pending_ = 0;
  bool cleanup_failed_ = false;
  bool retention_warned_ = false;
  std::vector<std::vector<StreamProgress>> consumer_progress_;
  std::map<StreamKey, InStream> in_;
  std::string follower_id_;
  bool progress_dirty_ = false;
  bool progress_inflight_ = false;
  int64_t next_progress_nanos_ = 0;
  int64_t next_poll_nanos_ = 0;
  NamedThread thread_;
};

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

Status ZkReplicator::ScanStream(uint32_t g, uint32_t p, int64_t deadline_nanos) {
  const std::string path = StreamPath(opts_.root, g, p);
  struct String_vector sv = {0, nullptr};
  QR_RETURN_IF_ERROR(SyncRetry("list", path, deadline_nanos,
                               [&] { return zoo_get_children(session_.handle(), path.c_str(), 0, &sv); }, {}));
  std::set<uint64_t> markers;
  std::map<uint64_t, std::vector<uint32_t>> chunks;
  for (int32_t i = 0; i < sv.count; ++i) {
    auto c = ParseChildName(sv.data[i]);
    if (!c) continue;
    if (c->kind == ChildName::Kind::kMarker) {
      markers.insert(c->batch_id);
    } else {
      chunks[c->batch_id].push_back(c->chunk);
    }
  }
  deallocate_String_vector(&sv);
  uint64_t lo = markers.empty() ? 0 : *markers.begin();
  uint64_t next = lo;
  while (markers.count(next) != 0) ++next;
  OutStream& s = out_[{g, p}];
  s.next_id = next;
  // Leftovers of a crashed leader: markers after the first gap were never acknowledged (acks
  // are in batch order), chunks at or after `next` belong to unfinished batches, chunks below
  // `lo` to deleted ones. Remove them so the stream has one writer's bytes only.
  std::vector<std::string> doomed;
  for (uint64_t id : markers) {
    if (id > next) doomed.push_back(path + "/" + MarkerName(id));
  }
  for (auto& [id, ks] : chunks) {
    if (id >= next || id < lo) {
      for (uint32_t k : ks) doomed.push_back(path + "/" + ChunkName(id, k));
    }
  }
  for (uint64_t id : markers) {
    if (id >= next) break;
    uint32_t n = 1;
    if (auto it = chunks.find(id); it != chunks.end()) {
      for (uint32_t k : it->second) n = std::max(n, k + 1);
    }
    s.live[id] = OutStream::Live{n, 0};
  }
  s.fence.insert(doomed.begin(), doomed.end());
  if (!doomed.empty()) {
    log_->warn("{}stream {}: {} leftover znodes of an unfinished leader, deleted before the first write (resuming "
               "at batch {})",
               ident_, StreamName(g, p), doomed.size(), next);
  }
  PublishNext({g, p}, next);
  return Status::Ok();
}

Status ZkReplicator::LoadProgress(int64_t deadline_nanos) {
  const std::string path = ConsumerPath(opts_.root, follower_id_);
  std::string buf(1 << 20, '\0');
  int len = 0;
  int rc = ZOK;
  struct Stat stat;
  QR_RETURN_IF_ERROR(SyncRetry(
      "read", path, deadline_nanos,
      [&] {
        len = static_cast<int>(buf.size());
        return zoo_get(session_.handle(), path.c_str(), 0, buf.data(), &len, &stat);
      },
      {ZNONODE}, &rc));
  if (rc == ZNONODE) {
    std::string empty = EncodeProgress({});
    return SyncRetry(
        "create", path, deadline_nanos,
        [&] {
          return zoo_create(session_.handle(), path.c_str(), empty.data(), static_cast<int>(empty.size()),
                            &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
        },
        {ZNODEEXISTS});
  }
  std::vector<StreamProgress> progress;
  Status s = DecodeProgress(std::string_view(buf.data(), static_cast<size_t>(std::max(len, 0))), &progress);
  if (!s.ok()) return Status::Corruption(ident_ + path + ": " + s.message());
  for (const auto& p : progress) {
    if (p.group >= opts_.groups || p.planner >= opts_.planners) continue;
    in_[{p.group, p.planner}].next_needed = p.next_batch_id;
    PublishNext({p.group, p.planner}, p.next_batch_id);
  }
  log_->info("{}resuming follower '{}' from its progress ({} streams)", ident_, follower_id_, progress.size());
  return Status::Ok();
}

void ZkReplicator::PublishNext(const StreamKey& key, uint64_t next) {
  std::lock_guard<std::mutex> lock(next_mu_);
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
  if (st.ok() && opts_.leader) {
    for (uint32_t g = 0; g < opts_.groups && st.ok(); ++g) {
      for (uint32_t p = 0; p < opts_.planners && st.ok(); ++p) {
        st = EnsurePath(StreamPath(opts_.root, g, p), deadline);
        if (st.ok()) st = ScanStream(g, p, deadline);
      }
    }
  }
  if (st.ok() && !opts_.leader) {
    static std::atomic<uint64_t> auto_ids{0};
    follower_id_ = opts_.follower_id;
    if (follower_id_.empty()) {
      follower_id_ = "auto-" + std::to_string(::getpid()) + "-" + std::to_string(auto_ids.fetch_add(1));
      log_->warn("{}replication.zookeeper.follower_id is empty: using '{}' (progress is not resumed after a restart)",
                 ident_, follower_id_);
    }
    st = LoadProgress(deadline);
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
  if (!opts_.leader) {
    cb(meta, Status::Unavailable(ident_ + "ReplicateData on a follower (replication.role=follower)"));
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
  if (opts_.leader) {
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

Result<uint64_t> ZkReplicator::NextBatchId(uint32_t group, uint32_t planner) const {
  if (group >= opts_.groups || planner >= opts_.planners) {
    return Status::InvalidArgument(ident_ + "stream " + StreamName(group, planner) + " out of range (groups " +
                                   std::to_string(opts_.groups) + ", planners " + std::to_string(opts_.planners) +
                                   ")");
  }
  std::lock_guard<std::mutex> lock(next_mu_);
  if (broken_.count({group, planner}) != 0) {
    return Status::Unavailable(ident_ + "stream " + StreamName(group, planner) +
                               " failed; restart the replicator to resume");
  }
  auto it = next_ids_.find({group, planner});
  return it == next_ids_.end() ? 0 : it->second;
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
  return s;
}

void NoopWatcher(zhandle_t*, int, int, const char*, void*) {}

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
// The worker thread.

void ZkReplicator::Run() {
  std::deque<ZkEvent> events;
  int64_t wake_at = NowNanos();
  while (!stopping_.load(std::memory_order_acquire)) {
    inbox_.WaitAndTake(&events, wake_at);
    if (stopping_.load(std::memory_order_acquire)) break;
    while (!events.empty()) {
      HandleEvent(events.front());
      events.pop_front();
    }
    // Admit queued requests. Leader: bounded by max_inflight admitted batches (memory bound).
    while (!opts_.leader || admitted_ < static_cast<size_t>(opts_.max_inflight)) {
      std::optional<Request> r = requests_.TryPop();
      if (!r) break;
      if (r->replicate) {
        AdmitReplicate(std::move(*r));
      } else {
        AdmitReceive(std::move(*r));
      }
    }
    wake_at = OnTimers(NowNanos());
    if (opts_.leader) {
      PumpLeader();
    } else {
      PumpFollower();
    }
  }
  Shutdown();
}

void ZkReplicator::Shutdown() {
  if (!opts_.leader && connected_ && session_.is_open()) {
    // Best effort: record the final progress so a restarted follower resumes exactly here.
    std::string bytes = ProgressBytes();
    const std::string path = ConsumerPath(opts_.root, follower_id_);
    zoo_set(session_.handle(), path.c_str(), bytes.data(), static_cast<int>(bytes.size()), -1);
  }
  session_.Close();  // outstanding completions land in the inbox and are dropped with it
  const Status aborted = Status::Aborted(ident_ + "stopped");
  for (auto& [key, s] : out_) {
    for (auto& b : s.batches) b.cb(b.meta, aborted);
    s.batches.clear();
  }
  for (auto& [key, s] : in_) {
    for (auto& [id, f] : s.fetches) f.cb(f.meta, aborted, {});
    s.fetches.clear();
  }
  while (std::optional<Request> r = requests_.TryPop()) {
    if (r->replicate) {
      r->replicate_cb(r->meta, aborted);
    } else {
      r->receive_cb(r->meta, aborted, {});
    }
  }
  log_->info("{}stopped: acked {} delivered {} retried {} sessions {} deleted {} inbox high-water {}", ident_,
             counters_.acked.load(std::memory_order_relaxed), counters_.delivered.load(std::memory_order_relaxed),
             counters_.retried.load(std::memory_order_relaxed), counters_.sessions.load(std::memory_order_relaxed),
             counters_.deleted.load(std::memory_order_relaxed), inbox_.high_water());
}

void ZkReplicator::HandleEvent(ZkEvent& ev) {
  switch (ev.kind) {
    case ZkEvent::Kind::kSession:
      HandleSession(ev);
      return;
    case ZkEvent::Kind::kWatch:
      if (ev.generation == session_.generation() && !opts_.leader) FollowerWatch(ev);
      return;
    case ZkEvent::Kind::kCompletion:
      // Results of an older session were already written off by Recreate (everything it had
      // in flight is re-issued), so they are dropped; a success among them is found again as
      // ZNODEEXISTS with the same bytes.
      if (ev.op.generation != session_.generation()) return;
      --inflight_;
      QR_CHECK_GE(inflight_, 0);
      QR_CHECK_GE(inflight_bytes_, ev.op.cost);
      inflight_bytes_ -= ev.op.cost;
      if (ev.rc == ZCONNECTIONLOSS || ev.rc == ZOPERATIONTIMEOUT) {
        counters_.losses.fetch_add(1, std::memory_order_relaxed);
      }
      if (opts_.leader) {
        LeaderCompletion(ev);
      } else {
        FollowerCompletion(ev);
      }
      return;
  }
}

void ZkReplicator::HandleSession(const ZkEvent& ev) {
  if (ev.generation != session_.generation()) return;
  if (ev.state == ZOO_CONNECTED_STATE) {
    if (!connected_) log_->info("{}connected to ZooKeeper ({})", ident_, opts_.hosts);
    connected_ = true;
    if (!opts_.leader) {
      // Watches survive a reconnect, but a request that failed may not have set its watch.
      for (auto& [key, s] : in_) {
        for (auto& [id, f] : s.fetches) {
          if (f.state == FetchState::kWaitCreated) f.state = FetchState::kStart;
        }
      }
    }
  } else if (ev.state == ZOO_EXPIRED_SESSION_STATE || ev.state == ZOO_AUTH_FAILED_STATE) {
    Recreate(ev.state == ZOO_EXPIRED_SESSION_STATE ? "session expired" : "authentication failed");
  } else {
    if (connected_) log_->warn("{}disconnected from ZooKeeper; the client is reconnecting", ident_);
    connected_ = false;
  }
}

void ZkReplicator::Recreate(const char* why) {
  log_->warn("{}{}: creating a new session and re-issuing {} outstanding requests", ident_, why, inflight_);
  session_.Close();
  inflight_ = 0;
  inflight_bytes_ = 0;
  connected_ = false;
  for (auto& [key, s] : out_) {
    s.fence_inflight = 0;
    for (auto& b : s.batches) {
      for (size_t k = 1; k < b.chunks.size(); ++k) {
        if (b.chunks[k] == PartState::kInFlight) b.chunks[k] = PartState::kNeed;
      }
      if (b.marker == MarkerState::kInFlight) {
        b.marker = MarkerState::kReady;
        ++b.marker_attempt;
      }
    }
  }
  cleanup_inflight_ = false;
  for (auto& [key, s] : in_) {
    for (auto& [id, f] : s.fetches) {
      if (f.state != FetchState::kReady) RestartFetch(f, 0);
    }
  }
  progress_inflight_ = false;
  progress_dirty_ = !opts_.leader;
  Status st = session_.Open(opts_.hosts, opts_.session_timeout_ms);
  reopen_pending_ = !st.ok();
  if (st.ok()) {
    counters_.sessions.fetch_add(1, std::memory_order_relaxed);
  } else {
    log_->error("{}{}", ident_, st.ToString());
  }
}

void ZkReplicator::NoteRetry(int rc) {
  (void)rc;
  counters_.retried.fetch_add(1, std::memory_order_relaxed);
  // Wait for the session to report CONNECTED (or the next timer check) before re-issuing, so
  // a dead connection does not turn into a tight retry loop.
  connected_ = false;
}

int64_t ZkReplicator::OnTimers(int64_t now) {
  if (reopen_pending_) {
    Status st = session_.Open(opts_.hosts, opts_.session_timeout_ms);
    reopen_pending_ = !st.ok();
    if (st.ok()) counters_.sessions.fetch_add(1, std::memory_order_relaxed);
  }
  if (!connected_ && session_.is_open() && zoo_state(session_.handle()) == ZOO_CONNECTED_STATE) connected_ = true;
  int64_t wake = now + kIdleWaitNanos;
  bool busy = !connected_ || reopen_pending_;
  if (now >= next_stats_nanos_) {
    // A periodic stats line instead of per-batch logging; silent while nothing happens.
    next_stats_nanos_ = now + kStatsIntervalNanos;
    ZkStats st = stats();
    uint64_t activity = st.batches_acked + st.batches_delivered + st.requests_retried + st.sessions_created;
    if (activity != last_stats_activity_) {
      last_stats_activity_ = activity;
      log_->info("{}stats: acked {} delivered {} retried {} losses {} sessions {} deleted {} evicted {} kept_bytes {}",
                 ident_, st.batches_acked, st.batches_delivered, st.requests_retried, st.connection_losses,
                 st.sessions_created, st.batches_deleted, st.batches_evicted, retained_bytes_);
    }
  }
  if (opts_.leader) {
    for (auto& [key, s] : out_) {
      if (!s.batches.empty()) {
        busy = true;
        if (now > s.batches.front().deadline_nanos) {
          FailStream(key, s,
                     Status::Unavailable(ident_ + "batch " + std::to_string(s.batches.front().meta.batch_id) +
                                         " of stream " + StreamName(key.first, key.second) + " not durable after " +
                                         std::to_string(opts_.op_deadline_ms) + " ms" +
                                         (HeldBack() ? " (held back: followers have not consumed " +
                                                           std::to_string(retained_bytes_) +
                                                           " bytes >= replication.zookeeper.retain_bytes)"
                                                     : " (ZooKeeper " + opts_.hosts + " unreachable?)")));
        }
      }
    }
    if (opts_.followers > 0 || opts_.retain_bytes > 0) {
      if (now >= next_cleanup_nanos_ && connected_ && !cleanup_inflight_) {
        next_cleanup_nanos_ = now + static_cast<int64_t>(opts_.cleanup_interval_ms) * 1'000'000;
        StartCleanup();
      }
      wake = std::min(wake, std::max(next_cleanup_nanos_, now + 1'000'000));
    }
  } else {
    bool waiting = false;
    for (auto& [key, s] : in_) {
      for (auto& [id, f] : s.fetches) {
        if (f.state == FetchState::kWaitCreated) waiting = true;
        if (f.not_before_nanos > now) wake = std::min(wake, f.not_before_nanos);
      }
    }
    if (waiting && now >= next_poll_nanos_ && connected_) {
      next_poll_nanos_ = now + static_cast<int64_t>(opts_.poll_ms) * 1'000'000;
      for (auto& [key, s] : in_) {
        // Only the stream's first awaited batch: later ones have their own watches, and
        // re-reading all of a long window every poll would be wasted load on ZooKeeper.
        for (auto& [id, f] : s.fetches) {
          if (f.state != FetchState::kWaitCreated) continue;
          f.state = FetchState::kStart;  // re-check: a watch may have been lost
          // Was the awaited batch deleted (retain_bytes, or a follower restarted far behind)?
          // Then it never comes back: list the stream to find out.
          OpTag t = OpTag::Make(OpTag::Type::kListStream, key.first, key.second, id, 0);
          session_.Children(StreamPath(opts_.root, key.first, key.second), t);
          ++inflight_;
          break;
        }
      }
    }
    if (waiting) wake = std::min(wake, next_poll_nanos_);
    if (progress_dirty_) wake = std::min(wake, std::max(next_progress_nanos_, now + 1'000'000));
  }
  if (busy) wake = std::min(wake, now + kBusyTickNanos);
  return wake;
}

// ------------------------------------------------------------------------------------------
// Leader.

void ZkReplicator::AdmitReplicate(Request r) {
  const ReplicateMeta& m = r.meta;
  if (!InRange(m)) {
    r.replicate_cb(m, Status::InvalidArgument(ident_ + "stream " + StreamName(m.group, m.planner) +
                                              " out of range (groups " + std::to_string(opts_.groups) +
                                              ", planners " + std::to_string(opts_.planners) + ")"));
    return;
  }
  OutStream& s = out_[{m.group, m.planner}];
  if (s.broken) {
    r.replicate_cb(m, Status::Unavailable(s.broken_reason));
    return;
  }
  if (m.batch_id != s.next_id) {
    r.replicate_cb(m, Status::InvalidArgument(ident_ + "batch id " + std::to_string(m.batch_id) +
                                              " out of sequence: stream " + StreamName(m.group, m.planner) +
                                              " expects " + std::to_string(s.next_id)));
    return;
  }
  ++s.next_id;
  PublishNext({m.group, m.planner}, s.next_id);
  OutBatch b;
  b.meta = m;
  b.header = MakeMarkerHeader(r.bytes, opts_.chunk_bytes);
  b.payload = std::move(r.bytes);
  b.cb = std::move(r.replicate_cb);
  b.chunks.assign(b.header.num_chunks, PartState::kNeed);
  b.chunks[0] = PartState::kDone;
  b.marker = b.header.num_chunks == 1 ? MarkerState::kReady : MarkerState::kWaitChunks;
  b.deadline_nanos = NowNanos() + static_cast<int64_t>(opts_.op_deadline_ms) * 1'000'000;
  s.batches.push_back(std::move(b));
  ++admitted_;
}

void ZkReplicator::PumpLeader() {
  if (!connected_) return;
  const int max = opts_.max_inflight;
  for (auto& [key, s] : out_) {
    const auto [g, p] = key;
    if (!s.fence.empty() && !s.batches.empty()) {
      if (s.fence_inflight == 0) {
        for (const auto& path : s.fence) {
          OpTag t = OpTag::Make(OpTag::Type::kDeleteFence, g, p);
          t.name = path;
          session_.Delete(path, t);
          ++inflight_;
          ++s.fence_inflight;
        }
      }
      continue;  // this stream's writes wait for the fence
    }
    bool prev_marker_issued = true;  // markers go out in batch-id order (see zk_layout.h)
    for (auto& b : s.batches) {
      if (inflight_ >= max) return;
      // Flow control: while the followers have not consumed retain_bytes, no new batch starts
      // (batches already started finish, so their callbacks come).
      if (!b.started && HeldBack()) return;
      b.started = true;
      const uint64_t id = b.meta.batch_id;
      for (uint32_t k = 1; k < b.chunks.size(); ++k) {
        if (b.chunks[k] != PartState::kNeed) continue;
        ByteRange r = ChunkRange(b.payload.size(), opts_.chunk_bytes, k);
        if (!CanIssue(r.length)) return;
        OpTag t = OpTag::Make(OpTag::Type::kCreateChunk, g, p, id, k);
        Charge(&t, r.length);
        session_.Create(ChunkPath(g, p, id, k), std::string_view(b.payload).substr(r.offset, r.length), t);
        b.chunks[k] = PartState::kInFlight;
        ++inflight_;
      }
      if (b.marker == MarkerState::kWaitChunks && b.chunks_done + 1 == b.chunks.size()) b.marker = MarkerState::kReady;
      const ByteRange r0 = ChunkRange(b.payload.size(), opts_.chunk_bytes, 0);
      if (b.marker == MarkerState::kReady && prev_marker_issued && CanIssue(r0.length + kMarkerHeaderBytes)) {
        OpTag t = OpTag::Make(OpTag::Type::kCreateMarker, g, p, id, 0);
        t.attempt = b.marker_attempt;
        Charge(&t, r0.length + kMarkerHeaderBytes);
        session_.Create(MarkerPath(g, p, id),
                        EncodeMarker(b.header, std::string_view(b.payload).substr(r0.offset, r0.length)), t);
        b.marker = MarkerState::kInFlight;
        ++inflight_;
      }
      prev_marker_issued = b.marker == MarkerState::kInFlight || b.marker == MarkerState::kDone;
    }
  }
}

OutBatch* ZkReplicator::FindBatch(const OpTag& t) {
  auto it = out_.find({t.group, t.planner});
  if (it == out_.end() || it->second.batches.empty()) return nullptr;
  auto& q = it->second.batches;
  uint64_t first = q.front().meta.batch_id;
  if (t.batch_id < first || t.batch_id - first >= q.size()) return nullptr;
  OutBatch* b = &q[t.batch_id - first];
  QR_CHECK_EQ(b->meta.batch_id, t.batch_id);
  return b;
}

void ZkReplicator::LeaderCompletion(ZkEvent& ev) {
  const OpTag& t = ev.op;
  if (t.type == OpTag::Type::kListConsumers || t.type == OpTag::Type::kGetConsumer ||
      t.type == OpTag::Type::kDeleteBatch) {
    CleanupCompletion(ev);
    return;
  }
  if (t.type == OpTag::Type::kDeleteFence) {
    OutStream& s = out_[{t.group, t.planner}];
    if (s.fence_inflight > 0) --s.fence_inflight;
    if (ev.rc == ZOK || ev.rc == ZNONODE) {
      s.fence.erase(t.name);
    } else if (IsRetryable(ev.rc)) {
      NoteRetry(ev.rc);  // re-issued once the fence's requests are all back
    } else {
      FailStream({t.group, t.planner}, s,
                 Status::Unavailable(ident_ + "cannot delete leftover " + t.name + ": " + ZkErrorName(ev.rc)));
    }
    return;
  }
  OutBatch* b = FindBatch(t);
  if (b == nullptr) return;  // its stream failed meanwhile
  const StreamKey key{t.group, t.planner};
  OutStream& s = out_[key];
  const int rc = ev.rc;
  auto fail = [&](const std::string& what) {
    FailStream(key, s,
               Status::Unavailable(ident_ + what + " for batch " + std::to_string(t.batch_id) + " of stream " +
                                   StreamName(t.group, t.planner) + ": " + ZkErrorName(rc)));
  };
  switch (t.type) {
    case OpTag::Type::kCreateChunk:
    case OpTag::Type::kSetChunk:
    case OpTag::Type::kVerifyChunk: {
      PartState& st = b->chunks[t.chunk];
      if (st != PartState::kInFlight) return;
      if (IsRetryable(rc) || (rc == ZNONODE && t.type != OpTag::Type::kCreateChunk)) {
        if (IsRetryable(rc)) NoteRetry(rc);
        st = PartState::kNeed;
        return;
      }
      ByteRange r = ChunkRange(b->payload.size(), opts_.chunk_bytes, t.chunk);
      std::string_view want = std::string_view(b->payload).substr(r.offset, r.length);
      if (t.type == OpTag::Type::kCreateChunk && rc == ZNODEEXISTS) {
        // A retried create whose first attempt was applied, or a crashed writer's chunk:
        // compare the bytes (the marker is not written yet, so overwriting is safe).
        OpTag v = OpTag::Make(OpTag::Type::kVerifyChunk, t.group, t.planner, t.batch_id, t.chunk);
        Charge(&v, r.length);
        session_.Get(ChunkPath(t.group, t.planner, t.batch_id, t.chunk), v);
        ++inflight_;
        return;
      }
      if (t.type == OpTag::Type::kVerifyChunk && rc == ZOK && ev.data != want) {
        OpTag w = OpTag::Make(OpTag::Type::kSetChunk, t.group, t.planner, t.batch_id, t.chunk);
        Charge(&w, r.length);
        session_.Set(ChunkPath(t.group, t.planner, t.batch_id, t.chunk), want, w);
        ++inflight_;
        return;
      }
      if (rc != ZOK) return fail("chunk write");
      if (t.type == OpTag::Type::kVerifyChunk) counters_.verified.fetch_add(1, std::memory_order_relaxed);
      st = PartState::kDone;
      ++b->chunks_done;
      return;
    }
    case OpTag::Type::kCreateMarker:
    case OpTag::Type::kVerifyMarker: {
      if (b->marker != MarkerState::kInFlight || t.attempt != b->marker_attempt) return;
      if (IsRetryable(rc) || (rc == ZNONODE && t.type == OpTag::Type::kVerifyMarker)) {
        if (IsRetryable(rc)) NoteRetry(rc);
        // Later markers of the stream still in flight went out on the same (now failed)
        // connection after this one: write them off too, so that all are re-issued in batch
        // order and marker creation order stays batch order (followers rely on it).
        bool later = false;
        for (auto& o : s.batches) {
          if (&o == b) later = true;
          if (later && o.marker == MarkerState::kInFlight) {
            o.marker = MarkerState::kReady;
            ++o.marker_attempt;
          }
        }
        return;
      }
      if (t.type == OpTag::Type::kCreateMarker && rc == ZNODEEXISTS) {
        OpTag v = OpTag::Make(OpTag::Type::kVerifyMarker, t.group, t.planner, t.batch_id, 0);
        v.attempt = b->marker_attempt;
        Charge(&v, ChunkRange(b->payload.size(), opts_.chunk_bytes, 0).length + kMarkerHeaderBytes);
        session_.Get(MarkerPath(t.group, t.planner, t.batch_id), v);
        ++inflight_;
        return;
      }
      if (rc != ZOK) return fail("marker write");
      if (t.type == OpTag::Type::kVerifyMarker) {
        ByteRange r0 = ChunkRange(b->payload.size(), opts_.chunk_bytes, 0);
        if (ev.data != EncodeMarker(b->header, std::string_view(b->payload).substr(r0.offset, r0.length))) {
          return FailStream(key, s,
                            Status::Unavailable(ident_ + "batch " + std::to_string(t.batch_id) + " of stream " +
                                                StreamName(t.group, t.planner) +
                                                " was already written by another writer (two leaders on root " +
                                                opts_.root + "?)"));
        }
        counters_.verified.fetch_add(1, std::memory_order_relaxed);
      }
      b->marker = MarkerState::kDone;
      AckFront(s);
      return;
    }
    default:
      QR_CHECK(false, "unexpected leader completion type %d", static_cast<int>(t.type));
  }
}

void ZkReplicator::AckFront(OutStream& s) {
  // In batch-id order: OK for b promises 0..b (a follower cannot read past a missing batch).
  while (!s.batches.empty() && s.batches.front().marker == MarkerState::kDone) {
    OutBatch b = std::move(s.batches.front());
    s.batches.pop_front();
    --admitted_;
    s.live[b.meta.batch_id] = OutStream::Live{b.header.num_chunks, b.header.total_bytes};
    s.live_bytes += b.header.total_bytes;
    retained_bytes_ += b.header.total_bytes;
    counters_.acked.fetch_add(1, std::memory_order_relaxed);
    b.cb(b.meta, Status::Ok());
  }
}

void ZkReplicator::FailStream(const StreamKey& key, OutStream& s, const Status& status) {
  log_->error("{}", status.ToString());
  s.broken = true;
  s.broken_reason = status.message();
  {
    std::lock_guard<std::mutex> lock(next_mu_);
    broken_.insert(key);
  }
  std::deque<OutBatch> failed = std::move(s.batches);
  s.batches.clear();
  admitted_ -= failed.size();
  for (auto& b : failed) b.cb(b.meta, status);
}

void ZkReplicator::StartCleanup() {
  cleanup_failed_ = false;
  consumer_progress_.clear();
  ++cleanup_round_;
  if (opts_.followers == 0) {
    // No followers to wait for: only the byte budget applies.
    FinishCleanupRound();
    return;
  }
  cleanup_inflight_ = true;
  OpTag t = OpTag::Make(OpTag::Type::kListConsumers);
  t.attempt = cleanup_round_;
  session_.Children(ConsumersPath(opts_.root), t);
  ++inflight_;
}

void ZkReplicator::CleanupCompletion(ZkEvent& ev) {
  const OpTag& t = ev.op;
  if (t.type == OpTag::Type::kDeleteBatch) {
    if (ev.rc == ZOK || ev.rc == ZNONODE) {
      if (t.chunk == 0 && ev.rc == ZOK) counters_.deleted.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // Not deleted: put the batch back so a later round tries again (chunk count in attempt).
    out_[{t.group, t.planner}].live.emplace(t.batch_id, OutStream::Live{static_cast<uint32_t>(t.attempt), 0});
    if (IsRetryable(ev.rc)) NoteRetry(ev.rc);
    return;
  }
  if (!cleanup_inflight_ || t.attempt != cleanup_round_) return;
  if (t.type == OpTag::Type::kListConsumers) {
    if (ev.rc != ZOK || ev.children.size() < static_cast<size_t>(opts_.followers)) {
      if (IsRetryable(ev.rc)) NoteRetry(ev.rc);
      cleanup_inflight_ = false;
      return;
    }
    consumers_pending_ = ev.children.size();
    for (const auto& child : ev.children) {
      OpTag g = OpTag::Make(OpTag::Type::kGetConsumer);
      g.attempt = cleanup_round_;
      g.name = child;
      session_.Get(ConsumerPath(opts_.root, child), g);
      ++inflight_;
    }
    return;
  }
  // kGetConsumer
  if (ev.rc == ZOK) {
    std::vector<StreamProgress> progress;
    if (DecodeProgress(ev.data, &progress).ok()) {
      consumer_progress_.push_back(std::move(progress));
    } else {
      log_->warn("{}ignoring unreadable progress of follower '{}'; no cleanup this round", ident_, t.name);
      cleanup_failed_ = true;
    }
  } else {
    if (IsRetryable(ev.rc)) NoteRetry(ev.rc);
    cleanup_failed_ = true;
  }
  if (--consumers_pending_ == 0) FinishCleanupRound();
}

void ZkReplicator::DeleteBatch(const StreamKey& key, OutStream& s) {
  auto [id, live] = *s.live.begin();
  s.live.erase(s.live.begin());
  s.live_bytes -= live.bytes;
  retained_bytes_ -= live.bytes;
  // Marker first: nobody may find a marker whose chunks are gone.
  OpTag t = OpTag::Make(OpTag::Type::kDeleteBatch, key.first, key.second, id, 0);
  t.attempt = live.chunks;
  session_.Delete(MarkerPath(key.first, key.second, id), t);
  ++inflight_;
  for (uint32_t k = 1; k < live.chunks; ++k) {
    OpTag c = OpTag::Make(OpTag::Type::kDeleteBatch, key.first, key.second, id, k);
    c.attempt = live.chunks;
    session_.Delete(ChunkPath(key.first, key.second, id, k), c);
    ++inflight_;
  }
}

void ZkReplicator::FinishCleanupRound() {
  cleanup_inflight_ = false;
  size_t budget = kMaxDeletesPerRound;
  if (opts_.followers > 0 && !cleanup_failed_ && consumer_progress_.size() >= static_cast<size_t>(opts_.followers)) {
    for (auto& [key, s] : out_) {
      uint64_t min_next = UINT64_MAX;
      for (const auto& progress : consumer_progress_) {
        uint64_t n = 0;  // a follower without an entry has consumed nothing of this stream
        for (const auto& e : progress) {
          if (e.group == key.first && e.planner == key.second) n = e.next_batch_id;
        }
        min_next = std::min(min_next, n);
      }
      // Keep the last consumed batch: a restarted leader finds where the stream ends from it.
      const uint64_t keep_from = min_next == 0 ? 0 : min_next - 1;
      while (budget > 0 && !s.live.empty() && s.live.begin()->first < keep_from) {
        DeleteBatch(key, s);
        --budget;
      }
    }
  }
  // The byte budget protects the ZooKeeper servers' memory (they hold every znode in their
  // heap). With followers to wait for, it is enforced by flow control (HeldBack). Without,
  // the oldest batches go past it (a follower that reads anyway gets kNotFound); each stream
  // keeps its newest batch.
  while (opts_.followers == 0 && opts_.retain_bytes > 0 && retained_bytes_ > opts_.retain_bytes && budget > 0) {
    OutStream* fattest = nullptr;
    StreamKey fattest_key{};
    for (auto& [key, s] : out_) {
      if (s.live.size() > 1 && (fattest == nullptr || s.live_bytes > fattest->live_bytes)) {
        fattest = &s;
        fattest_key = key;
      }
    }
    if (fattest == nullptr || fattest->live_bytes == 0) break;
    if (!retention_warned_) {
      retention_warned_ = true;
      log_->warn("{}over replication.zookeeper.retain_bytes ({} bytes kept): deleting the oldest batches whether or "
                 "not followers read them",
                 ident_, retained_bytes_);
    }
    counters_.evicted.fetch_add(1, std::memory_order_relaxed);
    DeleteBatch(fattest_key, *fattest);
    --budget;
  }
}

// ------------------------------------------------------------------------------------------
// Follower.

void ZkReplicator::AdmitReceive(Request r) {
  const ReplicateMeta& m = r.meta;
  if (!InRange(m)) {
    r.receive_cb(m,
                 Status::InvalidArgument(ident_ + "stream " + StreamName(m.group, m.planner) +
                                         " out of range (groups " + std::to_string(opts_.groups) + ", planners " +
                                         std::to_string(opts_.planners) + ")"),
                 {});
    return;
  }
  InStream& s = in_[{m.group, m.planner}];
  if (s.fetches.count(m.batch_id) != 0) {
    r.receive_cb(m,
                 Status::InvalidArgument(ident_ + "batch " + std::to_string(m.batch_id) + " of stream " +
                                         StreamName(m.group, m.planner) + " is already requested"),
                 {});
    return;
  }
  if (s.fetches.size() >= kMaxRequestsPerStream) {
    r.receive_cb(m,
                 Status::ResourceExhausted(ident_ + "more than " + std::to_string(kMaxRequestsPerStream) +
                                           " outstanding ReceiveData on stream " + StreamName(m.group, m.planner)),
                 {});
    return;
  }
  Fetch& f = s.fetches[m.batch_id];
  f.meta = m;
  f.cb = std::move(r.receive_cb);
}

void ZkReplicator::RestartFetch(Fetch& f, int64_t not_before_nanos) {
  ++f.attempt;
  f.state = FetchState::kStart;
  f.not_before_nanos = not_before_nanos;
  f.parts.clear();
  f.part_state.clear();
  f.parts_done = 0;
  f.bytes.clear();
}

void ZkReplicator::PumpFollower() {
  if (connected_) {
    const int max = opts_.max_inflight;
    const int64_t now = NowNanos();
    for (auto& [key, s] : in_) {
      const auto [g, p] = key;
      for (auto& [id, f] : s.fetches) {
        if (inflight_ >= max) break;
        if (f.state == FetchState::kStart && f.not_before_nanos <= now) {
          // Expected reply size: like the stream's previous marker (small batches stay cheap).
          const uint64_t cost = std::max<uint64_t>(4096, s.last_marker_bytes);
          if (!CanIssue(cost)) break;
          OpTag t = OpTag::Make(OpTag::Type::kGetMarker, g, p, id, 0);
          t.attempt = f.attempt;
          Charge(&t, cost);
          session_.Get(MarkerPath(g, p, id), t);
          ++inflight_;
          f.state = FetchState::kGetMarker;
        } else if (f.state == FetchState::kChunks) {
          for (uint32_t k = 1; k < f.part_state.size(); ++k) {
            if (f.part_state[k] != PartState::kNeed) continue;
            const uint64_t cost = ChunkRange(f.header.total_bytes, f.header.chunk_bytes, k).length;
            if (!CanIssue(cost)) break;
            OpTag t = OpTag::Make(OpTag::Type::kGetChunk, g, p, id, k);
            t.attempt = f.attempt;
            Charge(&t, cost);
            session_.Get(ChunkPath(g, p, id, k), t);
            ++inflight_;
            f.part_state[k] = PartState::kInFlight;
          }
        }
      }
    }
  }
  WriteProgress();
}

void ZkReplicator::FollowerWatch(const ZkEvent& ev) {
  // Path: ROOT/g<g>/p<p>/b<id>.
  const std::string prefix = opts_.root + "/g";
  if (ev.path.compare(0, prefix.size(), prefix) != 0) return;
  unsigned g = 0, p = 0;
  char name[64] = {0};
  if (std::sscanf(ev.path.c_str() + prefix.size(), "%u/p%u/%63s", &g, &p, name) != 3) return;
  auto c = ParseChildName(name);
  if (!c || c->kind != ChildName::Kind::kMarker) return;
  auto it = in_.find({g, p});
  if (it == in_.end()) return;
  auto f = it->second.fetches.find(c->batch_id);
  if (f != it->second.fetches.end() && f->second.state == FetchState::kWaitCreated) f->second.state = FetchState::kStart;
}

void ZkReplicator::FollowerCompletion(ZkEvent& ev) {
  const OpTag& t = ev.op;
  if (t.type == OpTag::Type::kWriteProgress) {
    progress_inflight_ = false;
    if (ev.rc == ZNONODE && t.chunk == 0) {
      // Someone removed our progress znode: create it again.
      OpTag c = OpTag::Make(OpTag::Type::kWriteProgress);
      c.chunk = 1;
      session_.Create(ConsumerPath(opts_.root, follower_id_), ProgressBytes(), c);
      ++inflight_;
      progress_inflight_ = true;
    } else if (ev.rc != ZOK) {
      if (IsRetryable(ev.rc)) NoteRetry(ev.rc);
      progress_dirty_ = true;
    }
    return;
  }
  const StreamKey key{t.group, t.planner};
  auto sit = in_.find(key);
  if (sit == in_.end()) return;
  InStream& s = sit->second;
  if (t.type == OpTag::Type::kListStream) {
    if (ev.rc != ZOK) return;  // the next poll asks again
    bool any = false;
    uint64_t oldest = 0;
    for (const auto& c : ev.children) {
      auto parsed = ParseChildName(c);
      if (parsed && parsed->kind == ChildName::Kind::kMarker && (!any || parsed->batch_id < oldest)) {
        oldest = parsed->batch_id;
        any = true;
      }
    }
    // Cleanup deletes from the oldest up and always keeps the newest batch, so a request
    // below the oldest marker asks for a deleted batch.
    while (any && !s.fetches.empty() && s.fetches.begin()->first < oldest &&
           s.fetches.begin()->second.state != FetchState::kReady) {
      auto it = s.fetches.begin();
      ReceiveCallback cb = std::move(it->second.cb);
      ReplicateMeta meta = it->second.meta;
      s.fetches.erase(it);
      counters_.gone.fetch_add(1, std::memory_order_relaxed);
      Status st = Status::NotFound(ident_ + "batch " + std::to_string(meta.batch_id) + " of stream " +
                                   StreamName(key.first, key.second) + " was deleted from ZooKeeper (oldest kept: " +
                                   std::to_string(oldest) +
                                   "); this follower fell behind replication.zookeeper.retain_bytes or its progress");
      log_->error("{}", st.message());
      cb(meta, st, {});
    }
    DeliverReady(key, s);
    return;
  }
  auto fit = s.fetches.find(t.batch_id);
  if (fit == s.fetches.end() || fit->second.attempt != t.attempt) return;  // superseded
  Fetch& f = fit->second;
  const int rc = ev.rc;
  auto fail = [&](const Status& st) {
    log_->error("{}{}", ident_, st.ToString());
    ReceiveCallback cb = std::move(f.cb);
    ReplicateMeta meta = f.meta;
    s.fetches.erase(fit);
    cb(meta, st, {});
    DeliverReady(key, s);  // a later request may now be first in line
  };
  switch (t.type) {
    case OpTag::Type::kGetMarker: {
      if (f.state != FetchState::kGetMarker) return;
      if (IsRetryable(rc)) {
        NoteRetry(rc);
        f.state = FetchState::kStart;
        return;
      }
      if (rc == ZNONODE) {
        // Not written yet: set an exists-watch (a create in between is seen by exists itself).
        OpTag w = OpTag::Make(OpTag::Type::kExistsMarker, t.group, t.planner, t.batch_id, 0);
        w.attempt = f.attempt;
        session_.ExistsWatch(MarkerPath(t.group, t.planner, t.batch_id), w);
        ++inflight_;
        f.state = FetchState::kExists;
        return;
      }
      if (rc != ZOK) {
        return fail(Status::Unavailable("reading batch " + std::to_string(t.batch_id) + " of stream " +
                                        StreamName(t.group, t.planner) + ": " + ZkErrorName(rc)));
      }
      std::string_view chunk0;
      Status st = DecodeMarker(ev.data, &f.header, &chunk0);
      if (!st.ok()) {
        return fail(Status::Corruption("batch " + std::to_string(t.batch_id) + " of stream " +
                                       StreamName(t.group, t.planner) + ": " + st.message()));
      }
      f.czxid = ev.czxid;
      s.last_marker_bytes = ev.data.size();
      f.parts.assign(f.header.num_chunks, std::string());
      f.parts[0].assign(chunk0.data(), chunk0.size());
      f.part_state.assign(f.header.num_chunks, PartState::kNeed);
      f.part_state[0] = PartState::kDone;
      f.parts_done = 1;
      f.state = FetchState::kChunks;
      if (f.parts_done == f.header.num_chunks) Assemble(s, f);
      break;
    }
    case OpTag::Type::kExistsMarker:
      if (f.state != FetchState::kExists) return;
      if (rc == ZNONODE) {
        f.state = FetchState::kWaitCreated;  // the watch fires on create
      } else {
        if (IsRetryable(rc)) NoteRetry(rc);
        f.state = FetchState::kStart;
      }
      return;
    case OpTag::Type::kGetChunk: {
      if (f.state != FetchState::kChunks || f.part_state[t.chunk] != PartState::kInFlight) return;
      if (IsRetryable(rc)) {
        NoteRetry(rc);
        f.part_state[t.chunk] = PartState::kNeed;
        return;
      }
      if (rc == ZNONODE) {
        // The marker we read was a crashed leader's leftover, removed meanwhile: start over.
        counters_.stale.fetch_add(1, std::memory_order_relaxed);
        RestartFetch(f, NowNanos() + kStaleBackoffNanos);
        return;
      }
      if (rc != ZOK) {
        return fail(Status::Unavailable("reading chunk " + std::to_string(t.chunk) + " of batch " +
                                        std::to_string(t.batch_id) + ": " + ZkErrorName(rc)));
      }
      f.parts[t.chunk] = std::move(ev.data);
      f.part_state[t.chunk] = PartState::kDone;
      ++f.parts_done;
      if (f.parts_done == f.header.num_chunks) Assemble(s, f);
      break;
    }
    default:
      QR_CHECK(false, "unexpected follower completion type %d", static_cast<int>(t.type));
  }
  DeliverReady(key, s);
}

void ZkReplicator::Assemble(InStream& s, Fetch& f) {
  (void)s;
  std::string bytes;
  bytes.reserve(f.header.total_bytes);
  bool sizes_ok = true;
  for (uint32_t k = 0; k < f.header.num_chunks; ++k) {
    ByteRange r = ChunkRange(f.header.total_bytes, f.header.chunk_bytes, k);
    if (f.parts[k].size() != r.length) sizes_ok = false;
    bytes += f.parts[k];
  }
  f.parts.clear();
  if (sizes_ok && Hash64(bytes) == f.header.payload_hash) {
    f.bytes = std::move(bytes);
    f.state = FetchState::kReady;
    return;
  }
  // Chunks replaced under us (a crashed leader's leftovers being rewritten) or real damage:
  // re-read a few times, then report corruption.
  if (++f.corrupt <= kMaxCorruptRetries) {
    int corrupt = f.corrupt;
    RestartFetch(f, NowNanos() + kStaleBackoffNanos);
    f.corrupt = corrupt;
    return;
  }
  f.state = FetchState::kReady;
  f.bytes.clear();
  f.header.payload_hash = ~Hash64(std::string_view());  // marks the failure for DeliverReady
  f.corrupt = -1;
}

void ZkReplicator::DeliverReady(const StreamKey& key, InStream& s) {
  while (!s.fetches.empty()) {
    auto it = s.fetches.begin();
    Fetch& f = it->second;
    if (f.state != FetchState::kReady) return;
    const uint64_t id = it->first;
    if (f.corrupt < 0) {
      ReceiveCallback cb = std::move(f.cb);
      ReplicateMeta meta = f.meta;
      s.fetches.erase(it);
      cb(meta,
         Status::Corruption(ident_ + "batch " + std::to_string(id) + " of stream " +
                            StreamName(key.first, key.second) + ": chunks do not match the marker's hash"),
         {});
      continue;
    }
    // Markers of a stream are created in batch order, so a marker b+1 older than the marker b
    // we delivered is a crashed leader's leftover beyond its gap: wait for the rewrite.
    if (s.have_last && id == s.last_id + 1 && f.czxid <= s.last_czxid) {
      counters_.stale.fetch_add(1, std::memory_order_relaxed);
      RestartFetch(f, NowNanos() + kStaleBackoffNanos);
      return;
    }
    ReceiveCallback cb = std::move(f.cb);
    ReplicateMeta meta = f.meta;
    std::string bytes = std::move(f.bytes);
    s.have_last = true;
    s.last_id = id;
    s.last_czxid = f.czxid;
    s.next_needed = std::max(s.next_needed, id + 1);
    s.fetches.erase(it);
    PublishNext(key, s.next_needed);
    progress_dirty_ = true;
    counters_.delivered.fetch_add(1, std::memory_order_relaxed);
    cb(meta, Status::Ok(), std::move(bytes));
  }
}

std::string ZkReplicator::ProgressBytes() const {
  std::vector<StreamProgress> progress;
  for (const auto& [key, s] : in_) {
    if (s.next_needed > 0) progress.push_back({key.first, key.second, s.next_needed});
  }
  return EncodeProgress(progress);
}

void ZkReplicator::WriteProgress() {
  // One write in flight at a time, at most one per progress_interval_ms; deliveries meanwhile
  // are coalesced into the next one. Not more often: ZooKeeper answers a session's reads only
  // after its earlier writes committed (fsync), so each progress write stalls our reads.
  if (!progress_dirty_ || progress_inflight_ || !connected_) return;
  const int64_t now = NowNanos();
  if (now < next_progress_nanos_) return;
  next_progress_nanos_ = now + static_cast<int64_t>(opts_.progress_interval_ms) * 1'000'000;
  progress_dirty_ = false;
  progress_inflight_ = true;
  session_.Set(ConsumerPath(opts_.root, follower_id_), ProgressBytes(), OpTag::Make(OpTag::Type::kWriteProgress));
  ++inflight_;
}

}  // namespace

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

Status ForceSessionExpiryForTest(Replicator* replicator) {
  auto* zk = dynamic_cast<ZkReplicator*>(replicator);
  if (zk == nullptr) return Status::InvalidArgument("ForceSessionExpiryForTest: not a ZooKeeper replicator");
  return zk->ForceSessionExpiry();
}

}  // namespace qrstore::replication::zookeeper
