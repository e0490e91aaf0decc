// RaftReplicator: the integrated replication backend (replication.backend: raft). Implements
// the Replicator contract (replication/replication.h) with one Raft group per replication
// group; every process hosts one member of every group (member i = node id i =
// replication.raft.members[i]). Leaders are elected (replication.raft.preferred_leader wins
// the first election of a fresh cluster); IsLeader(g) tells the application which role to play.
//
// Data flow. A log entry carries (planner, batch_id, bytes).
//  - Leader: ReplicateData validates the stream position (batch id must be the stream's next
//    in this member's log, else kInvalidArgument) and proposes on the raft thread. The callback
//    fires OK once the entry is committed (a majority persisted it, the leader's own copy
//    included, per the fsync policy), kUnavailable if leadership was lost before that or the
//    entry was overwritten, kAborted on Stop. Proposals are refused (kUnavailable) until the
//    new leader's first entry of its term committed; NextBatchId/IsLeader say when it may go.
//  - Every member hands committed batches to ReceiveData per stream, in batch order, each
//    once: re-committed duplicates are dropped, a gap is a bug (checked). Batches this member
//    proposed itself as leader (the application already has them) are not buffered; all others
//    wait in a per-group buffer until the application asks (a batch below the lowest one the
//    application is waiting for is dropped: it resumed from a checkpoint past it; and a request
//    for batch B drops what is buffered below B, which may have come before the application
//    asked for anything: a restarted member applies its log at once). The buffer is bounded
//    (replication.raft.max_buffered_bytes): when full, the member pauses applying committed
//    entries, and beyond the log budget refuses new entries from the leader (Raft retries), so
//    an application that stops calling ReceiveData never makes the member grow without bound.
//  - After a leader change NextBatchId(g, p) = 1 + the last batch of stream p in the new
//    leader's log. The application should first drain, with ReceiveData, every batch below it
//    that it has not seen (they were committed by earlier leaders).
//
// Restarts. With replication.raft.log=disk a member recovers its log and hard state from
// replication.raft.dir/group-<g>/ and re-delivers every committed batch still in its log from
// the start of the log (the application is in memory and starts empty); then it catches up
// from the leader. With log=memory it rejoins empty and catches up from the leader's log (see
// the safety caveat in log_storage.h). Logs are compacted to replication.raft.max_log_bytes,
// but never past what the application's restart replays (RetainFrom: the batches after its
// last checkpoint). A member further behind than the leader's log is offered a snapshot
// (core.h, Snapshots): it takes it by itself once its application waits for the batches the
// log holds whole (RaftGroupStatus::offer_next_batch, Health().resume_needs_next until then:
// the application restarts from a checkpoint fetched from the leader).
//
// Flow control. Proposals wait while the followers the quorum needs (the best placed ones,
// among those heard from within 2 election timeouts and not stranded) lack more than
// replication.raft.max_lag_bytes. A follower behind them (slow, paused, just restarted) never
// holds the group back: it is caught up while the log still holds what it needs, and once
// compaction passes its position it is stranded (Health(), GroupStatus; the leader's
// heartbeats tell it so) until it continues from a checkpoint (above).
//
// Back-pressure. ReplicateData blocks its caller while DriverOptions::task_queue (4096)
// proposals wait for the raft thread, and proposals wait (queued, not failed) while this
// member's own uncommitted bytes exceed replication.raft.max_uncommitted_bytes. A leader whose
// application leaves more than max_buffered_bytes of other members' batches unreceived pauses
// applying, which also holds back its own ReplicateData callbacks: drain ReceiveData first.
//
// Threads. All methods may be called from any thread between Start and Stop (Start must have
// returned before the first call). Work runs on the
// driver's "raft" thread, and the transport's "raft-net" thread receives; callbacks run on the
// raft thread (or on the caller's thread for immediate errors, or the stopping thread with
// kAborted), never under a lock of this class.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/mutex.h"
#include "common/status.h"
#include "replication/raft/driver.h"
#include "replication/replication.h"

