// ZkReplicator: the ZooKeeper backend's Replicator (zk_replicator.h describes what it does and
// promises), and the state its worker thread keeps per stream. Internal to
// replication/zookeeper: only this folder's .cc files include it. The class is implemented in
// several files, one part each:
//   zk_replicator.cc  Start / Stop, the user-facing calls, stats, the factory and test hooks
//   zk_worker.cc      the worker thread: event loop, session events, timers, shutdown
//   zk_leader.cc      leader (writer) side: the Start scan, batch writes and acks, cleanup
//   zk_follower.cc    follower (reader) side: progress at Start, fetches, delivery, progress writes
//   zk_election.cc    per-group election, epoch bump and promotion, deposition, CancelReceives
//
// Ownership and threads: CreateZkReplicator returns it to the caller, who owns it. Start and
// Stop run on one controlling thread; ReplicateData, ReceiveData, NextBatchId, Health, stats and
// the test hooks may run on any thread and touch only the members under "Shared with user
// threads".
// Everything under "Owned by the worker thread" belongs to the one thread Start creates,
// "zk-leader" or "zk-follower" (and to Start itself before that thread exists); ZooKeeper's
// client threads only push into inbox_ (zk_session.h), and user callbacks run on the worker.
//
// Invariants (on the worker thread): inflight_ and inflight_bytes_ count the requests issued on
// the current session that have no completion yet (and their Charge()d cost); Recreate resets
// both with the session, and completions of older sessions are dropped. A stream's OutBatches
// have consecutive ids and are acknowledged in that order; its markers are issued in that order
// (followers rely on it, see zk_layout.h). out_ holds the streams of groups this member leads
// (or led: deposed, they are broken), in_ the streams it reads; a promoted member has both for a
// group until its application has received what its predecessor wrote.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/bounded_queue.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/thread.h"
#include "replication/zookeeper/zk_layout.h"
#include "replication/zookeeper/zk_replicator.h"
#include "replication/zookeeper/zk_retention.h"
#include "replication/zookeeper/zk_session.h"

namespace qrstore::replication::zookeeper {

inline constexpr size_t kRequestQueueCapacity = 1024;

struct Request {
  bool replicate = true;  // else receive (or, with cancel, CancelReceives(meta.group))
  bool cancel = false;
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
  std::map<uint64_t, KeptBatch> kept;  // acknowledged batches still in ZooKeeper (zk_retention.h)
  uint64_t kept_bytes = 0;             // sum of kept[].bytes
  // Leftovers of a crashed writer found by the Start scan, deleted before this process first
  // writes the stream (not at Start: only a process that actually writes the stream may
  // touch it). Batch writes wait until the fence is empty.
  std::set<std::string> fence;
  size_t fence_inflight = 0;
  bool broken = false;
  std::string broken_reason;
  // A member promoted from follower: its own reader must still deliver the batches below this
  // (NextBatchId when it started leading), so cleanup deletes none of them before it has.
  uint64_t reader_until = 0;
};

// ---- election state, one per group (owned by the worker thread; zk_election.cc) ----
enum class ElectionPhase : uint8_t {
  kOff,         // replication.zookeeper.election is false: the configured role, for good
  kAwaitEpoch,  // not a candidate before the group had a leader (R/g<g>/epoch exists)
  kJoin,        // to create its election znode (again, after a session expiry)
  kCandidate,   // has its znode; watches its predecessor, or finds itself first and promotes
  kLeading,     // epoch bumped, streams scanned: IsLeader
  kDeposed,     // led, and no longer does (fenced, epoch moved on, session expired): for good
  kWithdrawn,   // stranded (a batch it needs was deleted): it could never deliver what its
                // predecessor wrote, so it is no candidate any more (for good)
};

struct GroupElection {
  ElectionPhase phase = ElectionPhase::kOff;
  bool step = false;           // StepElection must run (once connected, not before retry_nanos)
  bool refresh = false;        // the epoch znode changed: read it again (RefreshView)
  int64_t retry_nanos = 0;     // back-off after a step failed on the connection
  std::string node;            // this member's election znode (a child name), "" if none
  uint64_t epoch = 0;          // leading: the epoch (R/g<g>/epoch's version) its writes check
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
  bool read_after_prev = false;  // its marker read went out after batch id - 1 was delivered
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
  uint64_t last_epoch = 0;            // the epoch of the last delivered marker
  uint64_t last_marker_bytes = 0;     // size of the last marker read (cost estimate)
  // The first awaited batch, if at the last stats tick it waited on ZooKeeper rather than on
  // the leader (WarnStalledFetches), else UINT64_MAX.
  uint64_t suspect_batch = UINT64_MAX;
};

class ZkReplicator final : public Replicator {
 public:
  explicit ZkReplicator(ZkOptions o)
      : opts_(WithElectionRule(std::move(o))),
        log_(Logger("zk")),
        ident_(std::string("[zk ") + (opts_.leader ? "leader" : "follower") + " " + opts_.root + "] "),
        requests_(kRequestQueueCapacity),
        session_(&inbox_) {}
  ~ZkReplicator() override { Stop(); }

