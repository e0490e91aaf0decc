// Raft driver: the only code that gives the pure Raft cores (core.h) time, threads, storage and
// a network.
//
// What it is. One Driver per process runs ONE thread named "raft" that owns every Core hosted
// by the process (one per replication group), their LogStorages and the sending side of the
// Transport. Its loop:
//   wait (bounded by the next tick) on the inbox: peer messages, control tasks, proposal tasks
//   -> Step each message -> run tasks (they may Propose) -> Tick when due
//   -> for every core with a Ready: hand the committed entries already durable here to the
//      listener -> persist hard state + entries (fsync per policy: kAlways after each write,
//      kBatch once per storage per iteration = group commit, kNever not) -> send messages
//      -> hand the rest of the committed entries to the listener -> Advance
//   -> report role changes -> compact the in-memory log to its byte budget.
// Nothing in the loop blocks on the network (Transport::Send never blocks) or on the
// application (listener calls must only hand over), so executor load elsewhere in the process
// cannot starve heartbeats beyond the OS scheduler.
//
// Inbox lanes (all bounded): peer messages are dropped when their lane is full (Raft
// retries); tasks block the submitting thread while their lane is full (back-pressure).
// Proposal tasks may answer "not now" (the core's uncommitted-bytes limit): the driver then
// keeps that one task and stops taking proposals until it succeeds, retrying every iteration.
//
// Back-pressure on application: the listener may pause a group's apply (SetApplyPaused).
// While paused and the group's retained log exceeds its byte budget, AppendRequests carrying
// entries are dropped so a follower's memory stays bounded; heartbeats still pass, so the
// member keeps its leader.
//
// Threads. Start/Stop from the owner thread. Submit from any thread. Everything marked
// "raft thread only" may be called only from listener callbacks or tasks.
//
// Failure. A storage error is fatal for the driver: it logs it, stops processing (the peers
// see a dead member), aborts every queued task and tells the listener (OnFailed); health()
// reports the error.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread.h"
#include "replication/raft/core.h"
#include "replication/raft/log_storage.h"
#include "replication/raft/transport.h"

