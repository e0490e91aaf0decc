// qrstore-repl-bench: measures one replication backend, as the paper's figure 4 does:
// ReplicateData-to-callback latency (p50, p99) and throughput (batches/s, MB/s) with K
// batches in flight, on 127.0.0.1.
//
// What it starts: for raft, replicas-1 qrstore-repl-node follower processes (ports chosen free
// at run time, member directories in a temporary directory) while the bench itself is member 0,
// the preferred leader, in-process; for zookeeper, replicas-1 follower processes reading from
// the server given by --zk-hosts or $QRSTORE_ZK_HOSTS (the bench is the leader); for none,
// replicas-1 followers in-process. Followers check every payload byte against the generator
// (replication/tools/payload.h); the bench waits for them to deliver every acknowledged batch,
// then stops them and reports what they verified. Every process it started is stopped at the
// end, on error and on SIGINT/SIGTERM (and dies with it if it is killed: PR_SET_PDEATHSIG).
//
// Output: a progress line per second on stderr, a human summary on stdout and, with --json,
// one JSON object as the last stdout line.
#include <signal.h>

#include <algorithm>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/exit_codes.h"
#include "common/logging.h"
#include "replication/factory.h"
#include "replication/tools/member.h"
#include "replication/tools/process.h"

namespace {

using namespace qrstore;
using namespace qrstore::replication;
using namespace qrstore::replication::tools;

volatile std::sig_atomic_t g_stop_signal = 0;
void OnSignal(int sig) { g_stop_signal = sig; }

int Fail(const std::string& msg, int code = kExitFailed) {
  std::fprintf(stderr, "qrstore-repl-bench: %s\n", msg.c_str());
  return code;
}
// Bad flags, keys or values: the exit status every qrstore program gives bad input.
int FailInput(const std::string& msg) { return Fail(msg, kExitBadInput); }

double Percentile(const std::vector<int64_t>& sorted_ns, double q) {
  if (sorted_ns.empty()) return 0;
  size_t i = static_cast<size_t>(q * static_cast<double>(sorted_ns.size() - 1) + 0.5);
  return static_cast<double>(sorted_ns[std::min(i, sorted_ns.size() - 1)]) / 1e6;
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out.push_back(c);
  }
  return out;
}

// One follower of the run: an in-process receiver (none) or a qrstore-repl-node process.
struct Follower {
  std::string name;
  std::unique_ptr<Replicator> replicator;  // in-process only
  std::unique_ptr<StreamReceiver> receiver;
  Subprocess process;
  std::string deliveries, summary, log;
  uint64_t delivered = 0;
  uint64_t errors = 0;
  int exit_code = 0;
  std::string problem;

  uint64_t Delivered() const {
    if (receiver) return receiver->delivered();
    return ReadCompleteLines(deliveries).size();
  }
};

struct Settings {
  std::string backend;
  int64_t replicas = 3;
  int64_t payload_bytes = 1024;
  int64_t inflight = 100;
  double duration_s = 3;
  double warmup_s = 0.5;
  std::string compression = "none";
  std::string zk_hosts;
  std::string node_path;
  bool json = false;
  bool keep_dir = false;
  std::vector<std::string> user_overrides;
};

class Bench {
 public:
  explicit Bench(Settings s) : s_(std::move(s)) {}
  ~Bench() { Cleanup(); }
  int Run();

 private:
  Status Prepare();
  Status StartFollowers(const std::vector<std::string>& common, const std::vector<std::string>& per_member_extra);
  Result<Config> LoadConfig(const std::vector<std::string>& overrides);
  void StopFollowers(uint64_t expected_per_stream);
  void Cleanup();

  Settings s_;
  ConfigSchema schema_;
  std::string dir_;
  std::vector<std::string> self_overrides_;
  std::vector<Follower> followers_;
  std::unique_ptr<Replicator> leader_;
  uint32_t groups_ = 1, planners_ = 1;
};

Result<Config> Bench::LoadConfig(const std::vector<std::string>& overrides) {
  return Config::Load(schema_, "", overrides);
}

