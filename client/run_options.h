// What one qrstore-client run is asked to do: the cluster config (with the workload file's keys
// and the servers' table), the topology, and the flags, parsed and checked into one plain
// struct (RunOptions). Main thread only, before the run; errors are bad input (exit status 2),
// each with the message the user sees after "qrstore-client: ".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/config/topology.h"
#include "common/cli.h"
#include "common/config.h"
#include "common/status.h"
#include "workloads/workload.h"

namespace qrstore::client {

// Prints "qrstore-client: <msg>" on stderr; returns `code` (the exit status).
int Fail(int code, const std::string& msg);

struct RunOptions {
  std::string config_file;              // --config
  Config config;                        // with the workload file's keys, then the servers' table
  cluster::Topology topology;
  int connect_ms = 0;                   // client.connect_timeout_ms
  // Keys the user chose for this run (command line, workload file), by where they came from:
  // they must match what the servers loaded; the others follow the servers.
  std::map<std::string, std::string> chosen;
  std::string workload_file;            // --workload-file ("" without)
  std::optional<uint64_t> file_txns;    // its operationcount
  std::vector<std::string> overrides;   // --key=value
  bool has_node = false;                // --node: drive this node (redirected once), not the leader
  std::string node;                     // its name

  workloads::WorkloadOptions workload;  // the servers' partition function
  std::string kind;                     // "ycsb" | "transfer"
  uint64_t ops_per_txn = 0;
  bool has_txns = false;                // --txns (or the workload file's operationcount), else --duration-s
  uint64_t total_txns = 0;              // with has_txns
  double duration_s = 0;                // --duration-s
  double warmup_s = 0;                  // --warmup-s
  uint32_t conns = 0;                   // --connections
  uint64_t outstanding = 0;             // --outstanding: K
  uint32_t per_request = 0;             // client.txns_per_request, at most K
  uint64_t seed = 0;                    // --seed
  double target_tps = 0;                // --target-tps (0: not paced)
  std::string pacing;                   // ", paced at T txn/s" or ""
  bool verify = false, json = false;
  uint64_t verify_cap = 0;              // client.verify_max_txns
  // Txns to send over all connections: --txns, or with --verify client.verify_max_txns (a
  // duration run stops submitting there); 0: no limit.
  uint64_t budget = 0;
  uint32_t row_size = 1;                // partitions: connection c drives partition c mod row_size
  int64_t stall_ns = 0;                 // client.stall_timeout_ms
  int64_t failover_timeout_ns = 0;      // client.failover_timeout_ms
  int64_t silent_leader_ns = 0;         // client.silent_leader_ms, or about an election timeout
  int64_t progress_interval_ns = 0;     // client.progress_interval_ms
  int64_t settle_timeout_ns = 0;        // client.settle_timeout_ms
};

// Loads --config (with --key=value), the workload file and the topology: enough for --status.
Result<RunOptions> LoadRunConfig(const CommandLine& cli, const ConfigSchema& schema);
// The rest, for a run: the servers' table (asks them), the workload, every flag, checked.
Status ResolveRunOptions(const CommandLine& cli, RunOptions* o);

}  // namespace qrstore::client
