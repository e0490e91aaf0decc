// qrstore-bench: runs the single-node engine in-process under a closed-loop YCSB-T or
// transfer load and reports throughput, latency and the per-batch phase breakdown; optionally
// verifies the run against the serial reference executor, dumps the final state and compares
// with a raw single-threaded loop. See Usage below and docs/benchmarks.md.
//
// Output: progress lines (one per second) and logs go to stderr; the human summary to stdout;
// with --json the last line of stdout is one JSON object. Exit codes: 0 success, 1 the run or
// its verification failed, 2 bad input (flags, config).
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/driver.h"
#include "bench/verify.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/report.h"
#include "common/thread_cpu.h"
#include "engine/engine.h"
#include "storage/key_map.h"
#include "storage/table.h"
#include "workloads/workload.h"

namespace qrstore::bench {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;

void AddBenchKeys(ConfigSchema* s) {
  s->AddInt("bench.outstanding", 0, 0, 100'000'000,
            "closed-loop window: max txns submitted without an outcome; 0 = 2 * batch.txns");
  s->AddInt("bench.verify_max_txns", 10'000'000, 1, 1'000'000'000,
            "--verify keeps 32 bytes per txn: --txns above this is refused, --duration-s stops submitting here");
  s->AddInt("bench.progress_interval_ms", 1000, 0, 3'600'000, "stderr progress line period (0: none)");
}

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "qrstore-bench: %s\n", msg.c_str());
  return code;
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// The validated inputs of a run: the flags, the config and what follows from them.
struct BenchOptions {
  bool has_txns = false;  // --txns N, else --duration-s S
  uint64_t txns = 0;
  double duration_s = 0;
  int64_t duration_ns = 0;  // 0 with --txns
  uint64_t seed = 1;
  bool verify = false, json = false, raw_loop = false;
  std::string dump_path;
  std::string config_path;
  Config config;
  workloads::WorkloadOptions workload;
  bool range_fn = false;  // engine.range_function=range
  uint64_t key_space = 0;
  uint64_t verify_cap = 0;   // bench.verify_max_txns
  uint64_t outstanding = 0;  // the closed-loop window (bench.outstanding, 0 resolved)
  std::string kind;          // "ycsb" or "transfer"
  uint64_t ops_per_txn = 0;
};

// The --verify result as printed and in --json ("skipped" without --verify).
struct VerifyOutcome {
  std::string text = "skipped";
  std::string detail;
  bool failed = false;
};

// What a run produced: the driver's counts, the engine's stats, the raw loop's and the checks.
struct RunReport {
  std::optional<RawLoopResult> raw;
  DriverResult res;
  std::map<std::string, int64_t> cpu_ns;  // CPU each thread group used while the load ran
  uint64_t cpu_txns = 0;                  // txns answered in that time
  engine::EngineStats stats;
  uint64_t digest = 0;
  VerifyOutcome verify;
};

// The rates and latencies derived from a RunReport for the summary and --json.
struct Figures {
  double elapsed_s = 0, tps = 0, ops_per_s = 0;
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
  double raw_ops_per_s = 0, engine_vs_raw = 0;
  int64_t cpu_total_ns = 0;  // the CPU of all thread groups while the load ran
};

