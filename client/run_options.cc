// RunOptions (client/run_options.h): the config, the workload file, the topology and the flags
// of one qrstore-client run, checked in the order the user reads about them.
#include "client/run_options.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "client/cluster_view.h"
#include "client/load.h"
#include "cluster/config/cluster_config.h"
#include "common/logging.h"
#include "common/report.h"
#include "workloads/ycsb_properties.h"

namespace qrstore::client {

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "qrstore-client: %s\n", msg.c_str());
  return code;
}

namespace {

// --workload-file: its keys over the config's (each must match the servers' later), and its
// operationcount.
Status ApplyWorkloadFile(const CommandLine& cli, RunOptions* o) {
  auto props = workloads::LoadYcsbProperties(o->workload_file);
  if (!props.ok()) return props.status();
  if (o->config.GetString("workload.kind") != "ycsb") {
    return Status::InvalidArgument("--workload-file is a YCSB workload but the cluster runs workload.kind=" +
                                   o->config.GetString("workload.kind"));
  }
  auto log = Logger("client");
  for (const auto& w : props->warnings) log->warn("{}", w);
  for (const auto& ov : props->overrides) o->chosen[ov.substr(0, ov.find('='))] = o->workload_file;
  auto with = o->config.WithOverrides(props->overrides);
  if (!with.ok()) return Status::InvalidArgument(o->workload_file + ": " + with.status().message());
  o->config = std::move(with).value();
  o->file_txns = props->operationcount;
  if (o->file_txns && *o->file_txns == 0 && !cli.Has("txns") && !cli.Has("duration-s")) {
    return Status::InvalidArgument(o->workload_file + ": operationcount=0: nothing to run");
  }
  return Status::Ok();
}

// The flags of the run's size and shape, each within its bounds.
Status ParseRunFlags(const CommandLine& cli, RunOptions* o) {
  const Config& config = o->config;
  if (cli.Has("txns") && cli.Has("duration-s")) {
    return Status::InvalidArgument("give either --txns or --duration-s, not both");
  }
  const bool has_txns = cli.Has("txns") || (!cli.Has("duration-s") && o->file_txns.has_value());
  if (!has_txns && !cli.Has("duration-s")) {
    return Status::InvalidArgument("missing --txns N or --duration-s S (see qrstore-client --help)");
  }
  auto txns_flag = cli.GetInt("txns", static_cast<int64_t>(o->file_txns.value_or(0)));
  auto duration_flag = cli.GetDouble("duration-s", 0);
  auto warmup_flag = cli.GetDouble("warmup-s", 0);
  auto conns_flag = cli.GetInt("connections", config.GetInt("client.connections"));
  auto outstanding_flag = cli.GetInt("outstanding", config.GetInt("client.outstanding"));
  auto seed_flag = cli.GetInt("seed", 1);
  auto target_flag = cli.GetDouble("target-tps", 0);
  for (const Status* st : {&txns_flag.status(), &duration_flag.status(), &warmup_flag.status(), &conns_flag.status(),
                           &outstanding_flag.status(), &seed_flag.status(), &target_flag.status()}) {
    if (!st->ok()) return *st;
  }
  if (has_txns && txns_flag.value() < 1) return Status::InvalidArgument("flag --txns: must be >= 1");
  if (!has_txns && !(duration_flag.value() > 0 && duration_flag.value() <= 86400)) {
    return Status::InvalidArgument("flag --duration-s: must be in (0, 86400]");
  }
  if (!(warmup_flag.value() >= 0 && warmup_flag.value() <= 3600)) {
    return Status::InvalidArgument("flag --warmup-s: must be in [0, 3600]");
  }
  if (has_txns && cli.Has("warmup-s")) return Status::InvalidArgument("--warmup-s goes with --duration-s");
  if (conns_flag.value() < 1 || conns_flag.value() > 1024) {
    return Status::InvalidArgument("flag --connections: must be in [1, 1024]");
  }
  if (outstanding_flag.value() < 1 || outstanding_flag.value() > 10'000'000) {
    return Status::InvalidArgument("flag --outstanding: must be in [1, 10000000]");
  }
  if (seed_flag.value() < 0) return Status::InvalidArgument("flag --seed: must be >= 0");
  if (cli.Has("target-tps") && !(target_flag.value() >= 1 && target_flag.value() <= 1e9)) {
    return Status::InvalidArgument("flag --target-tps: must be in [1, 1000000000]");
  }
  o->has_txns = has_txns;
  o->duration_s = duration_flag.value();
  o->warmup_s = warmup_flag.value();
  o->target_tps = cli.Has("target-tps") ? target_flag.value() : 0;
  o->pacing = o->target_tps > 0 ? ", paced at " + Num(o->target_tps) + " txn/s" : "";
  o->total_txns = has_txns ? static_cast<uint64_t>(txns_flag.value()) : 0;
  o->conns = static_cast<uint32_t>(conns_flag.value());
  o->outstanding = static_cast<uint64_t>(outstanding_flag.value());
  o->seed = static_cast<uint64_t>(seed_flag.value());
  o->verify = cli.Has("verify");
  o->json = cli.Has("json");
  return Status::Ok();
}

// What the flags and the config ask must fit the client's and the servers' bounds.
Status CheckBounds(RunOptions* o) {
  const Config& config = o->config;
  // A request never carries more than K txns: at most K are in flight, whatever its size.
  o->per_request = static_cast<uint32_t>(
      std::min<uint64_t>(static_cast<uint64_t>(config.GetInt("client.txns_per_request")), o->outstanding));
  o->verify_cap = static_cast<uint64_t>(config.GetInt("client.verify_max_txns"));
  if (o->verify && o->has_txns && o->total_txns > o->verify_cap) {
    return Status::InvalidArgument("--verify with --txns " + std::to_string(o->total_txns) +
                                   " exceeds client.verify_max_txns (" + std::to_string(o->verify_cap) +
                                   "): raise it (40 bytes per txn) or run fewer");
  }
  const uint64_t max_message = static_cast<uint64_t>(config.GetInt("server.max_message_bytes"));
  if (MaxRequestBytes(o->workload, o->per_request) > max_message) {
    return Status::InvalidArgument("a request of " + std::to_string(o->per_request) + " txns can take " +
                                   std::to_string(MaxRequestBytes(o->workload, o->per_request)) +
                                   " bytes, more than server.max_message_bytes (" + std::to_string(max_message) +
                                   "): lower client.txns_per_request");
  }
  // A partitioned row: connection c drives the leader of partition c mod P, with txns whose
  // first key is on that partition (the key routes the txn to its home).
  o->row_size = o->topology.partitions();
  if (o->row_size > 1 && o->has_node) {
    return Status::InvalidArgument("--node: a row's connections go to all its leaders");
  }
  if (o->has_node) {
    auto n = o->topology.Find(o->node);
    if (!n.ok()) return Status::InvalidArgument("flag --node: " + n.status().message());
  }
  return Status::Ok();
}

// The timeouts of the run, from the config.
void SetTimeouts(RunOptions* o) {
  const Config& config = o->config;
  o->stall_ns = config.GetInt("client.stall_timeout_ms") * 1'000'000;
  o->failover_timeout_ns = config.GetInt("client.failover_timeout_ms") * 1'000'000;
  o->progress_interval_ns = config.GetInt("client.progress_interval_ms") * 1'000'000;
  o->settle_timeout_ns = config.GetInt("client.settle_timeout_ms") * 1'000'000;
  // No reply this long with txns in flight: ask who leads (then every half of it). About an
  // election timeout: a leader silent for that long has lost its group if it is paused or cut off.
  o->silent_leader_ns = config.GetInt("client.silent_leader_ms") * 1'000'000;
  if (o->silent_leader_ns == 0) {
    const int64_t election_ms = config.GetString("replication.backend") == "raft"
                                    ? config.GetInt("replication.raft.election_ticks") * config.GetInt("replication.raft.tick_ms")
                                    : 1000;
    o->silent_leader_ns = std::clamp<int64_t>(election_ms, 100, 1000) * 1'000'000;
  }
}

}  // namespace

