// qrstore-row-bench: a partitioned row in one process (docs/partitioned-rows.md, step 1). P
// nodes, one per partition, each a Pipeline over its own table. Every node is also a home:
// threads.planners planner threads per node generate YCSB txns whose first key is on the
// home's partition (ycsb.mp_ratio of them also touch ycsb.partitions_per_txn - 1 other
// partitions), plan them with RowPlanner and hand every partition its sub-slice, so each node
// runs (batch, home, planner) sub-slices in global order. Dependency values of cross-partition
// x <- y ops go straight to the receiving node's pipeline (no network: this measures the
// engine's side of a row, not the transport).
//
// Open loop over a fixed input: --txns is the row's total, generated ahead of the run, so the
// figure is execution throughput (planning is timed in the run). --verify replays every txn
// serially in global order on one table and compares each key with its owner's record.
// Exit codes: 0 success, 1 the run or its verification failed, 2 bad input.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster/row/row_local_link.h"
#include "commit/row_commit.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/report.h"
#include "common/thread.h"
#include "engine/engine.h"
#include "engine/pipeline.h"
#include "executor/range_executor.h"
#include "planner/row_planner.h"
#include "storage/key_map.h"
#include "storage/table.h"
#include "workloads/reference_executor.h"
#include "workloads/workload.h"

namespace qrstore::bench {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "qrstore-row-bench: %s\n", msg.c_str());
  return code;
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The validated inputs of a row run: the flags, the config and the row's shape.
struct RowOptions {
  uint64_t total = 0;  // --txns: the row's total
  uint64_t seed = 1;
  bool verify = false, json = false;
  Config config;
  uint32_t nparts = 0, planners = 0, executors = 0, in_flight = 0;
  uint64_t batch_txns = 0;
  storage::KeyMapper parts;   // key -> partition (node)
  storage::KeyMapper ranges;  // key -> executor range within its partition
  workloads::WorkloadOptions options;
  uint32_t threads = 0;    // planner threads over the row: nparts * planners
  uint64_t per_slice = 0;  // txns per (batch, planner thread) sub-slice
  uint64_t batches = 0;
};

// input[slice][batch]: the txns of sub-slices (batch, slice)
using RowInput = std::vector<std::vector<std::vector<storage::Txn>>>;

// The row: its nodes with their tables and links, and each home's commit with its counters.
// The nodes' and commits' callbacks point into it: it stays where Main made it (atomics cannot move).
struct Row {
  cluster::LocalRow row;
  std::vector<std::unique_ptr<cluster::LocalRowLink>> links;
  std::vector<std::unique_ptr<storage::Table>> tables;
  std::vector<std::unique_ptr<engine::Pipeline>> nodes;
  std::atomic<uint64_t> committed_at_home{0}, aborted_at_home{0}, values_at_home{0};
  // Each home's commit: its slices' outcomes once every partition reported them (the values of
  // reads gathered from the partitions that ran them). A txn is counted there.
  std::vector<std::unique_ptr<commit::RowCommit>> commits;
  // Which sub-slices list no txn (they get no sink call: reported empty once their batch commits).
  std::vector<std::vector<std::vector<uint8_t>>> empty_sub;
};

// What a run measured, for the summary and --json.
struct RowReport {
  uint64_t multi = 0, deps = 0;  // multi-partition txns and dependent writes in the input
  int64_t elapsed_ns = 0;
  double cpu_s = 0;
  std::string verify_text = "skipped";
};

