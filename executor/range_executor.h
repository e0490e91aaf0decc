// RangeExecutor: runs EQs of one key range against the shared Table (paper 2.3: each executor
// thread owns one range, so record accesses need no locks). One RangeExecutor per executor
// thread; only that thread calls RunEq. Between batches the engine's batch barrier hands its
// ExecLog to the abort resolver (executor/abort_resolver.h).
//
// Logging. While a batch may abort by logic (a slice so far has kAbortIf/kDebit ops), RunEq
// records every fragment it runs (in execution order = planned order within the range), the
// before-image of every record it modifies, and the fired abort votes. Batches without
// abortable ops skip logging entirely: the common YCSB case pays nothing for undo.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "executor/dep_board.h"
#include "planner/eq.h"
#include "storage/table.h"

namespace qrstore::executor {

// One fragment run while logging, in execution order: which fragment, and where the
// before-image of its record is if it modified it.
struct Access {
  uint32_t planner = 0;
  uint32_t txn = 0;           // index in the (batch, planner) slice
  uint32_t frag = 0;          // index in the slice's EQ of this executor's range
  uint64_t undo = kNoUndo;    // offset of the before-image in ExecLog::undo, if it modified
  static constexpr uint64_t kNoUndo = UINT64_MAX;
};

// A transaction whose own abort vote fired (kAbortIf true, or kDebit short).
struct Vote {
  uint32_t planner = 0;
  uint32_t txn = 0;
};

struct ExecLog {
  std::vector<Access> accesses;
  std::string undo;  // before-images, record size each
  std::vector<Vote> votes;
  void Clear() {
    accesses.clear();
    undo.clear();
    votes.clear();
  }
};

class RangeExecutor {
 public:
  RangeExecutor(storage::Table* table, uint32_t range) : table_(table), range_(range) {}

  // Runs EQ slice.eqs[range] to the end, resolving dependencies through `deps` (the slice's
  // board). With `log`, fills log() (see above).
  void RunEq(const planner::PlannedSlice& slice, DepBoard* deps, bool log);

  ExecLog& log() { return log_; }
  uint32_t range() const { return range_; }

 private:
  template <bool kLog>
  void Run(const planner::PlannedSlice& slice, DepBoard* deps);

  storage::Table* table_;
  uint32_t range_;
  ExecLog log_;
};

}  // namespace qrstore::executor
