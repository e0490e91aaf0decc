// RowPlanner (planner/row_planner.h): a home node's batch split into one row sub-slice per
// partition. Checked for random op mixes against the single-node Planner (the same fragments,
// cross-partition dependencies split into matching kDepSend / kDepRecv halves), through the
// codec, and against ValidateSlice on the receiving partition.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "planner/eq.h"
#include "planner/planner.h"
#include "planner/row_planner.h"
#include "storage/key_map.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using planner::FragKind;
using planner::Fragment;
using planner::PlannedSlice;
using storage::KeyMapper;

namespace {

// (op, kind, key, arg) of every fragment of each home txn, with the row kinds mapped onto
// their single-node halves (kDepSend -> kDepRead, its arg being the partition, kDepRecv ->
// kDepWrite): what the txn does, wherever it runs.
using Frag = std::tuple<uint32_t, int, uint64_t, uint64_t>;
std::vector<std::vector<Frag>> ByHomeTxn(const std::vector<PlannedSlice>& slices, size_t ntxns) {
  std::vector<std::vector<Frag>> out(ntxns);
  for (const PlannedSlice& s : slices) {
    for (const auto& eq : s.eqs) {
      for (const Fragment& f : eq) {
        FragKind k = f.kind;
        uint64_t arg = f.arg;
        if (k == FragKind::kDepSend) k = FragKind::kDepRead, arg = 0;
        if (k == FragKind::kDepRecv) k = FragKind::kDepWrite;
        out[s.txns[f.txn].home_index].emplace_back(f.op, static_cast<int>(k), f.key, arg);
      }
    }
  }
  for (auto& v : out) std::sort(v.begin(), v.end());
  return out;
}

}  // namespace

TEST_CASE("row planner: sub-slices carry the single-node plan's fragments, decode, validate and pair up") {
  int checked = 0;
  size_t all_sends = 0, all_txns_split = 0;
  for (uint64_t seed = 1; seed <= 48; ++seed) {
    testing::GenOptions g;
    g.keys = seed % 2 ? 1000 : 300000;
    g.max_ops = 1 + static_cast<uint32_t>(seed % 10);
    g.dep_per_100 = static_cast<uint32_t>(seed % 4) * 15;
    g.abort_per_100 = seed % 3 == 0 ? 10 : 0;
    g.debit_per_100 = seed % 5 == 0 ? 10 : 0;
    const size_t n = seed % 12 == 0 ? 0 : static_cast<size_t>(seed * 41 % 500);
    const auto txns = testing::RandomTxns(seed, n, g);
    const uint32_t nparts = 2 + static_cast<uint32_t>(seed % 3);
    const uint32_t nranges = 1 + static_cast<uint32_t>(seed % 4);
    const auto kind = seed % 2 ? KeyMapper::Kind::kHash : KeyMapper::Kind::kRange;
    const KeyMapper parts(kind, nparts, g.keys);
    const KeyMapper ranges = KeyMapper::Within(parts, nranges);
    INFO("seed " << seed << ", " << nparts << " partitions, " << nranges << " ranges, " << n << " txns");
    planner::RowPlanner rp(parts, ranges, static_cast<uint32_t>(seed % nparts));
    std::vector<PlannedSlice> subs;
    rp.PlanSlices(seed, 3, txns, &subs);
    REQUIRE(subs.size() == nparts);

    // The same fragments per txn as the single-node plan.
    planner::Planner single(KeyMapper(kind, 1, g.keys));
    PlannedSlice whole;
    single.PlanSlice(seed, 3, txns, &whole);
    REQUIRE(ByHomeTxn(subs, n) == ByHomeTxn({whole}, n));

    // Each kDepSend names a kDepRecv of the same txn and op on its slot, and every kDepRecv is
    // named by exactly one kDepSend.
    std::map<std::pair<uint32_t, uint32_t>, std::pair<uint32_t, uint32_t>> recv;  // (partition, slot) -> (home, op)
    for (uint32_t p = 0; p < nparts; ++p) {
      for (const auto& eq : subs[p].eqs) {
        for (const Fragment& f : eq) {
          if (f.kind == FragKind::kDepRecv) recv[{p, f.slot}] = {subs[p].txns[f.txn].home_index, f.op};
        }
      }
    }
    size_t sends = 0;
    for (uint32_t p = 0; p < nparts; ++p) {
      for (const auto& eq : subs[p].eqs) {
        for (const Fragment& f : eq) {
          if (f.kind != FragKind::kDepSend) continue;
          ++sends;
          REQUIRE(f.arg != p);
          auto it = recv.find({static_cast<uint32_t>(f.arg), f.slot});
          REQUIRE(it != recv.end());
          CHECK(it->second == std::make_pair(subs[p].txns[f.txn].home_index, f.op));
        }
      }
    }
    CHECK(sends == recv.size());
    all_sends += sends;
    size_t listed = 0;
    for (const auto& s : subs) listed += s.txns.size();
    all_txns_split += listed - n;  // txns listed in more than one sub-slice

    for (uint32_t p = 0; p < nparts; ++p) {
      const PlannedSlice& s = subs[p];
      CHECK(s.row);
      // Home indices strictly increasing; may_abort is the whole txn's.
      for (size_t i = 0; i < s.txns.size(); ++i) {
        if (i > 0) REQUIRE(s.txns[i].home_index > s.txns[i - 1].home_index);
        bool any = false;
        for (const auto& op : txns[s.txns[i].home_index].ops) any |= planner::MayAbortFrag(static_cast<FragKind>(op.kind));
        REQUIRE(s.txns[i].may_abort == any);
      }
      // Through the codec, whole and without reads.
      PlannedSlice expect = s;
      for (auto& t : expect.txns) t.submit_ns = 0;
      PlannedSlice decoded;
      REQUIRE(planner::DecodeSlice(planner::EncodeSlice(s), &decoded).ok());
      REQUIRE(decoded == expect);
      PlannedSlice replica;
      REQUIRE(planner::DecodeSlice(planner::EncodeSlice(s, planner::SliceEncoding::kWithoutReads), &replica).ok());
      // The receiving node's checks; a node outside a row refuses it.
      planner::RowPlace place{parts, p};
      Status v = planner::ValidateSlice(decoded, ranges, seed, 3, &place);
      INFO(v.ToString());
      REQUIRE(v.ok());
      CHECK_FALSE(planner::ValidateSlice(decoded, ranges, seed, 3).ok());
      if (!decoded.txns.empty()) {
        planner::RowPlace wrong{parts, (p + 1) % nparts};
        const Status w = planner::ValidateSlice(decoded, ranges, seed, 3, &wrong);
        REQUIRE_FALSE(w.ok());
        CHECK(w.message().find("belongs to partition " + std::to_string(p)) != std::string::npos);
      }
    }
    ++checked;
  }
  CHECK(checked == 48);
  // The mixes did exercise cross-partition dependencies and multi-partition txns.
  CHECK(all_sends > 1000);
  CHECK(all_txns_split > 1000);
}