// The command line: the flags and the --help text.
CommandLine MakeCommandLine() {
  CommandLine cli("qrstore-row-bench", "[--config FILE] [--key=value ...] --txns N [--seed S] [--verify] [--json]",
                  "Runs a partitioned row of engine.partitions nodes in one process: every node plans its own\n"
                  "YCSB txns into row sub-slices for every partition and executes the sub-slices addressed to\n"
                  "it, dependency values crossing between nodes. Prints throughput and CPU per txn for the row.\n"
                  "Keys: threads.planners (per node), threads.executors (per node), batch.txns (per node and\n"
                  "batch), engine.batches_in_flight, engine.range_function, ycsb.* (mp_ratio, dep_ratio,\n"
                  "abort_ratio, ...). Aborts are resolved by cascade over the batch (docs/partitioned-rows.md).");
  cli.AddValue("config", "FILE", "YAML config (e.g. configs/single-node.yaml); defaults when omitted");
  cli.AddValue("txns", "N", "transactions over the whole row (split evenly over the planner threads)");
  cli.AddValue("seed", "S", "workload seed (default 1)");
  cli.AddSwitch("verify",
                "replay every txn serially in global order and compare each key with its owner's record "
                "(needs ycsb.abort_ratio = 0: the serial reference does not apply the cascade rule)");
  cli.AddSwitch("json", "print one JSON object with the results as the last line of stdout");
  cli.AddValue("log-level", "LEVEL", "trace|debug|info|warn|error|off (default info)");
  return cli;
}

// Checks the parsed flags and loads the config into *o; nullopt to go on, else the exit code.
std::optional<int> ParseFlags(const ConfigSchema& schema, const CommandLine& cli, RowOptions* o) {
  if (!cli.positional().empty()) return Fail(kExitBadInput, "unexpected argument '" + cli.positional()[0] + "'");
  if (cli.Has("log-level") && !SetLogLevel(cli.Get("log-level"))) {
    return Fail(kExitBadInput, "flag --log-level: unknown level '" + cli.Get("log-level") + "'");
  }
  auto config_or = Config::Load(schema, cli.Get("config"), cli.overrides());
  if (!config_or.ok()) return Fail(kExitBadInput, config_or.status().message());
  o->config = std::move(config_or).value();
  if (!cli.Has("txns")) return Fail(kExitBadInput, "missing --txns N (see qrstore-row-bench --help)");
  auto txns_flag = cli.GetInt("txns", 0);
  if (!txns_flag.ok()) return Fail(kExitBadInput, txns_flag.status().message());
  auto seed_flag = cli.GetInt("seed", 1);
  if (!seed_flag.ok()) return Fail(kExitBadInput, seed_flag.status().message());
  if (txns_flag.value() < 1 || txns_flag.value() > 100'000'000) return Fail(kExitBadInput, "flag --txns: must be in [1, 100000000]");
  if (seed_flag.value() < 0) return Fail(kExitBadInput, "flag --seed: must be >= 0");
  o->verify = cli.Has("verify");
  o->json = cli.Has("json");
  o->seed = static_cast<uint64_t>(seed_flag.value());
  o->total = static_cast<uint64_t>(txns_flag.value());
  return std::nullopt;
}

// Derives the row's shape and workload from the config into *o; nullopt to go on, else the exit code.
std::optional<int> ShapeRow(RowOptions* o) {
  const Config& config = o->config;
  o->nparts = static_cast<uint32_t>(config.GetInt("engine.partitions"));
  o->planners = static_cast<uint32_t>(config.GetInt("threads.planners"));
  o->executors = static_cast<uint32_t>(config.GetInt("threads.executors"));
  o->in_flight = static_cast<uint32_t>(config.GetInt("engine.batches_in_flight"));
  o->batch_txns = static_cast<uint64_t>(config.GetInt("batch.txns"));
  const bool range_fn = config.GetString("engine.range_function") == "range";
  const uint64_t key_space = workloads::EngineKeySpace(config);
  if (range_fn && key_space < uint64_t{o->nparts} * o->executors) {
    return Fail(kExitBadInput, "engine.key_space must be >= engine.partitions * threads.executors with range mapping");
  }
  o->parts = storage::KeyMapper(range_fn ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash,
                                o->nparts, key_space);
  o->ranges = storage::KeyMapper::Within(o->parts, o->executors);
  auto options_or = workloads::OptionsFromConfig(config, o->parts);
  if (!options_or.ok()) return Fail(kExitBadInput, options_or.status().message());
  o->options = options_or.value();
  const workloads::WorkloadOptions& options = o->options;
  if (options.kind != workloads::WorkloadKind::kYcsb) return Fail(kExitBadInput, "workload.kind: only ycsb runs in a row so far");
  if (o->verify && options.ycsb.abort_ratio > 0) {
    return Fail(kExitBadInput, "--verify needs ycsb.abort_ratio = 0 (the serial reference has no cascade rule)");
  }
  // Every node's table holds all records (a node touches only its own partition's).
  if (Status s = workloads::CheckMemoryFits(options, o->nparts + (o->verify ? 1 : 0), 0); !s.ok()) {
    return Fail(kExitBadInput, s.message());
  }
  o->threads = o->nparts * o->planners;
  o->per_slice = std::max<uint64_t>(1, o->batch_txns / o->planners);
  o->batches = (o->total + o->threads * o->per_slice - 1) / (o->threads * o->per_slice);
  return std::nullopt;
}