namespace qrstore::replication::raft {

// Adds replication.raft.* keys. The common replication.groups / replication.planners /
// replication.max_payload_bytes keys come from replication/factory.h.
void AddConfigKeys(ConfigSchema* schema);
Result<std::unique_ptr<Replicator>> CreateRaftReplicator(const Config& config);

struct RaftReplicatorOptions {
  DriverOptions driver;
  std::vector<std::string> addresses;  // host:port per member
  uint32_t planners = 1;
  bool disk_log = false;
  std::string dir;                     // disk log root (group-<g>/ below it)
  uint64_t segment_bytes = 64 << 20;
  bool direct_io = true;  // DiskLogOptions::direct_io
  uint64_t max_buffered_bytes = 256ull << 20;  // per group, committed but not yet received
  uint64_t max_payload_bytes = 64ull << 20;
  // Own proposals in flight (bytes, per group) before ReplicateData waits; the core's hard
  // limit (driver.max_uncommitted_bytes) must be well above it.
  uint64_t max_uncommitted_bytes = 64ull << 20;
  // Flow control (replication.raft.max_lag_bytes): proposals wait while a live follower lacks
  // more than this; with max_uncommitted_bytes and max_payload_bytes it must fit the log budget.
  uint64_t max_lag_bytes = 128ull << 20;
  int send_buffer_messages = 1024;  // per-peer send queue (replication.raft.send_buffer_messages)
  bool nng_transport = true;  // replication.raft.transport: nng (default) | tcp
  // replication.raft.catch_up_election_ticks, at least driver.election_ticks: the election
  // timeout of a member restarted with a log until its application caught up (OnTick).
  int catch_up_election_ticks = 100;
};

// Reads and validates replication.* keys; every violation is listed, each naming its key.
Result<RaftReplicatorOptions> RaftOptionsFromConfig(const Config& config);

// Test and stats view of one group.
struct RaftGroupStatus {
  Role role = Role::kFollower;
  Term term = 0;
  NodeId leader = kNoNode;
  bool leader_ready = false;  // leader and an entry of its term committed
  uint64_t duplicates_dropped = 0;
  uint64_t buffered_bytes = 0;
  uint64_t lag_waits = 0;  // times proposals started waiting for a live follower to catch up
  // Leader: members it can no longer catch up (what they lack was compacted away; no
  // snapshots), e.g. a follower restarted after the log passed max_log_bytes. The driver
  // also logs a warning naming them. They are out of flow control.
  std::vector<NodeId> stranded_members;
  std::vector<Index> stranded_matches;  // their last known entries, by stranded_members
  Index log_start = 1;                  // leader: its first index when the set last changed
  // Follower: its leader said it can no longer catch this member up; the leader's log starts
  // at stranded_leader_log_start (0: not stranded) and this member's ended at stranded_last_index.
  Index stranded_leader_log_start = 0;
  Index stranded_last_index = 0;
  NodeId stranded_leader = kNoNode;
  // Follower: the leader's standing snapshot offer (Core::snapshot_offer): it continues this
  // member from its log once the application waits for batches >= offer_next_batch (0: none).
  uint64_t offer_next_batch = 0;
  uint64_t snapshots_installed = 0;
};

class RaftReplicator : public Replicator, private DriverListener {
 public:
  explicit RaftReplicator(RaftReplicatorOptions options);
  ~RaftReplicator() override;

