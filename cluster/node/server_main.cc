// qrstore-server: one node of a qrstore cluster (cluster/node/server.h). Started by
// scripts/cluster.sh, one process per node of the config.
//
// Output: logs on stderr; one ready line on stdout once the node serves ("qrstore-server ready:
// ..."); a stats line in the log every server.stats_interval_ms. SIGTERM or SIGINT: the clean
// stop of cluster/node/server.h, then exit 0 (1 if it could not finish cleanly or the node had
// failed). Exit 2: bad input (flags, config, unknown --node), reported before anything starts.
// Deposed (it led its group and lost it while alive: cluster/node/server_impl.h), it stops and
// executes itself again to rejoin as a follower (server.rejoin_when_deposed; never faster than
// once per server.rejoin_interval_ms); with that off it exits 3. Exit 1 by itself: the backend
// made it leader and it could not take over.
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

#include "cluster/config/cluster_config.h"
#include "cluster/config/topology.h"
#include "cluster/node/server.h"
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

// A count this process's earlier incarnations left in the environment (0: none).
uint32_t EnvCount(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return 0;
  char* end = nullptr;
  const unsigned long n = std::strtoul(v, &end, 10);
  return end != v && *end == '\0' && n < UINT32_MAX ? static_cast<uint32_t>(n) : 0;
}

// Executes this program again with the same arguments (the same pid and output files); returns
// only if that failed.
int ExecSelf(char** argv) {
  std::fflush(stdout);
  std::fflush(stderr);
  execv("/proc/self/exe", argv);
  return Fail(kExitFailed, std::string("could not execute itself again (execv /proc/self/exe): ") + std::strerror(errno));
}

// Rejoin environment: how many rejoins this node's process made so far, and when the last one
// started (CLOCK_MONOTONIC ns: the same clock across execv).
constexpr const char* kRejoinsEnv = "QRSTORE_REJOINS";
constexpr const char* kRejoinAtEnv = "QRSTORE_REJOIN_AT_NS";

// The main thread wakes this often: a node that must stop by itself (deposed) does so promptly.
constexpr int64_t kPollMs = 50;

