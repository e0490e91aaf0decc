// The ZooKeeper replication backend: a Replicator (replication/replication.h) that stores each
// stream's batches in znodes of a real ZooKeeper ensemble, which provides the durability and
// fault tolerance (a create is acknowledged once a quorum of ZooKeeper servers logged it).
//
// Roles: the leader of a group writes every stream of it (planners [0, replication.planners));
// the other members read them. With replication.zookeeper.election (the default, when the group
// has followers) roles are elected per group (zk_election.cc): a fresh group is led by the member
// configured with replication.role=leader; when a leader's session ends, the first candidate in
// line bumps the group's epoch, finds where each stream ends and takes over (IsLeader, Leader);
// every write of a leader is fenced by its epoch, so ZooKeeper refuses a deposed leader's writes,
// and a deposed leader (fenced, epoch moved on, session expired) stops leading for good. Without
// elections, replication.role fixes the roles for good. Layout
// and encodings are in zk_layout.h. Each Replicator owns one ZooKeeper session (a zhandle_t,
// whose two client threads belong to the C library) and one thread of its own, "zk-leader" or
// "zk-follower", which owns all backend state: ZooKeeper completion and watch callbacks only
// copy their result into that thread's inbox (never block), user calls are queued to it, and
// user callbacks run on it.
//
// Leader: ReplicateData cuts the payload into chunks (replication.zookeeper.chunk_bytes), creates
// the extra chunks, then the marker, with ZooKeeper's asynchronous API (many requests in flight,
// bounded by max_inflight requests and max_inflight_bytes, which also bound the followers' reads:
// ZooKeeper servers buffer all of it in their heap). Markers of a stream are issued in batch-id order, and callbacks fire
// in batch-id order: OK for batch b means batches 0..b of that stream are all durable.
// Connection loss: failed requests are re-issued once the session is connected again (a create
// that finds its znode already there with the same bytes counts as done); session expiry: the
// handle is re-created and every unacknowledged write re-issued. A batch still not durable after
// op_deadline_ms fails with kUnavailable, as does every later batch of its stream (the stream is
// then broken until the Replicator is restarted; a restart resumes at NextBatchId). At Start the
// leader scans each stream once: NextBatchId is the end of the contiguous run of complete
// batches; leftovers of a crashed leader beyond it (markers after a gap, orphan chunks) are
// deleted before this process first writes that stream. Each stream must have one writing
// process at a time (two writers are detected when their bytes differ and fail the stream).
//
// Follower: ReceiveData(b) reads marker b (an exists-watch waits for it if it is not there yet),
// then its chunks, checks the payload hash, and delivers requests of a stream in batch-id order,
// each exactly once. Several requests per stream may be outstanding (they are fetched in
// parallel). After delivering, the follower records its progress in R/consumers/<follower_id>
// (at most every progress_interval_ms: ZooKeeper holds a session's reads behind its writes).
// From Start to Stop it also holds the EPHEMERAL znode R/live/<follower_id> (created after the
// progress znode, again after a session expiry): ZooKeeper removes it when the session ends, at
// once on Stop, after session_timeout_ms when the process died. The follower's NextBatchId is
// the next batch it needs, initialized from its progress znode.
//
// Cleanup and whom the leader waits for (the rules: zk_retention.h). With F =
// replication.zookeeper.followers (the group has F + 1 members, a majority needs (F + 1) / 2
// followers), each cleanup round (cleanup_interval_ms) reads every registered follower's
// progress and which followers are live, then deletes the batches every registered follower
// that can still catch up has consumed (once F are registered; 0 = none). ZooKeeper servers
// hold all data in memory, so past replication.zookeeper.retain_bytes of acknowledged payloads
// it deletes further, oldest first, what the (F + 1) / 2 most advanced live followers have read
// (any batch when none is live or F = 0), and until that brings it back under the budget the
// leader starts no new batch (flow control). A majority thus never waits on a minority: a slow
// or dead follower loses the batches it has not read, becomes stranded (Health() names it on
// the leader; the leader logs it once), and when it asks for a deleted batch gets kNotFound
// saying it fell behind and needs a state transfer, also in its own Health(); with checkpoints
// (RetainFrom told) its receives stay posted instead and Health().resume_needs_next says from
// which batch on it can continue: its application fetches the leader's newest checkpoint, whose
// following batches the leader keeps (zk_retention.h rule 1).
// With F = 1 the leader waits for its one follower while that is live (both members are the
// majority of two) and goes on without it once its session is gone.
//
// Thread-safety: as the Replicator contract says; Start and Stop from one controlling thread.
// ReplicateData / ReceiveData only queue, and block only while 1024 calls are already queued
// (back-pressure). Start blocks up to connect_timeout_ms; Stop writes a follower's final
// progress synchronously (bounded by the client's timeout if the server is gone).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "replication/replication.h"