namespace qrstore::replication::raft {

struct DriverOptions {
  NodeId node_id = 0;
  std::vector<NodeId> members;  // the same in every group; includes node_id
  uint32_t groups = 1;
  int tick_ms = 10;
  int election_ticks = 10;
  int heartbeat_ticks = 1;
  NodeId preferred_leader = kNoNode;
  uint64_t seed = 1;  // core seeds are derived from (seed, node, group)
  bool check_quorum = true;
  bool pre_vote = true;  // CoreOptions::pre_vote
  bool vote_after_catch_up = false;  // CoreOptions::vote_after_catch_up
  size_t max_append_bytes = 4 << 20;
  size_t max_inflight_appends = 64;
  size_t max_uncommitted_bytes = 64 << 20;
  size_t max_apply_bytes = 64 << 20;
  // In-memory log budget per group: older applied entries are compacted beyond it (first
  // those every member has, then, if still over, those a lagging member would need). While a
  // member the log no longer covers is live (it answers snapshot offers: it is fetching a
  // checkpoint to continue from), the leader's log start holds still, up to twice this budget,
  // so the offer it is working toward stays good.
  uint64_t max_log_bytes = 256ull << 20;
  FsyncPolicy fsync = FsyncPolicy::kBatch;
  size_t inbox_messages = 16384;  // peer messages waiting for the raft thread
  size_t task_queue = 4096;       // per task lane
  int stats_interval_ms = 10000;  // periodic stats line (0: never)
  std::string identity;           // log prefix, e.g. "n1"
  // Test hook (replication.raft.test_isolate_file): while this file exists (checked every tick),
  // the member drops every message to and from its peers, as if cut off from them. Empty: off.
  std::string isolate_file;
};

// Called on the raft thread only. Implementations must not block: hand over and return.
class DriverListener {
 public:
  virtual ~DriverListener() = default;
  // `entries` were persisted (the stored log was first truncated from entries[0].index if
  // that index was <= the previous last index).
  virtual void OnPersisted(uint32_t group, const std::vector<Entry>& entries) = 0;
  // Newly committed entries, in index order (entries may be moved from).
  virtual void OnCommitted(uint32_t group, std::vector<Entry>& committed) = 0;
  virtual void OnRoleChanged(uint32_t group, Role role, Term term, NodeId leader) = 0;
  // Leader only: the members it can no longer catch up (the next entry each needs was
  // compacted away; there are no snapshots), in member order; called when that set changes,
  // and with an empty set when it empties (or this member stops leading).
  // `stranded` holds their positions; `log_start` is where this leader's log starts now.
  virtual void OnStrandedChanged(uint32_t group, const std::vector<MemberProgress>& stranded, Index log_start) {
    (void)group;
    (void)stranded;
    (void)log_start;
  }
  // This member's leader said it can no longer catch this member up (`leader_log_start` > 0:
  // the leader's log starts there, past this member's `last_index` + 1), or, with 0, that it
  // can again (a new leader). Called when that changes (also when the leader's log start moves).
  virtual void OnSelfStrandedChanged(uint32_t group, NodeId leader, Index leader_log_start, Index last_index) {
    (void)group;
    (void)leader;
    (void)leader_log_start;
    (void)last_index;
  }
  // The log now starts at `first_index` (entries below it were compacted away).
  virtual void OnCompacted(uint32_t group, Index first_index) {
    (void)group;
    (void)first_index;
  }
  // This member's leader offers it a snapshot (core.h, Snapshots): return true to install it
  // now (the application holds the state offer->tag names; the driver then calls
  // Core::InstallSnapshot and persists it before the acknowledgement goes out). Asked every
  // loop iteration while the offer stands; once with nullptr when it is gone.
  virtual bool OnSnapshotOffer(uint32_t group, const SnapshotOffer* offer) {
    (void)group;
    (void)offer;
    return false;
  }
  // The driver stopped after a storage failure `st` (a full disk, an I/O error); called once,
  // after the queued tasks were aborted. Nothing will commit on this member any more: fail
  // whatever waits for it, so the application stops with an error instead of hanging.
  virtual void OnFailed(const Status& st) { (void)st; }
  // Once per tick, after the cores ticked (raft thread; the listener may adjust a core).
  virtual void OnTick() {}
};

// A task runs once on the raft thread with OK, or, if the driver stops before running it,
// on the stopping thread with kAborted. Proposal tasks return false for "not now, retry" (only
// honoured with an OK status); control tasks' return value is ignored.
using DriverTask = std::function<bool(Status status)>;

// Driver counters, readable from any thread.
struct DriverCounters {
  std::atomic<uint64_t> iterations{0};
  std::atomic<uint64_t> readies{0};
  std::atomic<uint64_t> syncs{0};
  std::atomic<uint64_t> appends_before_sync{0};  // a leader's appends sent before its own sync (fsync: batch)
  std::atomic<uint64_t> messages_in_dropped{0};   // inbox full
  std::atomic<uint64_t> messages_isolated{0};     // dropped by the isolate_file test hook
  std::atomic<uint64_t> appends_dropped_paused{0};
  std::atomic<uint64_t> proposals_deferred{0};
  // Committed entries handed to the listener before the iteration's own write and sync (they
  // were durable here already), and those that had to wait for it (a follower's entries that
  // arrived with the commit that covers them).
  std::atomic<uint64_t> committed_early{0};
  std::atomic<uint64_t> committed_after_sync{0};
  // The raft thread's time in its log storage (steady clock ns): writes (entries, hard state,
  // snapshot resets), syncs, and compactions (a disk log unlinks whole segments there). The
  // stats line shows them: what a durable log costs the thread that every commit goes through.
  std::atomic<uint64_t> write_ns{0};
  std::atomic<uint64_t> sync_ns{0};
  std::atomic<uint64_t> sync_max_ns{0};
  std::atomic<uint64_t> compact_ns{0};
  std::atomic<uint64_t> compact_max_ns{0};
};

class Driver {
 public:
  // storages[g] and the transport are owned by the driver from now on.
  Driver(DriverOptions options, std::vector<std::unique_ptr<LogStorage>> storages,
         std::unique_ptr<Transport> transport, DriverListener* listener);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Restores the cores from their storages, starts the transport, then the raft thread.
  Status Start();
  // Stops the raft thread, then the transport, then aborts queued tasks. Idempotent.
  void Stop();

  enum class Lane { kControl, kProposal };
  // Any thread. Blocks while the lane is full. If the driver is not running (or stops before
  // running it) the task is called with kAborted (on this thread if not queued).
  void Submit(Lane lane, DriverTask task);

  // OK, or the storage error that stopped the driver. Any thread.
  Status health() const;
  const DriverCounters& counters() const { return counters_; }

  // ---- raft thread only (from tasks and listener callbacks) ----
  Core& core(uint32_t group) { return *cores_[group]; }
  void SetApplyPaused(uint32_t group, bool paused);
  // Raft thread only: entries above `index` are never compacted, whatever max_log_bytes says
  // (the application's restart needs them: RaftReplicator::RetainFrom). Default: no ceiling.
  void SetCompactCeiling(uint32_t group, Index index) { logs_[group].compact_ceiling = index; }
  // Raft thread only: Core::SetSnapshotTag of the group (a leader offers snapshots with it).
  void SetSnapshotTag(uint32_t group, uint64_t tag) { cores_[group]->SetSnapshotTag(tag); }
  const DriverOptions& options() const { return options_; }