// Generates every planner thread's txns ahead of the run; nullopt to go on, else the exit code.
std::optional<int> GenerateInput(const RowOptions& o, const std::shared_ptr<spdlog::logger>& log, RowInput* input,
                                 RowReport* report) {
  // Input: thread (home h, planner t) plans batches x per_slice txns (the last batch of the
  // last threads may be shorter: the row's total is exactly --txns).
  const uint32_t threads = o.threads, planners = o.planners;
  const int64_t gen0 = NowNanos();
  input->assign(threads, std::vector<std::vector<storage::Txn>>(o.batches));
  uint64_t left = o.total, multi = 0, deps = 0;
  {
    std::vector<std::unique_ptr<workloads::Generator>> gens;
    for (uint32_t s = 0; s < threads; ++s) {
      workloads::WorkloadOptions home = o.options;
      home.home_partition = s / planners;
      auto g = workloads::MakeGenerator(home, o.seed * 1000003 + s);
      if (!g.ok()) return Fail(kExitBadInput, g.status().message());
      gens.push_back(std::move(g).value());
    }
    for (uint64_t b = 0; b < o.batches; ++b) {
      for (uint32_t s = 0; s < threads; ++s) {
        const uint64_t n = std::min(left, o.per_slice);
        left -= n;
        auto& v = (*input)[s][b];
        v.reserve(n);
        for (uint64_t i = 0; i < n; ++i) {
          v.push_back(gens[s]->Next());
          const storage::Txn& t = v.back();
          bool mp = false;
          for (const auto& op : t.ops) {
            mp |= o.parts.Of(op.key) != s / planners;
            deps += op.kind == storage::OpKind::kDepWrite;
          }
          multi += mp;
        }
      }
    }
  }
  report->multi = multi;
  report->deps = deps;
  log->info("generated {} txns in {:.2f} s: {} batches x {} homes x {} planners x <= {} txns; {} multi-partition",
            o.total, static_cast<double>(NowNanos() - gen0) / 1e9, o.batches, o.nparts, planners, o.per_slice, multi);
  return std::nullopt;
}

// Creates each home's commit, which counts its txns' outcomes into the row's counters.
void AddHomeCommits(const RowOptions& o, Row* row) {
  const workloads::WorkloadOptions& options = o.options;
  for (uint32_t h = 0; h < o.nparts; ++h) {
    row->commits.push_back(std::make_unique<commit::RowCommit>(
        o.parts, options.Layout().size(),
        [row, &options](uint64_t, uint32_t, const commit::RowHomeSlice& v) {
          uint64_t committed = 0;
          uint64_t values = 0;
          for (const auto& out : v.txns) {
            committed += out.status == commit::TxnStatus::kCommitted;
            values += out.values_size;
          }
          row->committed_at_home.fetch_add(committed, std::memory_order_relaxed);
          row->aborted_at_home.fetch_add(v.txns.size() - committed, std::memory_order_relaxed);
          row->values_at_home.fetch_add(values / options.Layout().size(), std::memory_order_relaxed);
        }));
  }
}

