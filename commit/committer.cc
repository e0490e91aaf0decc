#include "commit/committer.h"

namespace qrstore::commit {

SliceTally CountSliceOutcomes(const planner::PlannedSlice& slice, const executor::BatchFates& fates) {
  SliceTally tally;
  const uint64_t n = slice.txns.size();
  if (!fates.any_abort) {
    tally.committed = n;
    return tally;
  }
  for (uint32_t i = 0; i < n; ++i) {
    const executor::Fate f = fates.Of(slice.planner, i);
    tally.aborted_logic += f == executor::Fate::kLogic ? 1 : 0;
    tally.aborted_cascade += f == executor::Fate::kCascade ? 1 : 0;
  }
  tally.committed = n - tally.aborted_logic - tally.aborted_cascade;
  return tally;
}

SliceTally BuildSliceOutcomes(const planner::PlannedSlice& slice, const executor::BatchFates& fates,
                              int64_t commit_ns, std::vector<TxnOutcome>* out, std::string_view read_values,
                              uint32_t record_bytes) {
  SliceTally tally;
  out->resize(slice.txns.size());
  for (uint32_t i = 0; i < slice.txns.size(); ++i) {
    const planner::TxnContext& tc = slice.txns[i];
    TxnOutcome& o = (*out)[i];
    o.txn_id = tc.txn_id;
    o.client = tc.client;
    o.pos = PlannedPos{slice.batch, slice.planner, i};
    o.home_index = tc.home_index;
    o.session = tc.session;
    o.seq = tc.seq;
    o.history = tc.history;
    o.history_of = PlannedPos{tc.history_batch, tc.history_planner, tc.history_index};
    o.submit_ns = tc.submit_ns;
    o.commit_ns = commit_ns;
    o.write_ops = tc.write_ops;
    o.reads = 0;
    o.values = {};
    switch (fates.Of(slice.planner, i)) {
      case executor::Fate::kCommit:
        o.status = TxnStatus::kCommitted;
        ++tally.committed;
        if (!read_values.empty()) {
          o.reads = tc.reads;
          o.values = read_values.substr(uint64_t{tc.read_begin} * record_bytes, uint64_t{tc.reads} * record_bytes);
        }
        break;
      case executor::Fate::kLogic:
        o.status = TxnStatus::kAbortedLogic;
        ++tally.aborted_logic;
        break;
      case executor::Fate::kCascade:
        o.status = TxnStatus::kAbortedCascade;
        ++tally.aborted_cascade;
        break;
    }
  }
  return tally;
}

}  // namespace qrstore::commit
