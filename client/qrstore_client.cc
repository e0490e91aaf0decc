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
//
// The pieces: client/run_options.h (the config and the flags, checked), client/run.h (the run:
// connecting, the timeline with its failover following, the drain, the replica check),
// client/report.h (--verify's final check, the summary). This file: the flags and their help,
// and the order of the steps.
#include <optional>
#include <string>
#include <utility>

#include "client/cluster_view.h"
#include "client/report.h"
#include "client/run.h"
#include "client/run_options.h"
#include "cluster/config/cluster_config.h"
#include "common/cli.h"
#include "common/config.h"
#include "common/exit_codes.h"

namespace qrstore::client {
namespace {

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
  auto loaded = LoadRunConfig(cli, schema);
  if (!loaded.ok()) return Fail(kExitBadInput, loaded.status().message());
  RunOptions options = std::move(loaded).value();
  if (cli.Has("status")) return StatusMain(options.topology, options.connect_ms);
  if (Status st = ResolveRunOptions(cli, &options); !st.ok()) return Fail(kExitBadInput, st.message());

  Run run(options);
  if (std::optional<int> code = run.Connect()) return *code;
  run.Drive();
  run.Drain();
  run.CheckReplicas();
  const VerifyResult verify = VerifyRun(options, run);
  return Report(options, run, verify);
}

}  // namespace
}  // namespace qrstore::client

int main(int argc, char** argv) { return qrstore::client::Main(argc, argv); }