// The command line: the flags and the --help text.
CommandLine MakeCommandLine() {
  CommandLine cli("qrstore-bench",
                  "[--config FILE] [--key=value ...] (--txns N | --duration-s S) [--seed S] [--verify] "
                  "[--dump-state PATH] [--json] [--raw-loop]",
                  "Runs the single-node qrstore engine in-process with a closed-loop load generator (one\n"
                  "submitting thread, at most bench.outstanding txns in flight) and prints throughput,\n"
                  "latency percentiles (submit -> commit) and the per-batch plan/execute/commit times.\n"
                  "A --txns run with a fixed --seed and config is deterministic: same digest every run,\n"
                  "whatever the thread counts, batch boundaries or timing.\n"
                  "Progress goes to stderr once per second; the summary to stdout; --json makes the last\n"
                  "stdout line a JSON object. Exit status: 0 ok, 1 run or verification failed, 2 bad input.");
  cli.AddValue("config", "FILE", "YAML config (e.g. configs/single-node.yaml); defaults when omitted");
  cli.AddValue("txns", "N", "submit exactly N transactions (0: load, dump and exit the engine at once)");
  cli.AddValue("duration-s", "S", "submit for S seconds, then finish the in-flight transactions");
  cli.AddValue("seed", "S", "workload seed (default 1): the input sequence is a function of it");
  cli.AddSwitch("verify",
                "re-run the committed txns in planned order on the serial reference executor and compare "
                "digests; also checks order and that every abort is justified (32 bytes kept per txn)");
  cli.AddValue("dump-state", "PATH", "write the final table as key<TAB>counter lines sorted by key");
  cli.AddSwitch("json", "print one JSON object with the results as the last line of stdout");
  cli.AddSwitch("raw-loop",
                "first apply the same txns single-threaded with no concurrency control on a fresh table "
                "and report its ops/s and the engine's ops/s as a fraction of it");
  cli.AddValue("log-level", "LEVEL", "trace|debug|info|warn|error|off (default info)");
  return cli;
}

// Checks the parsed flags (not yet the config) into *o; nullopt to go on, else the exit code.
std::optional<int> ParseFlags(const CommandLine& cli, BenchOptions* o) {
  if (!cli.positional().empty()) {
    return Fail(kExitBadInput, "unexpected argument '" + cli.positional()[0] + "' (see qrstore-bench --help)");
  }
  if (cli.Has("log-level") && !SetLogLevel(cli.Get("log-level"))) {
    return Fail(kExitBadInput, "flag --log-level: unknown level '" + cli.Get("log-level") + "'");
  }
  const bool has_txns = cli.Has("txns"), has_duration = cli.Has("duration-s");
  if (has_txns == has_duration) {
    return Fail(kExitBadInput, has_txns ? "give either --txns or --duration-s, not both"
                                        : "missing --txns N or --duration-s S (see qrstore-bench --help)");
  }
  auto txns_flag = cli.GetInt("txns", 0);
  if (!txns_flag.ok()) return Fail(kExitBadInput, txns_flag.status().message());
  auto duration_flag = cli.GetDouble("duration-s", 0);
  if (!duration_flag.ok()) return Fail(kExitBadInput, duration_flag.status().message());
  auto seed_flag = cli.GetInt("seed", 1);
  if (!seed_flag.ok()) return Fail(kExitBadInput, seed_flag.status().message());
  if (txns_flag.value() < 0) return Fail(kExitBadInput, "flag --txns: must be >= 0");
  if (has_duration && !(duration_flag.value() > 0 && duration_flag.value() <= 86400)) {
    return Fail(kExitBadInput, "flag --duration-s: must be in (0, 86400]");
  }
  if (seed_flag.value() < 0) return Fail(kExitBadInput, "flag --seed: must be >= 0");
  o->has_txns = has_txns;
  o->txns = static_cast<uint64_t>(txns_flag.value());
  o->duration_s = duration_flag.value();
  o->duration_ns = has_duration ? static_cast<int64_t>(o->duration_s * 1e9) : 0;
  o->seed = static_cast<uint64_t>(seed_flag.value());
  o->verify = cli.Has("verify");
  o->json = cli.Has("json");
  o->raw_loop = cli.Has("raw-loop");
  o->dump_path = cli.Get("dump-state");
  o->config_path = cli.Get("config");
  return std::nullopt;
}

