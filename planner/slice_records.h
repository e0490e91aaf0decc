// The records of a planned slice's encoding (planner/eq.h: EncodeSlice), written through a raw
// pointer with room checked by the caller: the one definition of the byte layout, shared by
// EncodeSlice (one pass over a planned slice) and ReplicaEncoder (record by record while
// planning). DecodeSlice (planner/eq.cc) reads the same layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/codec.h"
#include "planner/eq.h"

namespace qrstore::planner::slice_records {

constexpr size_t kV = Writer::kMaxVarintBytes;
// Most bytes each record can take.
constexpr size_t kMaxHeaderBytes = sizeof kSliceMagic + 5 * kV + 1;  // up to and with the txn count
constexpr size_t kMaxTxnBytes = 8 + 8 * kV + 1;
constexpr size_t kMaxFragBytes = 1 + 5 * kV;

// The header's flags byte.
constexpr uint8_t kFlagMayAbort = 1;
constexpr uint8_t kFlagRow = 2;
// A txn record's flags byte: may abort; has a session (its session and seq follow the byte).
constexpr uint8_t kTxnMayAbort = 1;
constexpr uint8_t kTxnSession = 2;

// Magic, batch, planner, dep_slots, read_slots (0 without reads), flags, txn count.
inline char* PutHeader(char* p, const PlannedSlice& s, bool with_reads, uint64_t ntxns) {
  std::memcpy(p, kSliceMagic, sizeof kSliceMagic);
  p += sizeof kSliceMagic;
  p = Writer::EncodeVarint(p, s.batch);
  p = Writer::EncodeVarint(p, s.planner);
  p = Writer::EncodeVarint(p, s.dep_slots);
  p = Writer::EncodeVarint(p, with_reads ? s.read_slots : 0);
  *p++ = static_cast<char>((s.may_abort ? kFlagMayAbort : 0) | (s.row ? kFlagRow : 0));
  return Writer::EncodeVarint(p, ntxns);
}

// Slot ranges are back to back, so their beginnings are not sent; a session txn's session and
// seq follow the flags byte (nothing for the others); submit_ns is the planning
// node's latency bookkeeping and not sent either. In a row sub-slice (`row`) the record ends
// with home_index - `prev_home` (prev_home: the previous txn's home_index, 0 for the first).
inline char* PutTxn(char* p, const TxnContext& t, bool with_reads, bool row = false, uint32_t prev_home = 0) {
  std::memcpy(p, &t.txn_id, 8);  // little-endian hosts only (common/codec.h)
  p += 8;
  p = Writer::EncodeVarint(p, t.client);
  p = Writer::EncodeVarint(p, with_reads ? t.fragments : t.fragments - t.reads);
  p = Writer::EncodeVarint(p, t.write_ops);
  p = Writer::EncodeVarint(p, t.deps);
  p = Writer::EncodeVarint(p, with_reads ? t.reads : 0);
  const bool session = t.session != 0 || t.seq != 0;
  *p++ = static_cast<char>((t.may_abort ? kTxnMayAbort : 0) | (session ? kTxnSession : 0));
  if (session) {
    p = Writer::EncodeVarint(p, t.session);
    p = Writer::EncodeVarint(p, t.seq);
  }
  if (row) p = Writer::EncodeVarint(p, t.home_index - prev_home);
  return p;
}

// Txn indices are non-decreasing in an EQ: the record stores the delta from the EQ's previous
// fragment (`prev_txn`, 0 for the first), usually one byte.
inline char* PutFragment(char* p, const Fragment& f, uint32_t prev_txn) {
  *p++ = static_cast<char>(f.kind);
  p = Writer::EncodeVarint(p, f.txn - prev_txn);
  p = Writer::EncodeVarint(p, f.key);
  p = Writer::EncodeVarint(p, f.arg);
  p = Writer::EncodeVarint(p, f.slot);
  return Writer::EncodeVarint(p, f.op);
}

}  // namespace qrstore::planner::slice_records
