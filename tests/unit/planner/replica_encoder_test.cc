// The planner's replica encoding (planner/replica_encoder.h) must be EncodeSlice(s,
// kWithoutReads) byte for byte, and planning with it must plan the same slice.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "planner/eq.h"
#include "planner/planner.h"
#include "planner/replica_encoder.h"
#include "storage/key_map.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using planner::PlannedSlice;
using storage::KeyMapper;

TEST_CASE("replica encoder: bytes equal EncodeSlice(kWithoutReads) for every op mix, range count and size") {
  planner::ReplicaEncoder enc;  // reused across slices, as a planner thread does
  int checked = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    testing::GenOptions g;
    g.keys = seed % 2 ? 1000 : 300000;  // one-byte and multi-byte key varints
    g.max_ops = 1 + static_cast<uint32_t>(seed % 12);
    g.dep_per_100 = static_cast<uint32_t>(seed % 4) * 10;
    g.abort_per_100 = seed % 3 == 0 ? 10 : 0;
    g.debit_per_100 = seed % 5 == 0 ? 10 : 0;
    const size_t n = seed % 10 == 0 ? 0 : static_cast<size_t>(seed * 37 % 700);
    auto txns = testing::RandomTxns(seed, n, g);
    // Some txns of client sessions (their session and seq travel in the slice), one an
    // open-session entry (no ops).
    for (size_t i = 0; i < txns.size(); i += 3) {
      txns[i].session = i == 0 ? storage::kOpenSession : 1 + i % 4;
      txns[i].seq = i == 0 ? 0 : i * 1000;
      if (i == 0) txns[i].ops.clear();
    }
    const uint32_t ranges = 1 + static_cast<uint32_t>(seed % 5);
    planner::Planner p(KeyMapper(seed % 2 ? KeyMapper::Kind::kHash : KeyMapper::Kind::kRange, ranges, g.keys));
    PlannedSlice plain, encoded;
    p.PlanSlice(seed, static_cast<uint32_t>(seed % 3), txns, &plain);
    p.PlanSlice(seed, static_cast<uint32_t>(seed % 3), txns, &encoded, &enc);
    REQUIRE(encoded == plain);
    const std::string bytes = enc.Finish(encoded);
    REQUIRE(bytes == planner::EncodeSlice(plain, planner::SliceEncoding::kWithoutReads));
    PlannedSlice decoded;
    REQUIRE(planner::DecodeSlice(bytes, &decoded).ok());
    CHECK(decoded.txns.size() == plain.txns.size());
    ++checked;
  }
  CHECK(checked == 60);
}