// Loads the config, derives the workload into *o and refuses unrunnable input; nullopt or the exit code.
std::optional<int> LoadConfig(const ConfigSchema& schema, const CommandLine& cli, BenchOptions* o) {
  auto config_or = Config::Load(schema, o->config_path, cli.overrides());
  if (!config_or.ok()) return Fail(kExitBadInput, config_or.status().message());
  o->config = std::move(config_or).value();
  const Config& config = o->config;

  // The partition mapping is the engine's (engine.partitions / range_function / key_space).
  o->range_fn = config.GetString("engine.range_function") == "range";
  const auto partitions = static_cast<uint32_t>(config.GetInt("engine.partitions"));
  o->key_space = workloads::EngineKeySpace(config);
  if (o->range_fn && o->key_space < partitions) {
    return Fail(kExitBadInput, "engine.key_space must be >= engine.partitions with engine.range_function=range");
  }
  storage::KeyMapper partition_map(o->range_fn ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash,
                                   partitions, o->key_space);
  auto options_or = workloads::OptionsFromConfig(config, partition_map);
  if (!options_or.ok()) return Fail(kExitBadInput, options_or.status().message());
  o->workload = std::move(options_or).value();
  const workloads::WorkloadOptions& options = o->workload;

  o->verify_cap = static_cast<uint64_t>(config.GetInt("bench.verify_max_txns"));
  if (o->verify && o->has_txns && o->txns > o->verify_cap) {
    return Fail(kExitBadInput, "--verify with --txns " + std::to_string(o->txns) + " exceeds bench.verify_max_txns (" +
                                   std::to_string(o->verify_cap) + "); raise it (32 bytes per txn) or run fewer");
  }
  // Tables that cannot fit are bad input, refused before anything is allocated: the engine's
  // table, plus the reference executor's for --verify (the raw loop's is freed before either).
  const uint64_t txns_in_flight = static_cast<uint64_t>(config.GetInt("batch.txns")) *
                                  static_cast<uint64_t>(config.GetInt("engine.batches_in_flight"));
  if (Status s = workloads::CheckMemoryFits(options, o->verify ? 2 : 1, txns_in_flight); !s.ok()) {
    return Fail(kExitBadInput, s.message());
  }
  // --dump-state to a path that cannot be written fails now, not after the run: create the file.
  if (!o->dump_path.empty()) {
    if (Status s = workloads::ProbeWritable(o->dump_path); !s.ok()) return Fail(kExitBadInput, "--dump-state: " + s.message());
  }
  o->outstanding = static_cast<uint64_t>(config.GetInt("bench.outstanding"));
  if (o->outstanding == 0) o->outstanding = 2 * static_cast<uint64_t>(config.GetInt("batch.txns"));
  o->kind = options.kind == workloads::WorkloadKind::kTransfer ? "transfer" : "ycsb";
  o->ops_per_txn = options.kind == workloads::WorkloadKind::kTransfer ? 2 : options.ycsb.ops_per_txn;
  return std::nullopt;
}

// Logs the effective config and warns about settings that make a run misleading.
void LogSetup(const std::shared_ptr<spdlog::logger>& log, const BenchOptions& o) {
  const Config& config = o.config;
  log->info("effective config{}:\n{}", o.config_path.empty() ? " (defaults)" : " from " + o.config_path, config.Dump());
  if (o.outstanding < static_cast<uint64_t>(config.GetInt("batch.txns"))) {
    log->warn("bench.outstanding ({}) < batch.txns ({}): no batch can fill, each closes by batch.timeout_ms",
              o.outstanding, config.GetInt("batch.txns"));
  }
  if (o.range_fn && o.key_space != o.workload.RecordCount()) {
    log->warn("engine.key_space ({}) differs from the record count ({}): executor ranges will be unbalanced",
              o.key_space, o.workload.RecordCount());
  }
}

// The --raw-loop step: applies the txns single-threaded into r->raw; nullopt to go on, else the exit code.
std::optional<int> RunRawLoopStep(const BenchOptions& o, const std::shared_ptr<spdlog::logger>& log, RunReport* r) {
  log->info("raw loop: applying the workload single-threaded without concurrency control");
  auto raw = RunRawLoop(o.workload, o.seed, o.txns, o.duration_ns);
  if (!raw.ok()) return Fail(kExitFailed, "raw loop: " + raw.status().ToString());
  r->raw = raw.value();
  log->info("raw loop: {} txns ({} committed) in {:.3f} s of applying", r->raw->txns, r->raw->committed,
            static_cast<double>(r->raw->apply_ns) / 1e9);
  return std::nullopt;
}

