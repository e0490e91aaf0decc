// qrstore-client: the closed-loop YCSB-T / transfer driver of a qrstore cluster (and its status
// tool). See Usage below and README.md.
//
// Load: C connections to the partition's leader (or --node, redirected once if it is not the
// leader; in a partitioned row, connection c to the leader of partition c mod P with txns
// whose first key is there), each keeping at most K txns in flight, in requests of up to client.txns_per_request
// txns. Connection c draws from its own deterministic generator (client/verify.h
// ConnectionSeed: connection 0 runs exactly MakeGenerator(options, seed), qrstore-bench's
// sequence), so a one-connection run is reproducible and ends in the same state as
// `qrstore-bench --seed S` on the same workload.
//
// Threads: main (flags, connecting, the run's timeline: warm-up, window, progress lines, stall
// checks, drain, settle, verify, report); per connection a sender and a reader (the closed loop,
// client/load.h). Every wait has a stop path: the run ends on completion, the window's end,
// a broken connection, the first failed txn or error reply (every sender stops), or no reply for
// client.stall_timeout_ms while txns are in flight; shutting a connection down unblocks its
// sender and reader. Memory: per connection at most K/n+1 pending requests, one reply buffer, a
// fixed histogram, and with --verify one 40-byte record per txn (at most client.verify_max_txns).
//
// Output: progress on stderr each client.progress_interval_ms; the summary on stdout; with
// --json the last stdout line is one JSON object. Exit status: 0 ok; 1 the run failed (failed or
// rejected txns, error replies, a broken or stalled connection, replicas that disagree,
// --verify); 2 bad input (flags, config, workload file).
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/cluster_view.h"
#include "client/load.h"
#include "client/stats.h"
#include "client/verify.h"
#include "cluster/config/cluster_config.h"
#include "cluster/config/topology.h"
#include "cluster/port/protocol.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/logging.h"
#include "common/report.h"
#include "storage/key_map.h"
#include "workloads/latency_histogram.h"
#include "workloads/workload.h"
#include "workloads/ycsb_properties.h"

