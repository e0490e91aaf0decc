// qrstore-server: one node of a qrstore cluster (cluster/server.h). Started by
// scripts/cluster.sh, one process per node of the config.
//
// Output: logs on stderr; one ready line on stdout once the node serves ("qrstore-server ready:
// ..."); a stats line in the log every server.stats_interval_ms. SIGTERM or SIGINT: the clean
// stop of cluster/server.h, then exit 0 (1 if it could not finish cleanly or the node had
// failed). Exit 2: bad input (flags, config, unknown --node), reported before anything starts.
// Exit 3 (by itself): it led its group and was deposed (cluster/server_impl.h); exit 1 by
// itself: the backend made it leader and it could not take over.
#include <malloc.h>

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "cluster/cluster_config.h"
#include "cluster/server.h"
#include "cluster/topology.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/logging.h"

namespace qrstore::cluster {
namespace {

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "qrstore-server: %s\n", msg.c_str());
  return code;
}

int Main(int argc, char** argv) {
  CommandLine cli("qrstore-server", "--config FILE --node NAME [--key=value ...]",
                  "Runs one node of a qrstore cluster: the node called NAME in the config's cluster.nodes.\n"
                  "The leader of a partition takes transactions from clients, plans them into execution queues,\n"
                  "replicates them (replication.backend: none | raft | zookeeper) and executes them; the other\n"
                  "members follow: they replay the leader's queues and report their state digest after every\n"
                  "batch. Row 0 leads a fresh cluster; after that the backend elects (raft), and a follower it\n"
                  "makes leader applies every replicated batch and plans from the next one. Prints one ready line\n"
                  "on stdout once serving. SIGTERM stops it cleanly (in-flight batches finish, clients are\n"
                  "answered; with server.dump_state_dir the table is written to <dir>/<node>.tsv). Usually\n"
                  "started by scripts/cluster.sh.\n"
                  "Exit status: 0 clean stop, 1 failed, 2 bad input, 3 deposed (it led, another member leads now;\n"
                  "it stops by itself and acknowledges nothing after losing leadership).");
  cli.AddValue("config", "FILE", "the cluster config (e.g. configs/cluster-raft.yaml)");
  cli.AddValue("node", "NAME", "which node of cluster.nodes this process is");
  cli.AddSwitch("list-nodes", "print the validated node list (name host client_port peer_port partition row) and exit");
  cli.AddValue("get", "KEY", "print the effective value of one config key (after overrides) and exit");
  cli.AddValue("log-level", "LEVEL", "trace|debug|info|warn|error|off (default info)");

  ConfigSchema schema;
  AddClusterConfigKeys(&schema);
  if (auto code = cli.ParseStandard(argc, argv, &schema)) return *code;
  if (!cli.Has("config")) return Fail(kExitBadInput, "missing --config FILE (see qrstore-server --help)");
  auto config = Config::Load(schema, cli.Get("config"), cli.overrides());
  if (!config.ok()) return Fail(kExitBadInput, config.status().message());

  if (cli.Has("get")) {
    const std::string key = cli.Get("get");
    const ConfigKey* k = schema.Find(key);
    if (k == nullptr || k->type == ConfigType::kTable) {
      return Fail(kExitBadInput, "--get " + key + ": not a scalar config key (see qrstore-server --help)");
    }
    std::string dump = config->Dump();
    const std::string prefix = key + ": ";
    for (size_t pos = 0; pos < dump.size();) {
      size_t nl = dump.find('\n', pos);
      std::string line = dump.substr(pos, nl - pos);
      if (line.rfind(prefix, 0) == 0) {
        std::printf("%s\n", line.substr(prefix.size()).c_str());
        return kExitOk;
      }
      pos = nl == std::string::npos ? dump.size() : nl + 1;
    }
    return Fail(kExitFailed, "--get " + key + ": no value");
  }
  auto topo = Topology::FromConfig(config.value());
  if (!topo.ok()) return Fail(kExitBadInput, cli.Get("config") + ": " + topo.status().message());
  if (cli.Has("list-nodes")) {
    for (const NodeInfo& n : topo->nodes()) {
      std::printf("%s %s %u %u %u %u\n", n.name.c_str(), n.host.c_str(), n.client_port, n.peer_port, n.partition, n.row);
    }
    return kExitOk;
  }
  if (!cli.Has("node")) return Fail(kExitBadInput, "missing --node NAME (see qrstore-server --help)");
  const std::string node = cli.Get("node");

  // Planned slices, replication frames and replies are buffers of a few hundred KB to a few MB,
  // allocated and freed every batch. glibc would serve each from a fresh mmap (page faults and
  // page zeroing on every batch: ~9% of a leader's CPU); keep them in the heap and reuse it.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);

  // Signals are taken by sigtimedwait below: block them before any thread starts, so every
  // thread inherits the mask. Writes to closed sockets must not kill the process.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto log = Logger("server");
  log->info("node {} effective config from {}:\n{}", node, cli.Get("config"), config->Dump());
  auto server = Server::Create(config.value(), node);
  if (!server.ok()) {
    const bool bad_input = server.status().code() == StatusCode::kInvalidArgument ||
                           server.status().code() == StatusCode::kNotFound;
    return Fail(bad_input ? kExitBadInput : kExitFailed, cli.Get("config") + ": " + server.status().message());
  }
  if (Status st = server.value()->Start(); !st.ok()) {
    return Fail(st.code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailed, st.message());
  }
  std::printf("%s\n", server.value()->ReadyLine().c_str());
  std::fflush(stdout);

  const int64_t stats_ms = config->GetInt("server.stats_interval_ms");
  // Wakes every 50 ms: a node that must stop by itself (deposed) does so promptly.
  constexpr int64_t kPollMs = 50;
  int64_t next_stats = stats_ms > 0 ? NowNanos() + stats_ms * 1'000'000 : INT64_MAX;
  bool deposed = false;
  Status self_stop;
  for (;;) {
    timespec wait{};
    wait.tv_nsec = kPollMs * 1'000'000;
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGTERM || sig == SIGINT) {
      log->info("{}: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      break;
    }
    if (self_stop = server.value()->fail_stop(&deposed); !self_stop.ok()) {
      log->error("stopping by itself: {}", self_stop.message());
      break;
    }
    if (NowNanos() >= next_stats) {
      log->info("{}", server.value()->StatsLine());
      next_stats = NowNanos() + stats_ms * 1'000'000;
    }
  }
  const bool restart = server.value()->restart_requested();
  const Status failed_before = server.value()->health();
  const Status stop = server.value()->Shutdown();
  log->info("{}", server.value()->StatsLine());
  if (restart) {
    // The node fetched a peer's checkpoint (its group could not catch it up from the log): it
    // starts again, as the same process (pid, arguments, output), and loads it. Every socket
    // and file of this run closes with the server first. Bounded: a node that keeps needing
    // transfers without ever catching up stops instead.
    constexpr int kMaxRestarts = 20;
    const char* env = std::getenv("QRSTORE_TRANSFER_RESTARTS");
    const int restarts = env != nullptr ? std::atoi(env) : 0;
    if (restarts >= kMaxRestarts) {
      return Fail(kExitFailed, "gave up after " + std::to_string(restarts) +
                                   " restarts to load fetched checkpoints (the node never caught up); start it again "
                                   "by hand: " + self_stop.message());
    }
    server.value().reset();
    setenv("QRSTORE_TRANSFER_RESTARTS", std::to_string(restarts + 1).c_str(), 1);
    log->warn("restarting ({} of at most {}): {}", restarts + 1, kMaxRestarts, self_stop.message());
    log->flush();
    std::fflush(stdout);
    std::fflush(stderr);
    execv("/proc/self/exe", argv);
    return Fail(kExitFailed, std::string("could not restart (execv /proc/self/exe): ") + std::strerror(errno));
  }
  if (!self_stop.ok()) return Fail(deposed ? kExitDeposed : kExitFailed, self_stop.message());
  if (!failed_before.ok()) return Fail(kExitFailed, "stopped after a failure: " + failed_before.message());
  if (!stop.ok()) return Fail(kExitFailed, "unclean stop: " + stop.message());
  log->info("stopped cleanly");
  return kExitOk;
}

}  // namespace
}  // namespace qrstore::cluster

int main(int argc, char** argv) { return qrstore::cluster::Main(argc, argv); }
