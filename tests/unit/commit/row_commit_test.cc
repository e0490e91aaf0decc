// RowCommit (commit/row_commit.h): a home slice completes once every partition reported, with
// the reads merged into op order; disagreements are errors naming the txn.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "commit/row_commit.h"

using namespace qrstore;
using commit::RowCommit;
using commit::RowHomeOutcome;
using commit::RowHomeSlice;
using commit::RowSliceReport;
using commit::TxnStatus;
using storage::KeyMapper;

namespace {
storage::Op Read(storage::Key k) { return storage::Op{storage::OpKind::kRead, k, 0, 0}; }
struct Entry {
  uint32_t home;
  TxnStatus status;
  std::string values;
};
RowSliceReport Rep(const std::vector<Entry>& entries) {
  RowSliceReport r;
  for (const Entry& e : entries) r.Add(e.home, e.status, e.values);
  return r;
}
}  // namespace

TEST_CASE("row commit: a slice completes when every partition reported, reads come back in op order") {
  // Range mapping over 100 keys: partition 0 = 0..49, partition 1 = 50..99. Records of 4 bytes.
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, 100);
  std::vector<RowHomeSlice> got;
  RowCommit rc(parts, 4, [&](uint64_t, uint32_t, const RowHomeSlice& v) { got.push_back(v); });
  storage::Txn a;
  a.id = 7;
  a.ops = {Read(60), Read(1), Read(70), Read(2)};  // partitions 1, 0, 1, 0
  storage::Txn b;
  b.id = 8;
  b.ops = {Read(3)};
  storage::Txn c;  // reads on partition 1 only, a write on partition 0
  c.id = 9;
  c.ops = {Read(80), storage::Op{storage::OpKind::kUpdate, 4, 0, 1}, Read(90)};
  storage::Txn d;  // no read
  d.id = 10;
  d.ops = {storage::Op{storage::OpKind::kUpdate, 5, 0, 1}};
  rc.Report(1, 0, 0, Rep({Entry{0, TxnStatus::kCommitted, "p1r1p1r2"}, Entry{2, TxnStatus::kCommitted, "c80_c90_"}}));
  CHECK(got.empty());
  rc.Plan(0, 0, {a, b, c, d});
  CHECK(got.empty());  // partition 0 has not reported
  rc.Report(0, 0, 0, Rep({Entry{0, TxnStatus::kCommitted, "p0r1p0r2"}, Entry{1, TxnStatus::kCommitted, "xyzw"},
                          Entry{2, TxnStatus::kCommitted, ""}, Entry{3, TxnStatus::kCommitted, ""}}));
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].txns.size() == 4);
  CHECK(got[0].txns[0].txn_id == 7);
  CHECK(got[0].ValuesOf(got[0].txns[0]) == "p1r1p0r1p1r2p0r2");  // merged across partitions
  CHECK(got[0].ValuesOf(got[0].txns[1]) == "xyzw");              // partition 0's report, as is
  CHECK(got[0].ValuesOf(got[0].txns[2]) == "c80_c90_");          // partition 1's, after another txn's
  CHECK(got[0].ValuesOf(got[0].txns[3]).empty());
  CHECK(rc.completed_slices() == 1);
  CHECK(rc.health().ok());
}

TEST_CASE("row commit: disagreeing fates, a double report and missing reads are errors naming them") {
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, 100);
  storage::Txn a;
  a.id = 7;
  a.ops = {Read(60), Read(1)};
  auto expect_error = [&](const std::function<void(RowCommit&)>& feed, const std::string& message) {
    int calls = 0;
    RowCommit rc(parts, 2, [&](uint64_t, uint32_t, const RowHomeSlice&) { ++calls; });
    rc.Plan(3, 1, {a});
    feed(rc);
    INFO(rc.health().ToString());
    CHECK(rc.health().message().find(message) != std::string::npos);
    CHECK(calls == 0);
  };
  expect_error([](RowCommit& rc) {
    rc.Report(0, 3, 1, Rep({Entry{0, TxnStatus::kCommitted, "aa"}}));
    rc.Report(1, 3, 1, Rep({Entry{0, TxnStatus::kAbortedCascade, ""}}));
  }, "home slice (3, 1): partitions disagree on the fate of txn 0 (committed / aborted-cascade from partition 1)");
  expect_error([](RowCommit& rc) {
    rc.Report(0, 3, 1, Rep({}));
    rc.Report(0, 3, 1, Rep({}));
  }, "partition 0 reported twice");
  expect_error([](RowCommit& rc) {
    rc.Report(0, 3, 1, Rep({Entry{0, TxnStatus::kCommitted, "aa"}}));
    rc.Report(1, 3, 1, Rep({Entry{0, TxnStatus::kCommitted, ""}}));
  }, "txn 0: partition 1 reports fewer reads than it has");
  expect_error([](RowCommit& rc) {
    rc.Report(0, 3, 1, Rep({Entry{0, TxnStatus::kCommitted, "aabb"}}));
    rc.Report(1, 3, 1, Rep({Entry{0, TxnStatus::kCommitted, "cc"}}));
  }, "txn 0: partition 0 reports more reads than it has");
  expect_error([](RowCommit& rc) {
    rc.Report(0, 3, 1, Rep({Entry{5, TxnStatus::kCommitted, ""}}));
    rc.Report(1, 3, 1, Rep({}));
  }, "partition 0 reports txn 5 of a slice of 1 out of order, twice or with values out of range");
  expect_error([](RowCommit& rc) { rc.Report(2, 3, 1, Rep({})); }, "a report from partition 2 of a row of 2");
}

