#include "planner/planner.h"

#include "planner/replica_encoder.h"

namespace qrstore::planner {

void Planner::PlanSlice(uint64_t batch, uint32_t planner, const std::vector<storage::Txn>& txns,
                        PlannedSlice* out, ReplicaEncoder* replica) const {
  out->Reset(batch, planner, ranges_.buckets());
  if (replica != nullptr) replica->Begin(ranges_.buckets());
  // Appends a fragment to its EQ (and, for replicas, its encoding unless it is a plain read).
  auto add = [&](uint32_t range, const Fragment& f) {
    out->eqs[range].push_back(f);
    if (replica != nullptr && f.kind != FragKind::kRead) replica->Fragment(range, f);
  };
  // Appended one by one, each written once (a resize would zero them all first).
  out->txns.reserve(txns.size());
  uint32_t dep = 0;
  uint32_t read = 0;
  for (size_t i = 0; i < txns.size(); ++i) {
    const storage::Txn& txn = txns[i];
    TxnContext& tc = out->txns.emplace_back();
    tc.txn_id = txn.id;
    tc.client = txn.client;
    tc.submit_ns = txn.submit_ns;
    tc.session = txn.session;
    tc.seq = txn.seq;
    tc.history = txn.history;
    tc.history_batch = txn.history_batch;
    tc.history_planner = txn.history_planner;
    tc.history_index = txn.history_index;
    tc.fragments = 0;
    tc.write_ops = 0;
    tc.dep_begin = dep;
    tc.read_begin = read;
    tc.may_abort = false;
    tc.home_index = static_cast<uint32_t>(i);
    const auto txn_index = static_cast<uint32_t>(i);
    for (uint32_t op_index = 0; op_index < txn.ops.size(); ++op_index) {
      const storage::Op& op = txn.ops[op_index];
      QR_CHECK(static_cast<uint8_t>(op.kind) <= storage::kMaxOpKind, "txn %llu: unknown op kind %u",
               static_cast<unsigned long long>(txn.id), static_cast<unsigned>(op.kind));
      const auto kind = static_cast<FragKind>(op.kind);
      if (op.kind == storage::OpKind::kDepWrite) {
        // The y half first: when x and y share a range the read precedes the write in the EQ.
        add(ranges_.Of(op.src_key), Fragment{op.src_key, 0, txn_index, dep, op_index, FragKind::kDepRead});
        add(ranges_.Of(op.key), Fragment{op.key, 0, txn_index, dep, op_index, FragKind::kDepWrite});
        ++dep;
        tc.fragments += 2;
      } else {
        const uint32_t slot = op.kind == storage::OpKind::kRead ? read++ : 0;
        add(ranges_.Of(op.key), Fragment{op.key, op.arg, txn_index, slot, op_index, kind});
        ++tc.fragments;
      }
      if (storage::IsWrite(op.kind)) ++tc.write_ops;
      if (MayAbortFrag(kind)) tc.may_abort = true;
    }
    tc.deps = dep - tc.dep_begin;
    tc.reads = read - tc.read_begin;
    out->may_abort |= tc.may_abort;
    if (replica != nullptr) replica->Txn(tc);
  }
  out->dep_slots = dep;
  out->read_slots = read;
}

}  // namespace qrstore::planner