// Runs the engine on the loaded table under the closed-loop driver; nullopt to go on, else the exit code.
std::optional<int> RunEngine(const BenchOptions& o, storage::Table* table, const std::shared_ptr<spdlog::logger>& log,
                             RunReport* r) {
  DriverOptions dopt;
  dopt.txns = o.txns;
  dopt.duration_ns = o.duration_ns;
  dopt.outstanding = o.outstanding;
  dopt.keep_outcomes = o.verify;
  dopt.max_kept_outcomes = o.verify_cap;
  dopt.progress_interval_ns = o.config.GetInt("bench.progress_interval_ms") * 1'000'000;
  dopt.on_progress = [&log](const DriverProgress& p) {
    log->info("t={:.0f}s committed={} ({:.0f} txn/s) aborted={} outstanding={}", p.elapsed_s, p.committed,
              p.interval_tps, p.aborted, p.outstanding);
  };
  // The CPU budget: what each thread group used from the first submit to the last, per txn
  // answered by then (Finish ends the engine's threads, and an ended thread's time is gone).
  std::map<std::string, int64_t> cpu_before;
  dopt.before_finish = [&cpu_before, r](uint64_t completed) {
    r->cpu_ns = ThreadCpuDelta(cpu_before, ThreadCpuNanos());
    r->cpu_txns = completed;
  };
  LoadDriver driver(dopt);
  auto gen_or = workloads::MakeGenerator(o.workload, o.seed);
  if (!gen_or.ok()) return Fail(kExitBadInput, gen_or.status().message());
  auto engine_or = engine::Engine::Create(o.config, table, driver.Sink());
  if (!engine_or.ok()) return Fail(kExitBadInput, engine_or.status().message());
  std::unique_ptr<engine::Engine> engine = std::move(engine_or).value();
  if (Status s = engine->Start(); !s.ok()) return Fail(kExitFailed, "engine start: " + s.ToString());
  cpu_before = ThreadCpuNanos();
  log->info("running {} {}", o.has_txns ? std::to_string(o.txns) + " txns" : Num(o.duration_s) + " s", o.kind);
  Status run = driver.Run(engine.get(), gen_or.value().get());
  engine->Stop();  // joins every engine thread: the sink is called no more
  r->stats = engine->Stats();
  r->res = driver.TakeResult();
  if (!run.ok()) return Fail(kExitFailed, "run: " + run.ToString());
  if (r->res.stopped_at_cap) {
    log->warn("stopped submitting at bench.verify_max_txns = {} txns (kept for --verify)", o.verify_cap);
  }
  return std::nullopt;
}

// Re-runs the committed txns in planned order on the serial reference executor (--verify).
VerifyOutcome VerifyAgainstReference(const BenchOptions& o, RunReport* r) {
  VerifyOutcome out;
  const int64_t v0 = NowNanos();
  VerifyReport vr;
  Status v = VerifyRun(o.workload, o.seed, r->res.submitted, &r->res.outcomes, r->digest, &vr);
  if (v.ok()) {
    out.text = "ok";
    out.detail = "committed " + std::to_string(vr.committed) + " serially (" + std::to_string(vr.reads_checked) + " read values equal), aborts justified: " +
                 std::to_string(vr.aborted_serially) + " serial + " + std::to_string(vr.aborted_cascade) +
                 " cascade, reference digest " + Hex(vr.reference_digest) + ", " +
                 Num(static_cast<double>(NowNanos() - v0) / 1e9) + " s";
  } else {
    out.text = "failed";
    out.detail = v.message();
    out.failed = true;
  }
  return out;
}

// Derives the rates and latency percentiles of a run (and the raw loop's, with --raw-loop).
Figures ComputeFigures(const BenchOptions& o, const RunReport& r) {
  Figures f;
  f.elapsed_s = static_cast<double>(r.res.elapsed_ns) / 1e9;
  f.tps = f.elapsed_s > 0 ? static_cast<double>(r.res.committed) / f.elapsed_s : 0;
  f.ops_per_s = f.tps * static_cast<double>(o.ops_per_txn);
  f.p50 = Ms(r.res.latency_ns.Percentile(0.50));
  f.p99 = Ms(r.res.latency_ns.Percentile(0.99));
  f.p999 = Ms(r.res.latency_ns.Percentile(0.999));
  f.max = Ms(r.res.latency_ns.max());
  if (r.raw) {
    f.raw_ops_per_s = r.raw->apply_ns > 0 ? static_cast<double>(r.raw->ops_committed) / (static_cast<double>(r.raw->apply_ns) / 1e9) : 0;
    f.engine_vs_raw = f.raw_ops_per_s > 0 ? f.ops_per_s / f.raw_ops_per_s : 0;
  }
  for (const auto& [name, ns] : r.cpu_ns) f.cpu_total_ns += ns;
  return f;
}

