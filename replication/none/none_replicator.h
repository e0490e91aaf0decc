// The `none` replication backend: the Q-Store baseline, where "replicated" costs nothing.
//
// ReplicateData's callback fires at once, inline on the caller's thread (callers must not
// hold a lock the callback takes). So that the conformance suite and the tools can run against
// it, the payload is also kept in an in-process hub: ReceiveData on the same object, or on any
// other NoneReplicator of the same process configured with the same hub name
// (replication.none.hub), gets exactly the bytes ReplicateData was given, in order. A
// ReceiveData for a batch not yet replicated is parked and fires, inline, on the thread of the
// ReplicateData that provides it.
//
// Durability: "quorum durable" means "in this process's memory"; a process crash loses
// everything, which is the baseline's point.
//
// Bounds: each stream keeps its last replication.none.retain_batches payloads (0: keeps none;
// the pure baseline, where nobody reads). A follower asking for an evicted batch gets
// kResourceExhausted, naming the key. Parked receives are bounded by the callers (one per
// outstanding ReceiveData).
//
// Roles: replication.role=leader may ReplicateData for every group in [0, replication.groups);
// a follower's ReplicateData fails with kUnavailable. Several leaders sharing a hub write the
// same streams (the hub checks batch ids, so a stale writer gets kInvalidArgument).
//
// Thread-safety: every method may be called from any thread; the hub's state is guarded by
// its mutex, and callbacks run after it is released.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/mutex.h"
#include "common/status.h"
#include "replication/replication.h"

namespace qrstore::replication::none {

// Shared state of every NoneReplicator using one hub name: the streams, keyed by
// (group, planner). Owned jointly (shared_ptr) by those replicators.
class NoneHub {
 public:
  explicit NoneHub(uint64_t retain_batches) : retain_batches_(retain_batches) {}

  // The hub called `name` in this process, created on first use with `retain_batches`
  // (later callers get the existing hub: the first one's setting wins). The registry holds
  // weak references: a hub dies with its last replicator.
  static std::shared_ptr<NoneHub> Get(const std::string& name, uint64_t retain_batches);

  // Appends batch meta.batch_id to its stream. kInvalidArgument unless it is the next id.
  Status Append(const ReplicateMeta& meta, std::string bytes);
  // Hands batch meta.batch_id to cb: now if present (cb runs before this returns), later
  // when appended, or kResourceExhausted if it was evicted. `owner` tags the waiter so
  // CancelOwner can abort it.
  void Receive(uint64_t owner, const ReplicateMeta& meta, ReceiveCallback cb);
  // Fails every parked receive of `owner` with kAborted (from Stop; with `group` >= 0, from
  // CancelReceives: that group's only).
  void CancelOwner(uint64_t owner, int64_t group = -1);
  uint64_t NextBatchId(uint32_t group, uint32_t planner) const;
  uint64_t NewOwnerId();

 private:
  using StreamKey = std::pair<uint32_t, uint32_t>;
  struct Waiter {
    uint64_t owner;
    ReceiveCallback cb;
  };
  struct Stream {
    uint64_t next_id = 0;
    uint64_t first_retained = 0;                        // batch id of retained.front()
    std::deque<SharedBytes> retained;
    std::multimap<uint64_t, Waiter> waiters;            // batch id -> parked receives
  };

  const uint64_t retain_batches_;
  mutable Mutex mu_;
  std::map<StreamKey, Stream> streams_ GUARDED_BY(mu_);
  uint64_t next_owner_ GUARDED_BY(mu_) = 1;
};

struct NoneOptions {
  bool leader = true;
  uint32_t groups = 1;
  uint32_t planners = 1;
  std::string hub = "default";
  uint64_t retain_batches = 1024;
};

class NoneReplicator final : public Replicator {
 public:
  explicit NoneReplicator(NoneOptions options);
  ~NoneReplicator() override;

  Status Start() override;
  void Stop() override;
  void ReplicateData(const ReplicateMeta& meta, std::string bytes, ReplicateCallback cb) override;
  void ReceiveData(const ReplicateMeta& meta, ReceiveCallback cb) override;
  Result<uint64_t> NextBatchId(uint32_t group, uint32_t planner) const override;
  bool IsLeader(uint32_t group) const override;
  std::string Name() const override { return "none"; }
  // Nothing is ever stranded: a follower reads what the hub retains, or fails saying so.
  GroupHealth Health(uint32_t) const override { return {}; }
  // Roles come from replication.role: a leader knows it leads; a follower knows no leader.
  LeaderView Leader(uint32_t group) const override;
  void CancelReceives(uint32_t group) override { hub_->CancelOwner(owner_id_, group); }
  void RetainFrom(uint32_t, uint64_t) override {}  // nothing durable: nothing to keep
  void HoldFrom(uint32_t, uint64_t, int64_t) override {}
  bool LogFromStart(uint32_t) const override { return true; }
  LogSyncTotals LogSyncs() const override { return {}; }

 private:
  Status CheckStream(const ReplicateMeta& meta) const;

  const NoneOptions options_;
  std::shared_ptr<NoneHub> hub_;
  uint64_t owner_id_;
  Mutex state_mu_;
  bool running_ GUARDED_BY(state_mu_) = false;
  bool stopped_ GUARDED_BY(state_mu_) = false;
};

// Adds the replication.none.* keys.
void AddConfigKeys(ConfigSchema* schema);
// Reads replication.role/groups/planners and replication.none.*.
Result<std::unique_ptr<Replicator>> CreateNoneReplicator(const Config& config);

}  // namespace qrstore::replication::none
