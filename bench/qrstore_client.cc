// qrstore-client: the closed-loop YCSB-T / transfer driver of a qrstore cluster (and its status
// tool). See Usage below and README.md.
//
// Load: C connections to the partition's leader (or --node), each keeping at most K txns in
// flight in requests of client.txns_per_request txns. Connection c draws from its own
// deterministic generator (connection 0: MakeGenerator(options, seed), exactly qrstore-bench's
// sequence; c > 0: a seed derived from (seed, c)), so a one-connection run is reproducible and
// ends in the same state as `qrstore-bench --seed S` on the same workload.
//
// Output: progress on stderr each second; the summary on stdout; with --json the last stdout
// line is one JSON object. Exit status: 0 ok, 1 the run failed (failed or rejected txns, error
// replies, a broken connection, replicas that disagree, --verify), 2 bad input.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/client_load.h"
#include "bench/report.h"
#include "bench/verify.h"
#include "cluster/client.h"
#include "cluster/cluster_config.h"
#include "cluster/protocol.h"
#include "cluster/topology.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/hash.h"
#include "common/logging.h"
#include "storage/table.h"
#include "workloads/latency_histogram.h"
#include "workloads/reference_executor.h"
#include "workloads/workload.h"
#include "workloads/ycsb_properties.h"

namespace qrstore::bench {
namespace {

namespace proto = cluster::proto;
using proto::ResultCode;

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "qrstore-client: %s\n", msg.c_str());
  return code;
}
double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// Status of every node (nodes that do not answer are missing from the map).
std::map<std::string, proto::NodeStatus> AllStatus(const cluster::Topology& topo, int timeout_ms,
                                                  std::vector<std::string>* errors = nullptr) {
  std::map<std::string, proto::NodeStatus> out;
  for (const cluster::NodeInfo& n : topo.nodes()) {
    auto s = cluster::QueryStatus(n.client_address(), timeout_ms);
    if (s.ok()) {
      out[n.name] = std::move(s).value();
    } else if (errors != nullptr) {
      errors->push_back(n.name + " (" + n.client_address() + "): " + s.status().message());
    }
  }
  return out;
}

int StatusMain(const cluster::Topology& topo, int timeout_ms) {
  std::vector<std::string> errors;
  auto all = AllStatus(topo, timeout_ms, &errors);
  std::map<std::string, proto::FollowerView> views;
  for (const auto& [name, s] : all) {
    for (const auto& f : s.followers) views[f.node] = f;
  }
  std::printf("%-12s %-8s %-9s %10s %12s %8s %-10s %s\n", "node", "role", "state", "batches", "committed", "lag",
              "digest", "error");
  for (const cluster::NodeInfo& n : topo.nodes()) {
    auto it = all.find(n.name);
    if (it == all.end()) {
      std::printf("%-12s %-8s %-9s %10s %12s %8s %-10s %s\n", n.name.c_str(), n.row == 0 ? "leader" : "follower",
                  "down", "-", "-", "-", "-", "no answer");
      continue;
    }
    const proto::NodeStatus& s = it->second;
    std::string lag = "-", digest = "-";
    if (auto v = views.find(n.name); v != views.end()) {
      lag = std::to_string(v->second.lag_batches);
      digest = v->second.mismatches > 0 ? "MISMATCH" : (v->second.agrees_at_last ? "agrees" : "behind");
    } else if (s.role == "leader") {
      digest = s.digest_mismatches > 0 ? "mismatch" : "reference";
    }
    std::printf("%-12s %-8s %-9s %10" PRIu64 " %12" PRIu64 " %8s %-10s %s\n", n.name.c_str(), s.role.c_str(),
                s.state.c_str(), s.committed_batches, s.committed_txns, lag.c_str(), digest.c_str(), s.error.c_str());
  }
  for (const auto& e : errors) std::fprintf(stderr, "qrstore-client: %s\n", e.c_str());
  return errors.empty() ? kExitOk : kExitFailed;
}

