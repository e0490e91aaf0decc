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

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
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

int Main(int argc, char** argv) {
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
  ConfigSchema schema;
  cluster::Engine::AddConfigKeys(&schema);
  workloads::AddConfigKeys(&schema);
  Status parsed = cli.Parse(argc, argv);
  if (cli.help_requested()) {
    std::fputs(cli.Usage(&schema).c_str(), stdout);
    return 0;
  }
  if (!parsed.ok()) return Fail(kExitBadInput, parsed.message());
  if (!cli.positional().empty()) return Fail(kExitBadInput, "unexpected argument '" + cli.positional()[0] + "'");
  if (cli.Has("log-level") && !SetLogLevel(cli.Get("log-level"))) {
    return Fail(kExitBadInput, "flag --log-level: unknown level '" + cli.Get("log-level") + "'");
  }
  auto config_or = Config::Load(schema, cli.Get("config"), cli.overrides());
  if (!config_or.ok()) return Fail(kExitBadInput, config_or.status().message());
  const Config& config = config_or.value();
  if (!cli.Has("txns")) return Fail(kExitBadInput, "missing --txns N (see qrstore-row-bench --help)");
  auto txns_flag = cli.GetInt("txns", 0);
  if (!txns_flag.ok()) return Fail(kExitBadInput, txns_flag.status().message());
  auto seed_flag = cli.GetInt("seed", 1);
  if (!seed_flag.ok()) return Fail(kExitBadInput, seed_flag.status().message());
  if (txns_flag.value() < 1 || txns_flag.value() > 100'000'000) return Fail(kExitBadInput, "flag --txns: must be in [1, 100000000]");
  if (seed_flag.value() < 0) return Fail(kExitBadInput, "flag --seed: must be >= 0");
  const bool verify = cli.Has("verify"), json = cli.Has("json");
  const uint64_t seed = static_cast<uint64_t>(seed_flag.value());

  const auto nparts = static_cast<uint32_t>(config.GetInt("engine.partitions"));
  const auto planners = static_cast<uint32_t>(config.GetInt("threads.planners"));
  const auto executors = static_cast<uint32_t>(config.GetInt("threads.executors"));
  const auto in_flight = static_cast<uint32_t>(config.GetInt("engine.batches_in_flight"));
  const auto batch_txns = static_cast<uint64_t>(config.GetInt("batch.txns"));
  const bool range_fn = config.GetString("engine.range_function") == "range";
  const uint64_t key_space = workloads::EngineKeySpace(config);
  if (range_fn && key_space < uint64_t{nparts} * executors) {
    return Fail(kExitBadInput, "engine.key_space must be >= engine.partitions * threads.executors with range mapping");
  }
  const storage::KeyMapper parts(range_fn ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash, nparts,
                                 key_space);
  const storage::KeyMapper ranges = storage::KeyMapper::Within(parts, executors);
  auto options_or = workloads::OptionsFromConfig(config, parts);
  if (!options_or.ok()) return Fail(kExitBadInput, options_or.status().message());
  const workloads::WorkloadOptions options = options_or.value();
  if (options.kind != workloads::WorkloadKind::kYcsb) return Fail(kExitBadInput, "workload.kind: only ycsb runs in a row so far");
  if (verify && options.ycsb.abort_ratio > 0) {
    return Fail(kExitBadInput, "--verify needs ycsb.abort_ratio = 0 (the serial reference has no cascade rule)");
  }
  // Every node's table holds all records (a node touches only its own partition's).
  if (Status s = workloads::CheckMemoryFits(options, nparts + (verify ? 1 : 0), 0); !s.ok()) {
    return Fail(kExitBadInput, s.message());
  }
  const uint32_t threads = nparts * planners;
  const uint64_t per_slice = std::max<uint64_t>(1, batch_txns / planners);
  const uint64_t total = static_cast<uint64_t>(txns_flag.value());
  const uint64_t batches = (total + threads * per_slice - 1) / (threads * per_slice);
  auto log = Logger("row-bench");
  log->info("effective config:\n{}", config.Dump());

  // Input: thread (home h, planner t) plans batches x per_slice txns (the last batch of the
  // last threads may be shorter: the row's total is exactly --txns).
  const int64_t gen0 = NowNanos();
  std::vector<std::vector<std::vector<storage::Txn>>> input(threads, std::vector<std::vector<storage::Txn>>(batches));
  uint64_t left = total, multi = 0, deps = 0;  // input[slice][batch]: the txns of sub-slices (batch, slice)
  {
    std::vector<std::unique_ptr<workloads::Generator>> gens;
    for (uint32_t s = 0; s < threads; ++s) {
      workloads::WorkloadOptions home = options;
      home.home_partition = s / planners;
      auto g = workloads::MakeGenerator(home, seed * 1000003 + s);
      if (!g.ok()) return Fail(kExitBadInput, g.status().message());
      gens.push_back(std::move(g).value());
    }
    for (uint64_t b = 0; b < batches; ++b) {
      for (uint32_t s = 0; s < threads; ++s) {
        const uint64_t n = std::min(left, per_slice);
        left -= n;
        auto& v = input[s][b];
        v.reserve(n);
        for (uint64_t i = 0; i < n; ++i) {
          v.push_back(gens[s]->Next());
          const storage::Txn& t = v.back();
          bool mp = false;
          for (const auto& op : t.ops) {
            mp |= parts.Of(op.key) != s / planners;
            deps += op.kind == storage::OpKind::kDepWrite;
          }
          multi += mp;
        }
      }
    }
  }
  log->info("generated {} txns in {:.2f} s: {} batches x {} homes x {} planners x <= {} txns; {} multi-partition",
            total, static_cast<double>(NowNanos() - gen0) / 1e9, batches, nparts, planners, per_slice, multi);

  // The row.
  cluster::LocalRow row;
  std::vector<std::unique_ptr<cluster::LocalRowLink>> links;
  std::vector<std::unique_ptr<storage::Table>> tables;
  std::vector<std::unique_ptr<cluster::Pipeline>> nodes;
  std::atomic<uint64_t> committed_at_home{0}, aborted_at_home{0}, values_at_home{0};
  // Each home's commit: its slices' outcomes once every partition reported them (the values of
  // reads gathered from the partitions that ran them). A txn is counted there.
  std::vector<std::unique_ptr<commit::RowCommit>> commits;
  for (uint32_t h = 0; h < nparts; ++h) {
    commits.push_back(std::make_unique<commit::RowCommit>(
        parts, options.Layout().size(),
        [&](uint64_t, uint32_t, const commit::RowHomeSlice& v) {
          uint64_t committed = 0;
          uint64_t values = 0;
          for (const auto& o : v.txns) {
            committed += o.status == commit::TxnStatus::kCommitted;
            values += o.values_size;
          }
          committed_at_home.fetch_add(committed, std::memory_order_relaxed);
          aborted_at_home.fetch_add(v.txns.size() - committed, std::memory_order_relaxed);
          values_at_home.fetch_add(values / options.Layout().size(), std::memory_order_relaxed);
        }));
  }
  // Which sub-slices list no txn (they get no sink call: reported empty once their batch commits).
  std::vector<std::vector<std::vector<uint8_t>>> empty_sub(
      batches, std::vector<std::vector<uint8_t>>(threads, std::vector<uint8_t>(nparts, 0)));
  for (uint32_t p = 0; p < nparts; ++p) {
    tables.push_back(std::make_unique<storage::Table>(options.Layout(), options.RecordCount()));
    // Each node holds its own partition's records only, as a server of a row does.
    if (Status s = workloads::LoadTable(options, tables.back().get(), [&](storage::Key k) { return parts.Of(k) == p; });
        !s.ok()) {
      return Fail(kExitFailed, "load: " + s.ToString());
    }
    cluster::PipelineOptions po;
    po.planners = threads;
    po.executors = executors;
    po.committers = static_cast<uint32_t>(config.GetInt("threads.committers"));
    po.batches_in_flight = config.GetString("engine.sync") == "node" ? 1 : in_flight;
    po.ranges = ranges;
    links.push_back(std::make_unique<cluster::LocalRowLink>(&row, p));
    po.row_sender = links.back().get();
    po.row_partitions = nparts;
    po.row_partition = p;
    po.capture_reads = true;  // a home returns its txns' reads
    // Each sub-slice's outcomes go to its home as this partition's report (BatchDone's part).
    auto sink = [&commits, p, planners](const std::vector<commit::TxnOutcome>& v) {
      if (v.empty()) return;
      commit::RowSliceReport report;
      report.txns.reserve(v.size());
      size_t bytes = 0;
      for (const auto& o : v) bytes += o.values.size();
      report.values.reserve(bytes);
      for (const auto& o : v) report.Add(o.home_index, o.status, o.values);
      commits[v.front().pos.planner / planners]->Report(p, v.front().pos.batch, v.front().pos.planner, std::move(report));
    };
    auto hook = [&commits, &empty_sub, p, planners, threads](const cluster::BatchInfo& info) {
      for (uint32_t s = 0; s < threads; ++s) {
        if (empty_sub[info.batch][s][p] != 0) commits[s / planners]->Report(p, info.batch, s, {});
      }
    };
    nodes.push_back(std::make_unique<cluster::Pipeline>(po, tables.back().get(), sink, hook));
    row.nodes.push_back(nodes.back().get());
  }
  for (auto& n : nodes) {
    if (Status s = n->Start(); !s.ok()) return Fail(kExitFailed, "start: " + s.ToString());
    n->EndInput(batches);
  }
  const double cpu0 = CpuSeconds();
  const int64_t t0 = NowNanos();
  std::atomic<bool> failed{false};
  {
    std::vector<NamedThread> fronts;
    for (uint32_t s = 0; s < threads; ++s) {
      fronts.emplace_back("home" + std::to_string(s / planners) + "-plan" + std::to_string(s % planners), [&, s] {
        planner::RowPlanner rp(parts, ranges, s / planners);
        std::vector<planner::PlannedSlice> subs;
        for (uint64_t b = 0; b < batches && !failed.load(); ++b) {
          rp.PlanSlices(b, s, input[s][b], &subs);
          // The home keeps its txns until every partition reported (--verify needs them after).
          commits[s / planners]->Plan(b, s, verify ? input[s][b] : std::move(input[s][b]));
          for (uint32_t p = 0; p < nparts; ++p) empty_sub[b][s][p] = subs[p].txns.empty();
          for (uint32_t p = 0; p < nparts; ++p) {
            planner::PlannedSlice* slot = nodes[p]->BeginSlice(b, s);
            if (slot == nullptr) {
              failed.store(true);
              return;
            }
            std::swap(*slot, subs[p]);
            nodes[p]->PublishSlice(b, s, 0, /*replicated=*/true);
          }
        }
      });
    }
    // Progress once a second while the row runs.
    for (;;) {
      Status st = nodes[0]->WaitIdle(1000);
      if (st.code() != StatusCode::kTimeout) break;
      log->info("t={:.0f}s batches committed on node 0: {} of {}, committed at home {}",
                static_cast<double>(NowNanos() - t0) / 1e9, nodes[0]->committed_batches(), batches,
                committed_at_home.load());
    }
  }
  Status run;
  for (auto& n : nodes) {
    Status st = n->WaitIdle(600'000);
    if (!st.ok() && run.ok()) run = st;
  }
  const int64_t elapsed_ns = NowNanos() - t0;
  const double cpu_s = CpuSeconds() - cpu0;
  for (auto& n : nodes) n->Stop();
  if (!run.ok()) return Fail(kExitFailed, "run: " + run.ToString());
  for (auto& c : commits) {
    if (!c->health().ok()) return Fail(kExitFailed, "home commit: " + c->health().ToString());
  }

  std::string verify_text = "skipped";
  if (verify) {
    workloads::ReferenceExecutor ref(options.Layout(), options.RecordCount());
    if (Status s = workloads::LoadTable(options, ref.mutable_table()); !s.ok()) return Fail(kExitFailed, s.ToString());
    for (uint64_t b = 0; b < batches; ++b) {
      for (uint32_t s = 0; s < threads; ++s) {
        for (const storage::Txn& t : input[s][b]) {
          auto r = ref.Apply(t);
          if (!r.ok()) return Fail(kExitFailed, "verify: " + r.status().ToString());
        }
      }
    }
    uint64_t wrong = 0;
    const uint32_t rec = options.Layout().size();
    for (storage::Key k = 0; k < options.RecordCount(); ++k) {
      wrong += std::memcmp(tables[parts.Of(k)]->Find(k), ref.table().Find(k), rec) != 0;
    }
    verify_text = wrong == 0 ? "ok: every key equals the serial run's"
                             : "failed: " + std::to_string(wrong) + " keys differ from the serial run";
    if (wrong != 0) {
      std::printf("  verify         %s\n", verify_text.c_str());
      return Fail(kExitFailed, "verify " + verify_text);
    }
  }

  const double secs = static_cast<double>(elapsed_ns) / 1e9;
  const double tps = static_cast<double>(total) / secs;
  const double cpu_us = cpu_s * 1e6 / static_cast<double>(total);
  std::printf("qrstore-row-bench: %u partitions x (%u planners, %u executors), %" PRIu64 " txns in %.3f s (seed %" PRIu64 ")\n",
              nparts, planners, executors, total, secs, seed);
  std::printf("  throughput     %.0f txn/s (at their homes, every partition done: %" PRIu64 " committed, %" PRIu64
              " aborted, %" PRIu64 " read values returned)\n",
              tps, committed_at_home.load(), aborted_at_home.load(), values_at_home.load());
  std::printf("  cpu            %.3f us per txn over the row (%.2f s)\n", cpu_us, cpu_s);
  std::printf("  input          %" PRIu64 " multi-partition (%.1f%%), %" PRIu64 " dependent writes, %" PRIu64
              " values sent across partitions, %" PRIu64 " abort-vote messages\n",
              multi, 100.0 * static_cast<double>(multi) / static_cast<double>(total), deps, row.dep_values.load(),
              row.vote_msgs.load());
  std::printf("  verify         %s\n", verify_text.c_str());
  if (json) {
    JsonObject j;
    j.Int("partitions", nparts);
    j.Int("planners_per_node", planners);
    j.Int("executors_per_node", executors);
    j.Int("txns", total);
    j.Int("seed", seed);
    j.Dbl("elapsed_s", secs);
    j.Dbl("throughput_tps", tps);
    j.Dbl("cpu_us_per_txn", cpu_us);
    j.Int("multi_partition", multi);
    j.Int("dep_writes", deps);
    j.Int("values_sent", row.dep_values.load());
    j.Int("vote_messages", row.vote_msgs.load());
    j.Int("committed", committed_at_home.load());
    j.Int("aborted", aborted_at_home.load());
    j.Str("verify", verify_text);
    j.Raw("overrides", JsonStringArray(cli.overrides()));
    j.Raw("config", config.DumpJson());
    std::printf("%s\n", j.Done().c_str());
  }
  if (committed_at_home.load() + aborted_at_home.load() != total) {
    return Fail(kExitFailed, "outcomes at home: " + std::to_string(committed_at_home.load() + aborted_at_home.load()) +
                                 " of " + std::to_string(total));
  }
  return 0;
}

}  // namespace
}  // namespace qrstore::bench

int main(int argc, char** argv) { return qrstore::bench::Main(argc, argv); }