TEST_CASE("row planner: one partition plans what the single-node planner plans, a txn without ops or with a session is listed at home") {
  testing::GenOptions g;
  g.dep_per_100 = 30;
  g.debit_per_100 = 10;
  const auto txns = testing::RandomTxns(7, 300, g);
  for (auto kind : {KeyMapper::Kind::kHash, KeyMapper::Kind::kRange}) {
    const KeyMapper one(kind, 1, g.keys);
    planner::RowPlanner rp(one, KeyMapper::Within(one, 3), 0);
    std::vector<PlannedSlice> subs;
    rp.PlanSlices(9, 1, txns, &subs);
    REQUIRE(subs.size() == 1);
    planner::Planner single(KeyMapper(kind, 3, g.keys));
    PlannedSlice whole;
    single.PlanSlice(9, 1, txns, &whole);
    subs[0].row = false;
    CHECK(subs[0] == whole);
  }
  std::vector<storage::Txn> empty(3);
  for (uint64_t i = 0; i < 3; ++i) empty[i].id = 100 + i;
  empty[1].ops.push_back(storage::Op{});  // a read of key 0
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, 1000);
  planner::RowPlanner rp(parts, KeyMapper::Within(parts, 2), 1);
  std::vector<PlannedSlice> subs;
  rp.PlanSlices(1, 0, empty, &subs);
  REQUIRE(subs[0].txns.size() == 1);  // the read of key 0
  CHECK(subs[0].txns[0].home_index == 1);
  REQUIRE(subs[1].txns.size() == 2);  // the two txns without ops, at home (partition 1)
  CHECK(subs[1].txns[0].home_index == 0);
  CHECK(subs[1].txns[1].home_index == 2);
  CHECK(subs[1].txns[0].fragments == 0);

  // A client session's txn is listed at its home even with no key there, and only the home's
  // part carries its session and seq (the session table is the home's).
  std::vector<storage::Txn> sess(2);
  sess[0].id = 1;
  sess[0].session = 5;
  sess[0].seq = 9;
  sess[0].ops.push_back(storage::Op{storage::OpKind::kUpdate, 10, 0, 0});  // key 10: partition 0
  sess[1].id = 2;
  sess[1].session = 5;
  sess[1].seq = 10;
  sess[1].ops.push_back(storage::Op{storage::OpKind::kUpdate, 700, 0, 0});  // key 700: home
  rp.PlanSlices(2, 0, sess, &subs);
  REQUIRE(subs[0].txns.size() == 1);
  CHECK(subs[0].txns[0].session == 0);
  CHECK(subs[0].txns[0].seq == 0);
  REQUIRE(subs[1].txns.size() == 2);
  CHECK(subs[1].txns[0].home_index == 0);
  CHECK(subs[1].txns[0].fragments == 0);
  CHECK(subs[1].txns[0].session == 5);
  CHECK(subs[1].txns[0].seq == 9);
  CHECK(subs[1].txns[1].session == 5);
  CHECK(subs[1].txns[1].seq == 10);
  CHECK(subs[1].txns[1].fragments == 1);
  // Through the codec, the home's part keeps them.
  std::string bytes = planner::EncodeSlice(subs[1]);
  PlannedSlice back;
  REQUIRE(planner::DecodeSlice(bytes, &back).ok());
  CHECK(back == subs[1]);
}

