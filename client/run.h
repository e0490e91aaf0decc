// One qrstore-client run (Run), step by step on the main thread: finding the leaders and
// connecting the load connections (a probe, one redirect, a session each); the timeline (warm-up,
// the measured window, progress lines and the commits-per-interval timeline, stall checks, the
// silent-leader check, following a failover); the drain; and the replica check after the run
// (live and down followers, the settle loop). What it leaves for the report is RunOutcome.
//
// Threads: every member runs on the main thread; the load connections' senders and readers
// (client/load.h) share only their counters, the ErrorLog, the RunSignal and the Window with it.
// Memory: the connections' (client/load.h) and a timeline of at most kMaxTimeline intervals.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/load.h"
#include "client/run_options.h"
#include "cluster/port/protocol.h"
#include "common/logging.h"
#include "common/status.h"

namespace qrstore::client {

// The client follows each partition's leader through a failover (client/load.h), with a session
// per connection at its partition's home (docs/sessions.md): what a lost leader had in flight is
// sent again, and what had run is answered from the session table.
inline constexpr bool kFollowLeader = true;

// What a finished run leaves for the report (client/report.h).
struct RunOutcome {
  // The leader driven (in a row, partition 0's at the end): its client address and name, and its
  // followers (after the run: the live ones).
  std::string target;
  std::string leader_name;
  std::vector<std::string> follower_names;
  // Every node's status at the window's start and end (a node that did not answer is missing),
  // and this process's CPU then.
  std::map<std::string, cluster::proto::NodeStatus> status0, status1;
  int64_t cpu0 = 0, cpu1 = 0;
  // Wall clock at the run's start, for scripts that line the timeline up with events they cause
  // (a kill): reported only, never used to decide anything.
  double start_unix_s = 0;
  // Commits per progress interval over the whole run (warm-up included), for --json: what a
  // user plots across a failure.
  std::vector<uint64_t> timeline;
  bool broken = false, stalled = false, capped = false, gave_up = false, interrupted = false;
  uint64_t failovers = 0;
  int64_t longest_gap_ns = 0;  // the longest time without a commit (unavailable_ms)
  // After the run: followers not waited for (down), the leader's last status (in a row, with
  // the other leaders' followers and mismatches added), and whether the replicas agree.
  std::vector<std::string> down_followers;
  cluster::proto::NodeStatus leader_status;
  bool leader_answered = false;
  Status agreement;
  bool replicas_agree = false;
  uint64_t max_lag = 0;
  uint64_t acked_batches = 0;  // 1 + the highest batch any committed/aborted answer came from
};

class Run {
 public:
  explicit Run(const RunOptions& options);
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  // Finds each partition's leader (or --node), makes the connections, connects connection 0
  // (a probe, one redirect) and the others, and opens a session on each. nullopt: go on; else
  // the exit status, the problem printed.
  std::optional<int> Connect();
  // The timeline, until the run ends (done, time up, interrupted, failed, stalled, broken, or
  // no new leader in time).
  void Drive();
  // No new requests; the in-flight ones are answered (a leader lost meanwhile is followed).
  // Closes the connections and the window.
  void Drain();
  // Polls the leaders until every live follower has their last batch with their digest
  // (client.settle_timeout_ms).
  void CheckReplicas();

  const RunOutcome& outcome() const { return out_; }
  const ErrorLog& errors() const { return errors_; }
  const Window& window() const { return window_; }
  // After Drain: every connection is finished (records(), latency()).
  const std::vector<std::unique_ptr<LoadConnection>>& connections() const { return lc_; }
  // A counter summed over the connections.
  uint64_t Sum(std::atomic<uint64_t> Counts::*field) const;

 private:
  // Commits per interval kept; beyond the cap the last entry keeps adding up.
  static constexpr size_t kMaxTimeline = 1 << 16;
  // A status question during a failover waits this long at most: the main thread asks it (a
  // paused node never answers), and the timeline's sampling waits meanwhile.
  static constexpr int kLookMs = 250;

  // Connection c with its generator, quota, pacing and session; not connected.
  Result<std::unique_ptr<LoadConnection>> MakeConnection(uint32_t c);
  // Connect's network part: the probe and redirect, the other connections, the sessions.
  std::optional<int> ConnectAll();
  uint64_t Inflight() const;  // txns in flight over the connections
  // A partition whose group has one node (no replicas) has no one to take over: a run that ends
  // while it is lost does not wait for a failover (Drive).
  bool CanTakeOver(uint32_t partition) const;
  // The measured window's ends: every node's status and this process's CPU there.
  void OpenWindow();
  void CloseWindow();
  // A progress line on stderr, and the interval's commits into the timeline.
  void Progress(int64_t now);
  // Tracks the longest time without a commit, and ends a failover episode on a commit.
  void NoteCommits(int64_t now);
  // One partition, no reply for client.silent_leader_ms: true when another node says it leads
  // (every connection abandons the silent one).
  bool CheckSilentLeader(int64_t now);
  // No reply for client.stall_timeout_ms with txns in flight: true, the connections shut down
  // (noted).
  bool CheckStall(int64_t now);
  // Failover (follow), once per loop turn: notes a lost leader, looks for the new one when due
  // (LookForLeader); true when no node took over within client.failover_timeout_ms (noted).
  bool FollowTick(int64_t now);
  // Asks the lost partition's group who leads; moves its connections there, or backs off.
  void LookForLeader(int64_t now);
  // After the run: the leaders to ask and their live followers (down ones in out_.down_followers).
  void FindReplicas();
  // The settle loop: until the replicas agree, a mismatch is final, or client.settle_timeout_ms.
  void Settle();

  const RunOptions& o_;
  const cluster::Topology& topo_;
  std::shared_ptr<spdlog::logger> log_;
  RunOutcome out_;
  std::vector<std::string> leads_;  // [partition] its leader's client address (without --node)
  ErrorLog errors_;
  RunSignal signal_;
  Window window_;
  std::vector<std::unique_ptr<LoadConnection>> lc_;  // after errors_, signal_, window_: they outlive it
  // After the run: the leaders' client addresses (in a row, [partition]; leaders_[0] is
  // out_.target) and their live followers.
  std::vector<std::string> leaders_;
  std::vector<std::vector<std::string>> follower_sets_;

  // The timeline.
  int64_t start_ = 0;
  int64_t next_report_ = INT64_MAX;
  uint64_t last_committed_ = 0, last_results_ = 0, events_ = 0;
  int64_t last_report_ = 0, last_progress_ = 0;
  bool finishing_failover_ = false;  // the run's time ran out during a failover (Drive)
  // Failover (follow): when the first connection lost its leader, the next look for a leader,
  // its back-off; the longest time without a commit (out_.longest_gap_ns).
  // An episode lasts from a loss until the first commit after it: a leader that keeps refusing
  // work after every move does not keep the client trying forever.
  // A partitioned row: the partition whose leader was lost (one failover at a time; connection c
  // drives partition c mod P).
  int64_t lost_since_ = -1, episode_since_ = -1, next_look_ = 0, look_backoff_ = 50'000'000;
  uint32_t lost_partition_ = 0;
  uint64_t commits_seen_ = 0;
  int64_t last_commit_ns_ = 0;
};

}  // namespace qrstore::client
