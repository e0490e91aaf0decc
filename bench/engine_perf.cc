// qrstore-engine-perf: a small throughput driver for the single-node engine (not the benchmark:
// bench/qrstore-bench is). Loads a table of `--records` records, submits `--txns` YCSB-style
// transactions (uniform keys, distinct within a txn, `--ops` ops, `--write-pct` updates) from one
// thread as fast as the engine takes them, and prints committed txn/s and ops/s plus the
// engine's per-stage means. Engine keys can be overridden (--threads.executors=2 ...).
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/rng.h"
#include "engine/engine.h"
#include "storage/record.h"
#include "storage/table.h"

using namespace qrstore;

int main(int argc, char** argv) {
  CommandLine cli("qrstore-engine-perf", "[--txns N] [--records N] [--ops N] [--write-pct P] [--seed S] [--key=value ...]",
                  "Measures the single-node engine's throughput on a uniform YCSB-like load.");
  cli.AddValue("config", "FILE", "YAML config with engine keys (optional)");
  cli.AddValue("txns", "N", "transactions to submit (default 300000)");
  cli.AddValue("records", "N", "records in the table (default 1000000)");
  cli.AddValue("ops", "N", "ops per transaction (default 16)");
  cli.AddValue("write-pct", "P", "percent of ops that are updates (default 50)");
  cli.AddValue("seed", "S", "generator seed (default 1)");
  cli.AddValue("abort-pct", "P", "percent of txns whose last op is a kAbortIf firing half the time (default 0)");
  ConfigSchema schema;
  engine::Engine::AddConfigKeys(&schema);
  if (Status st = cli.Parse(argc, argv); !st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return 2;
  }
  if (cli.help_requested()) {
    std::printf("%s", cli.Usage(&schema).c_str());
    return 0;
  }
  auto txns = cli.GetInt("txns", 300000);
  auto records = cli.GetInt("records", 1000000);
  auto ops = cli.GetInt("ops", 16);
  auto write_pct = cli.GetInt("write-pct", 50);
  auto seed = cli.GetInt("seed", 1);
  auto abort_pct = cli.GetInt("abort-pct", 0);
  for (const auto* r : {&txns, &records, &ops, &write_pct, &seed, &abort_pct}) {
    if (!r->ok()) {
      std::fprintf(stderr, "error: %s\n", r->status().message().c_str());
      return 2;
    }
  }
  if (txns.value() < 0 || records.value() < 1 || ops.value() < 1 || ops.value() > records.value() ||
      write_pct.value() < 0 || write_pct.value() > 100 || abort_pct.value() < 0 || abort_pct.value() > 100) {
    std::fprintf(stderr,
                 "error: need --txns >= 0, --records >= 1, 1 <= --ops <= --records, --write-pct and --abort-pct in "
                 "[0, 100]\n");
    return 2;
  }
  auto config = Config::Load(schema, cli.Get("config"), cli.overrides());
  if (!config.ok()) {
    std::fprintf(stderr, "error: %s\n", config.status().message().c_str());
    return 2;
  }

  const storage::RecordLayout layout{10, 10};
  storage::Table table(layout, static_cast<uint64_t>(records.value()));
  {
    std::string rec(layout.size(), '\0');
    for (int64_t k = 0; k < records.value(); ++k) {
      storage::InitRecord(rec.data(), layout, static_cast<uint64_t>(k), 0);
      if (Status st = table.Insert(static_cast<uint64_t>(k), rec.data()); !st.ok()) {
        std::fprintf(stderr, "error: %s\n", st.message().c_str());
        return 1;
      }
    }
  }
  std::atomic<uint64_t> committed{0};
  auto engine = engine::Engine::Create(config.value(), &table, [&](const std::vector<commit::TxnOutcome>& v) {
    committed.fetch_add(v.size(), std::memory_order_relaxed);
  });
  if (!engine.ok()) {
    std::fprintf(stderr, "error: %s\n", engine.status().message().c_str());
    return 2;
  }
  if (Status st = engine.value()->Start(); !st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return 1;
  }
  Rng rng(static_cast<uint64_t>(seed.value()));
  const auto n = static_cast<uint64_t>(records.value());
  const int64_t t0 = NowNanos();
  int64_t next_report = t0 + 1'000'000'000;
  for (int64_t i = 0; i < txns.value(); ++i) {
    storage::Txn t;
    t.id = static_cast<uint64_t>(i) + 1;
    t.submit_ns = NowNanos();
    t.ops.resize(static_cast<size_t>(ops.value()));
    for (size_t j = 0; j < t.ops.size(); ++j) {
      storage::Op& op = t.ops[j];
      bool dup;
      do {  // distinct keys within a txn
        op.key = rng.Next() % n;
        dup = false;
        for (size_t k = 0; k < j; ++k) dup |= t.ops[k].key == op.key;
      } while (dup);
      op.kind = static_cast<int64_t>(rng.Next() % 100) < write_pct.value() ? storage::OpKind::kUpdate
                                                                            : storage::OpKind::kRead;
    }
    if (static_cast<int64_t>(rng.Next() % 100) < abort_pct.value()) {
      t.ops.back().kind = storage::OpKind::kAbortIf;
      t.ops.back().arg = 5000;
    }
    const int64_t submit_ns = t.submit_ns;
    if (!engine.value()->Submit(std::move(t))) break;
    if (submit_ns > next_report) {
      next_report += 1'000'000'000;
      std::fprintf(stderr, "progress: %lld submitted, %llu committed\n", static_cast<long long>(i + 1),
                   static_cast<unsigned long long>(committed.load(std::memory_order_relaxed)));
    }
  }
  engine.value()->Finish();
  const double secs = static_cast<double>(NowNanos() - t0) / 1e9;
  engine::EngineStats s = engine.value()->Stats();
  engine.value()->Stop();
  const double tps = static_cast<double>(s.committed) / secs;
  std::printf("committed %llu txns in %.3f s: %.0f txn/s, %.0f ops/s\n", static_cast<unsigned long long>(s.committed),
              secs, tps, tps * static_cast<double>(ops.value()));
  std::printf("batches %llu (closed by timeout %llu), mean per batch: plan %.2f ms, exec %.2f ms, commit %.2f ms\n",
              static_cast<unsigned long long>(s.batches), static_cast<unsigned long long>(s.batches_closed_by_timeout),
              s.mean_plan_ms, s.mean_exec_ms, s.mean_commit_ms);
  std::printf("aborted %llu, re-executed after aborts %llu\n", static_cast<unsigned long long>(s.aborted),
              static_cast<unsigned long long>(s.reexecuted));
  std::printf("digest %016llx\n", static_cast<unsigned long long>(table.Digest()));
  return 0;
}
