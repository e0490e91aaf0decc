#include <catch2/catch.hpp>

#include <algorithm>

#include <map>
#include <string>
#include <vector>

#include "common/codec.h"
#include "common/rng.h"
#include "planner/eq.h"
#include "planner/planner.h"
#include "storage/key_map.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using planner::FragKind;
using planner::Fragment;
using planner::PlannedSlice;
using storage::KeyMapper;
using storage::Op;
using storage::OpKind;
using storage::Txn;

namespace {

Txn MakeTxn(uint64_t id, std::vector<Op> ops) {
  Txn t;
  t.id = id;
  t.client = static_cast<uint32_t>(id % 5);
  t.submit_ns = static_cast<int64_t>(id * 10);
  t.ops = std::move(ops);
  return t;
}

PlannedSlice PlanRandom(uint64_t seed, size_t n, uint32_t ranges) {
  testing::GenOptions g;
  g.keys = 1000;
  g.abort_per_100 = 10;
  g.debit_per_100 = 10;
  auto txns = testing::RandomTxns(seed, n, g);
  // Some txns of client sessions, with big seqs (multi-byte varints) and one open-session
  // entry (no ops): they travel in the slice's txn records.
  for (size_t i = 1; i < txns.size(); i += 4) {
    txns[i].session = i == 1 ? storage::kOpenSession : i;
    txns[i].seq = i == 1 ? 0 : (uint64_t{1} << (i % 40)) + i;
    if (i == 1) txns[i].ops.clear();
  }
  planner::Planner p(KeyMapper(KeyMapper::Kind::kHash, ranges, 0));
  PlannedSlice s;
  p.PlanSlice(seed, static_cast<uint32_t>(seed % 3), txns, &s);
  return s;
}

}  // namespace

TEST_CASE("planner: fragments go to their range's EQ in txn and op order") {
  KeyMapper ranges(KeyMapper::Kind::kRange, 4, 100);  // 25 keys per range
  planner::Planner p(ranges);
  std::vector<Txn> txns;
  txns.push_back(MakeTxn(10, {{OpKind::kUpdate, 5}, {OpKind::kRead, 30}, {OpKind::kUpdate, 99}, {OpKind::kRead, 6}}));
  txns.push_back(MakeTxn(11, {{OpKind::kCredit, 26, 0, 3}, {OpKind::kUpdate, 1}}));
  txns.push_back(MakeTxn(12, {}));
  PlannedSlice s;
  p.PlanSlice(7, 2, txns, &s);
  CHECK(s.batch == 7);
  CHECK(s.planner == 2);
  REQUIRE(s.eqs.size() == 4);
  REQUIRE(s.txns.size() == 3);
  CHECK(s.txns[0].txn_id == 10);
  CHECK(s.txns[0].client == 0);
  CHECK(s.txns[0].submit_ns == 100);
  CHECK(s.txns[0].fragments == 4);
  CHECK(s.txns[0].write_ops == 2);
  CHECK(s.txns[1].fragments == 2);
  CHECK(s.txns[1].write_ops == 2);
  CHECK(s.txns[2].fragments == 0);
  CHECK_FALSE(s.may_abort);
  // Range 0: txn 0 op 0 (key 5), txn 0 op 3 (key 6), txn 1 op 1 (key 1).
  REQUIRE(s.eqs[0].size() == 3);
  CHECK(s.eqs[0][0] == Fragment{5, 0, 0, 0, 0, FragKind::kUpdate});
  CHECK(s.eqs[0][1] == Fragment{6, 0, 0, 1, 3, FragKind::kRead});  // txn 0's second read: read slot 1
  CHECK(s.eqs[0][2] == Fragment{1, 0, 1, 0, 1, FragKind::kUpdate});
  REQUIRE(s.eqs[1].size() == 2);
  CHECK(s.eqs[1][0] == Fragment{30, 0, 0, 0, 1, FragKind::kRead});
  CHECK(s.read_slots == 2);
  CHECK(s.txns[0].read_begin == 0);
  CHECK(s.txns[0].reads == 2);
  CHECK(s.txns[1].read_begin == 2);
  CHECK(s.txns[1].reads == 0);
  CHECK(s.eqs[1][1] == Fragment{26, 3, 1, 0, 0, FragKind::kCredit});
  CHECK(s.eqs[2].empty());
  REQUIRE(s.eqs[3].size() == 1);
  CHECK(s.eqs[3][0].key == 99);

  // Replanning into the same slice reuses it and gives the same result.
  PlannedSlice again = s;
  p.PlanSlice(7, 2, txns, &again);
  CHECK(again == s);
}

