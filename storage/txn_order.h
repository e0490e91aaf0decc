// Where a transaction stands in the global planned order (PlannedPos) and how it ended
// (TxnStatus): plain values the planner's session table, the commit stage and the client port
// all carry. They live here, below every stage that uses them; commit/outcome.h re-exports them
// in qrstore::commit.
//
// Global planned order = lexicographic (batch, planner priority, index in the planner's slice);
// it equals the order in which transactions were submitted to the engine.
#pragma once

#include <cstdint>

namespace qrstore::storage {

struct PlannedPos {
  uint64_t batch = 0;
  uint32_t planner = 0;
  uint32_t index = 0;  // position in the (batch, planner) slice
};

inline bool operator<(const PlannedPos& a, const PlannedPos& b) {
  if (a.batch != b.batch) return a.batch < b.batch;
  if (a.planner != b.planner) return a.planner < b.planner;
  return a.index < b.index;
}
inline bool operator==(const PlannedPos& a, const PlannedPos& b) {
  return a.batch == b.batch && a.planner == b.planner && a.index == b.index;
}

enum class TxnStatus : uint8_t {
  kCommitted = 0,
  kAbortedLogic = 1,    // its own kAbortIf fired or a kDebit was short
  // It accessed what an aborted txn wrote: a partitioned row's cascade
  // (executor/row_resolver.h). A single node re-executes instead (executor/abort_resolver.h)
  // and never reports it.
  kAbortedCascade = 2,
};

inline const char* TxnStatusName(TxnStatus s) {
  switch (s) {
    case TxnStatus::kCommitted:
      return "committed";
    case TxnStatus::kAbortedLogic:
      return "aborted-logic";
    case TxnStatus::kAbortedCascade:
      return "aborted-cascade";
  }
  return "?";
}

}  // namespace qrstore::storage
