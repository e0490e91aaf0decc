// Deterministic simulation of a Raft group built from the production Core
// (replication/raft/core.h): N members, a seeded simulated network that drops, duplicates,
// delays and reorders messages and partitions the group (partitions heal), crashes and
// restarts where a crash in the middle of persisting a Ready loses the writes that were not
// synced, and optional log compaction. Time is a tick counter; there are no threads and no
// wall clock, so a seed reproduces a run bit for bit (RunSimulation returns a digest of the
// whole event trace to prove it).
//
// Checked after every step (every tick of every member and every delivered message):
//  - election safety: at most one leader per term;
//  - log matching: two durable logs with the same term at an index are identical up to it
//    (checked incrementally on every write, with cumulative hashes);
//  - committed entries never change: a global record of every committed (index, term, data)
//    that every member's committed prefix and every applied entry must agree with; members
//    apply committed entries exactly once, in index order, without gaps;
//  - leader completeness: a new leader of term T holds every entry committed in a term < T;
//  - no vote changes within a term on durable storage; the core's log equals its storage.
// Then a liveness phase: every fault is healed (all members up, no loss, no partitions); within
// a bounded number of ticks one leader must be known to all, with every member's log, commit
// and application equal to the leader's; fresh proposals must then commit everywhere within a
// bound; and every entry proposed during the chaos to the member that is still the leader of
// the same term at the end (so it never lost leadership after proposing) must be committed.
//
// Single-threaded; a SimOptions fully determines a run.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace qrstore::replication::raft::sim {

// Deliberate bugs in the simulated driver, to prove that the checks catch broken durability.
enum class InjectedBug {
  kNone,
  // A storage that acknowledges before syncing (fsync=never): a crash also loses the last
  // few entries the member had acknowledged.
  kLoseAckedWrites,
  // A storage that does not persist votes: a restarted member may vote twice in one term.
  kForgetVotes,
};

struct SimOptions {
  int nodes = 3;
  uint64_t seed = 0;
  int steps = 3000;          // ticks of the chaos phase
  bool compaction = false;   // compact every member's log as the run goes
  bool pre_vote = false;     // CoreOptions::pre_vote on every member
  InjectedBug bug = InjectedBug::kNone;
  int converge_ticks = 1000; // liveness bound: ticks without catch-up progress after healing
                             // (and 20x that in all)
  int commit_ticks = 100;    // liveness bound: fresh proposals commit everywhere
  bool trace = false;        // print every event to stderr
};

struct SimStats {
  uint64_t steps = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_delivered = 0;
  uint64_t messages_dropped = 0;
  uint64_t messages_duplicated = 0;
  uint64_t crashes = 0;
  uint64_t crashes_mid_ready = 0;  // crashes that lost unsynced writes
  uint64_t partitions = 0;
  uint64_t leaders = 0;            // distinct (term, leader) pairs
  uint64_t max_term = 0;
  uint64_t proposals = 0;
  uint64_t committed = 0;          // entries in the global committed record
  uint64_t survivor_proposals_checked = 0;
  uint64_t compactions = 0;
  uint64_t truncated_entries = 0;
};

struct SimResult {
  Status status;        // OK, or the first violation (with the step it happened at)
  uint64_t digest = 0;  // hash of the whole event trace: equal digests = identical runs
  SimStats stats;
};

SimResult RunSimulation(const SimOptions& options);

const char* InjectedBugName(InjectedBug bug);
Result<InjectedBug> ParseInjectedBug(const std::string& name);

}  // namespace qrstore::replication::raft::sim