  Status Start() override;
  void Stop() override;
  void ReplicateData(const ReplicateMeta& meta, std::string bytes, ReplicateCallback cb) override;
  void ReceiveData(const ReplicateMeta& meta, ReceiveCallback cb) override;
  Result<uint64_t> NextBatchId(uint32_t group, uint32_t planner) const override;
  bool IsLeader(uint32_t group) const override;
  std::string Name() const override { return "raft"; }
  GroupHealth Health(uint32_t group) const override;
  // The group's leader as this member last heard (raft: its member id and term); self once
  // it leads and may propose (IsLeader).
  LeaderView Leader(uint32_t group) const override;
  // On the raft thread: every waiting receive of the group fails with kAborted.
  void CancelReceives(uint32_t group) override;
  // Entries of batches >= `batch` are kept (Driver::SetCompactCeiling), and as leader this
  // member offers the members its log cannot catch up any more to continue them after its
  // first index once their application waits for batches >= `batch` (Core::SetSnapshotTag):
  // it restarted from a checkpoint at or after batch - 1 (its own or one fetched from a peer).
  void RetainFrom(uint32_t group, uint64_t batch) override;
  // Nothing to hold: a member that restarts from a fetched checkpoint continues after the
  // leader's log start by its snapshot offer (docs/recovery.md).
  void HoldFrom(uint32_t, uint64_t, int64_t) override {}
  // Set by Start (before the driver runs), fixed after.
  bool LogFromStart(uint32_t group) const override { return group < log_from_start_.size() && log_from_start_[group]; }
  // The driver's log storage syncs (DriverCounters::syncs, sync_ns).
  LogSyncTotals LogSyncs() const override;

  RaftGroupStatus GroupStatus(uint32_t group) const;
  // OK, or the storage failure that stopped the driver.
  Status health() const;

 private:
  struct Pending {
    ReplicateMeta meta;
    ReplicateCallback cb;
    Term term = 0;
    uint64_t bytes = 0;
  };
  struct Stream {
    uint64_t log_next = 0;     // 1 + last batch in this member's log (proposals included)
    bool commit_started = false;
    uint64_t commit_next = 0;  // 1 + last batch committed and applied here
    std::map<uint64_t, SharedBytes> buffered;        // committed, not yet asked for
    std::map<uint64_t, ReceiveCallback> waiting;     // asked for, not yet committed
  };
  struct Group {
    std::map<uint32_t, Stream> streams;  // by planner (ordered: deterministic iteration)
    std::map<Index, Pending> pending;    // leader: own proposals awaiting commit, by index
    uint64_t pending_bytes = 0;
    // Entries persisted but not yet applied: (planner, batch) by index, to recompute
    // log_next when a new leader truncates this member's log.
    std::map<Index, std::pair<uint32_t, uint64_t>> unapplied;
    Index last_persisted = 0;
    bool log_starts_at_one = true;
    Role role = Role::kFollower;
    Term term = 0;
    Term ready_term = 0;  // term of the last entry committed while this member led
    uint64_t buffered_bytes = 0;
    // Restarted with a log and not yet in step with the group (OnTick): the core's election
    // timeout is options_.catch_up_election_ticks meanwhile.
    bool catching_up = false;
    bool catch_up_set = false;  // the core was given the longer timeout
    uint64_t duplicates = 0;
    uint64_t skipped = 0;      // committed batches below every receive the application posted
    // RetainFrom (disk log): entries of batches >= retain_from are kept. Committed data
    // entries above the ceiling, (index, batch) in commit order, until one of a batch >=
    // retain_from is at the front; the ceiling is the last index below it.
    uint64_t retain_from = UINT64_MAX;  // UINT64_MAX: no rule
    uint64_t offer_tag_logged = 0;      // the last snapshot offer this member logged refusing
    // Committed data entries still in the log, (index, planner, batch) in index order: what a
    // leader's snapshot tag is computed from (UpdateSnapshotTag).
    struct LogBatch {
      Index index;
      uint32_t planner;
      uint64_t batch;
    };
    std::deque<LogBatch> log_batches;
    uint64_t snapshots_installed = 0;
    Index ceiling = 0;
    std::deque<std::pair<Index, uint64_t>> above_ceiling;
    uint64_t lag_waits = 0;    // times proposals started waiting for a live follower
    bool lag_waiting = false;  // the first waiting proposal is waiting now
  };
  // What other threads may read (NextBatchId, IsLeader, GroupStatus), under view_mu_.
  struct View {
    RaftGroupStatus status;
    std::map<uint32_t, uint64_t> log_next;
  };