 private:
  struct GroupLog {
    std::deque<std::pair<Index, uint64_t>> sizes;  // retained entries (index, data bytes)
    uint64_t bytes = 0;
    bool apply_paused = false;
    Index compact_ceiling = ~Index{0};  // SetCompactCeiling
    Role role = Role::kFollower;
    Term term = 0;
    NodeId leader = kNoNode;
    std::vector<NodeId> stranded;  // as last reported (NoteStranded)
    Index stranded_log_start = 0;  // the first index last reported with them
    Index self_stranded = 0;       // follower: the leader's first index, as last reported
    bool offer_reported = false;   // OnSnapshotOffer was asked about a standing offer
    bool caught_up = true;         // Core::caught_up, as last logged
    // The last index the storage holds as durably as the fsync policy makes it (after the
    // sync that followed its write; written is enough with fsync=never). Committed entries up
    // to it are delivered before the iteration's own write and sync (ProcessReadies).
    Index durable = 0;
    // The term and vote the storage holds durably (restored at Start, then each hard state
    // after its sync): a leader's appends go out before the sync only when their ready does not
    // change them (ProcessReadies).
    std::pair<Term, NodeId> durable_vote{0, kNoNode};
  };

  void Run();
  // Returns false on a fatal storage error.
  bool ProcessReadies();
  // Hands the listener the leading committed entries of `r` that the storage holds durably
  // already (GroupLog::durable), before `r` is persisted; the rest stay in r.committed.
  void DeliverDurableCommits(uint32_t g, Ready& r);
  // `r` is now as durable as the fsync policy makes it: moves GroupLog::durable.
  void NoteDurable(uint32_t g, const Ready& r);
  void NoteRoleChanges();
  // "n1 580 ms, n2 40 ms; ticks at most 12 ms apart, iterations at most 8 ms": each peer's
  // silence, and the raft thread's longest tick gap and loop iteration of the last 3 s.
  std::string SilenceReport(int64_t now_ms) const;
  void CompactLogs();
  // Reports changes of each group's stranded members, and of this member being stranded
  // (log + listener); once per tick.
  void NoteStranded();
  // Asks the listener about each group's standing snapshot offer; installs accepted ones.
  void ConsiderSnapshotOffers();
  void OnPeerMessage(Message&& m);  // transport thread: enqueue only
  void Fail(const Status& st);
  void LogStats();

  const DriverOptions options_;
  std::vector<std::unique_ptr<LogStorage>> storages_;
  std::unique_ptr<Transport> transport_;
  DriverListener* const listener_;
  std::vector<std::unique_ptr<Core>> cores_;  // raft thread only (after Start)
  std::vector<GroupLog> logs_;                // raft thread only

  // The inbox: three bounded lanes behind one mutex so the raft thread waits on one
  // condition variable for all of them.
  mutable Mutex mu_;
  std::condition_variable wake_;       // raft thread waits: work arrived or stop
  std::condition_variable not_full_;   // submitters wait: a task lane has room
  std::deque<Message> net_in_ GUARDED_BY(mu_);
  std::deque<DriverTask> control_in_ GUARDED_BY(mu_);
  std::deque<DriverTask> propose_in_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::atomic<bool> isolated_{false};  // the isolate_file test hook (raft thread writes)
  bool running_ GUARDED_BY(mu_) = false;
  Status health_ GUARDED_BY(mu_);

  // Raft thread only: when the raft thread last took a message from each member (NowMillis),
  // so a member that loses its leader, or a leader that steps down, can say how long each peer
  // was silent (the first thing to look at when elections happen under load).
  std::vector<int64_t> heard_ms_;  // by member id; 0: never
  // Raft thread only: the longest gap between two ticks over the last few seconds and when it
  // ended, so the same log line tells a starved raft thread from a silent peer.
  int64_t last_tick_ms_ = 0;
  int64_t max_tick_gap_ms_ = 0;
  int64_t max_tick_gap_at_ms_ = 0;
  int64_t max_iteration_ms_ = 0;  // the longest loop iteration over the last few seconds
  int64_t max_iteration_at_ms_ = 0;
  std::deque<DriverTask> deferred_;  // raft thread only: a proposal that said "not now"
  NamedThread thread_;
  bool started_ = false;
  bool stopped_ = false;
  int64_t last_stats_ms_ = 0;
  DriverCounters counters_;
};

}  // namespace qrstore::replication::raft
