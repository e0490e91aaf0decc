// What qrstore-client derives from the nodes' status replies (cluster/port/protocol.h NodeStatus) for
// its summary: per-node figures over the measured window, and whether the replicas agree with
// the leader. Pure functions; any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cluster/port/protocol.h"
#include "common/status.h"

namespace qrstore::client {

// One node's figures between two status snapshots of it (window start `a`, window end `b`).
struct NodeWindow {
  double cpu_s = 0;         // CPU the server process used in the window
  uint64_t batches = 0;     // batches it committed (a follower: applied) in the window
  cluster::proto::PhaseMeans phases;  // mean per-batch phase times over those batches
  bool phases_windowed = false;       // false: no batch in the window, `phases` are b's cumulative means
  // From the time totals (NodeStatus::times) over the window; 0 where nothing was counted.
  double log_syncs_per_batch = 0;     // the replication log's fsyncs on this node per batch
  double log_sync_ms = 0;             // their time per batch (ms)
  uint64_t replies = 0;               // txn reply frames written to clients
  double reply_ms = 0;                // mean: a reply complete -> written to the socket
  double request_ms = 0;              // mean: a request read -> its reply written
  uint64_t replicated_bytes = 0;      // bytes it handed its replication layer (a leader's entries)
};
// nullopt when the snapshots cannot be from one process run (CPU or batches went backwards: the
// node restarted in between). The phase means in a NodeStatus are cumulative, sum / committed
// batches since the process started (cluster/node/server.cc), so the window's are
//   (mean_b * n_b - mean_a * n_a) / (n_b - n_a).
std::optional<NodeWindow> WindowOf(const cluster::proto::NodeStatus& a, const cluster::proto::NodeStatus& b);

// Whether every follower has applied the leader's last committed batch with the leader's digest:
// OK when the leader counted no digest mismatch and every follower in `followers` (the
// topology's: a follower the leader does not list counts as behind) has applied_batches >=
// the leader's committed_batches and agrees_at_last. Otherwise kUnavailable saying which
// follower is behind (retry later), or kCorruption when a mismatch was counted (final).
// A follower the leader lists as stranded (the backend can no longer bring it up to date) is
// not waited for and not counted: StrandedFollowers names it instead.
Status ReplicaAgreement(const cluster::proto::NodeStatus& leader, const std::vector<std::string>& followers);
// Every follower in `followers` (but the stranded ones) is listed by the leader and has applied
// its committed batches (whether or not its digests agree).
bool FollowersCaughtUp(const cluster::proto::NodeStatus& leader, const std::vector<std::string>& followers);
// The followers the leader lists as stranded, in its order.
std::vector<const cluster::proto::FollowerView*> StrandedFollowers(const cluster::proto::NodeStatus& leader);

}  // namespace qrstore::client
