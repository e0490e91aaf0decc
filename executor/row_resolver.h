// RowResolver: logic-induced aborts for one node of a partitioned row, by deterministic cascade
// over the batch (docs/partitioned-rows.md, section 4). After every executor of the node ran
// batch b (logging, as for the single-node AbortResolver), the node's last executor:
//   1. takes the txns whose abort fired here in the parallel run (FiredHere);
//   2. exchanges aborted txns with its row peers in rounds until no node adds one: each round a
//      node extends the set with its local cascade (Cascade) and sends what it added;
//   3. undoes the aborted txns' writes and fills the batch's fates (Undo).
// A transaction aborts if its vote fired on any partition, or if it accessed, on any partition,
// a key an earlier aborted transaction of the batch wrote (kAbortedCascade). Txns are named
// across the row by (slice, home index): the sub-slice txn index differs per node.
// Deterministic: votes follow from the planned order (each range runs its fragments in it), and
// the aborted set is the least fixpoint of the cascade rule, whatever order messages come in.
#pragma once

#include <cstdint>
#include <vector>

#include "executor/abort_resolver.h"
#include "executor/range_executor.h"
#include "planner/eq.h"
#include "storage/table.h"

namespace qrstore::executor {

class RowResolver {
 public:
  // Starts batch resolution over this node's sub-slices and executor logs (all logged: the
  // batch may abort somewhere in the row). `slices[s]` is sub-slice s.
  void Begin(const std::vector<const planner::PlannedSlice*>& slices, const std::vector<ExecLog*>& logs,
             storage::Table* table);
  // The txns whose vote fired here, sorted.
  std::vector<RowTxn> FiredHere() const;
  // Adds `ids` (from this node or a peer) to the aborted set; returns how many were new here.
  size_t Add(const std::vector<RowTxn>& ids);
  // Extends the aborted set by the local cascade to a fixpoint; returns the txns it added
  // (sorted): what to send the peers this round.
  std::vector<RowTxn> Cascade();
  // The aborted txns that have a part here, sorted (a batch-end record's: Rule 2).
  std::vector<RowTxn> AbortedHere() const;
  // Restores every key an aborted txn wrote to its value before the batch's first aborted
  // write of it, and fills `out` (fired: kLogic, else aborted: kCascade). With `digest_delta`,
  // adds the digest change of the restored records.
  void Undo(const std::vector<RowTxn>& fired, BatchFates* out, uint64_t* digest_delta);
  // The checkpoint image epoch of the executor that resolves (AbortResolver::set_cow_epoch).
  void set_cow_epoch(uint8_t e) { cow_epoch_ = e; }

 private:
  bool Aborted(uint32_t slice, uint32_t local) const { return aborted_[slice][local] != 0; }
  // Local index of home txn `home` in sub-slice `slice`, or -1 when it has none here.
  int64_t LocalOf(uint32_t slice, uint32_t home) const;

  std::vector<const planner::PlannedSlice*> slices_;
  std::vector<ExecLog*> logs_;
  storage::Table* table_ = nullptr;
  uint8_t cow_epoch_ = 0;
  std::vector<std::vector<uint8_t>> aborted_;  // [slice][local txn]
  KeySet tainted_;                             // keys an aborted txn wrote (per Cascade pass)
  KeySet restored_;
};

}  // namespace qrstore::executor
