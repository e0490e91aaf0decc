#include "planner/replica_encoder.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "common/codec.h"

namespace qrstore::planner {

namespace {
constexpr size_t kV = Writer::kMaxVarintBytes;
}  // namespace

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
  char* const begin = eq.bytes.Reserve(1 + 5 * kV);
  char* p = begin;
  *p++ = static_cast<char>(f.kind);
  p = Writer::EncodeVarint(p, f.txn - eq.prev_txn);  // txn indices never decrease in an EQ
  eq.prev_txn = f.txn;
  p = Writer::EncodeVarint(p, f.key);
  p = Writer::EncodeVarint(p, f.arg);
  p = Writer::EncodeVarint(p, f.slot);
  p = Writer::EncodeVarint(p, f.op);
  eq.bytes.size += static_cast<size_t>(p - begin);
  ++eq.count;
}

void ReplicaEncoder::Txn(const TxnContext& t) {
  char* const begin = txns_.Reserve(8 + 5 * kV + 1);
  char* p = begin;
  std::memcpy(p, &t.txn_id, 8);  // little-endian hosts only (common/codec.h)
  p += 8;
  p = Writer::EncodeVarint(p, t.client);
  p = Writer::EncodeVarint(p, t.fragments - t.reads);
  p = Writer::EncodeVarint(p, t.write_ops);
  p = Writer::EncodeVarint(p, t.deps);
  p = Writer::EncodeVarint(p, 0);  // reads: none are sent
  *p++ = static_cast<char>(t.may_abort ? 1 : 0);
  txns_.size += static_cast<size_t>(p - begin);
  ++ntxns_;
}

std::string ReplicaEncoder::Finish(const PlannedSlice& s) {
  QR_CHECK(ntxns_ == s.txns.size() && eqs_.size() == s.eqs.size(), "ReplicaEncoder: %llu txns / %zu EQs encoded, slice has %zu / %zu",
           static_cast<unsigned long long>(ntxns_), eqs_.size(), s.txns.size(), s.eqs.size());
  size_t total = sizeof kSliceMagic + 6 * kV + 1 + txns_.size + kV;
  for (const Eq& eq : eqs_) total += kV + eq.bytes.size;
  std::string out;
  out.resize(total);  // an upper bound; trimmed below
  char* const begin = out.data();
  char* p = begin;
  std::memcpy(p, kSliceMagic, sizeof kSliceMagic);
  p += sizeof kSliceMagic;
  p = Writer::EncodeVarint(p, s.batch);
  p = Writer::EncodeVarint(p, s.planner);
  p = Writer::EncodeVarint(p, s.dep_slots);
  p = Writer::EncodeVarint(p, 0);  // read_slots: none are sent
  *p++ = static_cast<char>(s.may_abort ? 1 : 0);
  p = Writer::EncodeVarint(p, ntxns_);
  if (txns_.size > 0) std::memcpy(p, txns_.data.get(), txns_.size);
  p += txns_.size;
  p = Writer::EncodeVarint(p, eqs_.size());
  for (const Eq& eq : eqs_) {
    p = Writer::EncodeVarint(p, eq.count);
    if (eq.bytes.size > 0) std::memcpy(p, eq.bytes.data.get(), eq.bytes.size);
    p += eq.bytes.size;
  }
  out.resize(static_cast<size_t>(p - begin));
  return out;
}

}  // namespace qrstore::planner
