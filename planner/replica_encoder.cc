#include "planner/replica_encoder.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "common/codec.h"
#include "planner/slice_records.h"

namespace qrstore::planner {

char* ReplicaEncoder::Buf::Reserve(size_t n) {
  if (size + n > capacity) {
    const size_t cap = std::max<size_t>({size + n, capacity * 2, 4096});
    std::unique_ptr<char[]> bigger(new char[cap]);
    if (size > 0) std::memcpy(bigger.get(), data.get(), size);
    data = std::move(bigger);
    capacity = cap;
  }
  return data.get() + size;
}

void ReplicaEncoder::Begin(uint32_t ranges) {
  eqs_.resize(ranges);
  for (Eq& eq : eqs_) {
    eq.bytes.size = 0;
    eq.count = 0;
    eq.prev_txn = 0;
  }
  txns_.size = 0;
  ntxns_ = 0;
}

void ReplicaEncoder::Fragment(uint32_t range, const planner::Fragment& f) {
  Eq& eq = eqs_[range];
  char* const begin = eq.bytes.Reserve(slice_records::kMaxFragBytes);
  eq.bytes.size += static_cast<size_t>(slice_records::PutFragment(begin, f, eq.prev_txn) - begin);
  eq.prev_txn = f.txn;
  ++eq.count;
}

void ReplicaEncoder::Txn(const TxnContext& t) {
  char* const begin = txns_.Reserve(slice_records::kMaxTxnBytes);
  txns_.size += static_cast<size_t>(slice_records::PutTxn(begin, t, /*with_reads=*/false) - begin);
  ++ntxns_;
}

std::string ReplicaEncoder::Finish(const PlannedSlice& s) {
  QR_CHECK(!s.row, "ReplicaEncoder encodes a node's whole slice, not row sub-slices (EncodeSlice does)");
  QR_CHECK(ntxns_ == s.txns.size() && eqs_.size() == s.eqs.size(), "ReplicaEncoder: %llu txns / %zu EQs encoded, slice has %zu / %zu",
           static_cast<unsigned long long>(ntxns_), eqs_.size(), s.txns.size(), s.eqs.size());
  size_t total = slice_records::kMaxHeaderBytes + txns_.size + slice_records::kV;
  for (const Eq& eq : eqs_) total += slice_records::kV + eq.bytes.size;
  std::string out;
  // Appended piece by piece (no zero-fill of a fresh buffer). The spare capacity lets the
  // replication layers insert their headers (replication/compression.h: FrameInPlace; a Raft
  // batch entry's) in this buffer instead of copying the slice into new ones.
  out.reserve(total + kHeaderRoomBytes);
  char small[slice_records::kMaxHeaderBytes];
  out.append(small, static_cast<size_t>(slice_records::PutHeader(small, s, /*with_reads=*/false, ntxns_) - small));
  if (txns_.size > 0) out.append(txns_.data.get(), txns_.size);
  out.append(small, static_cast<size_t>(Writer::EncodeVarint(small, eqs_.size()) - small));
  for (const Eq& eq : eqs_) {
    out.append(small, static_cast<size_t>(Writer::EncodeVarint(small, eq.count) - small));
    if (eq.bytes.size > 0) out.append(eq.bytes.data.get(), eq.bytes.size);
  }
  return out;
}

}  // namespace qrstore::planner