TEST_CASE("row commit: more home slices waiting than its bound is an error, not growth") {
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, 100);
  RowCommit rc(parts, 2, [](uint64_t, uint32_t, const RowHomeSlice&) {}, /*max_pending=*/3);
  for (uint64_t b = 0; b < 3; ++b) rc.Report(1, b, 0, Rep({}));  // never planned
  CHECK(rc.health().ok());
  rc.Report(1, 3, 0, Rep({}));
  CHECK(rc.health().code() == StatusCode::kResourceExhausted);
  CHECK(rc.health().message().find("3 home slices wait for reports already") != std::string::npos);
}

TEST_CASE("row commit, repeats: with AcceptRepeats the predecessor's and completed home slices' reports are dropped, "
          "an identical repeat too, a different one is an error") {
  // docs/partitioned-rows.md 9.5: this home's successor plans its own home slices from batch 5.
  // A bound of one pending home slice shows that nothing dropped is kept.
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, 100);
  storage::Txn a;
  a.id = 7;
  a.ops = {Read(60), Read(1)};
  const RowSliceReport r0 = Rep({Entry{0, TxnStatus::kCommitted, "aa"}});
  const RowSliceReport r1 = Rep({Entry{0, TxnStatus::kCommitted, "bb"}});
  std::vector<std::pair<uint64_t, std::string>> got;  // (batch, txn 0's values)
  RowCommit rc(parts, 2, [&](uint64_t b, uint32_t, const RowHomeSlice& v) {
    got.emplace_back(b, std::string(v.ValuesOf(v.txns[0])));
  }, /*max_pending=*/1);
  rc.Report(1, 3, 1, r1);  // before the switch: waits
  rc.AcceptRepeats(5);
  rc.AcceptRepeats(5);     // again: nothing
  rc.Report(1, 4, 1, r1);  // the predecessor's home slice: dropped
  CHECK(rc.health().ok());

  rc.Plan(5, 1, {a});  // the one pending slot: (3, 1) and (4, 1) hold none of it
  rc.Report(0, 5, 1, r0);
  rc.Report(0, 5, 1, r0);  // identical, pending: dropped
  CHECK(got.empty());
  rc.Report(1, 5, 1, r1);
  REQUIRE(got.size() == 1);
  CHECK(got[0] == std::make_pair(uint64_t{5}, std::string("bbaa")));
  rc.Report(1, 5, 1, r1);  // completed: dropped
  rc.Report(0, 5, 1, Rep({Entry{0, TxnStatus::kAbortedLogic, ""}}));  // completed: dropped, whatever it says
  CHECK(rc.health().ok());
  CHECK(rc.completed_slices() == 1);

  SECTION("the next home slice completes as usual") {
    rc.Plan(6, 1, {a});
    rc.Report(1, 6, 1, r1);
    rc.Report(0, 6, 1, r0);
    CHECK(got.size() == 2);
    CHECK(rc.health().ok());
  }
  SECTION("a report of a home slice not planned yet waits for it, as without repeats") {
    rc.Report(0, 6, 1, r0);
    rc.Plan(6, 1, {a});
    rc.Report(1, 6, 1, r1);
    CHECK(got.size() == 2);
    CHECK(rc.health().ok());
  }
  SECTION("a second report that differs, in a status, in values or in txns, is an error naming it") {
    const std::vector<std::pair<RowSliceReport, std::string>> cases = {
        {Rep({Entry{0, TxnStatus::kAbortedLogic, ""}}), "txn 0 committed, then aborted-logic"},
        {Rep({Entry{0, TxnStatus::kCommitted, "ab"}}), "txn 0 with other read values"},
        {Rep({}), "1 txns listed, then 0"},
    };
    for (const auto& [second, detail] : cases) {
      RowCommit other(parts, 2, [](uint64_t, uint32_t, const RowHomeSlice&) {});
      other.AcceptRepeats(5);
      other.Plan(5, 1, {a});
      other.Report(0, 5, 1, r0);
      other.Report(0, 5, 1, second);
      INFO(other.health().ToString());
      CHECK(other.health().code() == StatusCode::kCorruption);
      CHECK(other.health().message() == "home slice (5, 1): partition 0 reported twice, differently: " + detail);
    }
  }
  SECTION("home slices are planned in batch order per slice, from the first own batch") {
    rc.Plan(7, 1, {a});
    CHECK(rc.health().message() == "home slice (7, 1) planned out of order: the next of slice 1 is batch 6");
    RowCommit other(parts, 2, [](uint64_t, uint32_t, const RowHomeSlice&) {});
    other.AcceptRepeats(5);
    other.Plan(4, 0, {a});
    CHECK(other.health().message() == "home slice (4, 0) planned out of order: the next of slice 0 is batch 5");
  }
}

TEST_CASE("row commit, repeats: without AcceptRepeats an identical repeat is still an error") {
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, 100);
  storage::Txn a;
  a.id = 7;
  a.ops = {Read(60), Read(1)};
  RowCommit rc(parts, 2, [](uint64_t, uint32_t, const RowHomeSlice&) {});
  rc.Plan(5, 1, {a});
  rc.Report(0, 5, 1, Rep({Entry{0, TxnStatus::kCommitted, "aa"}}));
  rc.Report(0, 5, 1, Rep({Entry{0, TxnStatus::kCommitted, "aa"}}));
  CHECK(rc.health().message() == "home slice (5, 1): partition 0 reported twice");
}
