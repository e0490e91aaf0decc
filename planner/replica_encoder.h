// ReplicaEncoder: builds EncodeSlice(slice, SliceEncoding::kWithoutReads) while the slice is
// planned, byte for byte, instead of in a second pass over the planned slice. The planner hands
// it each non-read fragment as it appends it to an EQ and each transaction's context once it is
// complete, while they are still in cache; a second pass would walk every fragment again (5 MB
// for a 10,000-transaction slice of 16 ops, more than the caches hold), the bulk of what
// replicas cost a leader's planner (docs/benchmarks.md).
//
// Use: Begin(ranges) per slice; Fragment() in EQ order per range; Txn() in slice order;
// Finish(slice) returns the bytes (`slice` gives the header: batch, planner, dep_slots,
// may_abort, and the transaction count, which must match the Txn() calls). Buffers keep their
// capacity across slices. One encoder per planner thread; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "planner/eq.h"

namespace qrstore::planner {

class ReplicaEncoder {
 public:
  void Begin(uint32_t ranges);
  // A non-kRead fragment, appended to EQ `range` (kRead fragments are not sent to replicas).
  void Fragment(uint32_t range, const planner::Fragment& f);
  void Txn(const TxnContext& t);
  std::string Finish(const PlannedSlice& slice);

  // Spare capacity Finish leaves in the string it returns: room for the headers the replication
  // layers put in front (the payload frame's 24 bytes, a Raft batch entry's up to 21), so the
  // slice travels in its own buffer instead of being copied into a new one per layer.
  static constexpr size_t kHeaderRoomBytes = 64;

 private:
  // An append-only byte buffer written through a raw pointer (a size check per record, not
  // per byte).
  struct Buf {
    std::unique_ptr<char[]> data;
    size_t size = 0;
    size_t capacity = 0;
    char* Reserve(size_t n);  // room for n more bytes; returns the write position
  };
  struct Eq {
    Buf bytes;
    uint64_t count = 0;
    uint32_t prev_txn = 0;
  };
  Buf txns_;
  uint64_t ntxns_ = 0;
  std::vector<Eq> eqs_;
};

}  // namespace qrstore::planner