Result<RunOptions> LoadRunConfig(const CommandLine& cli, const ConfigSchema& schema) {
  if (!cli.Has("config")) return Status::InvalidArgument("missing --config FILE (see qrstore-client --help)");
  RunOptions o;
  o.config_file = cli.Get("config");
  auto loaded = Config::Load(schema, o.config_file, cli.overrides());
  if (!loaded.ok()) return loaded.status();
  o.config = std::move(loaded).value();
  o.overrides = cli.overrides();
  o.has_node = cli.Has("node");
  o.node = cli.Get("node");
  for (const std::string& ov : cli.overrides()) o.chosen[ov.substr(0, ov.find('='))] = "command line";
  o.workload_file = cli.Get("workload-file");
  if (cli.Has("workload-file")) {
    if (Status st = ApplyWorkloadFile(cli, &o); !st.ok()) return st;
  }
  auto topo = cluster::Topology::FromConfig(o.config);
  if (!topo.ok()) return Status::InvalidArgument(o.config_file + ": " + topo.status().message());
  o.topology = std::move(topo).value();
  o.connect_ms = static_cast<int>(o.config.GetInt("client.connect_timeout_ms"));
  return o;
}

Status ResolveRunOptions(const CommandLine& cli, RunOptions* o) {
  if (Status st = FollowTheServers(o->topology, o->connect_ms, o->chosen, &o->config); !st.ok()) return st;
  // The servers' partition function (cluster/config/topology.h): with one partition, engine.partitions,
  // as qrstore-bench builds it, so connection 0 generates the bench's sequence.
  auto partition_map = cluster::PartitionMapFor(o->config, o->topology);
  if (!partition_map.ok()) return partition_map.status();
  auto options_or = workloads::OptionsFromConfig(o->config, partition_map.value());
  if (!options_or.ok()) return options_or.status();
  o->workload = std::move(options_or).value();
  if (Status st = ParseRunFlags(cli, o); !st.ok()) return st;
  if (Status st = CheckBounds(o); !st.ok()) return st;
  SetTimeouts(o);
  o->budget = o->has_txns ? o->total_txns : (o->verify ? o->verify_cap : 0);
  o->kind = o->workload.kind == workloads::WorkloadKind::kTransfer ? "transfer" : "ycsb";
  o->ops_per_txn = o->workload.kind == workloads::WorkloadKind::kTransfer ? 2 : o->workload.ycsb.ops_per_txn;
  return Status::Ok();
}

}  // namespace qrstore::client