// Adds partition p's node (its table, loaded, and its pipeline); nullopt to go on, else the exit code.
std::optional<int> AddNode(const RowOptions& o, uint32_t p, Row* row) {
  const uint32_t planners = o.planners, threads = o.threads;
  const storage::KeyMapper& parts = o.parts;
  row->tables.push_back(std::make_unique<storage::Table>(o.options.Layout(), o.options.RecordCount()));
  // Each node holds its own partition's records only, as a server of a row does.
  if (Status s = workloads::LoadTable(o.options, row->tables.back().get(), [&](storage::Key k) { return parts.Of(k) == p; });
      !s.ok()) {
    return Fail(kExitFailed, "load: " + s.ToString());
  }
  engine::PipelineOptions po;
  po.planners = threads;
  po.executors = o.executors;
  po.committers = static_cast<uint32_t>(o.config.GetInt("threads.committers"));
  po.batches_in_flight = o.config.GetString("engine.sync") == "node" ? 1 : o.in_flight;
  po.ranges = o.ranges;
  row->links.push_back(std::make_unique<cluster::LocalRowLink>(&row->row, p));
  po.row_sender = row->links.back().get();
  po.row_partitions = o.nparts;
  po.row_partition = p;
  po.capture_reads = true;  // a home returns its txns' reads
  // Each sub-slice's outcomes go to its home as this partition's report (BatchDone's part).
  auto sink = [row, p, planners](const std::vector<commit::TxnOutcome>& v) {
    if (v.empty()) return;
    commit::RowSliceReport report;
    report.txns.reserve(v.size());
    size_t bytes = 0;
    for (const auto& out : v) bytes += out.values.size();
    report.values.reserve(bytes);
    for (const auto& out : v) report.Add(out.home_index, out.status, out.values);
    row->commits[v.front().pos.planner / planners]->Report(p, v.front().pos.batch, v.front().pos.planner, std::move(report));
  };
  auto hook = [row, p, planners, threads](const commit::BatchInfo& info) {
    for (uint32_t s = 0; s < threads; ++s) {
      if (row->empty_sub[info.batch][s][p] != 0) row->commits[s / planners]->Report(p, info.batch, s, {});
    }
  };
  row->nodes.push_back(std::make_unique<engine::Pipeline>(po, row->tables.back().get(), sink, hook));
  row->row.nodes.push_back(row->nodes.back().get());
  return std::nullopt;
}

// Builds the row: the homes' commits, then a node per partition; nullopt to go on, else the exit code.
std::optional<int> BuildRow(const RowOptions& o, Row* row) {
  AddHomeCommits(o, row);
  row->empty_sub.assign(o.batches, std::vector<std::vector<uint8_t>>(o.threads, std::vector<uint8_t>(o.nparts, 0)));
  for (uint32_t p = 0; p < o.nparts; ++p) {
    if (std::optional<int> rc = AddNode(o, p, row)) return rc;
  }
  return std::nullopt;
}

// Planner thread s: plans its batches into sub-slices and publishes each on its partition's node.
void PlanThread(const RowOptions& o, uint32_t s, RowInput* in, Row* row, std::atomic<bool>* failed) {
  RowInput& input = *in;
  planner::RowPlanner rp(o.parts, o.ranges, s / o.planners);
  std::vector<planner::PlannedSlice> subs;
  for (uint64_t b = 0; b < o.batches && !failed->load(); ++b) {
    rp.PlanSlices(b, s, input[s][b], &subs);
    // The home keeps its txns until every partition reported (--verify needs them after).
    row->commits[s / o.planners]->Plan(b, s, o.verify ? input[s][b] : std::move(input[s][b]));
    for (uint32_t p = 0; p < o.nparts; ++p) row->empty_sub[b][s][p] = subs[p].txns.empty();
    for (uint32_t p = 0; p < o.nparts; ++p) {
      planner::PlannedSlice* slot = row->nodes[p]->BeginSlice(b, s);
      if (slot == nullptr) {
        failed->store(true);
        return;
      }
      std::swap(*slot, subs[p]);
      row->nodes[p]->PublishSlice(b, s, 0, /*replicated=*/true);
    }
  }
}