Status Bench::StartFollowers(const std::vector<std::string>& common, const std::vector<std::string>& per_member_extra) {
  for (int64_t i = 1; i < s_.replicas; ++i) {
    Follower f;
    f.name = "member-" + std::to_string(i);
    f.deliveries = dir_ + "/" + f.name + ".deliveries";
    f.summary = dir_ + "/" + f.name + ".summary";
    f.log = dir_ + "/" + f.name + ".log";
    std::vector<std::string> argv{s_.node_path, "--deliveries", f.deliveries, "--summary", f.summary, "--name", f.name,
                                  "--max-runtime-s", std::to_string(static_cast<int64_t>(s_.duration_s) + 120),
                                  "--log-level", "warn"};
    for (const auto& o : common) argv.push_back("--" + o);
    for (const auto& o : per_member_extra) {
      std::string x = o;
      // "{i}" in an extra override is the member index.
      for (size_t pos; (pos = x.find("{i}")) != std::string::npos;) x.replace(pos, 3, std::to_string(i));
      argv.push_back("--" + x);
    }
    Result<Subprocess> p = Subprocess::Spawn(argv, f.log);
    if (!p.ok()) return p.status();
    f.process = std::move(p).value();
    followers_.push_back(std::move(f));
  }
  return Status::Ok();
}

Status Bench::Prepare() {
  AddConfigKeys(&schema_);
  Result<std::string> dir = MakeTempDir("qrstore-repl-bench-");
  if (!dir.ok()) return dir.status();
  dir_ = dir.value();
  std::vector<std::string> common{"replication.backend=" + s_.backend, "replication.compression=" + s_.compression};
  for (const auto& o : s_.user_overrides) common.push_back(o);
  // Validate the user's overrides once, up front, with a clear error.
  Result<Config> probe = LoadConfig(common);
  if (!probe.ok()) return probe.status();
  groups_ = static_cast<uint32_t>(probe->GetInt("replication.groups"));
  planners_ = static_cast<uint32_t>(probe->GetInt("replication.planners"));
  self_overrides_ = common;

  if (s_.backend == "none") {
    const std::string hub = "bench";
    self_overrides_.push_back("replication.none.hub=" + hub);
    for (int64_t i = 1; i < s_.replicas; ++i) {
      std::vector<std::string> o = common;
      o.push_back("replication.none.hub=" + hub);
      o.push_back("replication.role=follower");
      Result<Config> c = LoadConfig(o);
      if (!c.ok()) return c.status();
      Result<std::unique_ptr<Replicator>> r = CreateReplicator(c.value());
      if (!r.ok()) return r.status();
      Follower f;
      f.name = "member-" + std::to_string(i);
      f.replicator = std::move(r).value();
      QR_RETURN_IF_ERROR(f.replicator->Start());
      f.receiver = std::make_unique<StreamReceiver>(f.replicator.get(), groups_, planners_, f.name, nullptr);
      f.receiver->Start();
      followers_.push_back(std::move(f));
    }
    return Status::Ok();
  }
  if (s_.backend == "raft") {
    std::string members;
    for (int64_t i = 0; i < s_.replicas; ++i) {
      Result<uint16_t> port = FreeTcpPort();
      if (!port.ok()) return port.status();
      members += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(port.value());
    }
    common.push_back("replication.raft.members=" + members);
    common.push_back("replication.raft.preferred_leader=0");
    self_overrides_ = common;
    self_overrides_.push_back("replication.raft.node_id=0");
    self_overrides_.push_back("replication.raft.dir=" + dir_ + "/member-0");
    return StartFollowers(common, {"replication.raft.node_id={i}", "replication.raft.dir=" + dir_ + "/member-{i}"});
  }
  // zookeeper
  std::string hosts = s_.zk_hosts;
  if (hosts.empty()) {
    const char* env = std::getenv("QRSTORE_ZK_HOSTS");
    if (env != nullptr) hosts = env;
  }
  if (hosts.empty()) {
    return Status::InvalidArgument("zookeeper backend needs a server: --zk-hosts HOST:PORT or $QRSTORE_ZK_HOSTS "
                                   "(scripts/zk-server.sh start DIR prints one)");
  }
  const std::string root = "/qrstore-bench-" + std::to_string(::getpid()) + "-" + std::to_string(NowNanos() % 1000000007);
  common.push_back("replication.zookeeper.hosts=" + hosts);
  common.push_back("replication.zookeeper.root=" + root);
  common.push_back("replication.zookeeper.followers=" + std::to_string(s_.replicas - 1));
  self_overrides_ = common;
  self_overrides_.push_back("replication.role=leader");
  return StartFollowers(common, {"replication.role=follower", "replication.zookeeper.follower_id=member-{i}"});
}