int Main(int argc, char** argv) {
  CommandLine cli("qrstore-client",
                  "--config FILE [--key=value ...] (--txns N | --duration-s S) [--warmup-s W] [--connections C] "
                  "[--outstanding K] [--seed S] [--workload-file F] [--node NAME] [--verify] [--json] | --status",
                  "Drives a qrstore cluster with a closed-loop YCSB-T or transfer load (workload.kind, ycsb.*,\n"
                  "transfer.* of the config, or a YCSB property file) over C connections to the partition's\n"
                  "leader, each keeping at most K txns in flight, and prints throughput, latency percentiles\n"
                  "(request sent -> answer received, per txn), every node's per-batch phase times and CPU,\n"
                  "follower lag and whether every follower's state digest agrees with the leader's.\n"
                  "Connection 0 runs exactly the --seed sequence (the same as qrstore-bench --seed S).\n"
                  "--verify (a fresh cluster, this client alone): replays the planned order on the serial\n"
                  "reference executor and checks every fate and every value read.\n"
                  "--status: one line per node (role, state, batches, lag, digest agreement) and exit.\n"
                  "Progress goes to stderr once per second; --json makes the last stdout line a JSON object.\n"
                  "Exit status: 0 ok, 1 failed (failed/rejected txns, errors, disagreeing replicas, verify), 2 bad input.");
  cli.AddValue("config", "FILE", "the cluster config the servers run (e.g. configs/cluster-raft.yaml)");
  cli.AddValue("txns", "N", "run exactly N transactions (over all connections)");
  cli.AddValue("duration-s", "S", "measure for S seconds (after the warm-up), then let the in-flight ones finish");
  cli.AddValue("warmup-s", "W", "with --duration-s: run W seconds before measuring (default 0)");
  cli.AddValue("connections", "C", "connections (default client.connections)");
  cli.AddValue("outstanding", "K", "txns in flight per connection (default client.outstanding)");
  cli.AddValue("seed", "S", "workload seed (default 1)");
  cli.AddValue("workload-file", "F", "a YCSB core workload property file (recordcount, operationcount, readproportion, ...)");
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

  std::optional<uint64_t> file_txns;
  if (cli.Has("workload-file")) {
    auto props = workloads::LoadYcsbProperties(cli.Get("workload-file"));
    if (!props.ok()) return Fail(kExitBadInput, props.status().message());
    for (const auto& w : props->warnings) log->warn("{}", w);
    for (const auto& o : props->overrides) {
      const std::string key = o.substr(0, o.find('='));
      const std::string value = o.substr(o.find('=') + 1);
      if ((key == "ycsb.records" || key == "ycsb.fields" || key == "ycsb.field_bytes") &&
          std::to_string(config.GetInt(key)) != value) {
        return Fail(kExitBadInput, cli.Get("workload-file") + ": " + key + "=" + value + " but the servers loaded " + key +
                                       "=" + std::to_string(config.GetInt(key)) +
                                       " from the cluster config: put it in the cluster config (or --" + key +
                                       " to cluster.sh up) so they load that table");
      }
    }
    auto with = config.WithOverrides(props->overrides);
    if (!with.ok()) return Fail(kExitBadInput, cli.Get("workload-file") + ": " + with.status().message());
    config = std::move(with).value();
    file_txns = props->operationcount;
  }
  auto topo = cluster::Topology::FromConfig(config);
  if (!topo.ok()) return Fail(kExitBadInput, cli.Get("config") + ": " + topo.status().message());
  const int connect_ms = static_cast<int>(config.GetInt("client.connect_timeout_ms"));
  if (cli.Has("status")) return StatusMain(topo.value(), connect_ms);

  auto options_or = workloads::OptionsFromConfig(config);
  if (!options_or.ok()) return Fail(kExitBadInput, options_or.status().message());
  const workloads::WorkloadOptions& options = options_or.value();
  const bool has_txns = cli.Has("txns") || (!cli.Has("duration-s") && file_txns.has_value());
  if (cli.Has("txns") && cli.Has("duration-s")) return Fail(kExitBadInput, "give either --txns or --duration-s, not both");
  if (!has_txns && !cli.Has("duration-s")) {
    return Fail(kExitBadInput, "missing --txns N or --duration-s S (see qrstore-client --help)");
  }
  auto txns_flag = cli.GetInt("txns", file_txns.value_or(0));
  auto duration_flag = cli.GetDouble("duration-s", 0);
  auto warmup_flag = cli.GetDouble("warmup-s", 0);
  auto conns_flag = cli.GetInt("connections", config.GetInt("client.connections"));
  auto outstanding_flag = cli.GetInt("outstanding", config.GetInt("client.outstanding"));
  auto seed_flag = cli.GetInt("seed", 1);
  for (const Status* st : {&txns_flag.status(), &duration_flag.status(), &warmup_flag.status(), &conns_flag.status(),
                           &outstanding_flag.status(), &seed_flag.status()}) {
    if (!st->ok()) return Fail(kExitBadInput, st->message());
  }
  if (has_txns && txns_flag.value() < 1) return Fail(kExitBadInput, "flag --txns: must be >= 1");
  if (!has_txns && !(duration_flag.value() > 0 && duration_flag.value() <= 86400)) {
    return Fail(kExitBadInput, "flag --duration-s: must be in (0, 86400]");
  }
  if (!(warmup_flag.value() >= 0 && warmup_flag.value() <= 3600)) return Fail(kExitBadInput, "flag --warmup-s: must be in [0, 3600]");
  if (has_txns && cli.Has("warmup-s")) return Fail(kExitBadInput, "--warmup-s goes with --duration-s");
  if (conns_flag.value() < 1 || conns_flag.value() > 1024) return Fail(kExitBadInput, "flag --connections: must be in [1, 1024]");
  if (outstanding_flag.value() < 1) return Fail(kExitBadInput, "flag --outstanding: must be >= 1");
  if (seed_flag.value() < 0) return Fail(kExitBadInput, "flag --seed: must be >= 0");
  const uint64_t total_txns = has_txns ? static_cast<uint64_t>(txns_flag.value()) : 0;
  const uint32_t conns = static_cast<uint32_t>(conns_flag.value());
  const uint64_t outstanding = static_cast<uint64_t>(outstanding_flag.value());
  const uint64_t seed = static_cast<uint64_t>(seed_flag.value());
  const bool verify = cli.Has("verify"), json = cli.Has("json");
  const uint32_t per_request = static_cast<uint32_t>(config.GetInt("client.txns_per_request"));
  const uint64_t verify_cap = static_cast<uint64_t>(config.GetInt("client.verify_max_txns"));
  if (verify && has_txns && total_txns > verify_cap) {
    return Fail(kExitBadInput, "--verify with --txns " + std::to_string(total_txns) + " exceeds client.verify_max_txns (" +
                                   std::to_string(verify_cap) + ")");
  }
  std::string target = topo->Leader(0).client_address();
  if (cli.Has("node")) {
    auto n = topo->Find(cli.Get("node"));
    if (!n.ok()) return Fail(kExitBadInput, n.status().message());
    target = n.value()->client_address();
  }
  const std::string kind = options.kind == workloads::WorkloadKind::kTransfer ? "transfer" : "ycsb";
  const uint64_t ops_per_txn = options.kind == workloads::WorkloadKind::kTransfer ? 2 : options.ycsb.ops_per_txn;

  // Connections (a follower named by --node redirects us to its leader).
  Totals totals;
  totals.keep_records = verify;
  totals.verify_cap = verify_cap;
  Window window;
  std::vector<std::unique_ptr<Driver>> drivers;
  for (uint32_t c = 0; c < conns; ++c) {
    auto gen = workloads::MakeGenerator(options, ConnSeed(seed, c));
    if (!gen.ok()) return Fail(kExitBadInput, gen.status().message());
    const uint64_t quota = has_txns ? total_txns / conns + (c < total_txns % conns ? 1 : 0) : UINT64_MAX;
    drivers.push_back(std::make_unique<Driver>(c, std::move(gen).value(), quota, outstanding, per_request, &totals, &window));
  }
  if (Status st = drivers[0]->Connect(target, connect_ms); !st.ok()) return Fail(kExitFailed, st.message());
  auto probe = drivers[0]->Probe(connect_ms);
  if (!probe.ok()) return Fail(kExitFailed, target + ": " + probe.status().message());
  if (!probe.value().empty()) {
    log->info("{} is not the leader: redirected to {}", target, probe.value());
    target = probe.value();
    drivers[0]->Close();
    auto gen = workloads::MakeGenerator(options, ConnSeed(seed, 0));
    const uint64_t quota = has_txns ? total_txns / conns + (0 < total_txns % conns ? 1 : 0) : UINT64_MAX;
    drivers[0] = std::make_unique<Driver>(0, std::move(gen).value(), quota, outstanding, per_request, &totals, &window);
    if (Status st = drivers[0]->Connect(target, connect_ms); !st.ok()) return Fail(kExitFailed, st.message());
    auto again = drivers[0]->Probe(connect_ms);
    if (!again.ok() || !again.value().empty()) return Fail(kExitFailed, target + ": does not take transactions either");
  }
  for (uint32_t c = 1; c < conns; ++c) {
    if (Status st = drivers[c]->Connect(target, connect_ms); !st.ok()) return Fail(kExitFailed, st.message());
  }
  log->info("{} {} against {} ({} connection(s), {} in flight each, {} txns per request, seed {})", kind,
            has_txns ? std::to_string(total_txns) + " txns" : Num(duration_flag.value()) + " s", target, conns,
            outstanding, per_request, seed);

  // Run.
  const int64_t start = NowNanos();
  const int64_t warmup_ns = static_cast<int64_t>(warmup_flag.value() * 1e9);
  const int64_t duration_ns = static_cast<int64_t>(duration_flag.value() * 1e9);
  std::map<std::string, proto::NodeStatus> status0;
  if (has_txns || warmup_ns == 0) {
    status0 = AllStatus(topo.value(), connect_ms);
    window.start_ns = NowNanos();
  }
  for (auto& d : drivers) d->Start();
  const int64_t interval = config.GetInt("client.progress_interval_ms") * 1'000'000;
  int64_t next_report = start + (interval > 0 ? interval : INT64_MAX / 2);
  uint64_t last_committed = 0;
  int64_t last_report = start;
  bool broken = false;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const int64_t now = NowNanos();
    if (!has_txns && window.start_ns == INT64_MAX && now >= start + warmup_ns) {
      status0 = AllStatus(topo.value(), connect_ms);
      window.start_ns = NowNanos();
      log->info("warm-up done: measuring for {} s", Num(duration_flag.value()));
    }
    for (auto& d : drivers) broken |= d->broken();
    uint64_t accounted = 0, committed = 0, aborted = 0, failed = 0;
    {
      std::lock_guard<std::mutex> lk(totals.mu);
      accounted = totals.accounted;
      committed = totals.committed;
      aborted = totals.aborted;
      failed = totals.failed;
    }
    if (now >= next_report) {
      uint64_t inflight = 0;
      for (auto& d : drivers) inflight += d->inflight();
      const double dt = static_cast<double>(now - last_report) / 1e9;
      log->info("t={:.0f}s committed={} ({:.0f} txn/s) aborted={} failed={} outstanding={}",
                static_cast<double>(now - start) / 1e9, committed, static_cast<double>(committed - last_committed) / dt,
                aborted, failed, inflight);
      last_committed = committed;
      last_report = now;
      while (next_report <= now) next_report += interval;
    }
    if (broken || totals.stop_sending.load()) break;
    if (has_txns) {
      if (accounted >= total_txns) break;
    } else if (window.start_ns != INT64_MAX && now >= window.start_ns + duration_ns) {
      break;
    }
  }
  const int64_t window_end = NowNanos();
  window.end_ns = window_end;
  // CPU over the measured window: a duration run reads it now (the txns still in flight are
  // not counted, nor is their work); a --txns run after the last answer.
  std::map<std::string, proto::NodeStatus> status1;
  if (!has_txns) status1 = AllStatus(topo.value(), connect_ms);
  for (auto& d : drivers) d->StopSending();
  const int64_t drain_deadline = NowNanos() + 60'000'000'000;
  bool drained = true;
  for (auto& d : drivers) drained &= d->Drain(drain_deadline);
  const int64_t end = NowNanos();
  for (auto& d : drivers) {
    if (!d->conn_status().ok()) {
      std::lock_guard<std::mutex> lk(totals.mu);
      totals.Note(d->conn_status().message());
      broken = true;
    }
    d->Close();
  }
  if (has_txns) status1 = AllStatus(topo.value(), connect_ms);

  // Replicas: every follower reports the leader's last committed batch with the same digest.
  const std::string leader_name = topo->Leader(0).name;
  const int64_t settle_deadline = NowNanos() + config.GetInt("client.settle_timeout_ms") * 1'000'000;
  proto::NodeStatus leader_status;
  bool replicas_agree = false;
  bool leader_answered = false;
  for (;;) {
    auto s = cluster::QueryStatus(topo->Leader(0).client_address(), connect_ms);
    if (s.ok()) {
      leader_answered = true;
      leader_status = s.value();
      bool all = leader_status.digest_mismatches == 0;
      for (const auto& f : leader_status.followers) all &= f.agrees_at_last;
      if (all) {
        replicas_agree = true;
        break;
      }
    }
    if (NowNanos() >= settle_deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  uint64_t max_lag = 0;
  for (const auto& f : leader_status.followers) max_lag = std::max(max_lag, f.lag_batches);

  // Verify.
  std::string verify_text = "skipped";
  bool verify_failed = false;
  if (verify) {
    std::vector<VerifyRecord> records;
    {
      std::lock_guard<std::mutex> lk(totals.mu);
      records = std::move(totals.records);
    }
    uint64_t sent = 0;
    for (auto& d : drivers) sent += d->sent();
    auto v = VerifyPlannedOrder(options, seed, conns, std::move(records), sent, totals.verify_overflow,
                                leader_answered ? std::optional<uint64_t>(leader_status.last_digest) : std::nullopt);
    verify_failed = !v.ok();
    verify_text = v.ok() ? v.value() : "failed: " + v.status().message();
  }

  // Report.
  Totals& t = totals;
  std::lock_guard<std::mutex> lk(t.mu);
  const int64_t window_ns = (has_txns ? end : window_end) - window.start_ns.load();
  const double window_s = static_cast<double>(window_ns) / 1e9;
  const uint64_t w_committed = has_txns ? t.committed : t.w_committed;
  const uint64_t w_aborted = has_txns ? t.aborted : t.w_aborted;
  const double tps = window_s > 0 ? static_cast<double>(w_committed) / window_s : 0;
  const double ops = tps * static_cast<double>(ops_per_txn);
  const double p50 = Ms(t.latency_ns.Percentile(0.50)), p95 = Ms(t.latency_ns.Percentile(0.95));
  const double p99 = Ms(t.latency_ns.Percentile(0.99)), p999 = Ms(t.latency_ns.Percentile(0.999));
  std::printf("qrstore-client: %s against %s, %s (seed %" PRIu64 ", %u connection(s) x %" PRIu64 " in flight)\n",
              kind.c_str(), target.c_str(),
              has_txns ? (std::to_string(total_txns) + " txns").c_str() : ("measured " + Num(window_s) + " s").c_str(),
              seed, conns, outstanding);
  std::printf("  throughput     %.0f txn/s, %.0f ops/s (%" PRIu64 " ops per txn)\n", tps, ops, ops_per_txn);
  std::printf("  committed      %" PRIu64 "  aborted %" PRIu64 "  rejected %" PRIu64 "  failed %" PRIu64
              "  errors %" PRIu64 "  (whole run: %" PRIu64 " committed)\n",
              w_committed, w_aborted, t.rejected, t.failed, t.errors, t.committed);
  std::printf("  latency ms     p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", p50, p95, p99, p999,
              Ms(t.latency_ns.max()));
  JsonObject cpu_json, cpu_txn_json, phases_json;
  for (const cluster::NodeInfo& n : topo->nodes()) {
    auto a = status0.find(n.name);
    auto b = status1.find(n.name);
    if (a == status0.end() || b == status1.end()) {
      std::printf("  node %-8s   no status (down?)\n", n.name.c_str());
      continue;
    }
    const proto::NodeStatus& s = b->second;
    const double cpu_s = static_cast<double>(s.cpu_ns - a->second.cpu_ns) / 1e9;
    const double us_per_txn = w_committed > 0 ? cpu_s * 1e6 / static_cast<double>(has_txns ? t.committed : w_committed) : 0;
    cpu_json.Dbl(n.name, cpu_s);
    cpu_txn_json.Dbl(n.name, us_per_txn);
    const proto::PhaseMeans& ph = s.phases;
    JsonObject pj;
    pj.Dbl("plan_ms", ph.plan_ms);
    pj.Dbl("deliver_ms", ph.deliver_ms);
    pj.Dbl("exec_ms", ph.exec_ms);
    pj.Dbl("repl_ms", ph.repl_ms);
    pj.Dbl("repl_wait_ms", ph.repl_wait_ms);
    pj.Dbl("commit_ms", ph.commit_ms);
    phases_json.Raw(n.name, pj.Done());
    std::printf("  node %-8s   %-8s batches %" PRIu64 "  per batch ms: plan %.3f deliver %.3f exec %.3f repl %.3f "
                "repl-wait %.3f commit %.3f  cpu %.2f s (%.3f us/txn)\n",
                n.name.c_str(), s.role.c_str(), s.committed_batches, ph.plan_ms, ph.deliver_ms, ph.exec_ms, ph.repl_ms,
                ph.repl_wait_ms, ph.commit_ms, cpu_s, us_per_txn);
  }
  for (const auto& f : leader_status.followers) {
    std::printf("  follower %-6s lag %" PRIu64 " batches, %" PRIu64 " digests checked, %" PRIu64 " mismatches, %s\n",
                f.node.c_str(), f.lag_batches, f.checked_batches, f.mismatches,
                f.agrees_at_last ? "agrees at the last batch" : "does NOT agree at the last batch");
  }
  std::printf("  replicas agree %s%s\n", replicas_agree ? "yes" : "NO",
              leader_status.followers.empty() ? " (no followers)" : "");
  std::printf("  verify         %s\n", verify_text.c_str());
  for (const auto& e : t.first_errors) std::printf("  error          %s\n", e.c_str());

  if (json) {
    JsonObject inputs;
    inputs.Str("config_file", cli.Get("config"));
    if (has_txns) inputs.Int("txns", total_txns); else inputs.Dbl("duration_s", duration_flag.value());
    inputs.Dbl("warmup_s", warmup_flag.value());
    inputs.Int("connections", conns);
    inputs.Int("outstanding", outstanding);
    inputs.Int("seed", seed);
    inputs.Str("workload_file", cli.Get("workload-file"));
    inputs.Str("target", target);
    std::string ov = "[";
    for (size_t i = 0; i < cli.overrides().size(); ++i) ov += (i ? "," : "") + JsonString(cli.overrides()[i]);
    inputs.Raw("overrides", ov + "]");
    JsonObject j;
    j.Str("workload", kind);
    j.Int("committed", w_committed);
    j.Int("aborted", w_aborted);
    j.Int("rejected", t.rejected);
    j.Int("failed", t.failed);
    j.Int("errors", t.errors);
    j.Int("committed_total", t.committed);
    j.Dbl("elapsed_s", window_s);
    j.Dbl("throughput_tps", tps);
    j.Dbl("ops_per_s", ops);
    j.Dbl("p50_ms", p50);
    j.Dbl("p95_ms", p95);
    j.Dbl("p99_ms", p99);
    j.Dbl("p999_ms", p999);
    j.Dbl("max_ms", Ms(t.latency_ns.max()));
    j.Bool("replicas_agree", replicas_agree);
    j.Int("digest_mismatches", leader_status.digest_mismatches);
    j.Int("follower_lag_batches", max_lag);
    j.Int("leader_batches", leader_status.committed_batches);
    j.Int("acked_batches", t.max_acked_batch);  // 1 + the highest batch any answer came from
    j.Str("leader_digest", Hex(leader_status.last_digest));
    j.Raw("server_cpu_s", cpu_json.Done());
    j.Raw("cpu_us_per_txn", cpu_txn_json.Done());
    j.Raw("phases", phases_json.Done());
    j.Str("verify", verify_text);
    j.Raw("inputs", inputs.Done());
    j.Raw("config", config.DumpJson());
    std::printf("%s\n", j.Done().c_str());
  }
  std::fflush(stdout);
  if (!drained) return Fail(kExitFailed, "some requests got no answer within 60 s");
  if (broken || t.errors > 0 || t.failed > 0 || t.rejected > 0) {
    return Fail(kExitFailed, std::to_string(t.failed) + " failed, " + std::to_string(t.rejected) + " rejected, " +
                                 std::to_string(t.errors) + " errors" + (t.first_errors.empty() ? "" : ": " + t.first_errors[0]));
  }
  if (!replicas_agree) return Fail(kExitFailed, "the replicas did not all agree with the leader within client.settle_timeout_ms");
  if (verify_failed) return Fail(kExitFailed, "verify " + verify_text);
  return kExitOk;
}

}  // namespace
}  // namespace qrstore::bench

int main(int argc, char** argv) { return qrstore::bench::Main(argc, argv); }