// --get KEY: the effective value of one scalar key, as the config dump prints it.
int PrintKey(const ConfigSchema& schema, const Config& config, const std::string& key) {
  const ConfigKey* k = schema.Find(key);
  if (k == nullptr || k->type == ConfigType::kTable) {
    return Fail(kExitBadInput, "--get " + key + ": not a scalar config key (see qrstore-server --help)");
  }
  std::string dump = config.Dump();
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

// Serves until SIGTERM/SIGINT, or until the server must stop by itself (deposed, failed,
// restarting): its reason (ok after a signal). Stats every stats_ms (0: none).
Status Serve(Server* server, int64_t stats_ms, const sigset_t& signals, bool* deposed) {
  auto log = Logger("server");
  int64_t next_stats = stats_ms > 0 ? NowNanos() + stats_ms * 1'000'000 : INT64_MAX;
  Status self_stop;
  for (;;) {
    timespec wait{};
    wait.tv_nsec = kPollMs * 1'000'000;
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGTERM || sig == SIGINT) {
      log->info("{}: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      return Status::Ok();
    }
    if (self_stop = server->fail_stop(deposed); !self_stop.ok()) {
      log->error("stopping by itself: {}", self_stop.message());
      return self_stop;
    }
    if (NowNanos() >= next_stats) {
      log->info("{}", server->StatsLine());
      next_stats = NowNanos() + stats_ms * 1'000'000;
    }
  }
}

// The node fetched a peer's checkpoint (its group could not catch it up from the log): it
// starts again, as the same process (pid, arguments, output), and loads it. Bounded: a node that
// keeps needing transfers without ever catching up stops instead.
int RestartToLoadCheckpoint(char** argv, const Status& why) {
  auto log = Logger("server");
  constexpr int kMaxRestarts = 20;
  const char* env = std::getenv("QRSTORE_TRANSFER_RESTARTS");
  const int restarts = env != nullptr ? std::atoi(env) : 0;
  if (restarts >= kMaxRestarts) {
    return Fail(kExitFailed, "gave up after " + std::to_string(restarts) +
                                 " restarts to load fetched checkpoints (the node never caught up); start it again "
                                 "by hand: " + why.message());
  }
  setenv("QRSTORE_TRANSFER_RESTARTS", std::to_string(restarts + 1).c_str(), 1);
  log->warn("restarting ({} of at most {}): {}", restarts + 1, kMaxRestarts, why.message());
  log->flush();
  return ExecSelf(argv);
}

// A deposed leader rejoins: its table may hold speculative batches no one else executed, so it
// went with the server. The next process starts as a follower from the newest checkpoint
// (committed batches only) or the initial table, and catches up from the group's log. Not sooner
// than interval_ms after the last rejoin (a signal meanwhile stops it instead).
int Rejoin(char** argv, int64_t interval_ms, const sigset_t& signals, const Status& why) {
  auto log = Logger("server");
  const int64_t interval_ns = interval_ms * 1'000'000;
  const char* last_env = std::getenv(kRejoinAtEnv);
  const int64_t last = last_env != nullptr ? std::strtoll(last_env, nullptr, 10) : 0;
  const int64_t at = last > 0 ? last + interval_ns : 0;
  if (NowNanos() < at) {
    log->warn("deposed again {} ms after its last rejoin: waiting {} ms before it rejoins (server.rejoin_interval_ms)",
              (NowNanos() - last) / 1'000'000, (at - NowNanos()) / 1'000'000);
  }
  while (NowNanos() < at) {
    const int64_t left = std::min<int64_t>(at - NowNanos(), kPollMs * 1'000'000);
    timespec wait{};
    wait.tv_sec = left / 1'000'000'000;
    wait.tv_nsec = left % 1'000'000'000;
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGTERM || sig == SIGINT) {
      return Fail(kExitDeposed, "told to stop while it waited to rejoin: " + why.message());
    }
  }
  const uint32_t rejoins = EnvCount(kRejoinsEnv) + 1;
  setenv(kRejoinsEnv, std::to_string(rejoins).c_str(), 1);
  setenv(kRejoinAtEnv, std::to_string(NowNanos()).c_str(), 1);
  // A rejoin starts the count of checkpoint transfers anew.
  unsetenv("QRSTORE_TRANSFER_RESTARTS");
  log->warn("rejoining (rejoin {} of this process): {}", rejoins, why.message());
  log->flush();
  return ExecSelf(argv);
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

  if (cli.Has("get")) return PrintKey(schema, config.value(), cli.Get("get"));
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
  // page zeroing on every batch, a visible share of a leader's CPU); keep them in the heap and reuse it.
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
  ServerLaunch launch;
  launch.rejoins = EnvCount(kRejoinsEnv);
  if (launch.rejoins > 0) {
    log->warn("rejoining its group as a follower (rejoin {} of this process): it was deposed; its table was dropped",
              launch.rejoins);
  }
  auto server = Server::Create(config.value(), node, launch);
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

  bool deposed = false;
  const Status self_stop = Serve(server.value().get(), config->GetInt("server.stats_interval_ms"), signals, &deposed);
  const bool restart = server.value()->restart_requested();
  const Status failed_before = server.value()->health();
  const Status stop = server.value()->Shutdown();
  log->info("{}", server.value()->StatsLine());
  if (restart) {
    server.value().reset();  // every socket and file of this run closes with the server first
    return RestartToLoadCheckpoint(argv, self_stop);
  }
  if (!self_stop.ok() && deposed && config->GetBool("server.rejoin_when_deposed")) {
    server.value().reset();  // its table may hold speculative batches: dropped with it
    return Rejoin(argv, config->GetInt("server.rejoin_interval_ms"), signals, self_stop);
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