void Bench::StopFollowers(uint64_t expected_total) {
  // Wait (bounded) until every follower delivered everything the leader had acknowledged.
  const int64_t deadline = NowMillis() + 20000;
  for (Follower& f : followers_) {
    while (f.Delivered() < expected_total && NowMillis() < deadline && g_stop_signal == 0) {
      if (f.process.running() && f.process.Wait(0).ok()) break;  // exited early
      if (f.receiver && f.receiver->errors() > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  for (Follower& f : followers_) {
    if (f.receiver) {
      f.replicator->Stop();
      f.receiver->Stop();
      f.delivered = f.receiver->delivered();
      f.errors = f.receiver->errors();
      if (f.errors > 0) f.problem = f.receiver->first_error();
      continue;
    }
    f.exit_code = f.process.Terminate(10000);
    f.delivered = ReadCompleteLines(f.deliveries).size();
    std::vector<std::string> summary = ReadCompleteLines(f.summary);
    unsigned long long d = 0, e = 0, a = 0, fl = 0;
    if (summary.empty() || std::sscanf(summary[0].c_str(), "delivered=%llu errors=%llu acked=%llu failed=%llu", &d, &e,
                                       &a, &fl) != 4) {
      f.problem = "no summary (exit code " + std::to_string(f.exit_code) + "); log tail:\n" + TailFile(f.log, 8);
      ++f.errors;
    } else {
      f.errors = e;
    }
    if (f.exit_code != 0) {
      ++f.errors;
      if (f.problem.empty()) f.problem = "exit code " + std::to_string(f.exit_code) + "; log tail:\n" + TailFile(f.log, 8);
    }
  }
}

void Bench::Cleanup() {
  if (leader_) leader_->Stop();
  for (Follower& f : followers_) {
    if (f.replicator) f.replicator->Stop();
    if (f.receiver) f.receiver->Stop();
    if (f.process.running()) f.process.Terminate(5000);
  }
  if (!dir_.empty() && !s_.keep_dir) RemoveTree(dir_);
  dir_.clear();
}

int Bench::Run() {
  auto log = Logger("repl-bench");
  if (Status st = Prepare(); !st.ok()) return Fail(st.ToString());
  Result<Config> config = LoadConfig(self_overrides_);
  if (!config.ok()) return Fail(config.status().ToString());
  log->info("effective config:\n{}", config->Dump());
  Result<std::unique_ptr<Replicator>> created = CreateReplicator(config.value());
  if (!created.ok()) return Fail(created.status().ToString());
  leader_ = std::move(created).value();
  if (Status st = leader_->Start(); !st.ok()) return Fail("start: " + st.ToString());

  // Wait (bounded) for leadership of every group: immediate for none/zookeeper, an election
  // (the bench is the preferred leader) for raft.
  const int64_t lead_deadline = NowMillis() + 15000;
  for (uint32_t g = 0; g < groups_; ++g) {
    while (!leader_->IsLeader(g)) {
      if (NowMillis() > lead_deadline || g_stop_signal != 0) {
        return Fail("this member did not become leader of group " + std::to_string(g) + " within 15 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  const int64_t start_ns = NowNanos();
  const int64_t measure_from_ns = start_ns + static_cast<int64_t>(s_.warmup_s * 1e9);
  const int64_t end_ns = measure_from_ns + static_cast<int64_t>(s_.duration_s * 1e9);
  std::vector<int64_t> latencies;
  latencies.reserve(1 << 16);
  constexpr size_t kMaxSamples = 20'000'000;  // bounded memory (~160 MB) for very long runs
  uint64_t window_acked = 0;
  uint64_t second_acked = 0;

  DriverOptions d;
  d.groups = groups_;
  d.planners = planners_;
  d.payload_bytes = static_cast<size_t>(s_.payload_bytes);
  d.inflight = static_cast<uint32_t>(s_.inflight);
  uint64_t retain = 0;
  if (s_.backend == "none" && !followers_.empty()) {
    retain = static_cast<uint64_t>(config->GetInt("replication.none.retain_batches"));
  }
  Driver* driver_ptr = nullptr;
  if (retain > 0) {
    // In-process none followers read from a bounded hub: hold the leader back so the slowest
    // follower stays within half the retention window.
    d.may_issue = [&, retain] {
      uint64_t slowest = UINT64_MAX;
      for (const Follower& f : followers_) slowest = std::min(slowest, f.receiver->delivered());
      return driver_ptr->acked() + driver_ptr->inflight() < slowest + retain / 2;
    };
  }
  Driver driver(leader_.get(), d, [&](const ReplicateMeta&, int64_t latency_ns) {
    const int64_t now = NowNanos();
    ++second_acked;
    if (now >= measure_from_ns && now < end_ns) {
      ++window_acked;
      if (latencies.size() < kMaxSamples) latencies.push_back(latency_ns);
    }
  });
  driver_ptr = &driver;

  int64_t next_progress_ns = start_ns + 1'000'000'000;
  while (g_stop_signal == 0 && NowNanos() < end_ns) {
    driver.Poll(20);
    const int64_t now = NowNanos();
    if (now >= next_progress_ns) {
      std::fprintf(stderr, "[%5.1fs] %s acked %" PRIu64 " batches/s (%.1f MB/s), in flight %" PRIu64 ", failed %" PRIu64 "%s\n",
                   static_cast<double>(now - start_ns) / 1e9, s_.backend.c_str(), second_acked,
                   static_cast<double>(second_acked) * static_cast<double>(s_.payload_bytes) / 1e6, driver.inflight(),
                   driver.failed(), now < measure_from_ns ? " (warm-up)" : "");
      second_acked = 0;
      next_progress_ns += 1'000'000'000;
    }
  }
  // The measured window actually covered (shorter when interrupted).
  const int64_t loop_end_ns = std::min(NowNanos(), end_ns);
  const double window_s = std::max(0.0, static_cast<double>(loop_end_ns - measure_from_ns) / 1e9);
  driver.StopIssuing();
  const int64_t drain_deadline = NowMillis() + 15000;
  while (driver.inflight() > 0 && NowMillis() < drain_deadline) driver.Poll(20);
  const bool interrupted = g_stop_signal != 0;
  const uint64_t total_acked = driver.acked();
  const uint64_t streams = static_cast<uint64_t>(groups_) * planners_;
  // Followers must deliver every acknowledged batch (totals over all streams).
  StopFollowers(total_acked);
  leader_->Stop();

  std::sort(latencies.begin(), latencies.end());
  const double batches_per_s = window_s > 0 ? static_cast<double>(window_acked) / window_s : 0;
  const double mb_per_s = batches_per_s * static_cast<double>(s_.payload_bytes) / 1e6;
  uint64_t min_delivered = followers_.empty() ? total_acked : UINT64_MAX;
  uint64_t follower_errors = 0;
  std::string problems;
  for (const Follower& f : followers_) {
    min_delivered = std::min(min_delivered, f.delivered);
    follower_errors += f.errors;
    if (!f.problem.empty()) problems += "  " + f.name + ": " + f.problem + "\n";
  }
  const bool complete = min_delivered >= total_acked;
  const bool ok = !interrupted && follower_errors == 0 && complete && driver.failed() == 0 && window_acked > 0;

  std::printf("qrstore-repl-bench: backend=%s replicas=%lld payload=%lld B inflight=%lld compression=%s\n",
              s_.backend.c_str(), static_cast<long long>(s_.replicas), static_cast<long long>(s_.payload_bytes),
              static_cast<long long>(s_.inflight), s_.compression.c_str());
  std::printf("  measured %.1f s after %.1f s warm-up: %" PRIu64 " batches acknowledged\n", window_s, s_.warmup_s,
              window_acked);
  std::printf("  throughput   %.0f batches/s, %.2f MB/s\n", batches_per_s, mb_per_s);
  std::printf("  latency      p50 %.3f ms, p99 %.3f ms, max %.3f ms (ReplicateData to callback)\n",
              Percentile(latencies, 0.5), Percentile(latencies, 0.99), Percentile(latencies, 1.0));
  if (followers_.empty()) {
    std::printf("  followers    none (--replicas 1: leader only)\n");
  } else {
    std::printf("  followers    %zu, each delivered >= %" PRIu64 " of %" PRIu64 " acknowledged batches (%s), errors %" PRIu64
                "\n",
                followers_.size(), min_delivered, total_acked, complete ? "all verified byte for byte" : "INCOMPLETE",
                follower_errors);
  }
  if (driver.failed() > 0) std::printf("  failed ReplicateData: %" PRIu64 " (last: %s)\n", driver.failed(), driver.last_failure().c_str());
  if (!problems.empty()) std::printf("  problems:\n%s", problems.c_str());
  if (interrupted) std::printf("  interrupted by signal %d\n", static_cast<int>(g_stop_signal));
  std::printf("  result       %s\n", ok ? "OK" : "FAILED");
  if (s_.json) {
    std::printf(
        "{\"backend\":\"%s\",\"replicas\":%lld,\"payload_bytes\":%lld,\"inflight\":%lld,\"compression\":\"%s\","
        "\"duration_s\":%.3f,\"warmup_s\":%.3f,\"streams\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"batches_per_s\":%.1f,"
        "\"mb_per_s\":%.3f,\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"max_ms\":%.4f,\"acked_total\":%" PRIu64
        ",\"failed\":%" PRIu64 ",\"followers\":%zu,\"follower_min_delivered\":%" PRIu64 ",\"follower_errors\":%" PRIu64
        ",\"followers_complete\":%s,\"ok\":%s,\"error\":\"%s\",\"config\":%s}\n",
        s_.backend.c_str(), static_cast<long long>(s_.replicas), static_cast<long long>(s_.payload_bytes),
        static_cast<long long>(s_.inflight), s_.compression.c_str(), window_s, s_.warmup_s, streams, window_acked,
        batches_per_s, mb_per_s, Percentile(latencies, 0.5), Percentile(latencies, 0.99), Percentile(latencies, 1.0),
        total_acked, driver.failed(), followers_.size(), min_delivered, follower_errors, complete ? "true" : "false",
        ok ? "true" : "false", JsonEscape(problems).c_str(), config->DumpJson().c_str());
  }
  std::fflush(stdout);
  return ok ? kExitOk : kExitFailed;
}

int Main(int argc, char** argv) {
  CommandLine cl("qrstore-repl-bench",
                 "--backend raft|zookeeper|none [--replicas N] [--payload-bytes B] [--inflight K] [--duration-s S] "
                 "[--compression snappy] [--json] [--zk-hosts H] [--key=value ...]",
                 "Measures ReplicateData-to-callback latency and throughput of one replication backend on\n"
                 "127.0.0.1, starting the follower members it needs; followers verify every byte.\n"
                 "Exit status: 0 OK, 1 start failure or a failed measurement or verification, 2 bad input.");
  cl.AddValue("backend", "NAME", "raft | zookeeper | none (required)");
  cl.AddValue("replicas", "N", "group members including the leader (default 3; 1 = leader only)");
  cl.AddValue("payload-bytes", "B", "payload size per batch (default 1024)");
  cl.AddValue("inflight", "K", "batches in flight (default 100)");
  cl.AddValue("duration-s", "S", "measured window in seconds (default 3)");
  cl.AddValue("warmup-s", "S", "warm-up before the window (default 0.5)");
  cl.AddValue("compression", "C", "none | snappy (default none)");
  cl.AddValue("zk-hosts", "HOSTS", "ZooKeeper connect string (default $QRSTORE_ZK_HOSTS)");
  cl.AddValue("node", "PATH", "qrstore-repl-node program (default: next to this program)");
  cl.AddValue("log-level", "LEVEL", "trace|debug|info|warn|error|off (default warn)");
  cl.AddSwitch("json", "print one JSON object as the last stdout line");
  cl.AddSwitch("keep-dir", "keep the temporary directory (member logs, deliveries files)");
  ConfigSchema schema;
  AddConfigKeys(&schema);
  if (Status st = cl.Parse(argc, argv); !st.ok()) return FailInput(st.message());
  if (cl.help_requested()) {
    std::printf("%s", cl.Usage(&schema).c_str());
    return 0;
  }
  if (!cl.positional().empty()) return FailInput("unexpected argument '" + cl.positional()[0] + "'");
  if (!SetLogLevel(cl.Get("log-level", "warn"))) return FailInput("--log-level: unknown level");
  Settings s;
  s.backend = cl.Get("backend");
  if (s.backend != "raft" && s.backend != "zookeeper" && s.backend != "none") {
    return FailInput("--backend must be raft, zookeeper or none (got '" + s.backend + "')");
  }
  auto replicas = cl.GetInt("replicas", 3);
  auto payload = cl.GetInt("payload-bytes", 1024);
  auto inflight = cl.GetInt("inflight", 100);
  auto duration = cl.GetDouble("duration-s", 3);
  auto warmup = cl.GetDouble("warmup-s", 0.5);
  for (const Status* st : {&replicas.status(), &payload.status(), &inflight.status(), &duration.status(), &warmup.status()}) {
    if (!st->ok()) return FailInput(st->message());
  }
  if (replicas.value() < 1 || replicas.value() > 9) return FailInput("--replicas must be in [1, 9]");
  if (payload.value() < 0 || payload.value() > (64ll << 20)) return FailInput("--payload-bytes must be in [0, 64 MiB]");
  if (inflight.value() < 1 || inflight.value() > 10000) return FailInput("--inflight must be in [1, 10000]");
  if (!(duration.value() > 0) || duration.value() > 3600) return FailInput("--duration-s must be in (0, 3600]");
  if (warmup.value() < 0 || warmup.value() > 600) return FailInput("--warmup-s must be in [0, 600]");
  s.replicas = replicas.value();
  s.payload_bytes = payload.value();
  s.inflight = inflight.value();
  s.duration_s = duration.value();
  s.warmup_s = warmup.value();
  s.compression = cl.Get("compression", "none");
  if (s.compression != "none" && s.compression != "snappy") return FailInput("--compression must be none or snappy");
  s.zk_hosts = cl.Get("zk-hosts");
  s.json = cl.Has("json");
  s.keep_dir = cl.Has("keep-dir");
  s.node_path = cl.Get("node", SelfDir() + "/qrstore-repl-node");
  s.user_overrides = cl.overrides();
  for (const auto& o : s.user_overrides) {
    if (o.rfind("replication.backend=", 0) == 0 || o.rfind("replication.compression=", 0) == 0) {
      return FailInput("use --backend / --compression instead of --" + o);
    }
  }
  // Unknown keys and bad values in the overrides are bad input, found before anything starts.
  if (auto checked = Config::LoadString(schema, "", s.user_overrides); !checked.ok()) {
    return FailInput(checked.status().message());
  }

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  Bench bench(std::move(s));
  return bench.Run();
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
