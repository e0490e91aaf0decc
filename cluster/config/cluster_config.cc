#include "cluster/config/cluster_config.h"

#include "cluster/config/topology.h"
#include "common/check.h"
#include "engine/engine.h"
#include "replication/config_keys.h"
#include "workloads/workload.h"

namespace qrstore::cluster {

void AddClusterConfigKeys(ConfigSchema* s) {
  engine::Engine::AddConfigKeys(s);
  workloads::AddConfigKeys(s);
  replication::AddConfigKeys(s);
  Topology::AddConfigKeys(s);
  s->AddString("replication.mode", "speculative",
               "speculative: executors start at once, commit waits until the batch is replicated (Invariant 1); "
               "sync: executors wait for replication",
               {"speculative", "sync"});
  s->AddString("replication.point", "plan",
               "what a leader replicates (docs/replication-points.md): plan, the planned slices (the paper's RP2: "
               "followers execute, never plan); input, each slice's sequenced transactions (RP1, Calvin's: every "
               "follower plans them itself); writes, after executing a batch, the last image of every record it "
               "wrote and the txns' fates (RP3: followers install them, never execute; speculative mode only, "
               "without server.session_read_values; one partition per row only). Every node of "
               "a cluster the same",
               {"plan", "input", "writes"});

  s->AddString("server.dump_state_dir", "", "on clean shutdown write <dir>/<node>.tsv (key<TAB>counter, sorted)");
  s->AddInt("server.max_connections", 64, 1, 4096, "client connections served at once (more are refused)");
  s->AddInt("server.max_message_bytes", 16 << 20, 1024, 1 << 30, "largest message body accepted (bigger: error reply)");
  s->AddInt("server.max_inflight_txns_per_connection", 100000, 1, 10'000'000,
            "txns of one connection admitted but not yet answered; the server reads no more from it meanwhile");
  s->AddInt("server.session_max_sessions", 1024, 1, 1 << 20,
            "client sessions remembered (replicated: every node of a group must use the same); at the cap the "
            "least recently active one is forgotten, and its txns are refused from then on");
  s->AddInt("server.session_max_outcomes_per_session", 20000, 1, 10'000'000,
            "txn outcomes remembered per session for retries (same on every node); keep it above the clients' "
            "txns in flight per connection (client.outstanding), or a retry after a failover may find its outcome "
            "forgotten (answered `expired`: outcome unknown, never run twice)");
  s->AddInt("server.session_max_outcomes", 262144, 1, 100'000'000,
            "txn outcomes remembered over all sessions (same on every node; about 150 bytes each); keep it above "
            "connections x txns in flight per connection");
  s->AddBool("server.session_read_values", false,
             "return a retried txn's read values after a failover too (replicated configuration): the leader "
             "sends session txns' reads to the followers, which run them and keep the values in their session "
             "table (up to server.session_max_value_bytes); about 3x the replicated bytes for a read-heavy YCSB. "
             "Off: such a retry's values come from the write histories (server.session_history_bytes). Ignored in "
             "partitioned rows (such a retry is answered committed-no-values there)");
  s->AddInt("server.session_history_bytes", 256 << 20, 0, int64_t{1} << 40,
            "every node keeps its recent writes' before-images in this many bytes (per node; about 130 bytes a "
            "write for 100-byte records), so a retry of a txn that committed, after a failover too, gets the values "
            "it read (docs/sessions.md); a retry older than what they hold is answered committed-no-values. 0: "
            "none (every such retry is). Ignored with server.session_read_values and in partitioned rows");
  s->AddInt("server.session_max_value_bytes", 64 << 20, 0, int64_t{1} << 40,
            "with server.session_read_values: read values kept per node; beyond it the oldest are dropped (their "
            "retries are answered committed-no-values)");
  s->AddString("server.checkpoint_dir", "",
               "write checkpoints of this node's table and session table under <dir>/<node>/ in the background "
               "(docs/recovery.md); a restarted node resumes from its newest valid one. Empty: none");
  s->AddInt("server.checkpoint_every_batches", 1000, 1, INT64_MAX,
            "a checkpoint after every this many batches; one still being written makes the next due ones be "
            "skipped, not queued");
  s->AddBool("server.checkpoint_stagger", true,
             "the members of a group take their checkpoints at different batches (row r of R rows: r * "
             "checkpoint_every_batches / R batches later than row 0), so they never all copy and write at once; "
             "false: the same batches on every node");
  s->AddBool("server.checkpoint_copy_on_write", true,
             "the executors stop at a checkpoint's batch only to mark every record (each one written afterwards "
             "is copied first) and the checkpoint thread copies the rest beside them; false: they copy the whole "
             "table at that batch before going on (storage/table_image.h)");
  s->AddBool("server.checkpoint_direct_io", true,
             "checkpoint files written with O_DIRECT (no page cache: less CPU, nothing dirty left to hold the raft "
             "log's syncs back); buffered where the file system refuses it");
  s->AddInt("server.checkpoint_write_mb_per_s", 100, 0, 1 << 20,
            "a checkpoint is written at most this fast (MB a second; it sleeps between pieces of the file), so "
            "its CPU and disk share is spread over the write instead of taken in one burst; the one written at a "
            "clean stop is not paced. 0: as fast as it goes");
  s->AddInt("server.checkpoint_keep", 2, 1, 1000, "checkpoints kept per node (the newest; older ones are deleted)");
  s->AddInt("row.peer_timeout_ms", 10000, 200, 3'600'000,
            "a partitioned row's node fails when a peer has sent nothing (not even a heartbeat, sent every "
            "fifth of this) for this long: a hung peer; a dead one is seen at once by its closed connection");
  s->AddInt("row.failover_timeout_ms", 30000, 1000, 3'600'000,
            "a partitioned row with followers: how long a row leader waits for a lost peer's successor (elected "
            "by the peer's group) to resume its place before it fails; without followers a lost peer fails it "
            "at once (docs/partitioned-rows.md 9.5)");
  s->AddBool("server.rejoin_when_deposed", true,
             "a leader deposed while alive (paused or cut off past an election, a higher term) drops its table, "
             "which may hold speculative batches, and executes itself again: it comes back as a follower from its "
             "newest checkpoint (or the initial table) and the group's log. false: it exits with status 3");
  s->AddInt("server.rejoin_interval_ms", 5000, 0, 3'600'000,
            "a node deposed again within this long of its last rejoin waits out the rest before it rejoins, so a "
            "node deposed over and over never loops faster than this");
  s->AddInt("server.drain_timeout_ms", 15000, 0, 3'600'000,
            "on SIGTERM: how long to wait for in-flight batches (a follower: for the leader's last batch)");
  s->AddInt("server.report_interval_ms", 50, 1, 60'000, "followers send their per-batch digests this often");
  s->AddInt("server.stats_interval_ms", 10000, 0, 3'600'000, "periodic stats log line (0: off)");
  s->AddInt("server.digest_history_batches", 1 << 16, 16, 1 << 24,
            "per-batch digests a leader keeps to compare with its followers' reports");
  s->AddInt("server.start_timeout_ms", 30000, 100, 3'600'000,
            "a leader waits this long for its replication backend to make it leader at start");
  s->AddInt("server.test_corrupt_slice_batch", -1, -1, INT64_MAX,
            "test hook: the leader damages planner 0's encoded slice of this batch before replicating it (its own "
            "execution is unaffected; in partitioned rows every leader damages its group's stream 0 entry of "
            "it), so tests can show a follower refusing it; -1: off");
  s->AddString("server.test_wrong_digest_node", "",
               "test hook: this follower reports wrong digests from server.test_wrong_digest_batch on, so tests can "
               "show the leader catching a divergence; empty: off");
  s->AddInt("server.test_wrong_digest_batch", 0, 0, INT64_MAX, "see server.test_wrong_digest_node");
  s->AddString("server.test_kill_before_reply_file", "",
               "test hook: once the file <this>.<node name> exists, that node, leading, kills itself (SIGKILL) when its next slice has "
               "committed (replicated) but before any of its outcomes is answered, so tests can show retries "
               "answered from the session table; empty: off");

  s->AddString("server.test_row_crash", "",
               "test hook: NODE:STEP:BATCH: that node, leading in a partitioned row, kills itself (SIGKILL) at STEP "
               "of its first home slice of batch BATCH or later (before_bundle: planned, not yet proposed to its "
               "group; bundle_proposed: proposed, not known committed; before_send: committed, no part sent; "
               "after_send: its parts sent; executed: the batch executed here, its values and votes sent, its "
               "batch-end record not yet logged), so tests can show a failover at every step of the row's exchange "
               "(docs/partitioned-rows.md 9.5); empty: off");

  s->AddInt("client.connections", 4, 1, 1024, "client connections to the leader (--connections)");
  s->AddInt("client.outstanding", 5000, 1, 10'000'000, "txns in flight per connection, closed loop (--outstanding)");
  s->AddInt("client.txns_per_request", 100, 1, 100000, "txns carried by one request message");
  s->AddInt("client.progress_interval_ms", 1000, 0, 3'600'000, "stderr progress line period (0: none)");
  s->AddInt("client.connect_timeout_ms", 5000, 1, 600'000, "connecting to a node");
  s->AddInt("client.settle_timeout_ms", 15000, 0, 600'000,
            "after the run: how long to wait for every follower to report the leader's last batch");
  s->AddInt("client.verify_max_txns", 2'000'000, 1, 1'000'000'000,
            "--verify keeps 40 bytes per txn: --txns above this is refused, --duration-s stops submitting here");
  s->AddInt("client.stall_timeout_ms", 30000, 100, 3'600'000,
            "the run fails when no reply arrives for this long while txns are in flight (the drain too)");
  s->AddInt("client.silent_leader_ms", 0, 0, 600'000,
            "with txns in flight and no reply from the leader for this long, the client asks the other members who "
            "leads (then every half of it) and moves if another does (a leader paused or cut off may never answer "
            "again). 0: about an election timeout (raft: election_ticks x tick_ms; else 1000), at most 1000");
  s->AddInt("client.failover_timeout_ms", 30000, 100, 3'600'000,
            "one partition: after losing its leader the client looks for the new one (back-off 50 ms to 1 s) for "
            "this long before the run fails (long enough for a whole cluster to restart)");
}

ReplicationPoint ReplicationPointOf(const Config& config) {
  const std::string& p = config.GetString("replication.point");
  if (p == "input") return ReplicationPoint::kInput;
  if (p == "writes") return ReplicationPoint::kWrites;
  QR_CHECK(p == "plan", "replication.point %s passed the schema", p.c_str());
  return ReplicationPoint::kPlan;
}

const char* ReplicationPointName(ReplicationPoint point) {
  switch (point) {
    case ReplicationPoint::kInput:
      return "input";
    case ReplicationPoint::kWrites:
      return "writes";
    case ReplicationPoint::kPlan:
      break;
  }
  return "plan";
}

const std::vector<std::string>& DerivedReplicationKeys() {
  static const std::vector<std::string> keys = {
      "replication.raft.members",      "replication.raft.node_id",          "replication.raft.preferred_leader",
      "replication.role",              "replication.groups",                "replication.planners",
      "replication.zookeeper.followers", "replication.zookeeper.follower_id",
  };
  return keys;
}

std::vector<std::pair<std::string, std::string>> TableKeys(const Config& config) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("workload.kind", config.GetString("workload.kind"));
  for (const char* k : {"ycsb.records", "ycsb.fields", "ycsb.field_bytes", "transfer.accounts",
                        "transfer.initial_balance"}) {
    out.emplace_back(k, std::to_string(config.GetInt(k)));
  }
  out.emplace_back("engine.range_function", config.GetString("engine.range_function"));
  out.emplace_back("engine.key_space", std::to_string(workloads::EngineKeySpace(config)));
  return out;
}

}  // namespace qrstore::cluster
