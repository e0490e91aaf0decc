// RowCommit: a home node's commit in a partitioned row (docs/partitioned-rows.md, section 5).
// A transaction's fragments run on every partition it touches; its home replies to the client
// only when every partition of the row has reported its batch done (the paper's ACKs, one
// report per partition and home slice rather than per EQ), with the fate every partition agrees
// on and the values its reads returned, merged into op order.
//
// Inputs, per home slice (batch, slice) this node planned:
//   - Plan(): the txns as planned (their ops give the partition of each read);
//   - Report() from every partition of the row, this one included (its own pipeline's sink):
//     the outcomes of the txns of that slice it lists, by home index, with their read values
//     (in op order, as captured there).
// Once all P reports are in, the sink gets the slice's outcomes in home order. A partition that
// disagrees on a fate, reports twice, or names a txn the slice lacks fails the commit with an
// error naming it (the row's determinism is broken: nothing more is acknowledged).
// Thread-safe; reports may come in any order. Memory: at most `max_pending` home slices held
// (planned or reported, not yet complete); one more is an error (a peer reporting slices that
// are never planned, or a peer that stopped reporting), not growth.
//
// Repeats (docs/partitioned-rows.md 9.5). After a failover in the row, a peer's successor
// re-sends the reports of the home slices it re-executed, and a home's successor h' answers only
// the home slices it plans itself, from some batch N on (its predecessor's are its clients'
// to retry). By default a report that repeats is an error, as above. After AcceptRepeats(N):
//   - a report for a home slice of a batch before N is dropped (planned by the predecessor;
//     nobody here answers it);
//   - a report for a home slice already completed (handed to the sink) is dropped;
//   - a second report from a partition for a home slice still pending is dropped if identical
//     to its first (the same txns, statuses and values), and fails the commit naming the
//     partition, batch and slice otherwise (the row's determinism is broken: the successor
//     re-executed the same sub-slice from the same state).
// "Completed" is known with one number per slice, not a set: after AcceptRepeats, Plan must come
// for every home slice in batch order per slice, from batch N on, with no gap (as the planner
// threads plan: each its slice, every batch); so for slice s planned up to batch next(s) - 1, a
// home slice (b < next(s), s) is completed exactly when it is no longer pending (an entry is
// only ever removed by completing it, or by an error that stops everything).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "commit/outcome.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "storage/key_map.h"
#include "storage/txn.h"

namespace qrstore::commit {

// A partition's report of one home slice: the txns of it that partition lists, in home order
// (strictly increasing home_index), each with its status and its kRead records on that
// partition (in op order) as a range of `values`.
struct RowTxnReport {
  uint32_t home_index = 0;
  TxnStatus status = TxnStatus::kCommitted;
  uint32_t values_begin = 0;  // bytes into RowSliceReport::values
  uint32_t values_size = 0;
};
struct RowSliceReport {
  std::vector<RowTxnReport> txns;
  std::string values;
  // Appends a txn's entry, copying its values.
  void Add(uint32_t home_index, TxnStatus status, std::string_view v) {
    txns.push_back(RowTxnReport{home_index, status, static_cast<uint32_t>(values.size()), static_cast<uint32_t>(v.size())});
    values.append(v);
  }
};

// A home slice's outcome: its txns in home order, each with status and the values of all its
// kRead ops in op order (committed txns only), as a range of one of `buffers`. A txn whose
// reads all come from one partition q (every txn at 0% multi-partition) keeps its values where
// q's report has them (buffer 1 + q, the report's bytes moved here, not copied); a txn reading
// from several partitions has them merged into op order in buffer 0.
struct RowHomeOutcome {
  uint64_t txn_id = 0;
  uint32_t client = 0;
  TxnStatus status = TxnStatus::kCommitted;
  uint32_t buffer = 0;
  uint32_t values_begin = 0;
  uint32_t values_size = 0;
};
struct RowHomeSlice {
  std::vector<RowHomeOutcome> txns;
  std::vector<std::string> buffers;  // [0]: merged values; [1 + q]: partition q's report values
  std::string_view ValuesOf(const RowHomeOutcome& o) const {
    if (o.values_size == 0) return {};
    return std::string_view(buffers[o.buffer]).substr(o.values_begin, o.values_size);
  }
};
// Called once per completed home slice, one call at a time, in completion order (not
// necessarily planned order); the slice is the sink's to keep.
using RowHomeSink = std::function<void(uint64_t batch, uint32_t slice, RowHomeSlice&& outcome)>;

class RowCommit {
 public:
  RowCommit(storage::KeyMapper partitions, uint32_t record_bytes, RowHomeSink sink, size_t max_pending = 4096);