TEST_CASE("planner: kDepWrite splits into a read half and a write half sharing a slot") {
  KeyMapper ranges(KeyMapper::Kind::kRange, 2, 100);
  planner::Planner p(ranges);
  std::vector<Txn> txns;
  // x=10 (range 0) <- y=60 (range 1); then x=20 <- y=30, both in range 0; then an abort check.
  txns.push_back(MakeTxn(1, {{OpKind::kDepWrite, 10, 60}, {OpKind::kDepWrite, 20, 30}}));
  txns.push_back(MakeTxn(2, {{OpKind::kAbortIf, 70, 0, 500}, {OpKind::kDepWrite, 55, 5}}));
  PlannedSlice s;
  p.PlanSlice(0, 0, txns, &s);
  CHECK(s.dep_slots == 3);
  CHECK(s.txns[0].dep_begin == 0);
  CHECK(s.txns[0].deps == 2);
  CHECK(s.txns[0].fragments == 4);
  CHECK(s.txns[1].dep_begin == 2);
  CHECK(s.txns[1].deps == 1);
  CHECK(s.txns[1].may_abort);
  CHECK_FALSE(s.txns[0].may_abort);
  CHECK(s.may_abort);
  REQUIRE(s.eqs[0].size() == 4);
  CHECK(s.eqs[0][0] == Fragment{10, 0, 0, 0, 0, FragKind::kDepWrite});
  CHECK(s.eqs[0][1] == Fragment{30, 0, 0, 1, 1, FragKind::kDepRead});  // read before write
  CHECK(s.eqs[0][2] == Fragment{20, 0, 0, 1, 1, FragKind::kDepWrite});
  CHECK(s.eqs[0][3] == Fragment{5, 0, 1, 2, 1, FragKind::kDepRead});
  REQUIRE(s.eqs[1].size() == 3);
  CHECK(s.eqs[1][0] == Fragment{60, 0, 0, 0, 0, FragKind::kDepRead});
  CHECK(s.eqs[1][1] == Fragment{70, 500, 1, 0, 0, FragKind::kAbortIf});
  CHECK(s.eqs[1][2] == Fragment{55, 0, 1, 2, 1, FragKind::kDepWrite});
}

TEST_CASE("planner: random slices satisfy the EQ invariants and decode back") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const uint32_t ranges = 1 + static_cast<uint32_t>(seed % 5);
    PlannedSlice s = PlanRandom(seed, 50 + seed * 13, ranges);
    KeyMapper m(KeyMapper::Kind::kHash, ranges, 0);
    std::vector<uint32_t> frags(s.txns.size(), 0);
    for (uint32_t r = 0; r < ranges; ++r) {
      for (size_t i = 0; i < s.eqs[r].size(); ++i) {
        const Fragment& f = s.eqs[r][i];
        REQUIRE(m.Of(f.key) == r);
        if (i > 0) REQUIRE(s.eqs[r][i - 1].txn <= f.txn);
        ++frags[f.txn];
      }
    }
    for (size_t t = 0; t < s.txns.size(); ++t) REQUIRE(frags[t] == s.txns[t].fragments);
    std::string bytes = planner::EncodeSlice(s);
    PlannedSlice d;
    Status st = planner::DecodeSlice(bytes, &d);
    INFO(st.ToString());
    REQUIRE(st.ok());
    CHECK(d == s);
    CHECK(planner::EncodeSlice(d) == bytes);
  }
}

