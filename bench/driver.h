// LoadDriver: the closed-loop load generator of qrstore-bench and of the engine integration
// tests. The thread that calls Run is the ONLY submitter: it draws txns from a seeded
// Generator and submits them in sequence, so the engine's planned order (FIFO) is the
// generator's order and a --txns run is reproducible. Closed loop: at most `outstanding` txns
// are submitted but without an outcome; the submitter blocks on a condition variable (with a
// timeout, to print progress) until the engine's commit threads report outcomes through
// Sink().
//
// Threads: Run on the submitting thread; the sink on the engine's commit threads. Shared
// state (counters, histogram, kept outcomes) is guarded by mu_; the sink holds it once per
// (batch, planner) slice, not per txn. Memory is bounded: a fixed-size histogram, plus one
// 32-byte OutcomeRecord per txn only when keep_outcomes (capped by max_kept_outcomes).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <vector>

#include "bench/verify.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "engine/engine.h"
#include "workloads/latency_histogram.h"
#include "workloads/workload.h"

namespace qrstore::bench {

struct DriverProgress {
  double elapsed_s = 0;
  uint64_t submitted = 0;
  uint64_t committed = 0;
  uint64_t aborted = 0;
  uint64_t outstanding = 0;
  double interval_tps = 0;  // committed txn/s since the previous progress report
};

struct DriverOptions {
  uint64_t txns = 0;        // submit exactly this many (when duration_ns == 0)
  int64_t duration_ns = 0;  // > 0: submit until this much time has passed, then Finish
  uint64_t outstanding = 1;  // closed-loop window, >= 1
  bool keep_outcomes = false;
  uint64_t max_kept_outcomes = UINT64_MAX;  // duration runs stop submitting when reached
  int64_t progress_interval_ns = 1000000000;  // 0: no progress reports
  std::function<void(const DriverProgress&)> on_progress;  // called on the submitting thread
  // Called on the submitting thread once the last txn is submitted, before the engine is told
  // to finish (its threads still run), with the outcomes received so far.
  std::function<void(uint64_t completed)> before_finish;
};

struct DriverResult {
  uint64_t submitted = 0;
  uint64_t committed = 0;
  uint64_t aborted = 0;
  uint64_t aborted_cascade = 0;
  uint64_t update_ops_committed = 0;
  int64_t elapsed_ns = 0;  // first Submit to Finish returned
  bool stopped_at_cap = false;  // a duration run reached max_kept_outcomes
  workloads::LatencyHistogram latency_ns;  // submit -> commit of committed txns
  std::vector<OutcomeRecord> outcomes;     // when keep_outcomes; in delivery order
};

class LoadDriver {
 public:
  explicit LoadDriver(DriverOptions options);
  LoadDriver(const LoadDriver&) = delete;
  LoadDriver& operator=(const LoadDriver&) = delete;

  // The engine's CommitSink. The driver must outlive the engine's commit threads.
  commit::CommitSink Sink();

  // Submits txns from `gen` to a started engine (created with Sink()) until the txn count or
  // duration is reached, then calls engine->Finish(). Errors if the engine refuses a txn.
  Status Run(engine::Engine* engine, workloads::Generator* gen) EXCLUDES(mu_);

  // The totals; call after Run (moves the kept outcomes out).
  DriverResult TakeResult() EXCLUDES(mu_);

 private:
  void OnOutcomes(const std::vector<commit::TxnOutcome>& outcomes) EXCLUDES(mu_);

  const DriverOptions options_;
  Mutex mu_;
  std::condition_variable slot_freed_;
  uint64_t completed_ GUARDED_BY(mu_) = 0;  // outcomes received
  DriverResult result_ GUARDED_BY(mu_);
};

// The raw loop: the same generated txns applied single-threaded to a fresh table by the
// reference executor (no planning, queues or threads). Generation is done in chunks outside
// the timed part, so apply_ns measures applying only.
struct RawLoopResult {
  uint64_t txns = 0;
  uint64_t committed = 0;
  uint64_t aborted = 0;
  uint64_t ops_committed = 0;  // operations of committed txns
  int64_t apply_ns = 0;
  uint64_t digest = 0;
};
// Runs `txns` txns, or, when duration_ns > 0, chunks until the applying time exceeds it.
Result<RawLoopResult> RunRawLoop(const workloads::WorkloadOptions& options, uint64_t seed, uint64_t txns,
                                 int64_t duration_ns);

}  // namespace qrstore::bench