// Starts the nodes, runs the planner threads until all is idle, times it; nullopt to go on, else the exit code.
std::optional<int> RunRow(const RowOptions& o, const std::shared_ptr<spdlog::logger>& log, RowInput* input, Row* row,
                          RowReport* report) {
  for (auto& n : row->nodes) {
    if (Status s = n->Start(); !s.ok()) return Fail(kExitFailed, "start: " + s.ToString());
    n->EndInput(o.batches);
  }
  const double cpu0 = CpuSeconds();
  const int64_t t0 = NowNanos();
  std::atomic<bool> failed{false};
  {
    std::vector<NamedThread> fronts;
    for (uint32_t s = 0; s < o.threads; ++s) {
      fronts.emplace_back("home" + std::to_string(s / o.planners) + "-plan" + std::to_string(s % o.planners),
                          [&, s] { PlanThread(o, s, input, row, &failed); });
    }
    // Progress once a second while the row runs.
    for (;;) {
      Status st = row->nodes[0]->WaitIdle(1000);
      if (st.code() != StatusCode::kTimeout) break;
      log->info("t={:.0f}s batches committed on node 0: {} of {}, committed at home {}",
                static_cast<double>(NowNanos() - t0) / 1e9, row->nodes[0]->committed_batches(), o.batches,
                row->committed_at_home.load());
    }
  }
  Status run;
  for (auto& n : row->nodes) {
    Status st = n->WaitIdle(600'000);
    if (!st.ok() && run.ok()) run = st;
  }
  report->elapsed_ns = NowNanos() - t0;
  report->cpu_s = CpuSeconds() - cpu0;
  for (auto& n : row->nodes) n->Stop();
  if (!run.ok()) return Fail(kExitFailed, "run: " + run.ToString());
  for (auto& c : row->commits) {
    if (!c->health().ok()) return Fail(kExitFailed, "home commit: " + c->health().ToString());
  }
  return std::nullopt;
}

// --verify: replays every txn serially in global order, compares each key with its owner's record.
std::optional<int> VerifyRow(const RowOptions& o, const RowInput& input, const Row& row, RowReport* report) {
  const workloads::WorkloadOptions& options = o.options;
  workloads::ReferenceExecutor ref(options.Layout(), options.RecordCount());
  if (Status s = workloads::LoadTable(options, ref.mutable_table()); !s.ok()) return Fail(kExitFailed, s.ToString());
  for (uint64_t b = 0; b < o.batches; ++b) {
    for (uint32_t s = 0; s < o.threads; ++s) {
      for (const storage::Txn& t : input[s][b]) {
        auto r = ref.Apply(t);
        if (!r.ok()) return Fail(kExitFailed, "verify: " + r.status().ToString());
      }
    }
  }
  uint64_t wrong = 0;
  const uint32_t rec = options.Layout().size();
  for (storage::Key k = 0; k < options.RecordCount(); ++k) {
    wrong += std::memcmp(row.tables[o.parts.Of(k)]->Find(k), ref.table().Find(k), rec) != 0;
  }
  report->verify_text = wrong == 0 ? "ok: every key equals the serial run's"
                                   : "failed: " + std::to_string(wrong) + " keys differ from the serial run";
  if (wrong != 0) {
    std::printf("  verify         %s\n", report->verify_text.c_str());
    return Fail(kExitFailed, "verify " + report->verify_text);
  }
  return std::nullopt;
}

// Prints the summary to stdout and, with --json, the results as one JSON line after it.
void PrintReport(const RowOptions& o, const Row& row, const RowReport& report, const std::vector<std::string>& overrides) {
  const uint64_t total = o.total;
  const double secs = static_cast<double>(report.elapsed_ns) / 1e9;
  const double tps = static_cast<double>(total) / secs;
  const double cpu_us = report.cpu_s * 1e6 / static_cast<double>(total);
  std::printf("qrstore-row-bench: %u partitions x (%u planners, %u executors), %" PRIu64 " txns in %.3f s (seed %" PRIu64 ")\n",
              o.nparts, o.planners, o.executors, total, secs, o.seed);
  std::printf("  throughput     %.0f txn/s (at their homes, every partition done: %" PRIu64 " committed, %" PRIu64
              " aborted, %" PRIu64 " read values returned)\n",
              tps, row.committed_at_home.load(), row.aborted_at_home.load(), row.values_at_home.load());
  std::printf("  cpu            %.3f us per txn over the row (%.2f s)\n", cpu_us, report.cpu_s);
  std::printf("  input          %" PRIu64 " multi-partition (%.1f%%), %" PRIu64 " dependent writes, %" PRIu64
              " values sent across partitions, %" PRIu64 " abort-vote messages\n",
              report.multi, 100.0 * static_cast<double>(report.multi) / static_cast<double>(total), report.deps,
              row.row.dep_values.load(), row.row.vote_msgs.load());
  std::printf("  verify         %s\n", report.verify_text.c_str());
  if (o.json) {
    JsonObject j;
    j.Int("partitions", o.nparts);
    j.Int("planners_per_node", o.planners);
    j.Int("executors_per_node", o.executors);
    j.Int("txns", total);
    j.Int("seed", o.seed);
    j.Dbl("elapsed_s", secs);
    j.Dbl("throughput_tps", tps);
    j.Dbl("cpu_us_per_txn", cpu_us);
    j.Int("multi_partition", report.multi);
    j.Int("dep_writes", report.deps);
    j.Int("values_sent", row.row.dep_values.load());
    j.Int("vote_messages", row.row.vote_msgs.load());
    j.Int("committed", row.committed_at_home.load());
    j.Int("aborted", row.aborted_at_home.load());
    j.Str("verify", report.verify_text);
    j.Raw("overrides", JsonStringArray(overrides));
    j.Raw("config", o.config.DumpJson());
    std::printf("%s\n", j.Done().c_str());
  }
}

int Main(int argc, char** argv) {
  CommandLine cli = MakeCommandLine();
  ConfigSchema schema;
  engine::Engine::AddConfigKeys(&schema);
  workloads::AddConfigKeys(&schema);
  Status parsed = cli.Parse(argc, argv);
  if (cli.help_requested()) {
    std::fputs(cli.Usage(&schema).c_str(), stdout);
    return 0;
  }
  if (!parsed.ok()) return Fail(kExitBadInput, parsed.message());
  RowOptions o;
  if (std::optional<int> rc = ParseFlags(schema, cli, &o)) return *rc;
  if (std::optional<int> rc = ShapeRow(&o)) return *rc;
  auto log = Logger("row-bench");
  log->info("effective config:\n{}", o.config.Dump());

  RowReport report;
  RowInput input;
  if (std::optional<int> rc = GenerateInput(o, log, &input, &report)) return *rc;

  // The row.
  Row row;
  if (std::optional<int> rc = BuildRow(o, &row)) return *rc;
  if (std::optional<int> rc = RunRow(o, log, &input, &row, &report)) return *rc;
  if (o.verify) {
    if (std::optional<int> rc = VerifyRow(o, input, row, &report)) return *rc;
  }

  PrintReport(o, row, report, cli.overrides());
  if (row.committed_at_home.load() + row.aborted_at_home.load() != o.total) {
    return Fail(kExitFailed, "outcomes at home: " + std::to_string(row.committed_at_home.load() + row.aborted_at_home.load()) +
                                 " of " + std::to_string(o.total));
  }
  return 0;
}

}  // namespace
}  // namespace qrstore::bench

int main(int argc, char** argv) { return qrstore::bench::Main(argc, argv); }