namespace qrstore::client {
namespace {

namespace proto = cluster::proto;
using proto::ResultCode;

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "qrstore-client: %s\n", msg.c_str());
  return code;
}
double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// SIGINT / SIGTERM: the run ends as if its time were up (no more requests, the in-flight ones
// are answered, the summary is printed); a second one kills as usual (SA_RESETHAND).
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");
extern "C" void OnInterrupt(int) { g_interrupted.store(true, std::memory_order_relaxed); }
void CatchInterrupts() {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int64_t ProcessCpuNanos() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ns = [](const timeval& t) { return int64_t{t.tv_sec} * 1'000'000'000 + int64_t{t.tv_usec} * 1000; };
  return ns(u.ru_utime) + ns(u.ru_stime);
}


int Main(int argc, char** argv) {
  CommandLine cli("qrstore-client",
                  "--config FILE [--key=value ...] (--txns N | --duration-s S) [--warmup-s W] [--connections C] "
                  "[--outstanding K] [--target-tps T] [--seed S] [--workload-file F] [--node NAME] [--verify] [--json] | --status",
                  "Drives a qrstore cluster with a closed-loop YCSB-T or transfer load (workload.kind, ycsb.*,\n"
                  "transfer.* of the config, or a YCSB property file) over C connections to partition 0's\n"
                  "leader (a partitioned row: connection c to partition c mod P's leader, with txns whose\n"
                  "first key lives there), each keeping at most K txns in flight in requests of client.txns_per_request txns,\n"
                  "and prints throughput, latency percentiles (request sent -> answer received, per txn),\n"
                  "every node's per-batch phase times and CPU over the measured window, follower lag and\n"
                  "whether every follower's state digest agrees with the leader's (replicas_agree).\n"
                  "Connection 0 runs exactly the --seed sequence (the same as qrstore-bench --seed S); connection\n"
                  "c > 0 a seed derived from (S, c). A node that answers not-leader is followed once.\n"
                  "Each connection opens a client session (in a partitioned row, at its partition's leader);\n"
                  "when that leader is lost the client finds the new one (client.failover_timeout_ms) and sends\n"
                  "every unanswered txn again with the same sequence number: what already ran is answered from\n"
                  "the replicated session table, never run twice (--json: retried, committed_no_values,\n"
                  "in_doubt; docs/sessions.md).\n"
                  "--verify (a fresh cluster, this client its only client): replays the planned order on the\n"
                  "serial reference executor and checks every txn's fate and the values it read, and the\n"
                  "leader's final digest.\n"
                  "--status: one line per node (role, state, batches, lag and digest agreement of followers as\n"
                  "their leader sees them, error); exit 0 when every node answered, 1 otherwise.\n"
                  "--workload-file: YCSB core properties recordcount, operationcount (the txns to run without\n"
                  "--txns/--duration-s), readproportion/updateproportion, requestdistribution (uniform|zipfian),\n"
                  "zipfianconstant, fieldcount, fieldlength, readallfields, and qrstore.opspertxn (ops per txn);\n"
                  "recordcount/fieldcount/fieldlength must equal the cluster config's (the servers' table).\n"
                  "--target-tps T paces the senders (YCSB's -target): T txns/s over all connections, still at\n"
                  "most K in flight each; the CPU per txn of two configs compares best at the same load.\n"
                  "The first failed txn or error reply stops every connection's sending (the run has failed).\n"
                  "Progress goes to stderr once per second; --json makes the last stdout line a JSON object.\n"
                  "SIGINT/SIGTERM ends the run early as if its time were up (the summary follows); again kills.\n"
                  "Exit status: 0 ok; 1 failed (failed/rejected txns, error replies, a broken or stalled\n"
                  "connection, replicas that disagree, verify); 2 bad input (flags, config, workload file).");
  cli.AddValue("config", "FILE", "the cluster config the servers run (e.g. configs/cluster-raft.yaml)");
  cli.AddValue("txns", "N", "run exactly N transactions (over all connections)");
  cli.AddValue("duration-s", "S", "measure for S seconds (after the warm-up), then let the in-flight ones finish (a failover under way when the time is up is finished first)");
  cli.AddValue("warmup-s", "W", "with --duration-s: run W seconds before measuring (default 0)");
  cli.AddValue("connections", "C", "connections (default client.connections)");
  cli.AddValue("outstanding", "K", "txns in flight per connection (default client.outstanding)");
  cli.AddValue("target-tps", "T", "send at most T txns/s over all connections (default: no limit, the closed loop)");
  cli.AddValue("seed", "S", "workload seed (default 1)");
  cli.AddValue("workload-file", "F", "a YCSB core workload property file (see above)");
  cli.AddValue("node", "NAME", "send to this node instead of the leader (a follower answers with the leader's address)");
  cli.AddSwitch("verify", "check every fate and read value against the serial reference executor (fresh cluster only)");
  cli.AddSwitch("status", "print every node's status and exit");
  cli.AddSwitch("json", "print one JSON object with the results as the last line of stdout");
  cli.AddValue("log-level", "LEVEL", "trace|debug|info|warn|error|off (default info)");

  ConfigSchema schema;
  cluster::AddClusterConfigKeys(&schema);
  if (auto code = cli.ParseStandard(argc, argv, &schema)) return *code;
  if (!cli.Has("config")) return Fail(kExitBadInput, "missing --config FILE (see qrstore-client --help)");
  auto loaded = Config::Load(schema, cli.Get("config"), cli.overrides());
  if (!loaded.ok()) return Fail(kExitBadInput, loaded.status().message());
  Config config = std::move(loaded).value();
  auto log = Logger("client");

  // Keys the user chose for this run (command line, workload file), by where they came from:
  // they must match what the servers loaded; the others follow the servers.
  std::map<std::string, std::string> chosen;
  for (const std::string& o : cli.overrides()) chosen[o.substr(0, o.find('='))] = "command line";
  const std::string workload_file = cli.Get("workload-file");
  std::optional<uint64_t> file_txns;
  if (cli.Has("workload-file")) {
    auto props = workloads::LoadYcsbProperties(workload_file);
    if (!props.ok()) return Fail(kExitBadInput, props.status().message());
    if (config.GetString("workload.kind") != "ycsb") {
      return Fail(kExitBadInput, "--workload-file is a YCSB workload but the cluster runs workload.kind=" +
                                     config.GetString("workload.kind"));
    }
    for (const auto& w : props->warnings) log->warn("{}", w);
    for (const auto& o : props->overrides) chosen[o.substr(0, o.find('='))] = workload_file;
    auto with = config.WithOverrides(props->overrides);
    if (!with.ok()) return Fail(kExitBadInput, workload_file + ": " + with.status().message());
    config = std::move(with).value();
    file_txns = props->operationcount;
    if (file_txns && *file_txns == 0 && !cli.Has("txns") && !cli.Has("duration-s")) {
      return Fail(kExitBadInput, workload_file + ": operationcount=0: nothing to run");
    }
  }
  auto topo = cluster::Topology::FromConfig(config);
  if (!topo.ok()) return Fail(kExitBadInput, cli.Get("config") + ": " + topo.status().message());
  const int connect_ms = static_cast<int>(config.GetInt("client.connect_timeout_ms"));
  if (cli.Has("status")) return StatusMain(topo.value(), connect_ms);
  if (Status st = FollowTheServers(topo.value(), connect_ms, chosen, &config); !st.ok()) {
    return Fail(kExitBadInput, st.message());
  }

  // The servers' partition function (cluster/config/topology.h): with one partition, engine.partitions,
  // as qrstore-bench builds it, so connection 0 generates the bench's sequence.
  auto partition_map = cluster::PartitionMapFor(config, topo.value());
  if (!partition_map.ok()) return Fail(kExitBadInput, partition_map.status().message());
  auto options_or = workloads::OptionsFromConfig(config, partition_map.value());
  if (!options_or.ok()) return Fail(kExitBadInput, options_or.status().message());
  const workloads::WorkloadOptions& options = options_or.value();
  if (cli.Has("txns") && cli.Has("duration-s")) return Fail(kExitBadInput, "give either --txns or --duration-s, not both");
  const bool has_txns = cli.Has("txns") || (!cli.Has("duration-s") && file_txns.has_value());
  if (!has_txns && !cli.Has("duration-s")) {
    return Fail(kExitBadInput, "missing --txns N or --duration-s S (see qrstore-client --help)");
  }
  auto txns_flag = cli.GetInt("txns", static_cast<int64_t>(file_txns.value_or(0)));
  auto duration_flag = cli.GetDouble("duration-s", 0);
  auto warmup_flag = cli.GetDouble("warmup-s", 0);
  auto conns_flag = cli.GetInt("connections", config.GetInt("client.connections"));
  auto outstanding_flag = cli.GetInt("outstanding", config.GetInt("client.outstanding"));
  auto seed_flag = cli.GetInt("seed", 1);
  auto target_flag = cli.GetDouble("target-tps", 0);
  for (const Status* st : {&txns_flag.status(), &duration_flag.status(), &warmup_flag.status(), &conns_flag.status(),
                           &outstanding_flag.status(), &seed_flag.status(), &target_flag.status()}) {
    if (!st->ok()) return Fail(kExitBadInput, st->message());
  }
  if (has_txns && txns_flag.value() < 1) return Fail(kExitBadInput, "flag --txns: must be >= 1");
  if (!has_txns && !(duration_flag.value() > 0 && duration_flag.value() <= 86400)) {
    return Fail(kExitBadInput, "flag --duration-s: must be in (0, 86400]");
  }
  if (!(warmup_flag.value() >= 0 && warmup_flag.value() <= 3600)) return Fail(kExitBadInput, "flag --warmup-s: must be in [0, 3600]");
  if (has_txns && cli.Has("warmup-s")) return Fail(kExitBadInput, "--warmup-s goes with --duration-s");
  if (conns_flag.value() < 1 || conns_flag.value() > 1024) return Fail(kExitBadInput, "flag --connections: must be in [1, 1024]");
  if (outstanding_flag.value() < 1 || outstanding_flag.value() > 10'000'000) {
    return Fail(kExitBadInput, "flag --outstanding: must be in [1, 10000000]");
  }
  if (seed_flag.value() < 0) return Fail(kExitBadInput, "flag --seed: must be >= 0");
  if (cli.Has("target-tps") && !(target_flag.value() >= 1 && target_flag.value() <= 1e9)) {
    return Fail(kExitBadInput, "flag --target-tps: must be in [1, 1000000000]");
  }
  const double target_tps = cli.Has("target-tps") ? target_flag.value() : 0;
  const std::string pacing = target_tps > 0 ? ", paced at " + Num(target_tps) + " txn/s" : "";
  const uint64_t total_txns = has_txns ? static_cast<uint64_t>(txns_flag.value()) : 0;
  const uint32_t conns = static_cast<uint32_t>(conns_flag.value());
  const uint64_t outstanding = static_cast<uint64_t>(outstanding_flag.value());
  const uint64_t seed = static_cast<uint64_t>(seed_flag.value());
  const bool verify = cli.Has("verify"), json = cli.Has("json");
  // A request never carries more than K txns: at most K are in flight, whatever its size.
  const uint32_t per_request =
      static_cast<uint32_t>(std::min<uint64_t>(static_cast<uint64_t>(config.GetInt("client.txns_per_request")), outstanding));
  const uint64_t verify_cap = static_cast<uint64_t>(config.GetInt("client.verify_max_txns"));
  if (verify && has_txns && total_txns > verify_cap) {
    return Fail(kExitBadInput, "--verify with --txns " + std::to_string(total_txns) + " exceeds client.verify_max_txns (" +
                                   std::to_string(verify_cap) + "): raise it (40 bytes per txn) or run fewer");
  }
  const uint64_t max_message = static_cast<uint64_t>(config.GetInt("server.max_message_bytes"));
  if (MaxRequestBytes(options, per_request) > max_message) {
    return Fail(kExitBadInput, "a request of " + std::to_string(per_request) + " txns can take " +
                                   std::to_string(MaxRequestBytes(options, per_request)) +
                                   " bytes, more than server.max_message_bytes (" + std::to_string(max_message) +
                                   "): lower client.txns_per_request");
  }
  const int64_t stall_ns = config.GetInt("client.stall_timeout_ms") * 1'000'000;
  // Each partition: whoever leads it now (the backend elects; row 0 only leads a fresh cluster, and
  // in a row a follower may have taken a dead leader's place). A group just started (or
  // restarted) may not have elected yet: wait for it, as after a failover.
  std::vector<std::string> leads;  // [partition] its leader's client address
  if (!cli.Has("node")) {
    for (uint32_t p = 0; p < topo->partitions(); ++p) {
      WaitForServingLeader(topo.value(), p, std::min(connect_ms, 1000), config.GetInt("client.failover_timeout_ms"));
      leads.push_back(LiveLeader(topo.value(), p, connect_ms).client_address());
    }
  }
  std::string target = leads.empty() ? std::string() : leads[0];
  // A partitioned row: connection c drives the leader of partition c mod P, with txns whose
  // first key is on that partition (the key routes the txn to its home).
  const uint32_t row_size = topo->partitions();
  if (row_size > 1 && cli.Has("node")) return Fail(kExitBadInput, "--node: a row's connections go to all its leaders");
  if (cli.Has("node")) {
    auto n = topo->Find(cli.Get("node"));
    if (!n.ok()) return Fail(kExitBadInput, "flag --node: " + n.status().message());
    target = n.value()->client_address();
  }
  // The client follows each partition's leader through a failover (client/load.h), with a session
  // per connection at its partition's home (docs/sessions.md): what a lost leader had in flight is
  // sent again, and what had run is answered from the session table.
  const bool follow = true;
  // A partition whose group has one node (no replicas) has no one to take over: a run that ends
  // while it is lost does not wait for a failover (below).
  auto can_take_over = [&](uint32_t partition) { return topo->Group(partition).size() > 1; };
  const int64_t failover_timeout_ns = config.GetInt("client.failover_timeout_ms") * 1'000'000;
  const std::string kind = options.kind == workloads::WorkloadKind::kTransfer ? "transfer" : "ycsb";
  const uint64_t ops_per_txn = options.kind == workloads::WorkloadKind::kTransfer ? 2 : options.ycsb.ops_per_txn;
  log->info("effective config from {}:\n{}", cli.Get("config"), config.Dump());

  // Connections. A duration run with --verify stops submitting at client.verify_max_txns.
  const uint64_t budget = has_txns ? total_txns : (verify ? verify_cap : 0);
  ErrorLog errors;
  RunSignal signal;
  Window window;
  auto make_connection = [&](uint32_t c) -> Result<std::unique_ptr<LoadConnection>> {
    workloads::WorkloadOptions conn_options = options;
    if (row_size > 1) conn_options.home_partition = c % row_size;
    auto gen = workloads::MakeGenerator(conn_options, ConnectionSeed(seed, c));
    if (!gen.ok()) return gen.status();
    ConnectionConfig cc;
    cc.index = c;
    cc.quota = budget > 0 ? budget / conns + (c < budget % conns ? 1 : 0) : UINT64_MAX;
    cc.outstanding = outstanding;
    cc.per_request = per_request;
    // Each connection paces its share: a request of n txns every n * C / T seconds.
    if (target_tps > 0) cc.request_interval_ns = static_cast<int64_t>(per_request * 1e9 * conns / target_tps);
    cc.keep_records = verify;
    cc.connect_timeout_ms = connect_ms;
    cc.follow_leader = follow;
    cc.sessions = true;  // a session per connection, carried across failovers
    cc.max_frame_bytes = static_cast<uint32_t>(std::min<uint64_t>(
        std::max<uint64_t>(MaxReplyBytes(options, per_request), 1u << 16), uint64_t{1} << 31));
    return std::make_unique<LoadConnection>(cc, std::move(gen).value(), &window, &errors, &signal);
  };
  std::vector<std::unique_ptr<LoadConnection>> lc;
  for (uint32_t c = 0; c < conns; ++c) {
    auto l = make_connection(c);
    if (!l.ok()) return Fail(kExitBadInput, l.status().message());
    lc.push_back(std::move(l).value());
  }
  // Connection 0 asks first whether the target takes transactions, and follows one redirect.
  for (int attempt = 0;; ++attempt) {
    if (Status st = lc[0]->Connect(target); !st.ok()) return Fail(kExitFailed, st.message());
    auto probe = lc[0]->Probe(connect_ms);
    if (!probe.ok()) return Fail(kExitFailed, probe.status().message());
    if (probe.value().empty()) break;
    if (attempt == 1) {
      return Fail(kExitFailed, target + " does not take transactions either (it names " + probe.value() +
                                   "): no leader after one redirect");
    }
    log->info("{} is not the leader: redirected to {}", target, probe.value());
    target = probe.value();
    lc[0]->Finish();
    auto fresh = make_connection(0);
    lc[0] = std::move(fresh).value();
  }
  for (uint32_t c = 1; c < conns; ++c) {
    const std::string to = row_size > 1 ? leads[c % row_size] : target;
    if (Status st = lc[c]->Connect(to); !st.ok()) return Fail(kExitFailed, st.message());
  }
  for (auto& l : lc) {
    if (Status st = l->OpenSession(connect_ms); !st.ok()) return Fail(kExitFailed, st.message());
  }
  // The leader we drive: its node name, for its status and its followers.
  std::string leader_name;
  std::vector<std::string> follower_names;
  for (const cluster::NodeInfo& n : topo->nodes()) {
    if (n.client_address() == target) leader_name = n.name;
  }
  if (const cluster::NodeInfo* ln = leader_name.empty() ? nullptr : topo->Find(leader_name).value()) {
    for (const cluster::NodeInfo* m : topo->Group(ln->partition)) {
      if (m->name != ln->name) follower_names.push_back(m->name);
    }
  }
  log->info("{} {} against {} ({} connection(s), {} in flight each, {} txns per request, seed {}{})", kind,
            has_txns ? std::to_string(total_txns) + " txns" : Num(duration_flag.value()) + " s", target, conns,
            outstanding, per_request, seed, pacing);

  // Run: the main thread keeps the timeline.
  auto sum = [&](auto field) {
    uint64_t s = 0;
    for (auto& l : lc) s += (l->counts().*field).load(std::memory_order_relaxed);
    return s;
  };
  auto inflight = [&] {
    uint64_t s = 0;
    for (auto& l : lc) s += l->inflight();
    return s;
  };
  const int64_t warmup_ns = static_cast<int64_t>(warmup_flag.value() * 1e9);
  const int64_t duration_ns = static_cast<int64_t>(duration_flag.value() * 1e9);
  std::map<std::string, proto::NodeStatus> status0, status1;
  int64_t cpu0 = 0, cpu1 = 0;
  auto open_window = [&] {
    status0 = AllStatus(topo.value(), connect_ms);
    cpu0 = ProcessCpuNanos();
    window.start_ns.store(NowNanos(), std::memory_order_release);
  };
  auto close_window = [&] {
    window.end_ns.store(NowNanos(), std::memory_order_release);
    cpu1 = ProcessCpuNanos();
    status1 = AllStatus(topo.value(), connect_ms);
  };
  const int64_t start = NowNanos();
  // Wall clock at `start`, for scripts that line the timeline up with events they cause (a
  // kill): reported only, never used to decide anything.
  const double start_unix_s =
      static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count()) / 1e6;
  if (has_txns || warmup_ns == 0) open_window();
  CatchInterrupts();
  for (auto& l : lc) l->Start();
  const int64_t interval = config.GetInt("client.progress_interval_ms") * 1'000'000;
  int64_t next_report = interval > 0 ? start + interval : INT64_MAX;
  uint64_t last_committed = 0, last_results = 0, events = 0;
  // Commits per progress interval over the whole run (warm-up included), for --json: what a
  // user plots across a failure. Bounded: beyond the cap the last entry keeps adding up.
  constexpr size_t kMaxTimeline = 1 << 16;
  std::vector<uint64_t> timeline;
  int64_t last_report = start, last_progress = start;
  bool broken = false, stalled = false, capped = false, gave_up = false, interrupted = false;
  bool finishing_failover = false;  // the run's time ran out during a failover (below)
  // Failover (follow): when the first connection lost its leader, the next look for a leader,
  // its back-off; failovers done; the longest time without a commit (unavailable_ms).
  // An episode lasts from a loss until the first commit after it: a leader that keeps refusing
  // work after every move does not keep the client trying forever.
  // A partitioned row: the partition whose leader was lost (one failover at a time; connection c
  // drives partition c mod P).
  int64_t lost_since = -1, episode_since = -1, next_look = 0, look_backoff = 50'000'000;
  uint32_t lost_partition = 0;
  // No reply this long with txns in flight: ask who leads (then every half of it). About an
  // election timeout: a leader silent for that long has lost its group if it is paused or cut off.
  int64_t silent_leader_ns = config.GetInt("client.silent_leader_ms") * 1'000'000;
  if (silent_leader_ns == 0) {
    const int64_t election_ms = config.GetString("replication.backend") == "raft"
                                    ? config.GetInt("replication.raft.election_ticks") * config.GetInt("replication.raft.tick_ms")
                                    : 1000;
    silent_leader_ns = std::clamp<int64_t>(election_ms, 100, 1000) * 1'000'000;
  }
  // A status question during a failover waits this long at most: the main thread asks it (a
  // paused node never answers), and the timeline's sampling waits meanwhile.
  constexpr int kLookMs = 250;
  uint64_t failovers = 0, commits_seen = 0;
  int64_t last_commit_ns = start, longest_gap_ns = 0;
  auto look_for_leader = [&](int64_t now) {
    // The node of the group that says it leads and serves, and not the one just lost.
    const auto group = topo->Group(lost_partition);
    std::vector<std::string> addresses;
    for (const cluster::NodeInfo* n : group) addresses.push_back(n->client_address());
    const cluster::NodeInfo* found = ServingLeader(group, QueryStatuses(addresses, std::min(connect_ms, kLookMs)));
    if (found == nullptr) {
      // Every 50 ms for the first 3 s (an election takes a few hundred ms: a longer back-off
      // would add to the pause), then doubling up to 1 s (a whole cluster restarting).
      next_look = now + look_backoff;
      if (now - lost_since > 3'000'000'000) look_backoff = std::min<int64_t>(look_backoff * 2, 1'000'000'000);
      return;
    }
    for (uint32_t c = 0; c < lc.size(); ++c) {
      auto& l = lc[c];
      if (c % row_size != lost_partition || !l->LostLeader()) continue;
      if (Status st = l->Reconnect(found->client_address()); !st.ok()) {
        log->warn("{} leads, but connecting to it failed: {}; trying again", found->name, st.message());
        next_look = now + look_backoff;
        return;
      }
    }
    ++failovers;
    const std::string after = Num(static_cast<double>(NowNanos() - lost_since) / 1e6);
    if (row_size == 1) {
      log->warn("failover: {} leads now; every connection moved to it {} ms after the first lost its leader", found->name,
                after);
    } else {
      log->warn("failover: {} leads partition {} now; its connections moved to it {} ms after the first lost its leader",
                found->name, lost_partition, after);
    }
    if (row_size == 1) {
      target = found->client_address();
      leader_name = found->name;
      follower_names.clear();
      for (const cluster::NodeInfo* m : group) {
        if (m->name != found->name) follower_names.push_back(m->name);
      }
    }
    lost_since = -1;
    look_backoff = 50'000'000;
  };
  auto all = [&](auto pred) { return std::all_of(lc.begin(), lc.end(), [&](auto& l) { return pred(*l); }); };
  auto check_stall = [&](int64_t now) {
    const uint64_t results = sum(&Counts::results);
    if (results != last_results) {
      last_results = results;
      last_progress = now;
      return false;
    }
    const uint64_t in_flight = inflight();
    if (in_flight == 0 || now - last_progress < stall_ns) return false;
    const std::string why = "no reply for " + Num(static_cast<double>(now - last_progress) / 1e9) + " s with " +
                            std::to_string(in_flight) + " txns in flight (client.stall_timeout_ms)";
    errors.Note(target + ": " + why);
    for (auto& l : lc) l->Shutdown(Status::Timeout(target + ": " + why));
    return true;
  };
  // Failover (follow), once per loop turn: notes a lost leader, looks for the new one when due
  // (look_for_leader); true when no node took over within client.failover_timeout_ms (noted).
  auto follow_tick = [&](int64_t now) {
    std::string why;
    bool lost = false;
    for (uint32_t c = 0; c < lc.size(); ++c) {
      std::string w;
      // While one partition fails over, only its connections count (the others' wait).
      if ((lost_since < 0 || c % row_size == lost_partition) && lc[c]->LostLeader(&w)) {
        if (!lost && lost_since < 0) lost_partition = c % row_size;
        lost = true;
        if (why.empty()) why = w;
      }
    }
    if (!lost) return false;
    if (episode_since < 0) episode_since = now;
    if (lost_since < 0) {
      lost_since = now;
      next_look = now;
      log->warn("lost the leader {} ({}): txns in flight there are in doubt; looking for the new leader",
                row_size == 1 ? leader_name : "of partition " + std::to_string(lost_partition), why);
    }
    if (now >= next_look) look_for_leader(now);
    if (episode_since >= 0 && NowNanos() - episode_since > failover_timeout_ns) {
      errors.Note("no node of partition " + std::to_string(lost_partition) +
                  " took over as leader within client.failover_timeout_ms (" +
                  std::to_string(failover_timeout_ns / 1'000'000) + " ms; asked every node of cluster.nodes)");
      return true;
    }
    return false;
  };
  for (;;) {
    const int64_t now = NowNanos();
    if (window.start_ns.load() == INT64_MAX && now >= start + warmup_ns) {
      open_window();
      log->info("warm-up done: measuring for {} s", Num(duration_flag.value()));
    }
    if (now >= next_report) {
      const uint64_t committed = sum(&Counts::committed);
      const double dt = static_cast<double>(now - last_report) / 1e9;
      log->info("t={:.0f}s committed={} ({:.0f} txn/s) aborted={} failed={} outstanding={}",
                static_cast<double>(now - start) / 1e9, committed,
                static_cast<double>(committed - last_committed) / dt, sum(&Counts::aborted), sum(&Counts::failed),
                inflight());
      // Intervals the loop missed (a status question of a failover held it) count 0 and the
      // commits go to the last one: the timeline keeps its time axis.
      const int64_t missed = interval > 0 ? (now - next_report) / interval : 0;
      for (int64_t m = 0; m < missed && timeline.size() < kMaxTimeline; ++m) timeline.push_back(0);
      if (timeline.size() < kMaxTimeline) {
        timeline.push_back(committed - last_committed);
      } else {
        timeline.back() += committed - last_committed;
      }
      last_committed = committed;
      last_report = now;
      while (next_report <= now) next_report += interval;
    }
    if (const uint64_t c = sum(&Counts::committed); c != commits_seen) {
      if (commits_seen > 0) longest_gap_ns = std::max(longest_gap_ns, now - last_commit_ns);
      if (lost_since < 0) episode_since = -1;  // committing again: the failover is over
      commits_seen = c;
      last_commit_ns = now;
    }
    if (follow && follow_tick(now)) {
      gave_up = true;
      break;
    }
    broken = !all([](LoadConnection& l) { return !l.Broken(); });
    if (broken) break;
    if (signal.stopping()) {
      log->warn("a txn failed or an error reply came: no more requests (the run has failed)");
      break;
    }
    if (g_interrupted.load(std::memory_order_relaxed)) {
      interrupted = true;
      log->warn("interrupted: no more requests; the ones in flight are answered, then the summary (again to kill)");
      break;
    }
    if (all([](LoadConnection& l) { return l.Done(); })) {
      capped = !has_txns;
      break;
    }
    // The run's time is up: it ends, but not in the middle of a failover. A leader lost just
    // before the end leaves txns in doubt on connections that have no leader: the client finishes
    // the failover first (bounded by client.failover_timeout_ms, above), so that the drain gets
    // their outcomes from the new leader.
    const bool time_up =
        !has_txns && window.start_ns.load() != INT64_MAX && now >= window.start_ns.load() + duration_ns;
    if (time_up && (lost_since < 0 || !can_take_over(lost_partition))) break;
    if (time_up && !finishing_failover) {
      finishing_failover = true;
      log->warn("the run's {} s are up during a failover: finishing it before the drain (client.failover_timeout_ms)",
                Num(duration_flag.value()));
    }
    if (row_size == 1 && lost_since < 0 && inflight() > 0 && now - last_progress > silent_leader_ns && now >= next_look) {
      // No reply for a while with txns in flight: if another node says it leads, this one was
      // deposed while paused or cut off (it may never answer again): move to the new leader.
      next_look = now + silent_leader_ns / 2;
      const cluster::NodeInfo& live = LiveLeader(topo.value(), 0, std::min(connect_ms, kLookMs));
      if (live.name != leader_name) {
        const std::string why = leader_name + " did not answer for " +
                                Num(static_cast<double>(now - last_progress) / 1e6) + " ms and " + live.name +
                                " says it leads";
        for (auto& l : lc) l->Abandon(why);
        continue;
      }
    }
    if (lost_since < 0 && (stalled = check_stall(now))) break;
    int64_t wake = std::min<int64_t>(next_report, now + 100'000'000);  // stall checks 10 times a second
    if (lost_since >= 0) wake = std::min(wake, next_look);
    if (!has_txns && !time_up) {
      const int64_t ws = window.start_ns.load();
      wake = std::min(wake, ws == INT64_MAX ? start + warmup_ns : ws + duration_ns);
    }
    events = signal.WaitFor(events, wake - NowNanos());
  }
  if (lost_since >= 0 && !gave_up) {
    // The run's end came while no node had taken over: that is not a run that went on.
    errors.Note("the run ended " + Num(static_cast<double>(NowNanos() - lost_since) / 1e6) + " ms after losing its " +
                "leader of partition " + std::to_string(lost_partition) + ", before any of its nodes took over");
  }
  if (!has_txns && window.start_ns.load() != INT64_MAX) close_window();  // before the drain
  if (capped) log->warn("stopped submitting at client.verify_max_txns = {} txns (kept for --verify)", verify_cap);

  // Drain: no new requests; the in-flight ones are answered (or the connection stalls). A leader
  // lost during the drain is followed as in the run (unless the run was interrupted or gave up):
  // the new leader answers what the old one left unanswered (sessions), and the connections
  // moved to it stop sending again.
  bool replicated = true;
  for (uint32_t p = 0; p < row_size; ++p) replicated = replicated && can_take_over(p);
  const bool follow_in_drain = follow && replicated && !interrupted && !gave_up && !broken && !stalled;
  auto drained = [&](LoadConnection& l) { return l.Idle() && !(follow_in_drain && l.LostLeader()); };
  for (auto& l : lc) l->StopSending();
  auto failing_over = [&] { return follow_in_drain && lost_since >= 0; };
  bool drain_failover = false;  // logged once
  while (!broken && !stalled && !gave_up && (failing_over() || !all(drained))) {
    const int64_t now = NowNanos();
    if (follow_in_drain) {
      if (!drain_failover && std::any_of(lc.begin(), lc.end(), [](auto& l) { return l->LostLeader(); })) {
        drain_failover = true;
        log->warn("the leader was lost during the drain: following it to the new one (client.failover_timeout_ms)");
      }
      if (follow_tick(now)) {
        gave_up = true;
        break;
      }
      for (auto& l : lc) l->StopSending();  // a connection moved to a new leader sends only what it resends
    }
    if (!failing_over() && (stalled = check_stall(now))) break;
    broken = !all([](LoadConnection& l) { return !l.Broken(); });
    events = signal.WaitFor(events, failing_over() ? std::max<int64_t>(next_look - now, 1'000'000) : 100'000'000);
  }
  for (auto& l : lc) l->Finish();
  for (auto& l : lc) broken |= l->Broken();
  if (window.start_ns.load() == INT64_MAX) open_window();  // ended during the warm-up: an empty window
  if (window.end_ns.load() == INT64_MAX) close_window();

  // Replicas: poll the leader until every follower has its last committed batch with its digest
  // (in a partitioned row, every partition's leader for its own followers; the summary shows
  // partition 0's leader with every follower of the row).
  // A follower that is down (its leader has no report connection from it, and it answers no
  // status or does not answer as a follower: a deposed old leader, or one that resumed and has
  // not noticed yet) is not waited for: it is reported apart (a dead member is the group's
  // business now, and a restart brings it back).
  std::vector<std::string> down_followers;
  // One group whose leader no longer answers: lost after the load ended (killed as the run
  // finished, before any connection saw it), so its group elects another; wait for it as a
  // failover would (client.failover_timeout_ms) and compare the replicas with that one.
  const bool leader_lost = row_size == 1 && !QueryStatus(target, connect_ms).ok();
  if (leader_lost) {
    log->warn("{} does not answer after the run: comparing the replicas with whoever leads now", leader_name);
    WaitForServingLeader(topo.value(), 0, connect_ms, failover_timeout_ns / 1'000'000);
  }
  if (row_size > 1 || leader_lost) {
    // A row: partition 0's leader now (a failover may have moved it), as for the others below.
    const cluster::NodeInfo& l = LiveLeader(topo.value(), 0, connect_ms);
    target = l.client_address();
    leader_name = l.name;
    follower_names.clear();
    for (const cluster::NodeInfo* m : topo->Group(0)) {
      if (m->name != l.name) follower_names.push_back(m->name);
    }
  }
  std::vector<std::string> leaders = {target};
  std::vector<std::vector<std::string>> follower_sets;
  {
    std::map<std::string, proto::NodeStatus> answered = AllStatus(topo.value(), connect_ms);
    // The followers of `leader` (a node name) among `members` that are up.
    auto live_followers = [&](const std::string& leader, const std::vector<std::string>& members) {
      std::vector<std::string> live;
      auto ls = answered.find(leader);
      for (const std::string& f : members) {
        bool connected = false;
        if (ls != answered.end()) {
          for (const proto::FollowerView& v : ls->second.followers) connected |= v.node == f && v.connected;
        }
        auto a = answered.find(f);
        const bool follows = a != answered.end() && a->second.role == "follower";
        if (!connected && !follows) {
          down_followers.push_back(f);
        } else {
          live.push_back(f);
        }
      }
      return live;
    };
    follower_names = live_followers(leader_name, follower_names);
    follower_sets.push_back(follower_names);
    // The other partitions of a row: whoever leads each now (a failover may have moved it).
    for (uint32_t p = 1; p < row_size; ++p) {
      const cluster::NodeInfo& l = LiveLeader(topo.value(), p, connect_ms);
      leaders.push_back(l.client_address());
      std::vector<std::string> members;
      for (const cluster::NodeInfo* m : topo->Group(p)) {
        if (m->name != l.name) members.push_back(m->name);
      }
      follower_sets.push_back(live_followers(l.name, members));
    }
  }
  proto::NodeStatus leader_status;
  bool leader_answered = false;
  Status agreement = Status::Unavailable("no status from " + target);
  const int64_t settle_deadline = NowNanos() + config.GetInt("client.settle_timeout_ms") * 1'000'000;
  for (;;) {
    agreement = Status::Ok();
    bool caught_up = true;
    for (size_t i = 0; i < leaders.size(); ++i) {
      auto s = QueryStatus(leaders[i], connect_ms);
      if (!s.ok()) {
        if (agreement.ok()) agreement = s.status();
        caught_up = false;
        continue;
      }
      const Status a = ReplicaAgreement(s.value(), follower_sets[i]);
      if (agreement.ok() && !a.ok()) agreement = a;
      caught_up = caught_up && FollowersCaughtUp(s.value(), follower_sets[i]);
      if (i == 0) {
        leader_answered = true;
        leader_status = std::move(s).value();
      } else if (leader_answered) {
        leader_status.digest_mismatches += s.value().digest_mismatches;
        for (auto& f : s.value().followers) leader_status.followers.push_back(f);
      }
    }
    // A mismatch is final, but the other followers still get to catch up, so that the summary
    // says which ones agree.
    if (agreement.ok() || NowNanos() >= settle_deadline) break;
    if (agreement.code() == StatusCode::kCorruption && caught_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const bool replicas_agree = agreement.ok();
  uint64_t max_lag = 0;
  for (const auto& f : leader_status.followers) max_lag = std::max(max_lag, f.lag_batches);
  uint64_t acked_batches = 0;
  for (auto& l : lc) acked_batches = std::max(acked_batches, l->counts().acked_batches.load());

  // Verify.
  std::string verify_text = "skipped";
  bool verify_failed = false;
  if (verify && sum(&Counts::in_doubt) > 0) {
    // The serial reference needs every txn's fate.
    verify_text = "not possible: " + std::to_string(sum(&Counts::in_doubt)) +
                  " txns are in doubt (a failover: executed or not, the client cannot tell yet)";
    verify_failed = true;
  } else if (verify) {
    std::vector<ClientTxnRecord> records;
    std::vector<uint64_t> sent;
    for (auto& l : lc) {
      sent.push_back(l->sent());
      records.insert(records.end(), l->records().begin(), l->records().end());
      std::vector<ClientTxnRecord>().swap(l->records());
    }
    const int64_t v0 = NowNanos();
    ClientVerifyReport vr;
    Status v = VerifyClientRun(options, seed, sent, &records, &vr, row_size);
    if (v.ok() && row_size > 1) {
      // Each node of the row holds the reference's records of its partition (and the initial
      // ones of the others). Asked again rather than reusing the settle loop's statuses: a peer
      // may report a batch's outcomes a moment before its batch hook records the digest.
      for (uint32_t p = 0; p < row_size && v.ok(); ++p) {
        const cluster::NodeInfo& n = topo->Leader(p);
        auto st = QueryStatus(n.client_address(), connect_ms);
        if (!st.ok()) {
          v = Status::Unavailable(n.name + "'s final digest is unknown: " + st.status().message());
        } else if (st.value().last_digest != vr.partition_digests[p]) {
          v = Status::Internal(n.name + " (partition " + std::to_string(p) + "): state digest " +
                               Hex(st.value().last_digest) + " differs from the reference's for its partition " +
                               Hex(vr.partition_digests[p]) + " (another client ran, or the cluster was not fresh?)");
        }
      }
    } else if (v.ok() && leader_answered && leader_status.last_digest != vr.reference_digest) {
      v = Status::Internal("the leader's state digest " + Hex(leader_status.last_digest) + " differs from the reference's " +
                           Hex(vr.reference_digest) + " (another client ran, or the cluster was not fresh?)");
    } else if (v.ok() && !leader_answered) {
      v = Status::Unavailable("the leader's final digest is unknown: " + agreement.message());
    }
    if (v.ok()) {
      verify_text = "ok: " + std::to_string(vr.txns) + " txns in planned order (" + std::to_string(vr.committed) +
                    " committed, " + std::to_string(vr.aborted) + " aborted), fates and " +
                    std::to_string(vr.reads_checked) + " read values equal the serial reference's" +
                    (vr.values_unknown > 0 ? " (" + std::to_string(vr.values_unknown) +
                                                 " retried txns answered from the session table without their values)"
                                           : std::string()) +
                    (row_size > 1 ? " (batch by batch with the row's cascade rule; each partition's digest checked)" : "") +
                    ", digest " +
                    Hex(vr.reference_digest) + ", " + Num(static_cast<double>(NowNanos() - v0) / 1e9) + " s";
    } else {
      verify_text = "failed: " + v.message();
      verify_failed = true;
    }
  }

  // Report.
  workloads::LatencyHistogram latency;
  for (auto& l : lc) latency.Merge(l->latency());
  const uint64_t committed_total = sum(&Counts::committed), aborted_total = sum(&Counts::aborted);
  const uint64_t rejected = sum(&Counts::rejected), failed = sum(&Counts::failed);
  const uint64_t w_committed = has_txns ? committed_total : sum(&Counts::w_committed);
  const uint64_t w_aborted = has_txns ? aborted_total : sum(&Counts::w_aborted);
  const uint64_t write_ops_committed = sum(&Counts::write_ops_committed), in_doubt = sum(&Counts::in_doubt);
  const uint64_t write_ops_in_doubt = sum(&Counts::write_ops_in_doubt);
  uint64_t submitted = 0;
  for (auto& l : lc) submitted += l->sent();
  const double window_s = static_cast<double>(window.end_ns.load() - window.start_ns.load()) / 1e9;
  const double tps = window_s > 0 ? static_cast<double>(w_committed) / window_s : 0;
  const double ops = tps * static_cast<double>(ops_per_txn);
  const double p50 = Ms(latency.Percentile(0.50)), p95 = Ms(latency.Percentile(0.95));
  const double p99 = Ms(latency.Percentile(0.99)), p999 = Ms(latency.Percentile(0.999));
  const double client_cpu_s = static_cast<double>(cpu1 - cpu0) / 1e9;
  auto per_txn_us = [&](double cpu_s) { return w_committed > 0 ? cpu_s * 1e6 / static_cast<double>(w_committed) : 0.0; };
  std::printf("qrstore-client: %s against %s, %s (seed %" PRIu64 ", %u connection(s) x %" PRIu64
              " in flight, %u txns per request%s)\n",
              kind.c_str(), target.c_str(),
              has_txns ? (std::to_string(total_txns) + " txns in " + Num(window_s) + " s").c_str()
                       : ("measured " + Num(window_s) + " s").c_str(),
              seed, conns, outstanding, per_request, pacing.c_str());
  std::printf("  throughput     %.0f txn/s, %.0f ops/s (%" PRIu64 " ops per txn)\n", tps, ops, ops_per_txn);
  std::printf("  committed      %" PRIu64 "  aborted %" PRIu64 "  rejected %" PRIu64 "  failed %" PRIu64
              "  errors %" PRIu64 "  (whole run: %" PRIu64 " submitted, %" PRIu64 " committed)\n",
              w_committed, w_aborted, rejected, failed, errors.count(), submitted, committed_total);
  if (interrupted) {
    std::printf("  interrupted    by SIGINT/SIGTERM: the run ended early (%s)\n",
                has_txns ? "before all its txns were sent: a failed run" : "what ran is reported");
  }
  std::printf("  fates          write ops committed %" PRIu64 " (whole run); in doubt %" PRIu64 " txns (%" PRIu64
              " write ops): outcome unknown (answered failed or lost in flight without a session, expired, or "
              "unanswered at the end), executed or not\n",
              write_ops_committed, in_doubt, write_ops_in_doubt);
  std::printf("  sessions       one per connection; %" PRIu64 " txns sent again to a new leader (each answered "
              "once: what had run is answered from the replicated session table, not run again)\n",
              sum(&Counts::retried));
  if (failovers > 0 || gave_up) {
    std::printf("  failovers      %" PRIu64 " (now driving %s); longest time without a commit %.0f ms%s\n", failovers,
                leader_name.c_str(), static_cast<double>(longest_gap_ns) / 1e6,
                gave_up ? "; GAVE UP: no new leader within client.failover_timeout_ms" : "");
  }
  std::printf("  latency ms     p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (request sent -> answer, committed)\n",
              p50, p95, p99, p999, Ms(latency.max()));
  std::printf("  client cpu     %.2f s (%.3f us/txn)\n", client_cpu_s, per_txn_us(client_cpu_s));
  JsonObject cpu_json, cpu_txn_json, phases_json, batches_json;
  for (const cluster::NodeInfo& n : topo->nodes()) {
    auto a = status0.find(n.name);
    auto b = status1.find(n.name);
    std::optional<NodeWindow> w;
    if (a != status0.end() && b != status1.end()) w = WindowOf(a->second, b->second);
    if (!w) {
      std::printf("  node %-8s   %s\n", n.name.c_str(),
                  a == status0.end() || b == status1.end() ? "no status in the window (down?)" : "restarted in the window");
      continue;
    }
    cpu_json.Dbl(n.name, w->cpu_s);
    cpu_txn_json.Dbl(n.name, per_txn_us(w->cpu_s));
    batches_json.Int(n.name, w->batches);
    const proto::PhaseMeans& ph = w->phases;
    JsonObject pj;
    pj.Dbl("plan_ms", ph.plan_ms);
    pj.Dbl("deliver_ms", ph.deliver_ms);
    pj.Dbl("exec_ms", ph.exec_ms);
    pj.Dbl("repl_ms", ph.repl_ms);
    pj.Dbl("repl_wait_ms", ph.repl_wait_ms);
    pj.Dbl("commit_ms", ph.commit_ms);
    pj.Bool("windowed", w->phases_windowed);
    phases_json.Raw(n.name, pj.Done());
    std::printf("  node %-8s   %-8s batches %" PRIu64 "%s  per batch ms: plan %.3f deliver %.3f exec %.3f repl %.3f "
                "repl-wait %.3f commit %.3f  cpu %.2f s (%.3f us/txn)\n",
                n.name.c_str(), b->second.role.c_str(), w->batches, w->phases_windowed ? "" : " (means since start)",
                ph.plan_ms, ph.deliver_ms, ph.exec_ms, ph.repl_ms, ph.repl_wait_ms, ph.commit_ms, w->cpu_s,
                per_txn_us(w->cpu_s));
  }
  for (const auto& f : leader_status.followers) {
    if (std::find(down_followers.begin(), down_followers.end(), f.node) != down_followers.end()) {
      std::printf("  follower %-6s DOWN (no status, no report connection; lag %" PRIu64 " batches): not waited for\n",
                  f.node.c_str(), f.lag_batches);
      continue;
    }
    if (f.stranded) {
      std::printf("  follower %-6s STRANDED (lag %" PRIu64 " batches, %" PRIu64 " mismatches): %s\n", f.node.c_str(),
                  f.lag_batches, f.mismatches, f.note.c_str());
      continue;
    }
    std::printf("  follower %-6s lag %" PRIu64 " batches, %" PRIu64 " digests checked, %" PRIu64 " mismatches, %s\n",
                f.node.c_str(), f.lag_batches, f.checked_batches, f.mismatches,
                f.agrees_at_last ? "agrees at the last batch" : "does NOT agree at the last batch");
  }
  const std::vector<const proto::FollowerView*> stranded = StrandedFollowers(leader_status);
  std::string stranded_text;
  for (const proto::FollowerView* f : stranded) stranded_text += (stranded_text.empty() ? "" : ", ") + f->node;
  if (!stranded_text.empty()) stranded_text = " (stranded, not counted: " + stranded_text + ")";
  std::string down_text;
  for (const std::string& d : down_followers) down_text += (down_text.empty() ? "" : ", ") + d;
  if (!down_text.empty()) stranded_text += " (down, not counted: " + down_text + ")";
  std::printf("  replicas agree %s%s%s\n", replicas_agree ? "yes" : "NO: ",
              replicas_agree ? (follower_names.empty() ? " (no followers)" : "") : agreement.message().c_str(),
              stranded_text.c_str());
  std::printf("  verify         %s\n", verify_text.c_str());
  const std::vector<std::string> first_errors = errors.first();
  for (const auto& e : first_errors) std::printf("  error          %s\n", e.c_str());

  if (json) {
    JsonObject inputs;
    inputs.Str("config_file", cli.Get("config"));
    if (has_txns) inputs.Int("txns", total_txns); else inputs.Dbl("duration_s", duration_flag.value());
    inputs.Dbl("warmup_s", warmup_flag.value());
    inputs.Int("connections", conns);
    inputs.Int("outstanding", outstanding);
    inputs.Int("txns_per_request", per_request);
    inputs.Dbl("target_tps", target_tps);
    inputs.Int("seed", seed);
    inputs.Bool("verify", verify);
    inputs.Str("workload_file", workload_file);
    inputs.Str("node", cli.Get("node"));
    inputs.Raw("overrides", JsonStringArray(cli.overrides()));
    JsonObject j;
    j.Str("workload", kind);
    j.Str("target", target);
    j.Int("submitted", submitted);
    j.Int("committed", w_committed);
    j.Int("aborted", w_aborted);
    j.Int("rejected", rejected);
    j.Int("failed", failed);
    j.Int("errors", errors.count());
    j.Bool("interrupted", interrupted);
    j.Int("committed_total", committed_total);
    // Whole run: what an exactly-once check needs (the table's update counters sum to at least
    // update_ops_committed and at most that plus update_ops_in_doubt).
    j.Int("update_ops_committed", write_ops_committed);
    j.Int("in_doubt", in_doubt);
    j.Int("update_ops_in_doubt", write_ops_in_doubt);
    j.Int("failovers", failovers);
    j.Dbl("unavailable_ms", static_cast<double>(longest_gap_ns) / 1e6);  // the longest time without a commit
    j.Int("retried", sum(&Counts::retried));  // txns sent again to a new leader (client sessions)
    // Of the committed: retries answered from the session table (they had run), without values.
    j.Int("committed_no_values", sum(&Counts::no_values));
    j.Str("leader", leader_name);
    j.Int("aborted_total", aborted_total);
    j.Dbl("elapsed_s", window_s);
    j.Dbl("throughput_tps", tps);
    j.Dbl("ops_per_s", ops);
    j.Dbl("p50_ms", p50);
    j.Dbl("p95_ms", p95);
    j.Dbl("p99_ms", p99);
    j.Dbl("p999_ms", p999);
    j.Dbl("max_ms", Ms(latency.max()));
    j.Bool("replicas_agree", replicas_agree);
    if (!replicas_agree) j.Str("replicas_detail", agreement.message());
    std::vector<std::string> stranded_names;
    JsonObject stranded_json;
    for (const proto::FollowerView* f : stranded) {
      stranded_names.push_back(f->node);
      stranded_json.Str(f->node, f->note);
    }
    std::string timeline_json;
    for (uint64_t c : timeline) timeline_json += (timeline_json.empty() ? "" : ",") + std::to_string(c);
    j.Int("progress_interval_ms", static_cast<uint64_t>(config.GetInt("client.progress_interval_ms")));
    char start_buf[32];  // (ms precision: Dbl keeps 6 digits)
    std::snprintf(start_buf, sizeof start_buf, "%.3f", start_unix_s);
    j.Raw("timeline_start_unix_s", start_buf);  // committed_per_interval[0] starts here
    j.Raw("committed_per_interval", "[" + timeline_json + "]");
    j.Raw("stranded_followers", JsonStringArray(stranded_names));
    j.Raw("down_followers", JsonStringArray(down_followers));
    j.Raw("stranded_detail", stranded_json.Done());
    j.Int("digest_mismatches", leader_status.digest_mismatches);
    j.Int("follower_lag_batches", max_lag);
    j.Int("leader_batches", leader_status.committed_batches);
    j.Int("acked_batches", acked_batches);  // 1 + the highest batch any committed/aborted answer came from
    j.Str("leader_digest", Hex(leader_status.last_digest));
    j.Raw("server_cpu_s", cpu_json.Done());
    j.Raw("cpu_us_per_txn", cpu_txn_json.Done());
    j.Raw("batches", batches_json.Done());
    j.Raw("phases", phases_json.Done());
    j.Dbl("client_cpu_s", client_cpu_s);
    j.Dbl("client_cpu_us_per_txn", per_txn_us(client_cpu_s));
    j.Bool("stopped_at_verify_cap", capped);
    j.Str("verify", verify_text);
    j.Raw("inputs", inputs.Done());
    j.Raw("config", config.DumpJson());
    std::printf("%s\n", j.Done().c_str());
  }
  std::fflush(stdout);
  // Following the leader, `failed` replies are txns in doubt of a failover (reported), not a
  // failed run.
  if (stalled || broken || errors.count() > 0 || (failed > 0 && !follow) || rejected > 0) {
    return Fail(kExitFailed, std::to_string(failed) + " failed, " + std::to_string(rejected) + " rejected, " +
                                 std::to_string(errors.count()) + " errors" +
                                 (first_errors.empty() ? "" : ": " + first_errors[0]));
  }
  if (!replicas_agree) return Fail(kExitFailed, "the replicas do not agree with the leader: " + agreement.message());
  if (interrupted && has_txns) return Fail(kExitFailed, "interrupted before its " + std::to_string(total_txns) + " txns were sent");
  if (verify_failed) return Fail(kExitFailed, "verify " + verify_text);
  return kExitOk;
}

}  // namespace
}  // namespace qrstore::client

int main(int argc, char** argv) { return qrstore::client::Main(argc, argv); }