  // The txns of home slice (batch, slice), as planned. Before or after reports.
  void Plan(uint64_t batch, uint32_t slice, std::vector<storage::Txn> txns) EXCLUDES(mu_, deliver_mu_);
  // Partition `from`'s report for home slice (batch, slice).
  void Report(uint32_t from, uint64_t batch, uint32_t slice, RowSliceReport report) EXCLUDES(mu_, deliver_mu_);
  // From now on reports are taken idempotently (see "Repeats" above); this node plans its own
  // home slices from batch `first_own_batch` on. Before the first Plan (the successor of a home
  // switches this on before it plans); pending reports of earlier batches are dropped. Or, with
  // first_own_batch 0, at any time (a home whose row peer failed over: every Plan so far was
  // tracked). Calling it again with the same batch does nothing.
  void AcceptRepeats(uint64_t first_own_batch) EXCLUDES(mu_);

  Status health() const EXCLUDES(mu_);
  uint64_t completed_slices() const EXCLUDES(mu_);

 private:
  struct Pending {
    bool planned = false;
    std::vector<storage::Txn> txns;
    std::vector<RowSliceReport> reports;             // [partition]
    std::vector<uint8_t> reported;                   // [partition]
  };
  void Fail(Status s) REQUIRES(mu_);
  // The pending entry of (batch, slice), made if new; nullptr (and failed) past max_pending_.
  Pending* Find(uint64_t batch, uint32_t slice) REQUIRES(mu_);
  // If `p` = (batch, slice) is planned and every partition reported it: assembles it into
  // `out`, forgets it and returns true (false and failed if it does not assemble).
  bool CompleteLocked(uint64_t batch, uint32_t slice, Pending& p, RowHomeSlice* out) REQUIRES(mu_);
  // Merges a complete slice into outcomes, taking its reports' values (or fails).
  bool Assemble(Pending& p, RowHomeSlice* out, std::string* error) const REQUIRES(mu_);
  // With repeats accepted: whether partition `from`'s report of (batch, slice) is one to drop
  // (fails the commit if it repeats a report differently).
  bool DropRepeatLocked(uint32_t from, uint64_t batch, uint32_t slice, const RowSliceReport& report) REQUIRES(mu_);

  const storage::KeyMapper partitions_;
  const uint32_t record_bytes_;
  const RowHomeSink sink_;
  const size_t max_pending_;
  mutable Mutex mu_;
  std::map<std::pair<uint64_t, uint32_t>, Pending> pending_ GUARDED_BY(mu_);
  Status health_ GUARDED_BY(mu_);
  uint64_t completed_ GUARDED_BY(mu_) = 0;
  bool planned_any_ GUARDED_BY(mu_) = false;
  // Repeats: accepted at all; the first batch this node plans; per slice, the next batch Plan
  // must give (absent: first_own_batch_). One entry per slice this home plans.
  bool accept_repeats_ GUARDED_BY(mu_) = false;
  uint64_t first_own_batch_ GUARDED_BY(mu_) = 0;
  std::map<uint32_t, uint64_t> next_plan_ GUARDED_BY(mu_);
  Mutex deliver_mu_;  // sink calls one at a time (guards no data)
};

}  // namespace qrstore::commit
