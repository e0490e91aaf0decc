// RowServer: the partitioned-row half of a qrstore-server node (a config whose cluster.nodes
// list P > 1 partitions; docs/partitioned-rows.md). The node builds it the way it builds a
// Pipeline for one partition: RowServer builds the node's RowNode from the node's config, sends
// its outcomes to the client port and its per-batch digests to the digest monitor (a leader) or
// the reporter (a follower), replicates every sub-slice a leader runs to its partition's group
// (one stream per (home, planner), and one more for the leader's batch-end records), and on a
// follower feeds its partition from that group's streams alone (FollowerFeed in row mode; a
// follower has no row peers: docs/partitioned-rows.md 9.4).
//
//   node (cluster/node/server.cc)                 RowServer
//   Create(ctx) ------------------------------> RowNode (not started), its sinks and hooks
//   client port open, replication started
//   Start() ----------------------------------> row transport up (peers), follower: feed
//   SIGTERM: node()->CloseInput, WaitFinished (the row ends together)
//   Stop() -----------------------------------> feed, then the RowNode
//
// Owner: the node (ServerImpl), which also owns everything RowServerContext points at and keeps
// it alive for the RowServer's life. Threads: Create, Start and Stop on the node's controlling
// thread; the sinks and hooks it installs run on the RowNode's, the feed's and the backend's
// threads and only hand over (to the client service, the monitor or reporter, the node's
// callbacks).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cluster/config/topology.h"
#include "cluster/follow/follower_feed.h"
#include "cluster/recovery/checkpointer.h"
#include "cluster/row/row_node.h"
#include "common/config.h"
#include "common/mutex.h"
#include "common/status.h"
#include "engine/engine.h"
#include "replication/replication.h"
#include "storage/key_map.h"
#include "storage/table.h"

namespace qrstore::cluster {

class ClientService;
class DigestMonitor;
class SessionStore;
class DigestReporter;

// What the node lends its RowServer (not owned; all outlive it).
struct RowServerContext {
  const Config* config = nullptr;
  const Topology* topo = nullptr;
  const NodeInfo* me = nullptr;
  bool leader = false;
  std::string mode;                    // replication.mode
  bool input = false;                  // replication.point = input (docs/replication-points.md)
  bool writes = false;                 // replication.point = writes
  const engine::EngineConfig* engine = nullptr;
  storage::KeyMapper partition_map;
  uint64_t record_bytes = 0;
  uint32_t streams = 1;                // replication streams of the group: (home, planner) pairs
  uint32_t group = 0;                  // the replication group (this partition's)
  storage::Table* table = nullptr;
  ClientService* service = nullptr;    // outcomes go to its clients
  replication::Replicator* replicator = nullptr;  // with rf > 0
  DigestMonitor* monitor = nullptr;    // leader: records its own digests
  DigestReporter* reporter = nullptr;  // follower: reports its digests to its leader
  std::atomic<uint64_t>* replicated_bytes = nullptr;  // leader: bytes handed to ReplicateData
  std::function<void(Status)> on_failure;            // the row failed (any thread)
  std::function<void()> on_row_ending;               // a peer's input ended (any thread)
  std::function<void(uint64_t batch, uint32_t stream, Status st)> on_replicated;  // leader, rf > 0
  // With server.checkpoint_dir: images at batch boundaries and each committed batch's digest
  // go to it (not owned). A follower restarted from a checkpoint starts at first_batch.
  Checkpointer* checkpointer = nullptr;
  uint64_t first_batch = 0;
  // Client sessions (docs/sessions.md, rows): the node's replicated session table. Every member
  // applies its home's session entries in planned order; a leader admits session txns at
  // planning. Its digest is mixed into each batch's (the monitor's, reporter's and
  // checkpointer's), as on one partition.
  SessionStore* sessions = nullptr;
  // The group's term when the node starts (its row transport's epoch).
  uint64_t term = 0;
};

// server.test_row_crash's value NODE:STEP:BATCH (STEP: a RowNodeOptions::crash_step); empty:
// off. kInvalidArgument naming the key for anything else.
struct RowCrash {
  std::string node, step;
  uint64_t batch = 0;
};
Result<RowCrash> ParseRowCrash(const std::string& value);

class RowServer {
 public:
  explicit RowServer(RowServerContext ctx);
  ~RowServer();
  RowServer(const RowServer&) = delete;
  RowServer& operator=(const RowServer&) = delete;

  // The row transport (connects to the row's peers), and on a follower the feed from the
  // group's streams. Call once the client port is open and replication has started. Errors
  // name the config key at fault (row_port / peer_port).
  Status Start();
  // The feed (a follower's), then the RowNode. Idempotent.
  void Stop();
  // A follower whose group made it leader (term `term`) takes its dead leader's place in the row
  // (docs/partitioned-rows.md 9.5): its feed applies every batch its group's log holds whole
  // (below D) and hands over the rest, its follower node stops there, and a successor RowNode
  // over the same table resumes with the row's peers (bounded by timeout_ms for the log and by
  // server.start_timeout_ms for the peers). From then on node() is the successor. Errors: the
  // log could not be read to its end, the row ended already, the peers did not answer.
  Status Promote(uint64_t term, int64_t timeout_ms);
  bool leader() const { return leader_.load(std::memory_order_acquire); }

  // The current node (the successor once promoted; the earlier ones stay alive, stopped, so a
  // pointer a thread got before the switch stays valid).
  RowNode* node() { return node_.load(std::memory_order_acquire); }
  const RowNode* node() const { return node_.load(std::memory_order_acquire); }
  // OK, or the first failure of the feed or the RowNode.
  Status health() const;

 private:
  // The options of this node's RowNode, as a leader or a follower.
  RowNodeOptions Options(bool leader);
  // Sessions: the leader's check of the txns a planner of its home just popped (docs/sessions.md);
  // its first waits until every batch before the node's first own one committed here.
  void Admit(uint64_t b, uint32_t planner, std::vector<storage::Txn>* txns, size_t from);
  // Sessions: the outcomes of the home's own sub-slices (RowNodeOptions::own_outcomes).
  void ApplySessions(const std::vector<commit::TxnOutcome>& v);
  // The home's outcomes to the clients, with the ids of the sessions they opened.
  void Deliver(const std::vector<commit::TxnOutcome>& v);
  // A RowNode with the node's sinks and hooks (a leader's digests to the monitor, a follower's to
  // its reporter).
  std::unique_ptr<RowNode> MakeNode(RowNodeOptions ro, bool leader);

  const RowServerContext ctx_;
  std::atomic<bool> leader_;
  std::vector<std::unique_ptr<RowNode>> nodes_;  // every node this server ran; the last is node_
  std::atomic<RowNode*> node_{nullptr};
  std::unique_ptr<FollowerFeed> feed_;  // follower only

  // Sessions: open-session entries applied, by home position (batch, planner, index), until
  // their home slice is answered (Deliver drops every one before the slice it answers).
  Mutex opened_mu_;
  std::map<std::tuple<uint64_t, uint32_t, uint32_t>, uint64_t> opened_ GUARDED_BY(opened_mu_);
  // The RowNode whose first batches' sessions are known complete (Admit's wait, once per node).
  std::atomic<const RowNode*> admit_ready_{nullptr};
};

}  // namespace qrstore::cluster