TEST_CASE("eq codec: the replica encoding is the slice without its plain reads, and validates") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const uint32_t ranges = 1 + static_cast<uint32_t>(seed % 5);
    PlannedSlice s = PlanRandom(seed, 50 + seed * 13, ranges);
    // What a replica should get: the same slice with every kRead removed and no read slots.
    PlannedSlice want = s;
    want.read_slots = 0;
    for (auto& t : want.txns) {
      t.fragments -= t.reads;
      t.reads = 0;
      t.read_begin = 0;
      t.submit_ns = 0;
    }
    size_t dropped = 0;
    for (auto& eq : want.eqs) {
      const size_t before = eq.size();
      eq.erase(std::remove_if(eq.begin(), eq.end(), [](const Fragment& f) { return f.kind == planner::FragKind::kRead; }),
               eq.end());
      dropped += before - eq.size();
    }
    REQUIRE(dropped > 0);
    const std::string bytes = planner::EncodeSlice(s, planner::SliceEncoding::kWithoutReads);
    PlannedSlice d;
    Status st = planner::DecodeSlice(bytes, &d);
    INFO("seed " << seed << ": " << st.ToString());
    REQUIRE(st.ok());
    CHECK(d == want);
    CHECK(planner::ValidateSlice(d, KeyMapper(KeyMapper::Kind::kHash, ranges, 0), s.batch, s.planner).ok());
    CHECK(bytes.size() < planner::EncodeSlice(s).size());
  }
}

TEST_CASE("eq codec: an empty slice round-trips") {
  PlannedSlice s;
  s.Reset(3, 1, 2);
  PlannedSlice d;
  REQUIRE(planner::DecodeSlice(planner::EncodeSlice(s), &d).ok());
  CHECK(d == s);
}

TEST_CASE("eq codec: every truncation and any trailing byte is rejected") {
  PlannedSlice s = PlanRandom(42, 40, 3);
  std::string bytes = planner::EncodeSlice(s);
  PlannedSlice d;
  for (size_t n = 0; n < bytes.size(); ++n) {
    Status st = planner::DecodeSlice(std::string_view(bytes.data(), n), &d);
    INFO("prefix " << n << " of " << bytes.size());
    REQUIRE(st.code() == StatusCode::kCorruption);
  }
  Status trailing = planner::DecodeSlice(bytes + "x", &d);
  CHECK(trailing.code() == StatusCode::kCorruption);
  CHECK(trailing.message().find("trailing") != std::string::npos);
}

