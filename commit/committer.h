// Commit stage helpers: turn an executed, abort-resolved (batch, planner) slice into the
// outcomes delivered to the CommitSink. A transaction is committed when every fragment of its
// batch has run and the batch's aborts are resolved (the engine calls this only then; later
// issues add "and the batch is replicated", Invariant 1). Outcomes come out in slice order, and
// the engine delivers slices in global planned order, so conflicting transactions commit in
// planning order (Invariant 3). Aborted transactions leave no trace in the table: the abort
// resolver (executor/abort_resolver.h) has already undone their writes and re-executed every
// transaction that depended on them, so no transaction is ever aborted by cascade.
// Pure functions; called by commit threads.
#pragma once

#include <cstdint>
#include <vector>

#include "commit/outcome.h"
#include "executor/abort_resolver.h"
#include "planner/eq.h"

namespace qrstore::commit {

struct SliceTally {
  uint64_t committed = 0;
  uint64_t aborted_logic = 0;
  uint64_t aborted_cascade = 0;  // a partitioned row's cascade (executor/row_resolver.h)
};

// The tally alone (a node whose outcomes nobody reads, e.g. a follower).
SliceTally CountSliceOutcomes(const planner::PlannedSlice& slice, const executor::BatchFates& fates);

// Fills `out` (cleared first) with one outcome per txn of `slice`, in slice order. With
// `read_values` (the slice's read_slots records of `record_bytes` each), committed outcomes
// point at their reads.
SliceTally BuildSliceOutcomes(const planner::PlannedSlice& slice, const executor::BatchFates& fates,
                              int64_t commit_ns, std::vector<TxnOutcome>* out, std::string_view read_values = {},
                              uint32_t record_bytes = 0);

}  // namespace qrstore::commit
