// Planner: PLANBATCH for one (batch, planner) slice. Turns the transactions a planner thread
// took from the client queue into per-range EQs and TCs (planner/eq.h). A pure function of
// (txns, range mapping): no clock, no table access, no shared state, so planning is
// deterministic and any number of planner threads can each own one Planner.
//
// Hot path: per op one KeyMapper lookup and one push_back into a vector whose capacity is
// reused across batches (no per-op allocation once warm).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/eq.h"
#include "storage/key_map.h"
#include "storage/txn.h"

namespace qrstore::planner {

class ReplicaEncoder;

class Planner {
 public:
  explicit Planner(storage::KeyMapper ranges) : ranges_(ranges) {}

  // Plans `txns` (in order: txns[i] becomes slice position i) into `out`, which is Reset first.
  // With `replica`, also encodes the slice for replicas as it goes: replica->Finish(*out) then
  // returns EncodeSlice(*out, SliceEncoding::kWithoutReads) without a second pass.
  void PlanSlice(uint64_t batch, uint32_t planner, const std::vector<storage::Txn>& txns, PlannedSlice* out,
                 ReplicaEncoder* replica = nullptr) const;

  const storage::KeyMapper& ranges() const { return ranges_; }

 private:
  storage::KeyMapper ranges_;
};

}  // namespace qrstore::planner