namespace qrstore::replication::zookeeper {

// Adds the replication.zookeeper.* keys. The common keys replication.role, .groups and
// .planners are added by replication/factory (tests add them themselves).
void AddConfigKeys(ConfigSchema* schema);

struct ZkOptions {
  std::string hosts;  // "127.0.0.1:2181,127.0.0.1:2182"
  std::string root = "/qrstore";
  bool leader = true;
  uint32_t groups = 1;
  uint32_t planners = 1;
  int session_timeout_ms = 10000;
  int connect_timeout_ms = 15000;
  uint64_t chunk_bytes = 900 * 1024;
  int max_inflight = 256;        // outstanding asynchronous ZooKeeper requests of this Replicator
  uint64_t max_inflight_bytes = 8ull << 20;   // and their payload bytes (one request always may)
  int op_deadline_ms = 30000;    // leader: a batch not durable by then fails (kUnavailable)
  int followers = 0;             // F: followers in the group; the leader waits for (F+1)/2 live ones
                                 // at most (0 = for none; consumed batches are then kept)
  std::string follower_id;       // the member id: its progress and live znodes, its election data
  // Leader election per group (replication.zookeeper.election): candidates race with ephemeral
  // sequential znodes, the winner bumps the group's epoch, every write it makes checks it.
  // false: roles fixed by `leader` (no failover, no fencing), for setups without elections; so
  // also with followers == 0 (a one-member group: nobody to elect).
  bool election = true;
  uint64_t retain_bytes = 32ull << 20;  // leader: byte budget of kept batches (0 = unlimited): past
                                        // it what a majority has read goes (zk_retention.h)
  int cleanup_interval_ms = 100;
  int poll_ms = 1000;            // follower: re-check awaited markers (safety net for watches)
  int progress_interval_ms = 200;  // follower: at most one progress write per interval
};

// Reads and validates the options; hosts falls back to $QRSTORE_ZK_HOSTS when the key is
// empty. Every violation is reported, each naming its key.
Result<ZkOptions> OptionsFromConfig(const Config& config);

Result<std::unique_ptr<Replicator>> CreateZkReplicator(const Config& config);
Result<std::unique_ptr<Replicator>> CreateZkReplicator(const ZkOptions& options);

// Counters of one ZooKeeper Replicator (monotonic; for tests, benchmarks and stats lines).
struct ZkStats {
  uint64_t batches_acked = 0;        // leader: OK callbacks
  uint64_t batches_delivered = 0;    // follower: OK receive callbacks
  uint64_t requests_retried = 0;     // failures that made requests be re-issued (a failed marker
                                     // also re-issues the later markers sent after it)
  uint64_t exists_verified = 0;      // leader: create found the znode with the same bytes
  uint64_t sessions_created = 0;     // 1 + re-creations after expiry
  uint64_t connection_losses = 0;    // requests failed with ZCONNECTIONLOSS / ZOPERATIONTIMEOUT or
                                     // outstanding when their session expired (all re-issued)
  uint64_t batches_deleted = 0;      // leader: consumed batches removed by cleanup
  uint64_t stale_markers = 0;        // follower: markers refetched (crashed leader's leftovers)
  uint64_t batches_evicted = 0;      // leader: deleted by the retain_bytes budget, read or not
  uint64_t batches_gone = 0;         // follower: requests failed with kNotFound (deleted batch)
  uint64_t rounds_held_back = 0;     // leader: cleanup rounds that ended with more than retain_bytes
                                     // still kept (flow control: no new batch starts meanwhile)
  uint64_t elections_won = 0;        // groups this member started leading (epoch bumped, streams scanned)
  uint64_t writes_fenced = 0;        // leader writes ZooKeeper refused: the group's epoch had moved on
  uint64_t depositions = 0;          // groups this member stopped leading (fenced, epoch moved, expiry)
};

// The counters of `replicator` if it is a ZooKeeper Replicator, else nullopt-like zeros + false.
bool GetZkStats(const Replicator& replicator, ZkStats* stats);

// Test hook: makes ZooKeeper expire `replicator`'s current session (a second handle attaches to
// the same session and closes it), as a server-side session timeout would. The replicator finds
// out on its own, as in production. Returns an error for a non-ZooKeeper replicator.
Status ForceSessionExpiryForTest(Replicator* replicator);

// Test hook: while `muted`, the replicator ignores notifications that its groups' epochs changed,
// like a leader whose notifications are late (a long pause, a slow link): only ZooKeeper's
// fencing (the epoch check in every write) stops its writes then. Returns an error for a
// non-ZooKeeper replicator.
Status MuteEpochWatchForTest(Replicator* replicator, bool muted);

// Test hook: "host:port" of the ZooKeeper server `replicator`'s session is connected to ("" if
// none or not a ZooKeeper replicator).
std::string CurrentServerForTest(const Replicator& replicator);

}  // namespace qrstore::replication::zookeeper