  // A one-member group (followers 0) has nobody to elect: its roles stay fixed by config, and
  // its leader rides out a session expiry as before elections existed.
  static ZkOptions WithElectionRule(ZkOptions o) {
    if (o.followers == 0) o.election = false;
    return o;
  }

  Status Start() override;
  void Stop() override;
  void ReplicateData(const ReplicateMeta& meta, std::string bytes, ReplicateCallback cb) override;
  void ReceiveData(const ReplicateMeta& meta, ReceiveCallback cb) override;
  Result<uint64_t> NextBatchId(uint32_t group, uint32_t planner) const override;
  bool IsLeader(uint32_t group) const override {
    if (!opts_.election) return opts_.leader && group < opts_.groups;
    MutexLock lock(view_mu_);
    return group < views_.size() && views_[group].self;
  }
  std::string Name() const override { return "zookeeper"; }

  ZkStats stats() const;
  Status ForceSessionExpiry();
  std::string CurrentServer() const { return session_.CurrentServer(); }
  // Leader: the followers of `group` the last cleanup round found stranded; follower: whether it
  // learned that a batch it needs was deleted. A snapshot the worker publishes (any thread).
  GroupHealth Health(uint32_t group) const override;
  // With elections: what this member last read from R/g<g>/epoch (the leader's id and epoch; it
  // re-reads it on every change), self once it leads. Without: the configured role (a leader
  // knows it leads, a follower knows no leader).
  LeaderView Leader(uint32_t group) const override {
    if (!opts_.election) {
      LeaderView v;
      v.known = v.self = IsLeader(group);
      if (v.self) v.id = opts_.follower_id;
      return v;
    }
    MutexLock lock(view_mu_);
    return group < views_.size() ? views_[group] : LeaderView{};
  }
  // Queued to the worker, which fails every waiting receive of the group with kAborted before it
  // admits any request queued after this call.
  void CancelReceives(uint32_t group) override;
  // The application's restart needs batches >= `batch` of the group (its newest checkpoint):
  // this member's progress asks the leader's cleanup to keep them (zk_retention.h rule 1; the
  // byte budget, rule 2, still applies). Any thread.
  void RetainFrom(uint32_t group, uint64_t batch) override {
    MutexLock lock(retain_mu_);
    floor_.RetainFrom(group, batch);
  }
  // RetainFrom's batch of the group (UINT64_MAX: none told).
  uint64_t RetainedFrom(uint32_t group) const {
    MutexLock lock(retain_mu_);
    return floor_.RetainedFrom(group);
  }
  // The leader's floor (zk_retention.h LeaderFloor, leader_keep_from): the RetainFrom before the
  // newest one, so a member fetching the leader's newest checkpoint still finds what follows it
  // when the leader writes its next checkpoint meanwhile, lowered by a hold of a fetch
  // (UINT64_MAX: none told).
  uint64_t LeaderRetainedFrom(uint32_t group) const {
    MutexLock lock(retain_mu_);
    return floor_.Floor(group, NowNanos());
  }
  void HoldFrom(uint32_t group, uint64_t batch, int64_t for_ms) override {
    MutexLock lock(retain_mu_);
    const int64_t now = NowNanos();
    floor_.HoldFrom(group, batch, now + for_ms * 1'000'000, now);
  }
  // The streams live in ZooKeeper, shared by every member: a member that lacks what was cleaned
  // away learns it as a stranded follower (Health).
  bool LogFromStart(uint32_t) const override { return true; }
  LogSyncTotals LogSyncs() const override { return {}; }  // the ZooKeeper server syncs its own log
  void MuteEpochWatch(bool muted) { epoch_watch_muted_.store(muted, std::memory_order_release); }

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
  // Leader with followers (flow control, rule 3 of zk_retention.h): more than retain_bytes kept,
  // so no new batch starts until a cleanup round deletes enough. A round deletes what the
  // followers a majority needs have consumed (or anything, with none live), so this waits for
  // those followers only, and between two rounds. Batches already started still finish, so
  // ZooKeeper holds at most retain_bytes + max_inflight_bytes (+ one batch) of this leader's.
  bool HeldBack() const {
    return opts_.followers > 0 && opts_.retain_bytes > 0 && retained_bytes_ > opts_.retain_bytes;
  }
  // Held back: what the last cleanup round said the leader waits for (for stats and errors).
  std::string HeldBackReason() const;
  bool InRange(const ReplicateMeta& m) const { return m.group < opts_.groups && m.planner < opts_.planners; }
  // Start-up, on Start's thread (zk_replicator.cc; ScanStream in zk_leader.cc, LoadProgress in
  // zk_follower.cc). PublishNext (zk_replicator.cc) also runs on the worker thread.
  Status WaitConnected(int64_t deadline_nanos);
  Status SyncRetry(const char* what, const std::string& path, int64_t deadline_nanos, const std::function<int()>& op,
                   std::initializer_list<int> accepted, int* rc_out = nullptr);
  Status EnsurePath(const std::string& path, int64_t deadline_nanos);
  Status ScanStream(uint32_t g, uint32_t p, int64_t deadline_nanos);
  Status LoadProgress(int64_t deadline_nanos);
  Status CreateLiveSync(int64_t deadline_nanos);
  void PublishNext(const StreamKey& key, uint64_t next);

