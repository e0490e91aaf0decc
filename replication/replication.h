// The replication seam (the paper's section 4.1): ReplicateData on a leader, ReceiveData on a
// follower, asynchronous, whatever the backend (none | raft | zookeeper).
//
// Streams. Data is replicated in streams identified by (group, planner): group is the
// replication group (= partition), planner the planner thread's priority on the group's
// leader. Each stream carries batches with consecutive batch ids starting at 0.
//
// Contract, for every backend:
//  - ReplicateData(meta, bytes, cb): cb fires exactly once. Status OK means the bytes are
//    durable at a quorum of the group (Invariant 1: every follower will eventually receive
//    them). A non-OK status (kUnavailable: not/no longer leader; kAborted: stopped;
//    kInvalidArgument: batch id out of sequence) means the batch may or may not be delivered;
//    the caller must not treat it as replicated.
//  - ReceiveData(meta, cb): a follower asks for batch meta.batch_id of stream (meta.group,
//    meta.planner); cb fires exactly once, with the bytes given to ReplicateData (OK) or an
//    error (kAborted on Stop). Every stream is delivered to every follower in order, without
//    gaps or duplicates, whatever the backend does underneath (retries, leader changes).
//  - Callbacks run on library threads. They must only hand work over (push to a queue,
//    fulfil a promise); they must never block or call back into the Replicator.
//  - Payloads may be several MB.
// Thread-safety: every method may be called from any thread after Start() and before Stop().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/shared_bytes.h"
#include "common/status.h"

namespace qrstore::replication {

struct ReplicateMeta {
  uint32_t group = 0;     // replication group = partition id
  uint32_t planner = 0;   // planner priority on the group's leader
  uint64_t batch_id = 0;  // consecutive per (group, planner), from 0
};

using ReplicateCallback = std::function<void(const ReplicateMeta& meta, Status status)>;
// The bytes are immutable and shared (common/shared_bytes.h): a backend hands over its own
// buffer (a Raft log entry, a received frame) without copying it; hold them as long as needed.
using ReceiveCallback = std::function<void(const ReplicateMeta& meta, Status status, SharedBytes bytes)>;

// A member the backend can no longer bring up to date: what it lacks is gone from the backend
// (raft: compacted out of the leader's log; zookeeper: deleted past retain_bytes). It stays out
// of the group's flow control (a majority never waits for it) until a state transfer brings it
// back (not built yet).
struct StrandedMember {
  uint32_t member = UINT32_MAX;  // raft: the member id (replication.raft.node_id); else UINT32_MAX
  std::string follower_id;       // zookeeper: the follower's id (replication.zookeeper.follower_id)
  std::string reason;            // for people: what it lacks and what the backend still holds
};

// What a member knows of its group's health, for status lines and replies (any thread).
struct GroupHealth {
  // This member is stranded (why, for people); empty when it is not, or does not know.
  std::string self_stranded;
  // Leader: the followers it has given up on, in member order.
  std::vector<StrandedMember> stranded;
  // Non-zero: the group can no longer bring this member's application up to date batch by
  // batch (what it needs was compacted or cleaned away); it can continue from a state whose
  // next batch is >= this (a checkpoint of batch >= resume_needs_next - 1), which the group's
  // leader (Leader()) holds. raft: its leader's standing snapshot offer; the member takes it by
  // itself once the application waits for batches >= it (ReceiveData).
  uint64_t resume_needs_next = 0;
};

// Who leads a group, as far as this member knows (status replies, "not leader" hints).
struct LeaderView {
  bool known = false;            // false: no leader known yet (an election is running, or none)
  bool self = false;             // this member leads (and may ReplicateData: IsLeader)
  uint32_t member = UINT32_MAX;  // raft: the leader's member id (replication.raft.node_id)
  std::string id;                // zookeeper: the leader's member id (replication.zookeeper.follower_id)
  uint64_t term = 0;             // raft term / zookeeper epoch: grows with every new leader
};

// Totals since Start (Replicator::LogSyncs).
struct LogSyncTotals {
  uint64_t syncs = 0;
  uint64_t sync_ns = 0;  // steady-clock time spent in them
};

class Replicator {
 public:
  virtual ~Replicator() = default;
  virtual Status Start() = 0;
  // Fails every pending callback with kAborted, then stops library threads. Idempotent.
  virtual void Stop() = 0;
  virtual void ReplicateData(const ReplicateMeta& meta, std::string bytes, ReplicateCallback cb) = 0;
  virtual void ReceiveData(const ReplicateMeta& meta, ReceiveCallback cb) = 0;
  // The batch id the next ReplicateData of stream (group, planner) must carry. After a leader
  // change, the new leader resumes each stream right after the last batch in its log.
  virtual Result<uint64_t> NextBatchId(uint32_t group, uint32_t planner) const = 0;
  // Whether this process currently leads `group` (raft: elected; none/zookeeper: by config).
  virtual bool IsLeader(uint32_t group) const = 0;
  virtual std::string Name() const = 0;
  // Stranded members of `group` as far as this member knows (a wrapper passes its backend's
  // on; a backend that never strands anyone returns an empty GroupHealth).
  virtual GroupHealth Health(uint32_t group) const = 0;
  // Who leads `group` now, as far as this member knows (any thread; cheap).
  virtual LeaderView Leader(uint32_t group) const = 0;
  // Fails every ReceiveData of `group` still waiting with kAborted, at once: a member that
  // starts leading cancels the receives it posted for batches it will now plan itself (they
  // must not be satisfied by its own proposals). Later ReceiveData calls are served as usual.
  virtual void CancelReceives(uint32_t group) = 0;
  // The application checkpointed its state after batch `batch` - 1 (every stream): a restart
  // of this member replays its own log from `batch` on, so a backend whose log survives a
  // restart (raft with replication.raft.log: disk) keeps every entry of a batch >= `batch`
  // from now on, and may compact those below. Called with growing values (any thread); a
  // backend without a durable log of its own ignores it. (Pure, so a wrapper cannot forget to
  // pass it on.)
  virtual void RetainFrom(uint32_t group, uint64_t batch) = 0;
  // A member is fetching this member's checkpoint of batch `batch` - 1 (a state transfer): as
  // leader, keep the batches >= `batch` it will read after restarting from it, for `for_ms`
  // (or until the byte budget says otherwise), even if this member checkpoints again
  // meanwhile. A backend whose leader does not drop batches on a schedule of its own (raft
  // offers a snapshot instead) ignores it. Any thread. (Pure, as RetainFrom.)
  virtual void HoldFrom(uint32_t group, uint64_t batch, int64_t for_ms) = 0;
  // After Start: whether this member's own log, as Start found it, holds `group` from the
  // beginning (batch 0 of every stream) rather than from a point it was compacted to (raft's
  // disk log after a checkpoint). A member that restarts from the initial table needs that.
  // A backend without a log of its own (its store is shared) says true. (Pure, as RetainFrom.)
  virtual bool LogFromStart(uint32_t group) const = 0;
  // This member's log syncs so far, every group (any thread; status replies): how often and
  // how long it waited for its own log to reach the disk. A backend whose log is not this
  // process's to sync (zookeeper: the server's; none) says zero. (Pure, as RetainFrom.)
  virtual LogSyncTotals LogSyncs() const = 0;
};

}  // namespace qrstore::replication