TEST_CASE("eq codec: structurally corrupt slices are rejected") {
  KeyMapper ranges(KeyMapper::Kind::kRange, 2, 100);
  planner::Planner p(ranges);
  std::vector<Txn> txns;
  txns.push_back(MakeTxn(1, {{OpKind::kDepWrite, 10, 60}, {OpKind::kUpdate, 20}}));
  txns.push_back(MakeTxn(2, {{OpKind::kAbortIf, 70, 0, 500}, {OpKind::kRead, 1}}));
  PlannedSlice good;
  p.PlanSlice(0, 0, txns, &good);
  PlannedSlice d;
  REQUIRE(planner::DecodeSlice(planner::EncodeSlice(good), &d).ok());

  auto expect_corrupt = [&](PlannedSlice bad, const std::string& what) {
    Status st = planner::DecodeSlice(planner::EncodeSlice(bad), &d);
    INFO(what << ": " << st.ToString());
    CHECK(st.code() == StatusCode::kCorruption);
    CHECK(st.message().find(what) != std::string::npos);
  };
  {
    PlannedSlice b = good;
    b.eqs[0][1].kind = static_cast<FragKind>(9);
    expect_corrupt(b, "unknown fragment kind");
  }
  {
    PlannedSlice b = good;
    b.eqs[0].back().txn = 5;
    expect_corrupt(b, "txn index out of range");
  }
  {
    PlannedSlice b = good;
    b.txns[0].fragments = 4;
    expect_corrupt(b, "fragment count mismatch");
  }
  {
    PlannedSlice b = good;
    b.eqs[1][0].slot = 1;  // the read half of slot 0 now names slot 1
    b.dep_slots = 2;
    b.txns[0].deps = 2;
    expect_corrupt(b, "dependency slot");
  }
  {
    PlannedSlice b = good;
    b.eqs[0][0].slot = 7;
    expect_corrupt(b, "dependency slot out of range");
  }
  {
    PlannedSlice b = good;
    std::swap(b.eqs[0][0], b.eqs[0][1]);  // txn 0: op 1 before op 0 in range 0
    expect_corrupt(b, "op order");
  }
  {
    PlannedSlice b = good;
    b.eqs[1][0].op = 1;  // read half at another op than its write half
    expect_corrupt(b, "different ops");
  }
  {
    PlannedSlice b = good;
    b.txns[1].may_abort = false;
    b.may_abort = false;
    expect_corrupt(b, "without may_abort");
  }
  {
    PlannedSlice b = good;
    b.may_abort = false;
    expect_corrupt(b, "may_abort flag");
  }
  {
    PlannedSlice b = good;
    b.txns[0].write_ops = 9;
    expect_corrupt(b, "bad txn context");
  }
  // Hand-made headers: bad magic, a huge txn count, a huge dependency slot count, no ranges.
  CHECK(planner::DecodeSlice("XS2", &d).code() == StatusCode::kCorruption);
  CHECK(planner::DecodeSlice(std::string("QS1") + std::string(40, '\0'), &d).message().find("bad magic") !=
        std::string::npos);  // the previous format is refused, not misread
  {
    PlannedSlice b = good;
    b.eqs[0].back().slot = 3;  // txn 1's read (key 1) names a slot beyond its own
    expect_corrupt(b, "read slot out of range");
  }
  {
    PlannedSlice b = good;
    b.txns[1].reads = 2;  // claims a second read slot that no fragment fills
    b.read_slots = 2;
    expect_corrupt(b, "read slot without its read");
  }
  {
    PlannedSlice b = good;
    REQUIRE(b.eqs[0][1].kind == FragKind::kUpdate);
    b.eqs[0][1].slot = 1;  // txn 0's update (key 20) given a slot
    expect_corrupt(b, "slot on a fragment that takes none");
  }
  {
    Writer w;
    w.PutRaw("QS2", 3);
    w.PutVarint(0);
    w.PutVarint(0);
    w.PutVarint(0);
    w.PutVarint(0);
    w.PutU8(0);
    w.PutVarint(uint64_t{1} << 40);
    Status st = planner::DecodeSlice(w.data(), &d);
    CHECK(st.code() == StatusCode::kCorruption);
    CHECK(st.message().find("txn count") != std::string::npos);
  }
  {
    Writer w;
    w.PutRaw("QS2", 3);
    w.PutVarint(0);
    w.PutVarint(0);
    w.PutVarint(uint64_t{1} << 31);
    w.PutVarint(0);
    w.PutU8(0);
    w.PutVarint(0);
    Status st = planner::DecodeSlice(w.data(), &d);
    CHECK(st.code() == StatusCode::kCorruption);
    CHECK(st.message().find("dependency slot count") != std::string::npos);
  }
  {
    Writer w;
    w.PutRaw("QS2", 3);
    w.PutVarint(0);
    w.PutVarint(0);
    w.PutVarint(0);
    w.PutVarint(0);
    w.PutU8(0);
    w.PutVarint(0);
    w.PutVarint(0);
    CHECK(planner::DecodeSlice(w.data(), &d).code() == StatusCode::kCorruption);
  }
}

TEST_CASE("eq codec: random byte flips never crash and never yield a broken slice") {
  PlannedSlice s = PlanRandom(9, 30, 3);
  const std::string bytes = planner::EncodeSlice(s);
  Rng rng(123);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string b = bytes;
    const int flips = 1 + static_cast<int>(rng.Next() % 3);
    for (int f = 0; f < flips; ++f) b[rng.Next() % b.size()] ^= static_cast<char>(1 + rng.Next() % 255);
    PlannedSlice d;
    if (planner::DecodeSlice(b, &d).ok()) {
      ++accepted;  // e.g. a flipped key or arg byte: still a well-formed slice
      PlannedSlice again;
      REQUIRE(planner::DecodeSlice(planner::EncodeSlice(d), &again).ok());
      REQUIRE(again == d);
    }
  }
  CHECK(accepted < 3000);
}