TEST_CASE("row sub-slices: the decoder and ValidateSlice refuse what would hang or misroute") {
  // Txn 0: x <- y across partitions (range mapping over 1000 keys: 0..499 and 500..999), and a
  // local x <- y on partition 0.
  storage::Txn t;
  t.id = 1;
  storage::Op cross;
  cross.kind = storage::OpKind::kDepWrite;
  cross.key = 10;       // partition 0
  cross.src_key = 600;  // partition 1
  storage::Op local = cross;
  local.src_key = 300;  // partition 0, another range than key 10
  t.ops = {cross, local};
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, 1000);
  const KeyMapper ranges = KeyMapper::Within(parts, 2);
  planner::RowPlanner rp(parts, ranges, 0);
  std::vector<PlannedSlice> subs;
  rp.PlanSlices(5, 0, {t}, &subs);
  planner::RowPlace p0{parts, 0}, p1{parts, 1};
  REQUIRE(planner::ValidateSlice(subs[0], ranges, 5, 0, &p0).ok());
  REQUIRE(planner::ValidateSlice(subs[1], ranges, 5, 0, &p1).ok());
  PlannedSlice out;
  auto find = [](PlannedSlice& s, FragKind k) -> Fragment& {
    for (auto& eq : s.eqs) {
      for (auto& f : eq) {
        if (f.kind == k) return f;
      }
    }
    FAIL("no fragment of kind " << static_cast<int>(k));
    return s.eqs[0][0];
  };
  SECTION("a slot fed by the row and by a local read") {
    PlannedSlice s = subs[0];
    find(s, FragKind::kDepWrite).kind = FragKind::kDepRecv;
    const Status st = planner::DecodeSlice(planner::EncodeSlice(s), &out);
    REQUIRE_FALSE(st.ok());
    CHECK(st.message().find("fed by the row and by a local read") != std::string::npos);
  }
  SECTION("row kinds in a slice that is not a row sub-slice") {
    PlannedSlice s = subs[1];
    s.row = false;
    const Status st = planner::DecodeSlice(planner::EncodeSlice(s), &out);
    REQUIRE_FALSE(st.ok());
    CHECK(st.message().find("outside a row sub-slice") != std::string::npos);
  }
  SECTION("a kDepSend to its own partition, or past the row") {
    PlannedSlice s = subs[1];
    find(s, FragKind::kDepSend).arg = 1;
    Status st = planner::ValidateSlice(s, ranges, 5, 0, &p1);
    REQUIRE_FALSE(st.ok());
    CHECK(st.message().find("sends a dependency to partition 1") != std::string::npos);
    find(s, FragKind::kDepSend).arg = 2;
    CHECK_FALSE(planner::ValidateSlice(s, ranges, 5, 0, &p1).ok());
  }
  SECTION("home indices that do not increase") {
    PlannedSlice s = subs[0];
    s.txns.push_back(s.txns[0]);  // a second context with the same home index and no fragments
    s.txns[1].fragments = 0;
    s.txns[1].deps = 0;
    s.txns[1].dep_begin = s.dep_slots;
    const Status st = planner::DecodeSlice(planner::EncodeSlice(s), &out);
    REQUIRE_FALSE(st.ok());
    CHECK(st.message().find("bad home index") != std::string::npos);
  }
  SECTION("a row sub-slice on a node outside a row, a plain slice on a node in one") {
    Status st = planner::ValidateSlice(subs[0], ranges, 5, 0);
    REQUIRE_FALSE(st.ok());
    CHECK(st.message().find("outside a partitioned row") != std::string::npos);
    PlannedSlice plain = subs[0];
    plain.row = false;
    st = planner::ValidateSlice(plain, ranges, 5, 0, &p0);
    REQUIRE_FALSE(st.ok());
    CHECK(st.message().find("not a row sub-slice") != std::string::npos);
  }
}
