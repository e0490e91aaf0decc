#include "bench/driver.h"

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "storage/table.h"
#include "workloads/reference_executor.h"

namespace qrstore::bench {

LoadDriver::LoadDriver(DriverOptions options) : options_(std::move(options)) {
  QR_CHECK(options_.outstanding >= 1);
}

commit::CommitSink LoadDriver::Sink() {
  return [this](const std::vector<commit::TxnOutcome>& outcomes) { OnOutcomes(outcomes); };
}

void LoadDriver::OnOutcomes(const std::vector<commit::TxnOutcome>& outcomes) {
  {
    MutexLock lock(mu_);
    for (const auto& o : outcomes) {
      if (o.status == commit::TxnStatus::kCommitted) {
        ++result_.committed;
        result_.update_ops_committed += o.write_ops;
        result_.latency_ns.Record(o.commit_ns - o.submit_ns);
      } else {
        ++result_.aborted;
        if (o.status == commit::TxnStatus::kAbortedCascade) ++result_.aborted_cascade;
      }
      if (options_.keep_outcomes) {
        result_.outcomes.push_back(
            OutcomeRecord{o.txn_id, o.pos.batch, o.pos.planner, o.pos.index, o.status, ReadsHash(o.values)});
      }
    }
    completed_ += outcomes.size();
  }
  slot_freed_.notify_one();
}

Status LoadDriver::Run(engine::Engine* engine, workloads::Generator* gen) {
  const int64_t start = NowNanos();
  const int64_t deadline = options_.duration_ns > 0 ? start + options_.duration_ns : INT64_MAX;
  const int64_t interval = options_.progress_interval_ns;
  int64_t next_progress = interval > 0 ? start + interval : INT64_MAX;
  uint64_t submitted = 0;
  uint64_t committed_at_last_report = 0;
  int64_t last_report = start;

  auto report = [&](int64_t now) {
    DriverProgress p;
    {
      MutexLock lock(mu_);
      p.committed = result_.committed;
      p.aborted = result_.aborted;
      p.outstanding = submitted - completed_;
    }
    p.elapsed_s = static_cast<double>(now - start) / 1e9;
    p.submitted = submitted;
    double dt = static_cast<double>(now - last_report) / 1e9;
    p.interval_tps = dt > 0 ? static_cast<double>(p.committed - committed_at_last_report) / dt : 0;
    committed_at_last_report = p.committed;
    last_report = now;
    if (options_.on_progress) options_.on_progress(p);
    // Skip missed ticks rather than reporting several times in a row.
    while (next_progress <= now) next_progress += interval;
  };

  // Txns are built and submitted in chunks: one queue lock per chunk, and each chunk is built
  // in the op vectors the engine lent back after the previous one (Engine::SubmitMany).
  constexpr uint64_t kChunk = 64;
  std::vector<storage::Txn> chunk;
  chunk.reserve(kChunk);
  bool capped = false;
  for (;;) {
    int64_t now = NowNanos();
    if (now >= next_progress) report(now);
    uint64_t n = kChunk;
    if (options_.duration_ns > 0) {
      if (now >= deadline) break;
    } else if (submitted >= options_.txns) {
      break;
    } else {
      n = std::min(n, options_.txns - submitted);
    }
    if (options_.keep_outcomes) {
      if (submitted >= options_.max_kept_outcomes) {
        capped = true;
        break;
      }
      n = std::min(n, options_.max_kept_outcomes - submitted);
    }
    {
      // Wait for a free slot in the window; wake at least for every progress tick and for
      // the deadline, so neither waits on the engine.
      MutexUniqueLock lock(mu_);
      if (submitted - completed_ >= options_.outstanding) {
        // At most 1 s: a safety net so the loop re-checks its state even without ticks.
        int64_t wake = std::min({next_progress, deadline, now + 1000000000});
        auto wake_tp = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(wake));
        slot_freed_.wait_until(lock.native(), wake_tp,
                               [&]() REQUIRES(mu_) { return submitted - completed_ < options_.outstanding; });
        continue;  // re-check progress, deadline and the window
      }
      n = std::min(n, options_.outstanding - (submitted - completed_));
    }
    chunk.resize(n);
    for (storage::Txn& txn : chunk) {
      gen->NextInto(&txn);
      txn.client = 0;
      // The clock read at the top of this iteration, the chunk's generation (tens of
      // microseconds at most) before the submit: latencies are counted in milliseconds.
      txn.submit_ns = now;
    }
    const size_t taken = engine->SubmitMany(chunk);
    submitted += taken;
    if (taken < n) {
      return Status::Aborted("the engine refused txn #" + std::to_string(submitted) + " (stopped?)");
    }
  }
  if (options_.before_finish) {
    uint64_t completed = 0;
    {
      MutexLock lock(mu_);
      completed = completed_;
    }
    options_.before_finish(completed);
  }
  engine->Finish();
  const int64_t end = NowNanos();
  MutexLock lock(mu_);
  result_.submitted = submitted;
  result_.elapsed_ns = end - start;
  result_.stopped_at_cap = capped;
  if (completed_ != submitted) {
    return Status::Internal("Finish returned with " + std::to_string(submitted - completed_) +
                            " submitted txns lacking an outcome");
  }
  return Status::Ok();
}

DriverResult LoadDriver::TakeResult() {
  MutexLock lock(mu_);
  return std::move(result_);
}

Result<RawLoopResult> RunRawLoop(const workloads::WorkloadOptions& options, uint64_t seed, uint64_t txns,
                                 int64_t duration_ns) {
  auto gen = workloads::MakeGenerator(options, seed);
  if (!gen.ok()) return gen.status();
  workloads::ReferenceExecutor ref(options.Layout(), options.RecordCount());
  QR_RETURN_IF_ERROR(workloads::LoadTable(options, ref.mutable_table()));
  constexpr uint64_t kChunk = 4096;  // bounded memory: txns are generated chunk by chunk
  std::vector<storage::Txn> chunk;
  chunk.reserve(kChunk);
  RawLoopResult r;
  for (;;) {
    if (duration_ns > 0 ? r.apply_ns >= duration_ns : r.txns >= txns) break;
    uint64_t n = duration_ns > 0 ? kChunk : std::min(kChunk, txns - r.txns);
    chunk.clear();
    for (uint64_t i = 0; i < n; ++i) chunk.push_back(gen.value()->Next());
    const int64_t t0 = NowNanos();
    for (const storage::Txn& t : chunk) {
      auto c = ref.Apply(t);
      if (!c.ok()) return c.status();
      if (c.value()) r.ops_committed += t.ops.size();
    }
    r.apply_ns += NowNanos() - t0;
    r.txns += n;
  }
  r.committed = ref.committed();
  r.aborted = ref.aborted();
  r.digest = ref.table().Digest();
  return r;
}

}  // namespace qrstore::bench