  // Election (zk_election.cc), on the worker thread (and on Start's before it exists). Its few
  // requests are synchronous (a round trip each, bounded by session_timeout_ms): they run only
  // when a group's election moves (join, predecessor gone, promotion, epoch changed).
  bool Leading(uint32_t g) const {
    if (!opts_.election) return opts_.leader;
    return g < elections_.size() && elections_[g].phase == ElectionPhase::kLeading;
  }
  bool AnyLeading() const;
  void PumpElection();
  Status StepElection(uint32_t g, int64_t deadline_nanos);
  Status JoinElection(uint32_t g, int64_t deadline_nanos);
  Status Promote(uint32_t g, int64_t deadline_nanos);
  void RefreshView(uint32_t g);
  void ElectionWatch(const ZkEvent& ev);
  void Depose(uint32_t g, const std::string& why, bool delete_node);
  void Withdraw(uint32_t g, const std::string& why);
  void PublishView(uint32_t g, const LeaderView& v);
  void CancelGroup(uint32_t g);
  // A leader's write (chunk, marker, deletion): fenced by the group's epoch when it has one.
  void LeaderWrite(ZkSession::FencedKind kind, uint32_t g, const std::string& path, std::string_view data, OpTag tag);

  // The worker thread (zk_worker.cc).
  void Run();
  void Shutdown();
  void HandleEvent(ZkEvent& ev);
  void HandleSession(const ZkEvent& ev);
  void Recreate(const char* why);
  void NoteRetry(int rc);
  int64_t OnTimers(int64_t now);

  // Leader (zk_leader.cc).
  void AdmitReplicate(Request r);
  void PumpLeader();
  void LeaderCompletion(ZkEvent& ev);
  OutBatch* FindBatch(const OpTag& t);
  void AckFront(OutStream& s);
  void FailStream(const StreamKey& key, OutStream& s, const Status& status);
  void StartCleanup();
  void CleanupCompletion(ZkEvent& ev);
  void CleanupRequestDone();
  void FinishCleanupRound();
  void DeleteBatch(const StreamKey& key, OutStream& s);  // the oldest kept batch of s

