// The ZooKeeper leader's retention rules: which acknowledged batches a cleanup round deletes,
// which followers are stranded (a batch they still need is gone), and, while the leader holds
// back new batches, whom it waits for. A pure function of what one cleanup round read (each
// registered follower's progress, which of them are live) and of the batches the leader keeps:
// no I/O, no clock, no threads (tests/unit/zookeeper/zk_retention_test.cc checks each rule).
// The zk-leader thread calls it at the end of every cleanup round (FinishCleanupRound).
//
// Words. F = replication.zookeeper.followers (the group has F + 1 members; a majority of it
// needs NeededFollowers(F) = (F + 1) / 2 followers beside the leader); R = retain_bytes.
// A follower is registered when its progress znode R/consumers/<id> is readable, live when it
// also holds its ephemeral znode R/live/<id> (ZooKeeper removes it when the follower's session
// ends: at once on a clean Stop, after session_timeout_ms when the process was killed).
// A follower is stranded in a group when its progress on some stream of the group is below that
// stream's oldest kept batch: it needs a batch that was deleted and cannot catch up from
// ZooKeeper any more (with checkpoints, a state transfer brings it back: it fetches the
// leader's newest checkpoint and continues after it).
//
// Rules, per round, in this order (at most max_deletes deletions in all):
//  1. Consumed (F > 0 and at least F followers registered): on each stream, delete the batches
//     below the least progress of the registered followers not stranded in its group (for each,
//     where its restart would start: keep_from, at or before what it consumed), keeping
//     the last consumed batch (a restarted leader finds where the stream ends from it), and the
//     batches after the leader's own checkpoints (leader_keep_from). A dead
//     follower's progress still counts here, but only within the byte budget (rule 2): a
//     follower that restarts before R bytes went past it resumes where it stopped.
//  2. Budget (R > 0, kept bytes > R): delete further, oldest first, from the stream that keeps
//     the most bytes first, the batches that the k = min(NeededFollowers(F), L) most advanced
//     of the L live, not stranded followers of the group have all consumed; with k = 0 (F = 0,
//     or no such follower) any batch. Each stream keeps its newest batch. A slower minority
//     (and every dead follower) thereby loses what a majority has read: it becomes stranded.
//  3. Flow control (F > 0, R > 0): while kept bytes stay above R after that, the leader starts
//     no new batch (held back); it waits for the k followers of rule 2, never for a dead or
//     stranded one nor for one outside those k.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace qrstore::replication::zookeeper {

using StreamKey = std::pair<uint32_t, uint32_t>;  // (group, planner)

inline std::string StreamName(uint32_t g, uint32_t p) { return "g" + std::to_string(g) + "/p" + std::to_string(p); }

// An acknowledged batch still in ZooKeeper.
struct KeptBatch {
  uint32_t chunks = 1;
  uint64_t bytes = 0;  // payload bytes; 0 when unknown (found by the leader's Start scan)
};

// One stream as the leader keeps it. `kept` points into the leader's own state: the plan only
// reads it, and must be carried out before that state changes.
struct RetentionStream {
  const std::map<uint64_t, KeptBatch>* kept = nullptr;  // by batch id
  uint64_t kept_bytes = 0;                              // sum of kept[].bytes
  uint64_t first_unkept = 0;  // the batch after the newest kept one (the first not acknowledged)
};

// A registered follower as one cleanup round saw it.
struct RetentionFollower {
  std::string id;
  bool live = false;
  std::map<StreamKey, uint64_t> next;  // next batch id it needs (= batches consumed); absent = 0
  // The first batch a restart of it would need (its newest checkpoint's next batch; <= next);
  // absent = next. Rule 1 keeps from there, so a follower restarted from its checkpoint finds
  // what follows it; rules 2 and 3 go by `next`.
  std::map<StreamKey, uint64_t> keep_from;
};

struct RetentionInput {
  int followers = 0;          // F
  uint64_t retain_bytes = 0;  // R; 0 = no budget
  size_t max_deletes = 256;   // per round
  std::map<StreamKey, RetentionStream> streams;
  std::vector<RetentionFollower> registered;  // any order; results come in id order
  // By group: the batch after the leader's own checkpoint before its newest (RetainFrom; the
  // one before, so that a newer checkpoint written during a transfer does not pull the batches
  // away); absent = none. Rule 1 keeps from there too: a member too far behind fetches the
  // leader's newest checkpoint and continues from the batches after it (a state transfer; the
  // budget, rule 2, still applies).
  std::map<uint32_t, uint64_t> leader_keep_from;
};

// How many of the oldest kept batches of a stream the round deletes, by rule.
struct StreamDeletes {
  uint64_t consumed = 0;  // rule 1
  uint64_t evicted = 0;   // rule 2 (after the consumed ones)
};

// A follower stranded in a group, after the round's deletions: the first stream (in planner
// order) on which it needs a deleted batch.
struct StrandedFollower {
  std::string id;
  uint32_t group = 0;
  uint32_t planner = 0;
  uint64_t next = 0;         // it has read [0, next) of that stream
  uint64_t oldest_kept = 0;  // the stream's oldest kept batch after the round (> next)
  size_t streams = 1;        // streams of the group on which it is stranded
  bool by_this_round = false;  // not stranded in this group before the round's deletions
};

struct RetentionPlan {
  std::map<StreamKey, StreamDeletes> deletes;  // streams with deletions only
  uint64_t kept_bytes_after = 0;
  std::vector<StrandedFollower> stranded;  // by (id, group)
  bool held_back = false;    // rule 3 applies: kept bytes after the round > R, with F > 0
  std::string waiting_for;   // held back: why, naming the followers waited for
};

inline int NeededFollowers(int followers) { return (followers + 1) / 2; }

RetentionPlan PlanRetention(const RetentionInput& in);

// For people: why `s` is stranded (Replicator::Health), and the leader's warning when it finds
// out (once per follower until it is no longer stranded).
std::string StrandedReason(const StrandedFollower& s, uint64_t retain_bytes);
std::string StrandedWarning(const StrandedFollower& s, uint64_t retain_bytes);

// The leader's floor for rule 1 (RetentionInput::leader_keep_from), by group: the batch after
// its own checkpoint before its newest (RetainFrom's value before the newest one), lowered by a
// hold not yet expired (HoldFrom: a member is fetching one of its checkpoints, and the leader may
// write more before that member restarts and reads on). Values only; the replicator guards it.
// Times are passed in (steady-clock ns), so it needs no clock.
class LeaderFloor {
 public:
  // The application checkpointed: a restart needs batches >= `batch` (growing values).
  void RetainFrom(uint32_t group, uint64_t batch);
  // Keep batches >= `batch` until `until_ns`. One hold per group: a new one while another holds
  // keeps the lower batch and the later expiry; after expiry it replaces it.
  void HoldFrom(uint32_t group, uint64_t batch, int64_t until_ns, int64_t now_ns);
  // RetainFrom's newest value (UINT64_MAX: none told).
  uint64_t RetainedFrom(uint32_t group) const;
  // The floor at `now_ns` (UINT64_MAX: nothing to keep for the leader's sake).
  uint64_t Floor(uint32_t group, int64_t now_ns) const;

 private:
  std::map<uint32_t, uint64_t> from_;    // newest RetainFrom
  std::map<uint32_t, uint64_t> before_;  // the one before it
  std::map<uint32_t, std::pair<uint64_t, int64_t>> holds_;  // (batch, until ns)
};

}  // namespace qrstore::replication::zookeeper
