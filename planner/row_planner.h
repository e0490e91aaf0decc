// RowPlanner: PLANBATCH for a home node of a partitioned row (docs/partitioned-rows.md, step 1).
// Splits each transaction's ops by partition, then by executor range inside the partition, into
// one row sub-slice per partition: out[p] = S(batch, planner -> p), empty ones included (every
// batch sends every partition of the row something, so nobody waits on silence).
//
// An x <- y op with x and y on one partition plans as on a single node (kDepRead + kDepWrite on
// a local slot). Across partitions it becomes a kDepRecv on a slot of x's sub-slice and a
// kDepSend in y's sub-slice that names that slot and x's partition: the home plans both ends,
// so the numbering needs no coordination. Every sub-slice lists, in home order, the txns with
// at least one fragment on its partition (the home's also every txn without ops and every client
// session's txn, which alone carries the session and seq: the session table is the home's);
// TxnContext::home_index ties them back to the home slice. may_abort is the whole txn's: every partition it touches must keep undo images, since
// an abort on one partition undoes its writes on all; and a sub-slice's may_abort is the whole
// home slice's (a cascade reaches txns on partitions where nothing of their own may abort).
//
// A pure function of (txns, partition mapping, range mapping), like Planner: deterministic, no
// shared state; one RowPlanner per planner thread. With one partition, out[0] is Planner's slice
// with `row` set.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/eq.h"
#include "storage/key_map.h"
#include "storage/txn.h"

namespace qrstore::planner {

class RowPlanner {
 public:
  // `ranges` maps a partition's keys to its executor ranges (KeyMapper::Within(partitions, n)):
  // every node of the row has the same number of ranges. `home`: this node's partition, where
  // a txn without ops is listed (it touches no partition but still commits at its home).
  RowPlanner(storage::KeyMapper partitions, storage::KeyMapper ranges, uint32_t home);

  // Plans `txns` (home slice positions 0..n-1) into out[0..P-1] (resized to P, each Reset).
  void PlanSlices(uint64_t batch, uint32_t planner, const std::vector<storage::Txn>& txns,
                  std::vector<PlannedSlice>* out);

  const storage::KeyMapper& partitions() const { return partitions_; }
  const storage::KeyMapper& ranges() const { return ranges_; }

 private:
  storage::KeyMapper partitions_;
  storage::KeyMapper ranges_;
  uint32_t home_;
  // Per txn, scratch: the index of its context in out[p], or kNone (reset after each txn).
  static constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> tc_of_;
  std::vector<uint32_t> touched_;
};

}  // namespace qrstore::planner