  // Follower (zk_follower.cc).
  void AdmitReceive(Request r);
  void PumpFollower();
  void FollowerCompletion(ZkEvent& ev);
  void ProgressCompletion(ZkEvent& ev);
  void ListCompletion(const StreamKey& key, InStream& s, ZkEvent& ev);
  void FetchCompletion(const StreamKey& key, InStream& s, ZkEvent& ev);
  void FollowerWatch(const ZkEvent& ev);
  // Follower, at each stats tick: warns of each stream whose first awaited batch has waited on
  // ZooKeeper (a request out, or one to issue) rather than for the leader to write it, at this
  // tick and the last, with nothing delivered in between. Such a wait should not outlast a
  // stats interval; an idle follower waits for creation and says nothing.
  void WarnStalledFetches(bool delivered_since_last_tick);
  void RestartFetch(Fetch& f, int64_t not_before_nanos);
  void Assemble(InStream& s, Fetch& f);
  void DeliverReady(const StreamKey& key, InStream& s);
  void WriteProgress();
  std::string ProgressBytes() const;
  // The ephemeral R/live/<follower_id> (re-created after a session expiry): issue / completion.
  void PumpLive();
  void LiveCompletion(const ZkEvent& ev);
  void SetSelfStranded(uint32_t group, const std::string& reason);

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
  mutable Mutex next_mu_;              // NextBatchId is read from any thread
  std::map<StreamKey, uint64_t> next_ids_ GUARDED_BY(next_mu_);
  std::set<StreamKey> broken_ GUARDED_BY(next_mu_);
  // Health() is read from any thread; the worker publishes whole snapshots here.
  mutable Mutex retain_mu_;
  LeaderFloor floor_ GUARDED_BY(retain_mu_);  // RetainFrom and HoldFrom, by group
  mutable Mutex health_mu_;
  std::map<uint32_t, GroupHealth> health_ GUARDED_BY(health_mu_);  // by group
  // Leader() and IsLeader() are polled from any thread; the worker publishes each group's view.
  mutable Mutex view_mu_;
  std::vector<LeaderView> views_ GUARDED_BY(view_mu_);  // by group
  std::atomic<bool> epoch_watch_muted_{false};  // test hook (acquire/release)
  struct Counters {
    std::atomic<uint64_t> acked{0}, delivered{0}, retried{0}, verified{0}, sessions{0}, losses{0}, deleted{0},
        stale{0}, evicted{0}, gone{0}, held{0}, won{0}, fenced{0}, deposed{0};
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
  uint64_t retained_bytes_ = 0;  // sum of out_[].kept_bytes
  int64_t next_stats_nanos_ = 0;
  uint64_t last_stats_activity_ = 0;
  uint64_t delivered_at_last_stats_ = 0;  // follower: batches_delivered at the last stats tick
  // Leader: the cleanup round in progress (its requests carry attempt = cleanup_round_).
  bool cleanup_inflight_ = false;
  uint64_t cleanup_round_ = 0;
  size_t cleanup_pending_ = 0;  // its list / get requests without a completion yet
  bool cleanup_failed_ = false;  // one failed: the round decides nothing
  std::map<std::string, std::vector<StreamProgress>> round_progress_;  // registered followers, by id
  std::set<std::string> round_live_;                                   // children of R/live
  std::set<std::string> unreadable_warned_;  // followers whose progress did not decode (warned once)
  std::set<std::string> stranded_warned_;    // stranded followers already warned of
  std::string hold_reason_;                  // the last round's RetentionPlan::waiting_for
  bool retention_warned_ = false;
  // The byte budget deleted batches after the leader's checkpoint before its newest (warned once).
  bool retention_checkpoint_warned_ = false;
  std::map<StreamKey, InStream> in_;
  std::string follower_id_;  // the member id (opts_.follower_id, or an automatic one)
  // Whether this member keeps R/consumers/<id> and R/live/<id> (a follower; with elections also
  // a configured leader that has a follower_id, since it may read as a follower later).
  bool registered_ = false;
  std::vector<GroupElection> elections_;  // by group
  bool progress_dirty_ = false;
  bool progress_inflight_ = false;
  int64_t next_progress_nanos_ = 0;
  int64_t next_poll_nanos_ = 0;
  bool live_needed_ = false;    // follower: its live znode must be (re-)created
  bool live_inflight_ = false;  // a kCreateLive / kCheckLive / kDeleteLive is out
  int64_t next_live_nanos_ = 0;  // not before (back-off after a failure)
  NamedThread thread_;
};

}  // namespace qrstore::replication::zookeeper