TEST_CASE("eq codec: two txns sharing dependency slots crosswise are rejected (they would deadlock the executors)") {
  // A: x=10 (range 0) <- y=60 (range 1); B: x=70 (range 1) <- y=20 (range 0). Planned, A owns
  // slot 0 and B slot 1. The crosswise slice gives both txns the range [0, 2) and swaps the
  // write halves' slots: every slot still has one read and one write at the same op, so the
  // previous format and decoder accepted it, but executor 0 runs A's write (waiting for slot 1) before
  // B's read of slot 1 in the same EQ and waits for itself forever.
  KeyMapper ranges(KeyMapper::Kind::kRange, 2, 100);
  planner::Planner p(ranges);
  std::vector<Txn> txns;
  txns.push_back(MakeTxn(1, {{OpKind::kDepWrite, 10, 60}}));
  txns.push_back(MakeTxn(2, {{OpKind::kDepWrite, 70, 20}}));
  PlannedSlice s;
  p.PlanSlice(0, 0, txns, &s);
  REQUIRE(s.eqs[0].size() == 2);
  REQUIRE(s.eqs[0][0] == Fragment{10, 0, 0, 0, 0, FragKind::kDepWrite});
  REQUIRE(s.eqs[0][1] == Fragment{20, 0, 1, 1, 0, FragKind::kDepRead});
  REQUIRE(s.eqs[1][0] == Fragment{60, 0, 0, 0, 0, FragKind::kDepRead});
  REQUIRE(s.eqs[1][1] == Fragment{70, 0, 1, 1, 0, FragKind::kDepWrite});
  PlannedSlice cross = s;
  cross.txns[0].deps = 2;
  cross.txns[1].dep_begin = 0;
  cross.txns[1].deps = 2;
  cross.eqs[0][0].slot = 1;  // A's write waits for slot 1, read by B later in the same EQ
  cross.eqs[1][1].slot = 0;  // B's write takes A's value
  PlannedSlice d;
  Status st = planner::DecodeSlice(planner::EncodeSlice(cross), &d);
  CHECK(st.code() == StatusCode::kCorruption);
  // The encoding carries slot counts, not ranges: shared ranges cannot even be written down, and
  // what the writer produces from this value is refused.
  CHECK(st.message().find("dependency slot") != std::string::npos);
  REQUIRE(planner::DecodeSlice(planner::EncodeSlice(s), &d).ok());
}

TEST_CASE("ValidateSlice: batch, planner, EQ count and key ranges of the executing node") {
  KeyMapper ranges(KeyMapper::Kind::kRange, 2, 100);
  planner::Planner p(ranges);
  std::vector<Txn> txns;
  txns.push_back(MakeTxn(1, {{OpKind::kUpdate, 10}, {OpKind::kRead, 60}}));
  PlannedSlice s;
  p.PlanSlice(4, 1, txns, &s);
  CHECK(planner::ValidateSlice(s, ranges, 4, 1).ok());
  CHECK(planner::ValidateSlice(s, ranges, 5, 1).message() == "slice (batch 5, planner 1): carries batch 4, planner 1");
  CHECK(planner::ValidateSlice(s, ranges, 4, 0).message() == "slice (batch 4, planner 0): carries batch 4, planner 1");
  KeyMapper three(KeyMapper::Kind::kRange, 3, 100);
  CHECK(planner::ValidateSlice(s, three, 4, 1).message() == "slice (batch 4, planner 1): 2 EQs for 3 executor ranges");
  PlannedSlice moved = s;
  std::swap(moved.eqs[0], moved.eqs[1]);
  CHECK(planner::ValidateSlice(moved, ranges, 4, 1).message() ==
        "slice (batch 4, planner 1): key 60 of txn 0 is in EQ 0 but belongs to range 1");
}
