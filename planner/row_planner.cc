#include "planner/row_planner.h"

#include "common/check.h"

namespace qrstore::planner {

RowPlanner::RowPlanner(storage::KeyMapper partitions, storage::KeyMapper ranges, uint32_t home)
    : partitions_(partitions), ranges_(ranges), home_(home), tc_of_(partitions.buckets(), kNone) {
  QR_CHECK(partitions.buckets() <= kMaxPartitions && ranges.buckets() <= kMaxRanges && home < partitions.buckets());
}

void RowPlanner::PlanSlices(uint64_t batch, uint32_t planner, const std::vector<storage::Txn>& txns,
                            std::vector<PlannedSlice>* out) {
  const uint32_t nparts = partitions_.buckets();
  out->resize(nparts);
  for (PlannedSlice& s : *out) {
    s.Reset(batch, planner, ranges_.buckets());
    s.row = true;
  }
  // The context of txn `i` in out[p], made on its first fragment there. Slots are allocated
  // from each sub-slice's running counts, so every txn's slots are back to back.
  auto tc_in = [&](uint32_t p, const storage::Txn& txn, uint32_t i, bool may_abort) -> TxnContext& {
    PlannedSlice& s = (*out)[p];
    if (tc_of_[p] == kNone) {
      tc_of_[p] = static_cast<uint32_t>(s.txns.size());
      touched_.push_back(p);
      TxnContext& tc = s.txns.emplace_back();
      tc.txn_id = txn.id;
      tc.client = txn.client;
      tc.submit_ns = txn.submit_ns;
      tc.dep_begin = s.dep_slots;
      tc.read_begin = s.read_slots;
      tc.may_abort = may_abort;
      tc.home_index = i;
      if (p == home_) {
        // A client session's txn is recorded where the session lives: only the home's part
        // names it (docs/sessions.md, rows).
        tc.session = txn.session;
        tc.seq = txn.seq;
      }
      s.may_abort |= may_abort;
    }
    return s.txns[tc_of_[p]];
  };
  auto add = [&](uint32_t p, const Fragment& f) { (*out)[p].eqs[ranges_.Of(f.key)].push_back(f); };
  for (uint32_t i = 0; i < txns.size(); ++i) {
    const storage::Txn& txn = txns[i];
    bool may_abort = false;
    for (const storage::Op& op : txn.ops) {
      QR_CHECK(static_cast<uint8_t>(op.kind) <= storage::kMaxOpKind, "txn %llu: unknown op kind %u",
               static_cast<unsigned long long>(txn.id), static_cast<unsigned>(op.kind));
      may_abort |= MayAbortFrag(static_cast<FragKind>(op.kind));
    }
    // A txn without ops, and every session txn, is listed at its home first (a session txn's
    // fate is recorded there even if none of its keys is).
    if (txn.ops.empty() || txn.session != 0) (void)tc_in(home_, txn, i, may_abort);
    for (uint32_t op_index = 0; op_index < txn.ops.size(); ++op_index) {
      const storage::Op& op = txn.ops[op_index];
      const uint32_t px = partitions_.Of(op.key);
      if (op.kind == storage::OpKind::kDepWrite) {
        const uint32_t py = partitions_.Of(op.src_key);
        TxnContext& ty = tc_in(py, txn, i, may_abort);
        if (py == px) {
          // As on one node: the y half first, so when x and y share a range the read precedes.
          PlannedSlice& s = (*out)[px];
          const uint32_t slot = s.dep_slots++;
          const uint32_t local = tc_of_[px];
          add(px, Fragment{op.src_key, 0, local, slot, op_index, FragKind::kDepRead});
          add(px, Fragment{op.key, 0, local, slot, op_index, FragKind::kDepWrite});
          ty.fragments += 2;
          ++ty.deps;
          ++ty.write_ops;
        } else {
          ++ty.fragments;
          TxnContext& tx = tc_in(px, txn, i, may_abort);
          PlannedSlice& sx = (*out)[px];
          const uint32_t slot = sx.dep_slots++;
          add(py, Fragment{op.src_key, px, tc_of_[py], slot, op_index, FragKind::kDepSend});
          add(px, Fragment{op.key, 0, tc_of_[px], slot, op_index, FragKind::kDepRecv});
          ++tx.fragments;
          ++tx.deps;
          ++tx.write_ops;
        }
        continue;
      }
      TxnContext& tc = tc_in(px, txn, i, may_abort);
      PlannedSlice& s = (*out)[px];
      const uint32_t slot = op.kind == storage::OpKind::kRead ? s.read_slots++ : 0;
      add(px, Fragment{op.key, op.arg, tc_of_[px], slot, op_index, static_cast<FragKind>(op.kind)});
      ++tc.fragments;
      if (op.kind == storage::OpKind::kRead) ++tc.reads;
      if (storage::IsWrite(op.kind)) ++tc.write_ops;
    }
    for (uint32_t p : touched_) tc_of_[p] = kNone;
    touched_.clear();
  }
  // If any txn of the home slice may abort, every partition logs from this sub-slice on: a
  // cascade can reach a txn through a partition where nothing of its own may abort.
  bool any = false;
  for (const PlannedSlice& s : *out) any = any || s.may_abort;
  for (PlannedSlice& s : *out) s.may_abort = any;
}

}  // namespace qrstore::planner
