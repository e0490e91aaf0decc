// qrstore-repl-node: one replication group member as a separate process, for the
// conformance suite and qrstore-repl-bench.
//
// It runs one Replicator built from config (replication/factory.h). With --deliveries it
// receives every stream (replication.groups x replication.planners) in order, checks each
// payload against the deterministic generator and appends one line per delivered batch; any
// gap, duplicate or content mismatch makes it exit with status 3. With --drive N it also acts
// as a leader "driver": whenever this process leads a group (by config for none/zookeeper, by
// election for raft) it replicates generated payloads for that group's streams, resuming at
// NextBatchId, until N batches per stream are acknowledged, logging acknowledged batches to
// --acks. It runs until SIGTERM/SIGINT (clean stop, exit 0 unless errors) or --max-runtime-s
// (exit 4).
//
// Threads: main (driver, signal flag, progress), recv-<name> (receiver), plus the backend's.
#include <signal.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "common/cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/exit_codes.h"
#include "common/logging.h"
#include "replication/factory.h"
#include "replication/tools/member.h"

namespace {

using namespace qrstore;
using namespace qrstore::replication;

volatile std::sig_atomic_t g_stop_signal = 0;

void OnSignal(int sig) { g_stop_signal = sig; }

void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int Fail(const std::string& msg, int code = kExitFailed) {
  std::fprintf(stderr, "qrstore-repl-node: %s\n", msg.c_str());
  return code;
}
// Bad flags, keys, values or paths: the exit status every qrstore program gives bad input.
int FailInput(const std::string& msg) { return Fail(msg, kExitBadInput); }
// A delivered batch was wrong (gap, duplicate, content).
constexpr int kExitWrongDelivery = 3;

FILE* OpenAppend(const std::string& path) {
  if (path.empty()) return nullptr;
  return std::fopen(path.c_str(), "a");
}

int Run(int argc, char** argv) {
  CommandLine cl("qrstore-repl-node", "--config FILE [--key=value ...] [--deliveries FILE] [--drive N ...]",
                 "Runs one replication group member. As a follower it receives and checks every stream;\n"
                 "with --drive it also replicates deterministic payloads whenever it leads a group.\n"
                 "Exit status: 0 clean stop, 1 start failure, 2 bad input, 3 a delivered batch was wrong\n"
                 "(gap, duplicate, content), 4 --max-runtime-s reached.");
  cl.AddValue("config", "FILE", "YAML config (replication.* keys); optional, overrides apply on top");
  cl.AddValue("deliveries", "FILE", "receive every stream, append 'group planner batch bytes hash' per batch");
  cl.AddValue("drive", "N", "when leader, replicate until N batches per stream are acknowledged (default 0: never)");
  cl.AddValue("payload-bytes", "B", "driver payload size (default 1024)");
  cl.AddValue("inflight", "K", "driver batches in flight per stream (default 1)");
  cl.AddValue("acks", "FILE", "append 'group planner batch' per acknowledged batch (driver)");
  cl.AddValue("summary", "FILE", "write 'delivered=.. errors=.. acked=.. failed=..' at exit");
  cl.AddValue("name", "NAME", "identity in log lines (default node)");
  cl.AddValue("max-runtime-s", "S", "exit with status 4 after S seconds (default 0: no limit)");
  cl.AddValue("log-level", "LEVEL", "trace|debug|info|warn|error|off (default info)");
  ConfigSchema schema;
  AddConfigKeys(&schema);
  if (Status s = cl.Parse(argc, argv); !s.ok()) return FailInput(s.message());
  if (cl.help_requested()) {
    std::printf("%s", cl.Usage(&schema).c_str());
    return 0;
  }
  if (!cl.positional().empty()) return FailInput("unexpected argument '" + cl.positional()[0] + "'");
  if (!SetLogLevel(cl.Get("log-level", "info"))) return FailInput("--log-level: unknown level '" + cl.Get("log-level") + "'");
  auto drive = cl.GetInt("drive", 0);
  auto payload_bytes = cl.GetInt("payload-bytes", 1024);
  auto inflight = cl.GetInt("inflight", 1);
  auto max_runtime_s = cl.GetDouble("max-runtime-s", 0);
  for (const Status* s : {&drive.status(), &payload_bytes.status(), &inflight.status(), &max_runtime_s.status()}) {
    if (!s->ok()) return FailInput(s->message());
  }
  if (drive.value() < 0) return FailInput("--drive must be >= 0");
  if (payload_bytes.value() < 0 || payload_bytes.value() > (1ll << 30)) return FailInput("--payload-bytes must be in [0, 2^30]");
  if (inflight.value() < 1 || inflight.value() > 100000) return FailInput("--inflight must be in [1, 100000]");
  if (max_runtime_s.value() < 0) return FailInput("--max-runtime-s must be >= 0");
  if (cl.Has("acks") && drive.value() == 0) return FailInput("--acks needs --drive N");

  Result<Config> config = Config::Load(schema, cl.Get("config"), cl.overrides());
  if (!config.ok()) return FailInput(config.status().message());
  const std::string name = cl.Get("name", "node");
  auto log = Logger("repl-node");
  log->info("[{}] effective config:\n{}", name, config->Dump());
  const auto groups = static_cast<uint32_t>(config->GetInt("replication.groups"));
  const auto planners = static_cast<uint32_t>(config->GetInt("replication.planners"));

  FILE* deliveries = OpenAppend(cl.Get("deliveries"));
  if (cl.Has("deliveries") && deliveries == nullptr) return FailInput("cannot open --deliveries " + cl.Get("deliveries"));
  FILE* acks = OpenAppend(cl.Get("acks"));
  if (cl.Has("acks") && acks == nullptr) return FailInput("cannot open --acks " + cl.Get("acks"));

  InstallSignalHandlers();
  Result<std::unique_ptr<Replicator>> created = CreateReplicator(config.value());
  if (!created.ok()) {
    return Fail(created.status().message(),
                created.status().code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailed);
  }
  std::unique_ptr<Replicator> replicator = std::move(created).value();
  if (Status s = replicator->Start(); !s.ok()) return Fail("start: " + s.ToString());
  log->info("[{}] started {} ({} groups x {} planners)", name, replicator->Name(), groups, planners);

  std::unique_ptr<tools::StreamReceiver> receiver;
  if (deliveries != nullptr) {
    receiver = std::make_unique<tools::StreamReceiver>(replicator.get(), groups, planners, name, deliveries);
    receiver->Start();
  }
  std::unique_ptr<tools::Driver> driver;
  if (drive.value() > 0) {
    tools::DriverOptions d;
    d.groups = groups;
    d.planners = planners;
    d.payload_bytes = static_cast<size_t>(payload_bytes.value());
    d.inflight = static_cast<uint32_t>(inflight.value());
    d.batches_per_stream = static_cast<uint64_t>(drive.value());
    d.acks = acks;
    driver = std::make_unique<tools::Driver>(replicator.get(), d, nullptr);
  }

  const int64_t start_ms = NowMillis();
  const int64_t deadline_ms =
      max_runtime_s.value() > 0 ? start_ms + static_cast<int64_t>(max_runtime_s.value() * 1000) : INT64_MAX;
  int64_t next_progress_ms = start_ms + 2000;
  std::vector<bool> leading(groups, false);
  bool complete_logged = false;
  int exit_code = 0;
  while (g_stop_signal == 0) {
    if (driver) {
      driver->Poll(20);
      if (!complete_logged && driver->AllStreamsComplete()) {
        complete_logged = true;
        log->info("[{}] every stream has its {} batches replicated", name, drive.value());
      }
    } else {
      // Nothing to drive: wake every 20 ms only to notice signals, errors and the deadline.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (uint32_t g = 0; g < groups; ++g) {
      bool now = replicator->IsLeader(g);
      if (now != leading[g]) {
        log->info("[{}] {} leader of group {}", name, now ? "became" : "no longer", g);
        leading[g] = now;
      }
    }
    if (receiver && receiver->errors() > 0) {
      log->error("[{}] stopping: {}", name, receiver->first_error());
      exit_code = kExitWrongDelivery;
      break;
    }
    const int64_t now_ms = NowMillis();
    if (now_ms >= deadline_ms) {
      log->error("[{}] --max-runtime-s reached", name);
      exit_code = 4;
      break;
    }
    if (now_ms >= next_progress_ms) {
      next_progress_ms = now_ms + 2000;
      log->info("[{}] delivered {} acked {} inflight {}", name, receiver ? receiver->delivered() : 0,
                driver ? driver->acked() : 0, driver ? driver->inflight() : 0);
    }
  }
  if (g_stop_signal != 0) log->info("[{}] signal {}: stopping", name, static_cast<int>(g_stop_signal));
  replicator->Stop();
  if (receiver) receiver->Stop();
  const uint64_t delivered = receiver ? receiver->delivered() : 0;
  const uint64_t errors = receiver ? receiver->errors() : 0;
  const uint64_t acked = driver ? driver->acked() : 0;
  const uint64_t failed = driver ? driver->failed() : 0;
  log->info("[{}] stopped: delivered={} errors={} acked={} failed={}", name, delivered, errors, acked, failed);
  if (cl.Has("summary")) {
    if (FILE* f = std::fopen(cl.Get("summary").c_str(), "w")) {
      std::fprintf(f, "delivered=%llu errors=%llu acked=%llu failed=%llu\n", static_cast<unsigned long long>(delivered),
                   static_cast<unsigned long long>(errors), static_cast<unsigned long long>(acked),
                   static_cast<unsigned long long>(failed));
      std::fclose(f);
    }
  }
  driver.reset();
  receiver.reset();
  replicator.reset();
  if (deliveries != nullptr) std::fclose(deliveries);
  if (acks != nullptr) std::fclose(acks);
  if (exit_code == 0 && errors > 0) exit_code = kExitWrongDelivery;
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
