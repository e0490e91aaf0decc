// Engine: the single-node queue-oriented transaction engine (QueCC, paper section 2.3), the
// facade that wires a planning front-end (engine/local_planner.h) to an execution pipeline
// (engine/pipeline.h) around one storage::Table. A replicated node wires the same two pieces
// with replication in between (cluster/node/server.h).
//
//   Submit() --> client txn queue (bounded, FIFO)
//     --> planner-<i> threads: take slices of each batch in turn (a token passed around the
//         ring: batch b = slice of planner 0, then planner 1, ...), so the planned order is the
//         Submit order whatever the timing; plan slices in parallel into EQs + TCs
//     --> executor-<r> threads: each owns one key range and runs, for batch b, the EQs
//         (b, 0, r), (b, 1, r), ... in priority order; dependency values flow between ranges;
//         logic aborts are resolved per batch before batch b+1 executes: aborted txns are
//         undone and the txns that touched their keys are re-executed serially, so results
//         equal a serial run in submit order where aborted txns leave no trace
//     --> commit-<c> threads: outcomes per (batch, planner) slice, delivered to the CommitSink
//         in global planned order.
//
// Determinism: for a fixed Submit order, every outcome and the final table contents equal
// those of applying the txns serially in that order (storage/ops.h semantics, an aborted txn
// leaves no trace), whatever the thread counts, batch boundaries, engine.sync mode or timing.
// The planned order equals the Submit order. Only batch boundaries (which depend on the
// batch.timeout_ms clock), PlannedPos values and latency figures depend on time.
//
// Threads and ownership: the Engine owns its threads and queues; the Table and the sink are the
// caller's and must outlive the Engine. Submit may be called from any thread (several
// submitters are allowed, the queue order is then the order of their pushes); Start, Finish and
// Stop from one controlling thread. Memory is bounded: the client queue
// (engine.client_queue_txns) plus engine.batches_in_flight batches.
//
// Ops on keys absent from the table are no-ops (reads see counter 0, nothing is written).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "commit/outcome.h"
#include "common/config.h"
#include "common/status.h"
#include "engine/local_planner.h"
#include "engine/pipeline.h"
#include "storage/table.h"
#include "storage/txn.h"

namespace qrstore::engine {

// The sink type of Create's signature; the outcome types are commit's (commit/outcome.h).
using commit::CommitSink;

// Counters include every outcome already handed to the sink.
struct EngineStats {
  uint64_t batches = 0;                    // batches fully committed
  uint64_t batches_closed_by_timeout = 0;  // closed by batch.timeout_ms before they were full
  uint64_t committed = 0;
  uint64_t aborted = 0;                    // logic aborts (kAbortIf fired, kDebit short)
  uint64_t reexecuted = 0;                 // txns re-run serially after an abort in their batch
  double mean_cut_ms = 0;     // per batch: its first txn taken to its last slice closed
  double mean_plan_ms = 0;    // per batch: sum over its slices of planner time (after popping)
  double mean_exec_ms = 0;    // per batch: first executor start to last executor end (+ undo)
  double mean_commit_ms = 0;  // per batch: executed to last slice delivered to the sink
};

class EngineImpl;

// The engine keys turned into the two halves' options (validated; errors name the keys).
struct EngineConfig {
  PipelineOptions pipeline;
  LocalPlannerOptions planner;
};

class Engine {
 public:
  // batch.*, threads.*, engine.* keys.
  static void AddConfigKeys(ConfigSchema* schema);
  // Validates the config (errors name the keys). `table` must outlive the Engine.
  static Result<std::unique_ptr<Engine>> Create(const Config& config, storage::Table* table, CommitSink sink);
  // batch.*, threads.*, engine.* read and cross-checked (what Create uses; the server builds its
  // pipeline and front-end from it too).
  static Result<EngineConfig> OptionsFromConfig(const Config& config);

  ~Engine();  // Stop()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts the threads (committers, executors, planners). Once only.
  Status Start();
  // Enqueues a transaction; blocks while the client txn queue is full. Returns false (the txn is
  // dropped, no outcome) after Finish or Stop.
  bool Submit(storage::Txn txn);
  // Submits txns in order (moved out; one lock per queue chunk, not per txn), blocking while the
  // queue is full; returns how many were taken (fewer once Finish or Stop came). The taken txns
  // are left moved-from, and those the engine has a spare for get an empty ops vector with
  // capacity (the ops of txns it planned), so a caller that builds its next txns in them
  // allocates nothing per txn.
  size_t SubmitMany(std::vector<storage::Txn>& txns);
  // No more input: closes the open batch now and returns once every submitted txn has an
  // outcome delivered to the sink (or the engine was stopped). Without Start, returns at once.
  void Finish();
  // Stops and joins every thread. Txns not yet committed get no outcome. Idempotent; also
  // called by the destructor. Safe without Start.
  void Stop();
  EngineStats Stats() const;

 private:
  explicit Engine(std::unique_ptr<EngineImpl> impl);
  std::unique_ptr<EngineImpl> impl_;
};

}  // namespace qrstore::engine