// Prints the human summary to stdout.
void PrintSummary(const BenchOptions& o, const RunReport& r, const Figures& f) {
  const DriverResult& res = r.res;
  const engine::EngineStats& stats = r.stats;
  std::printf("qrstore-bench: %s, %" PRIu64 " txns submitted in %.3f s (seed %" PRIu64 ")\n", o.kind.c_str(),
              res.submitted, f.elapsed_s, o.seed);
  std::printf("  throughput     %.0f txn/s, %.0f ops/s (%" PRIu64 " ops per txn)\n", f.tps, f.ops_per_s, o.ops_per_txn);
  std::printf("  committed      %" PRIu64 " (update ops %" PRIu64 ")\n", res.committed, res.update_ops_committed);
  std::printf("  aborted        %" PRIu64 " (cascade %" PRIu64 ")\n", res.aborted, res.aborted_cascade);
  std::printf("  latency ms     p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (submit -> commit, window %" PRIu64 ")\n",
              f.p50, f.p99, f.p999, f.max, o.outstanding);
  std::printf("  per batch ms   cut %.3f  plan %.3f  execute %.3f  commit %.3f  (batches %" PRIu64 ", closed by timeout %" PRIu64 ")\n",
              stats.mean_cut_ms, stats.mean_plan_ms, stats.mean_exec_ms, stats.mean_commit_ms, stats.batches,
              stats.batches_closed_by_timeout);
  if (r.raw) {
    std::printf("  raw loop       %.0f ops/s (%" PRIu64 " txns, %" PRIu64 " committed, 1 thread, no concurrency control)\n",
                f.raw_ops_per_s, r.raw->txns, r.raw->committed);
    std::printf("  engine / raw   %.3f\n", f.engine_vs_raw);
  }
  if (r.cpu_txns > 0 && !r.cpu_ns.empty()) {
    std::string line;
    for (const auto& [name, ns] : r.cpu_ns) {
      line += (line.empty() ? "" : ", ") + name + " " + std::to_string(ns / static_cast<int64_t>(r.cpu_txns));
    }
    std::printf("  cpu ns / txn   %s; total %" PRId64 " (by thread; qrstore-bench: the load generator)\n", line.c_str(),
                f.cpu_total_ns / static_cast<int64_t>(r.cpu_txns));
  }
  std::printf("  digest         %s\n", Hex(r.digest).c_str());
  std::printf("  verify         %s%s%s\n", r.verify.text.c_str(), r.verify.detail.empty() ? "" : ": ", r.verify.detail.c_str());
}

