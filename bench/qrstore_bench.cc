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
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/driver.h"
#include "bench/verify.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/report.h"
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

int Main(int argc, char** argv) {
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

  ConfigSchema schema;
  cluster::Engine::AddConfigKeys(&schema);
  workloads::AddConfigKeys(&schema);
  AddBenchKeys(&schema);

  Status parsed = cli.Parse(argc, argv);
  if (cli.help_requested()) {
    std::fputs(cli.Usage(&schema).c_str(), stdout);
    return 0;
  }
  if (!parsed.ok()) return Fail(kExitBadInput, parsed.message());
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
  const uint64_t txns = static_cast<uint64_t>(txns_flag.value());
  const double duration_s = duration_flag.value();
  const uint64_t seed = static_cast<uint64_t>(seed_flag.value());
  const bool verify = cli.Has("verify"), json = cli.Has("json"), raw_loop = cli.Has("raw-loop");
  const std::string dump_path = cli.Get("dump-state");
  const std::string config_path = cli.Get("config");

  auto config_or = Config::Load(schema, config_path, cli.overrides());
  if (!config_or.ok()) return Fail(kExitBadInput, config_or.status().message());
  const Config& config = config_or.value();

  // The partition mapping is the engine's (engine.partitions / range_function / key_space).
  const bool range_fn = config.GetString("engine.range_function") == "range";
  const auto partitions = static_cast<uint32_t>(config.GetInt("engine.partitions"));
  const uint64_t key_space = workloads::EngineKeySpace(config);
  if (range_fn && key_space < partitions) {
    return Fail(kExitBadInput, "engine.key_space must be >= engine.partitions with engine.range_function=range");
  }
  storage::KeyMapper partition_map(range_fn ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash,
                                   partitions, key_space);
  auto options_or = workloads::OptionsFromConfig(config, partition_map);
  if (!options_or.ok()) return Fail(kExitBadInput, options_or.status().message());
  const workloads::WorkloadOptions& options = options_or.value();

  const uint64_t verify_cap = static_cast<uint64_t>(config.GetInt("bench.verify_max_txns"));
  if (verify && has_txns && txns > verify_cap) {
    return Fail(kExitBadInput, "--verify with --txns " + std::to_string(txns) + " exceeds bench.verify_max_txns (" +
                                   std::to_string(verify_cap) + "); raise it (32 bytes per txn) or run fewer");
  }
  // Tables that cannot fit are bad input, refused before anything is allocated: the engine's
  // table, plus the reference executor's for --verify (the raw loop's is freed before either).
  const uint64_t txns_in_flight = static_cast<uint64_t>(config.GetInt("batch.txns")) *
                                  static_cast<uint64_t>(config.GetInt("engine.batches_in_flight"));
  if (Status s = workloads::CheckMemoryFits(options, verify ? 2 : 1, txns_in_flight); !s.ok()) {
    return Fail(kExitBadInput, s.message());
  }
  // --dump-state to a path that cannot be written fails now, not after the run: create the file.
  if (!dump_path.empty()) {
    if (Status s = workloads::ProbeWritable(dump_path); !s.ok()) return Fail(kExitBadInput, "--dump-state: " + s.message());
  }
  uint64_t outstanding = static_cast<uint64_t>(config.GetInt("bench.outstanding"));
  if (outstanding == 0) outstanding = 2 * static_cast<uint64_t>(config.GetInt("batch.txns"));

  auto log = Logger("bench");
  log->info("effective config{}:\n{}", config_path.empty() ? " (defaults)" : " from " + config_path, config.Dump());
  if (outstanding < static_cast<uint64_t>(config.GetInt("batch.txns"))) {
    log->warn("bench.outstanding ({}) < batch.txns ({}): no batch can fill, each closes by batch.timeout_ms",
              outstanding, config.GetInt("batch.txns"));
  }
  if (range_fn && key_space != options.RecordCount()) {
    log->warn("engine.key_space ({}) differs from the record count ({}): executor ranges will be unbalanced",
              key_space, options.RecordCount());
  }
  const std::string kind = options.kind == workloads::WorkloadKind::kTransfer ? "transfer" : "ycsb";
  const uint64_t ops_per_txn = options.kind == workloads::WorkloadKind::kTransfer ? 2 : options.ycsb.ops_per_txn;
  const int64_t duration_ns = has_duration ? static_cast<int64_t>(duration_s * 1e9) : 0;

  // 1. The raw loop, on its own fresh table (freed before the engine's is built).
  std::optional<RawLoopResult> raw;
  if (raw_loop) {
    log->info("raw loop: applying the workload single-threaded without concurrency control");
    auto r = RunRawLoop(options, seed, txns, duration_ns);
    if (!r.ok()) return Fail(kExitFailed, "raw loop: " + r.status().ToString());
    raw = r.value();
    log->info("raw loop: {} txns ({} committed) in {:.3f} s of applying", raw->txns, raw->committed,
              static_cast<double>(raw->apply_ns) / 1e9);
  }

  // 2. Load.
  const int64_t load_start = NowNanos();
  storage::Table table(options.Layout(), options.RecordCount());
  if (Status s = workloads::LoadTable(options, &table); !s.ok()) return Fail(kExitFailed, "load: " + s.ToString());
  log->info("loaded {} {} records in {:.2f} s", options.RecordCount(), kind, static_cast<double>(NowNanos() - load_start) / 1e9);

  // 3. Run the engine.
  DriverOptions dopt;
  dopt.txns = txns;
  dopt.duration_ns = duration_ns;
  dopt.outstanding = outstanding;
  dopt.keep_outcomes = verify;
  dopt.max_kept_outcomes = verify_cap;
  dopt.progress_interval_ns = config.GetInt("bench.progress_interval_ms") * 1'000'000;
  dopt.on_progress = [&log](const DriverProgress& p) {
    log->info("t={:.0f}s committed={} ({:.0f} txn/s) aborted={} outstanding={}", p.elapsed_s, p.committed,
              p.interval_tps, p.aborted, p.outstanding);
  };
  LoadDriver driver(dopt);
  auto gen_or = workloads::MakeGenerator(options, seed);
  if (!gen_or.ok()) return Fail(kExitBadInput, gen_or.status().message());
  auto engine_or = cluster::Engine::Create(config, &table, driver.Sink());
  if (!engine_or.ok()) return Fail(kExitBadInput, engine_or.status().message());
  std::unique_ptr<cluster::Engine> engine = std::move(engine_or).value();
  if (Status s = engine->Start(); !s.ok()) return Fail(kExitFailed, "engine start: " + s.ToString());
  log->info("running {} {}", has_txns ? std::to_string(txns) + " txns" : Num(duration_s) + " s", kind);
  Status run = driver.Run(engine.get(), gen_or.value().get());
  engine->Stop();  // joins every engine thread: the sink is called no more
  const cluster::EngineStats stats = engine->Stats();
  DriverResult res = driver.TakeResult();
  if (!run.ok()) return Fail(kExitFailed, "run: " + run.ToString());
  if (res.stopped_at_cap) {
    log->warn("stopped submitting at bench.verify_max_txns = {} txns (kept for --verify)", verify_cap);
  }
  const uint64_t digest = table.Digest();

  // 4. Dump and verify.
  if (!dump_path.empty()) {
    if (Status s = workloads::DumpState(table, dump_path); !s.ok()) return Fail(kExitFailed, "dump-state: " + s.ToString());
    log->info("wrote {} records to {}", table.size(), dump_path);
  }
  std::string verify_text = "skipped";
  std::string verify_detail;
  bool verify_failed = false;
  if (verify) {
    const int64_t v0 = NowNanos();
    VerifyReport vr;
    Status v = VerifyRun(options, seed, res.submitted, &res.outcomes, digest, &vr);
    if (v.ok()) {
      verify_text = "ok";
      verify_detail = "committed " + std::to_string(vr.committed) + " serially (" + std::to_string(vr.reads_checked) + " read values equal), aborts justified: " +
                      std::to_string(vr.aborted_serially) + " serial + " + std::to_string(vr.aborted_cascade) +
                      " cascade, reference digest " + Hex(vr.reference_digest) + ", " +
                      Num(static_cast<double>(NowNanos() - v0) / 1e9) + " s";
    } else {
      verify_text = "failed";
      verify_detail = v.message();
      verify_failed = true;
    }
  }

  // 5. Report.
  const double elapsed_s = static_cast<double>(res.elapsed_ns) / 1e9;
  const double tps = elapsed_s > 0 ? static_cast<double>(res.committed) / elapsed_s : 0;
  const double ops_per_s = tps * static_cast<double>(ops_per_txn);
  const double p50 = Ms(res.latency_ns.Percentile(0.50));
  const double p99 = Ms(res.latency_ns.Percentile(0.99));
  const double p999 = Ms(res.latency_ns.Percentile(0.999));
  double raw_ops_per_s = 0, engine_vs_raw = 0;
  if (raw) {
    raw_ops_per_s = raw->apply_ns > 0 ? static_cast<double>(raw->ops_committed) / (static_cast<double>(raw->apply_ns) / 1e9) : 0;
    engine_vs_raw = raw_ops_per_s > 0 ? ops_per_s / raw_ops_per_s : 0;
  }

  std::printf("qrstore-bench: %s, %" PRIu64 " txns submitted in %.3f s (seed %" PRIu64 ")\n", kind.c_str(),
              res.submitted, elapsed_s, seed);
  std::printf("  throughput     %.0f txn/s, %.0f ops/s (%" PRIu64 " ops per txn)\n", tps, ops_per_s, ops_per_txn);
  std::printf("  committed      %" PRIu64 " (update ops %" PRIu64 ")\n", res.committed, res.update_ops_committed);
  std::printf("  aborted        %" PRIu64 " (cascade %" PRIu64 ")\n", res.aborted, res.aborted_cascade);
  std::printf("  latency ms     p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (submit -> commit, window %" PRIu64 ")\n",
              p50, p99, p999, Ms(res.latency_ns.max()), outstanding);
  std::printf("  per batch ms   plan %.3f  execute %.3f  commit %.3f  (batches %" PRIu64 ", closed by timeout %" PRIu64 ")\n",
              stats.mean_plan_ms, stats.mean_exec_ms, stats.mean_commit_ms, stats.batches, stats.batches_closed_by_timeout);
  if (raw) {
    std::printf("  raw loop       %.0f ops/s (%" PRIu64 " txns, %" PRIu64 " committed, 1 thread, no concurrency control)\n",
                raw_ops_per_s, raw->txns, raw->committed);
    std::printf("  engine / raw   %.3f\n", engine_vs_raw);
  }
  std::printf("  digest         %s\n", Hex(digest).c_str());
  std::printf("  verify         %s%s%s\n", verify_text.c_str(), verify_detail.empty() ? "" : ": ", verify_detail.c_str());

  if (json) {
    JsonObject inputs;
    inputs.Str("config_file", config_path);
    if (has_txns) inputs.Int("txns", txns); else inputs.Dbl("duration_s", duration_s);
    inputs.Int("seed", seed);
    inputs.Bool("verify", verify);
    inputs.Bool("raw_loop", raw_loop);
    inputs.Str("dump_state", dump_path);
    inputs.Raw("overrides", JsonStringArray(cli.overrides()));

    JsonObject j;
    j.Str("workload", kind);
    j.Int("submitted", res.submitted);
    j.Int("committed", res.committed);
    j.Int("aborted", res.aborted);
    j.Int("aborted_cascade", res.aborted_cascade);
    j.Int("update_ops_committed", res.update_ops_committed);
    j.Dbl("elapsed_s", elapsed_s);
    j.Dbl("throughput_tps", tps);
    j.Dbl("ops_per_s", ops_per_s);
    j.Dbl("p50_ms", p50);
    j.Dbl("p99_ms", p99);
    j.Dbl("p999_ms", p999);
    j.Dbl("max_ms", Ms(res.latency_ns.max()));
    j.Int("batches", stats.batches);
    j.Int("batches_closed_by_timeout", stats.batches_closed_by_timeout);
    j.Dbl("mean_plan_ms", stats.mean_plan_ms);
    j.Dbl("mean_exec_ms", stats.mean_exec_ms);
    j.Dbl("mean_commit_ms", stats.mean_commit_ms);
    j.Int("outstanding", outstanding);
    j.Str("digest", Hex(digest));
    j.Str("verify", verify_text);
    if (verify_failed) j.Str("verify_error", verify_detail);
    if (raw) {
      j.Dbl("raw_ops_per_s", raw_ops_per_s);
      j.Dbl("engine_vs_raw", engine_vs_raw);
      j.Str("raw_digest", Hex(raw->digest));
    }
    j.Raw("inputs", inputs.Done());
    j.Raw("config", config.DumpJson());
    std::printf("%s\n", j.Done().c_str());
  }
  std::fflush(stdout);
  if (verify_failed) return Fail(kExitFailed, "verify failed: " + verify_detail);
  return 0;
}

}  // namespace
}  // namespace qrstore::bench

int main(int argc, char** argv) { return qrstore::bench::Main(argc, argv); }