  // DriverListener (raft thread).
  void OnPersisted(uint32_t group, const std::vector<Entry>& entries) override;
  void OnCommitted(uint32_t group, std::vector<Entry>& committed) override;
  void OnRoleChanged(uint32_t group, Role role, Term term, NodeId leader) override;
  void OnStrandedChanged(uint32_t group, const std::vector<MemberProgress>& stranded, Index log_start) override;
  void OnSelfStrandedChanged(uint32_t group, NodeId leader, Index leader_log_start, Index last_index) override;
  bool OnSnapshotOffer(uint32_t group, const SnapshotOffer* offer) override;
  void OnCompacted(uint32_t group, Index first_index) override;
  void OnFailed(const Status& st) override;
  // Once per tick: a member restarted with a log keeps the longer election timeout until a
  // leader is known, what was committed is applied and its application has taken it (all but
  // a few entries, within one append's bytes); then the configured one, for good.
  void OnTick() override;
  // Drops the stream's buffered batches before `end` (the application skipped them: it asks in
  // order), keeping Group::buffered_bytes and skipped true. Raft thread only.
  static void DropBufferedBelow(Group& g, Stream& s, std::map<uint64_t, SharedBytes>::iterator end);

  // Raft thread.
  bool ProposeOnRaft(const ReplicateMeta& meta, EntryData& data, ReplicateCallback& cb);
  void ReceiveOnRaft(const ReplicateMeta& meta, ReceiveCallback& cb);
  void NotePersistedEntry(Group& g, const Entry& e);
  void RecomputeLogNext(Group& g);
  void MaybeUnpause(uint32_t group);
  // Raft thread: moves g's compaction ceiling past every committed entry below retain_from.
  void AdvanceCeiling(uint32_t group);
  // Raft thread: the tag this member offers snapshots with as leader (Core::SetSnapshotTag):
  // the batch from which every stream's batches are all in the log after its first index
  // (for each stream, the batch of its first committed entry there; the stream's next batch if
  // it has none), so a member whose application waits for that batch or later can continue
  // after first_index - 1. 0 (no offers) without RetainFrom (no checkpoints to fetch).
  // It depends only on the rule and on where the log starts: recomputed when either changes
  // (RetainFrom, OnCompacted, a snapshot taken) and on becoming leader, not per commit.
  void UpdateSnapshotTag(uint32_t group);
  void PublishView(uint32_t group);
  static bool LeaderReady(const Group& g) { return g.role == Role::kLeader && g.ready_term == g.term && g.term > 0; }
  Status CheckMeta(const ReplicateMeta& meta) const;

  const RaftReplicatorOptions options_;
  const std::string identity_;
  std::unique_ptr<Driver> driver_;
  std::vector<Group> groups_;  // raft thread only while running
  std::vector<bool> log_from_start_;  // per group: Start found its log starting at index 1

  mutable Mutex view_mu_;
  std::vector<View> views_ GUARDED_BY(view_mu_);

  Mutex lifecycle_mu_;  // serializes Start/Stop
  bool started_ = false;
  bool stopped_ = false;
};

// Entry data layout: u8 version (1) | varint planner | varint batch_id | payload bytes. The
// header is inserted in front of `payload` in its own buffer: the bytes move within it, rather
// than being copied into a new one, when its capacity has the room (planner/replica_encoder.h).
std::string EncodeBatchEntry(const ReplicateMeta& meta, std::string payload);
// Fills meta.planner/batch_id and the payload's offset in `data`. kCorruption if malformed.
Status DecodeBatchEntryHeader(std::string_view data, ReplicateMeta* meta, size_t* payload_offset);

}  // namespace qrstore::replication::raft