// Prints the --json object (results, then the inputs and the effective config) as one stdout line.
void PrintJson(const BenchOptions& o, const RunReport& r, const Figures& f, const std::vector<std::string>& overrides) {
  const DriverResult& res = r.res;
  const engine::EngineStats& stats = r.stats;
  JsonObject inputs;
  inputs.Str("config_file", o.config_path);
  if (o.has_txns) inputs.Int("txns", o.txns); else inputs.Dbl("duration_s", o.duration_s);
  inputs.Int("seed", o.seed);
  inputs.Bool("verify", o.verify);
  inputs.Bool("raw_loop", o.raw_loop);
  inputs.Str("dump_state", o.dump_path);
  inputs.Raw("overrides", JsonStringArray(overrides));

  JsonObject j;
  j.Str("workload", o.kind);
  j.Int("submitted", res.submitted);
  j.Int("committed", res.committed);
  j.Int("aborted", res.aborted);
  j.Int("aborted_cascade", res.aborted_cascade);
  j.Int("update_ops_committed", res.update_ops_committed);
  j.Dbl("elapsed_s", f.elapsed_s);
  j.Dbl("throughput_tps", f.tps);
  j.Dbl("ops_per_s", f.ops_per_s);
  j.Dbl("p50_ms", f.p50);
  j.Dbl("p99_ms", f.p99);
  j.Dbl("p999_ms", f.p999);
  j.Dbl("max_ms", f.max);
  j.Int("batches", stats.batches);
  j.Int("batches_closed_by_timeout", stats.batches_closed_by_timeout);
  j.Dbl("mean_cut_ms", stats.mean_cut_ms);
  j.Dbl("mean_plan_ms", stats.mean_plan_ms);
  j.Dbl("mean_exec_ms", stats.mean_exec_ms);
  j.Dbl("mean_commit_ms", stats.mean_commit_ms);
  j.Int("outstanding", o.outstanding);
  if (r.cpu_txns > 0) {
    JsonObject cpu;
    for (const auto& [name, ns] : r.cpu_ns) cpu.Dbl(name, static_cast<double>(ns) / static_cast<double>(r.cpu_txns));
    cpu.Dbl("total", static_cast<double>(f.cpu_total_ns) / static_cast<double>(r.cpu_txns));
    j.Raw("cpu_ns_per_txn", cpu.Done());
  }
  j.Str("digest", Hex(r.digest));
  j.Str("verify", r.verify.text);
  if (r.verify.failed) j.Str("verify_error", r.verify.detail);
  if (r.raw) {
    j.Dbl("raw_ops_per_s", f.raw_ops_per_s);
    j.Dbl("engine_vs_raw", f.engine_vs_raw);
    j.Str("raw_digest", Hex(r.raw->digest));
  }
  j.Raw("inputs", inputs.Done());
  j.Raw("config", o.config.DumpJson());
  std::printf("%s\n", j.Done().c_str());
}

int Main(int argc, char** argv) {
  CommandLine cli = MakeCommandLine();
  ConfigSchema schema;
  engine::Engine::AddConfigKeys(&schema);
  workloads::AddConfigKeys(&schema);
  AddBenchKeys(&schema);

  Status parsed = cli.Parse(argc, argv);
  if (cli.help_requested()) {
    std::fputs(cli.Usage(&schema).c_str(), stdout);
    return 0;
  }
  if (!parsed.ok()) return Fail(kExitBadInput, parsed.message());
  BenchOptions o;
  if (std::optional<int> rc = ParseFlags(cli, &o)) return *rc;
  if (std::optional<int> rc = LoadConfig(schema, cli, &o)) return *rc;
  const workloads::WorkloadOptions& options = o.workload;

  auto log = Logger("bench");
  LogSetup(log, o);
  RunReport r;

  // 1. The raw loop, on its own fresh table (freed before the engine's is built).
  if (o.raw_loop) {
    if (std::optional<int> rc = RunRawLoopStep(o, log, &r)) return *rc;
  }

  // 2. Load.
  const int64_t load_start = NowNanos();
  storage::Table table(options.Layout(), options.RecordCount());
  if (Status s = workloads::LoadTable(options, &table); !s.ok()) return Fail(kExitFailed, "load: " + s.ToString());
  log->info("loaded {} {} records in {:.2f} s", options.RecordCount(), o.kind, static_cast<double>(NowNanos() - load_start) / 1e9);

  // 3. Run the engine.
  if (std::optional<int> rc = RunEngine(o, &table, log, &r)) return *rc;
  r.digest = table.Digest();

  // 4. Dump and verify.
  if (!o.dump_path.empty()) {
    if (Status s = workloads::DumpState(table, o.dump_path); !s.ok()) return Fail(kExitFailed, "dump-state: " + s.ToString());
    log->info("wrote {} records to {}", table.size(), o.dump_path);
  }
  if (o.verify) r.verify = VerifyAgainstReference(o, &r);

  // 5. Report.
  const Figures f = ComputeFigures(o, r);
  PrintSummary(o, r, f);
  if (o.json) PrintJson(o, r, f, cli.overrides());
  std::fflush(stdout);
  if (r.verify.failed) return Fail(kExitFailed, "verify failed: " + r.verify.detail);
  return 0;
}

}  // namespace
}  // namespace qrstore::bench

int main(int argc, char** argv) { return qrstore::bench::Main(argc, argv); }
