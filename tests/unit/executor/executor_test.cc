#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "executor/abort_resolver.h"
#include "executor/dep_board.h"
#include "executor/range_executor.h"
#include "planner/eq.h"
#include "planner/planner.h"
#include "storage/key_map.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using executor::Fate;
using storage::KeyMapper;
using storage::Op;
using storage::OpKind;
using storage::Txn;

namespace {

const storage::RecordLayout kLayout{4, 8};

// Runs one batch the way the engine does: the batch's txns split into `planners` slices, one
// thread per range running the slices in priority order (logging from the first slice that may
// abort), then the resolver. Returns the fates in planned order.
std::vector<Fate> RunBatch(storage::Table* table, const std::vector<Txn>& txns, uint32_t planners,
                           const KeyMapper& ranges, executor::BatchFates* fates_out = nullptr,
                           bool through_codec = false,
                           planner::SliceEncoding encoding = planner::SliceEncoding::kFull) {
  planner::Planner planner(ranges);
  std::vector<planner::PlannedSlice> slices(planners);
  std::vector<executor::DepBoard> boards(planners);
  size_t next = 0;
  for (uint32_t p = 0; p < planners; ++p) {
    const size_t n = txns.size() / planners + (p < txns.size() % planners ? 1 : 0);
    std::vector<Txn> part(txns.begin() + static_cast<ptrdiff_t>(next), txns.begin() + static_cast<ptrdiff_t>(next + n));
    next += n;
    planner.PlanSlice(0, p, part, &slices[p]);
    if (through_codec) {
      // What a follower does: run the slice decoded from the leader's bytes.
      const std::string bytes = planner::EncodeSlice(slices[p], encoding);
      slices[p] = planner::PlannedSlice();
      REQUIRE(planner::DecodeSlice(bytes, &slices[p]).ok());
    }
    boards[p].Reset(slices[p].dep_slots);
  }
  std::vector<std::unique_ptr<executor::RangeExecutor>> execs;
  for (uint32_t r = 0; r < ranges.buckets(); ++r) execs.push_back(std::make_unique<executor::RangeExecutor>(table, r));
  {
    std::vector<std::thread> threads;
    for (auto& ex : execs) {
      threads.emplace_back([&, e = ex.get()] {
        bool log = false;
        for (uint32_t p = 0; p < planners; ++p) {
          log = log || slices[p].may_abort;
          e->RunEq(slices[p], &boards[p], log);
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  std::vector<const planner::PlannedSlice*> sp;
  for (auto& s : slices) sp.push_back(&s);
  std::vector<executor::ExecLog*> logs;
  for (auto& e : execs) logs.push_back(&e->log());
  executor::AbortResolver resolver;
  executor::BatchFates fates;
  resolver.Resolve(sp, logs, table, &fates);
  std::vector<Fate> out;
  for (uint32_t p = 0; p < planners; ++p) {
    for (uint32_t t = 0; t < slices[p].txns.size(); ++t) out.push_back(fates.Of(p, t));
  }
  if (fates_out != nullptr) *fates_out = fates;
  return out;
}

Txn MakeTxn(uint64_t id, std::vector<Op> ops) {
  Txn t;
  t.id = id;
  t.ops = std::move(ops);
  return t;
}

}  // namespace

TEST_CASE("executor: dependency values flow between concurrently running ranges") {
  // Chains of x <- y across all ranges in both directions, on a small table: every executor
  // waits for the others many times. The result must be the serial one.
  for (uint32_t nranges : {2u, 3u, 4u}) {
    storage::Table table(kLayout, 64), expect(kLayout, 64);
    testing::LoadTable(&table, 64, 0);
    testing::LoadTable(&expect, 64, 0);
    testing::GenOptions g;
    g.keys = 64;
    g.dep_per_100 = 60;
    g.max_ops = 8;
    auto txns = testing::RandomTxns(nranges, 400, g);
    for (const Txn& t : txns) REQUIRE(testing::SerialApply(&expect, t));
    KeyMapper ranges(KeyMapper::Kind::kHash, nranges, 0);
    auto fates = RunBatch(&table, txns, 2, ranges);
    for (Fate f : fates) REQUIRE(f == Fate::kCommit);
    CHECK(table.Digest() == expect.Digest());
  }
}

TEST_CASE("executor: a dependency on the same range and on an absent key") {
  storage::Table table(kLayout, 10), expect(kLayout, 10);
  testing::LoadTable(&table, 10, 3);
  testing::LoadTable(&expect, 10, 3);
  std::vector<Txn> txns = {
      MakeTxn(1, {{OpKind::kUpdate, 2}, {OpKind::kDepWrite, 4, 2}, {OpKind::kDepWrite, 2, 2}}),
      MakeTxn(2, {{OpKind::kDepWrite, 5, 777}, {OpKind::kDepWrite, 777, 5}, {OpKind::kUpdate, 999}}),
  };
  for (const Txn& t : txns) REQUIRE(testing::SerialApply(&expect, t));
  auto fates = RunBatch(&table, txns, 1, KeyMapper(KeyMapper::Kind::kRange, 2, 10));
  CHECK(fates == std::vector<Fate>{Fate::kCommit, Fate::kCommit});
  CHECK(table.Digest() == expect.Digest());
  CHECK(storage::GetCounter(table.Find(2)) == 5);  // 3 + update + dep-write on itself
}

TEST_CASE("abort resolver: a fired abort leaves no trace and a later reader re-reads the old value") {
  storage::Table table(kLayout, 10), expect(kLayout, 10);
  testing::LoadTable(&table, 10, 0);
  testing::LoadTable(&expect, 10, 0);
  std::vector<Txn> txns = {
      MakeTxn(1, {{OpKind::kUpdate, 1}, {OpKind::kAbortIf, 6, 0, 10000}}),  // always fires
      MakeTxn(2, {{OpKind::kDepWrite, 7, 1}}),                               // reads key 1
      MakeTxn(3, {{OpKind::kUpdate, 3}}),                                    // unrelated
      MakeTxn(4, {{OpKind::kUpdate, 1}, {OpKind::kRead, 6}}),                // writes key 1 again
  };
  std::vector<bool> serial;
  for (const Txn& t : txns) serial.push_back(testing::SerialApply(&expect, t));
  CHECK(serial == std::vector<bool>{false, true, true, true});
  executor::BatchFates fates;
  auto got = RunBatch(&table, txns, 1, KeyMapper(KeyMapper::Kind::kRange, 2, 10), &fates);
  CHECK(got == std::vector<Fate>{Fate::kLogic, Fate::kCommit, Fate::kCommit, Fate::kCommit});
  CHECK(fates.aborted == 1);
  CHECK(fates.reexecuted == 3);  // txns 1, 2 and 4 (3 touched nothing tainted)
  CHECK(storage::GetCounter(table.Find(1)) == 1);  // only txn 4's update
  CHECK(storage::GetCounter(table.Find(7)) == 1);
  CHECK(table.Digest() == expect.Digest());
}

TEST_CASE("abort resolver: short debits abort, balances are conserved") {
  storage::Table table(kLayout, 4), expect(kLayout, 4);
  testing::LoadTable(&table, 4, 60);
  testing::LoadTable(&expect, 4, 60);
  std::vector<Txn> txns;
  for (uint64_t i = 0; i < 40; ++i) {
    const uint64_t from = i % 4, to = (i + 1 + i / 4) % 4;
    if (from == to) continue;
    txns.push_back(MakeTxn(i + 1, {{OpKind::kDebit, from, 0, 30 + i % 50}, {OpKind::kCredit, to, 0, 30 + i % 50}}));
  }
  std::vector<Fate> serial;
  for (const Txn& t : txns) serial.push_back(testing::SerialApply(&expect, t) ? Fate::kCommit : Fate::kLogic);
  auto got = RunBatch(&table, txns, 2, KeyMapper(KeyMapper::Kind::kHash, 3, 0));
  CHECK(got == serial);
  int64_t total = 0;
  table.ForEach([&](storage::Key, const char* rec) { total += storage::GetCounter(rec); });
  CHECK(total == 240);
  CHECK(table.Digest() == expect.Digest());
  CHECK(std::count(serial.begin(), serial.end(), Fate::kLogic) > 0);
}

TEST_CASE("abort resolver: randomized batches equal the serial applier, also replayed from the replica encoding") {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const uint32_t nranges = 1 + static_cast<uint32_t>(seed % 4);
    const uint32_t planners = 1 + static_cast<uint32_t>(seed % 3);
    storage::Table table(kLayout, 40), expect(kLayout, 40);
    testing::LoadTable(&table, 40, 500);
    testing::LoadTable(&expect, 40, 500);
    testing::GenOptions g;
    g.keys = 40;
    g.absent = 3;
    g.abort_per_100 = 8;
    g.fire_per_10k = 2000;
    g.debit_per_100 = 20;
    g.dep_per_100 = 20;
    auto txns = testing::RandomTxns(seed, 150, g);
    std::vector<Fate> serial;
    for (const Txn& t : txns) serial.push_back(testing::SerialApply(&expect, t) ? Fate::kCommit : Fate::kLogic);
    const KeyMapper ranges(KeyMapper::Kind::kHash, nranges, 0);
    auto got = RunBatch(&table, txns, planners, ranges);
    INFO("seed " << seed << " ranges " << nranges << " planners " << planners);
    REQUIRE(got == serial);
    REQUIRE(table.Digest() == expect.Digest());
    // A follower replays the slices without their plain reads (aborts re-execute the txns that
    // touched an aborted txn's keys, reads included on the leader): same fates, same state.
    storage::Table replica(kLayout, 40);
    testing::LoadTable(&replica, 40, 500);
    auto replayed = RunBatch(&replica, txns, planners, ranges, nullptr, /*through_codec=*/true,
                             planner::SliceEncoding::kWithoutReads);
    REQUIRE(replayed == serial);
    REQUIRE(replica.Digest() == expect.Digest());
  }
}

TEST_CASE("abort resolver: no vote, no work") {
  storage::Table table(kLayout, 10);
  testing::LoadTable(&table, 10, 0);
  std::vector<Txn> txns = {MakeTxn(1, {{OpKind::kAbortIf, 1, 0, 0}, {OpKind::kUpdate, 2}})};  // never fires
  executor::BatchFates fates;
  auto got = RunBatch(&table, txns, 1, KeyMapper(KeyMapper::Kind::kHash, 2, 0), &fates);
  CHECK_FALSE(fates.any_abort);
  CHECK(fates.reexecuted == 0);
  CHECK(got == std::vector<Fate>{Fate::kCommit});
}

TEST_CASE("executor: decoded slices (the follower path) give the same result") {
  for (uint64_t seed = 100; seed < 110; ++seed) {
    storage::Table a(kLayout, 50), b(kLayout, 50);
    testing::LoadTable(&a, 50, 700);
    testing::LoadTable(&b, 50, 700);
    testing::GenOptions g;
    g.keys = 50;
    g.abort_per_100 = 5;
    g.debit_per_100 = 15;
    g.dep_per_100 = 25;
    auto txns = testing::RandomTxns(seed, 120, g);
    KeyMapper ranges(KeyMapper::Kind::kHash, 3, 0);
    auto fa = RunBatch(&a, txns, 2, ranges);
    auto fb = RunBatch(&b, txns, 2, ranges, nullptr, /*through_codec=*/true);
    INFO("seed " << seed);
    REQUIRE(fa == fb);
    REQUIRE(a.Digest() == b.Digest());
  }
}

namespace {

// Plans `txns` as one slice over `ranges` and runs range 0 on a thread of its own while every
// other range waits until `before_others` returned true (or 10 s passed), then runs them.
// Returns the slice's read values. The predicate sees range 0's progress through the dependency
// board (whose slots are atomics): reading records range 0 may be writing would race.
std::string RunRangeZeroFirst(storage::Table* table, const std::vector<Txn>& txns, const KeyMapper& ranges,
                              const std::function<bool(const executor::DepBoard&)>& before_others) {
  planner::Planner planner(ranges);
  planner::PlannedSlice slice;
  planner.PlanSlice(0, 0, txns, &slice);
  executor::DepBoard board;
  board.Reset(slice.dep_slots);
  std::string reads(uint64_t{slice.read_slots} * kLayout.size(), '\0');
  executor::RangeExecutor zero(table, 0);
  std::thread t([&] { zero.RunEq(slice, &board, /*log=*/false, reads.data()); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!before_others(board) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool ran_ahead = before_others(board);
  for (uint32_t r = 1; r < ranges.buckets(); ++r) {
    executor::RangeExecutor other(table, r);
    other.RunEq(slice, &board, /*log=*/false, reads.data());
  }
  t.join();
  CHECK(ran_ahead);
  return reads;
}

}  // namespace

TEST_CASE("executor: a dependency not yet published does not stall the range, its key keeps planned order") {
  // Range 0 holds keys 0..9, range 1 keys 10..19. Txn 1 writes 2 <- 15 (range 1 publishes 15's
  // counter, slot 0); range 1 runs only after range 0 published key 3's counter for txn 2's
  // 12 <- 3 (slot 1), which comes after txn 1: range 0 went on past the parked dependency.
  // Txns 3 and 4 touch key 2 again (a read and an update): they must wait behind the parked
  // write, in order. (Key 2 may be read meanwhile: range 0 writes it only after slot 0, which
  // is published after the predicate returned.)
  storage::Table table(kLayout, 20), expect(kLayout, 20);
  testing::LoadTable(&table, 20, 5);
  testing::LoadTable(&expect, 20, 5);
  storage::SetCounter(table.Find(15), 40);
  storage::SetCounter(expect.Find(15), 40);
  std::vector<Txn> txns = {
      MakeTxn(1, {{OpKind::kDepWrite, 2, 15}}),
      MakeTxn(2, {{OpKind::kDepWrite, 12, 3}}),
      MakeTxn(3, {{OpKind::kRead, 2}, {OpKind::kUpdate, 4}}),
      MakeTxn(4, {{OpKind::kUpdate, 2}, {OpKind::kRead, 2}}),
  };
  std::string expect_reads;
  for (const Txn& t : txns) {
    for (const Op& op : t.ops) {
      if (op.kind == OpKind::kRead) expect_reads.append(expect.Find(op.key), kLayout.size());
      if (op.kind != OpKind::kRead) REQUIRE(testing::SerialApply(&expect, MakeTxn(t.id, {op})));
    }
  }
  const int64_t key2_before = storage::GetCounter(table.Find(2));
  bool key2_untouched_meanwhile = true;
  const std::string reads =
      RunRangeZeroFirst(&table, txns, KeyMapper(KeyMapper::Kind::kRange, 2, 20), [&](const executor::DepBoard& b) {
        if (!b.Ready(1)) return false;
        key2_untouched_meanwhile = storage::GetCounter(table.Find(2)) == key2_before;
        return true;
      });
  CHECK(key2_untouched_meanwhile);  // parked behind txn 1's write: nothing on key 2 ran early
  CHECK(table.Digest() == expect.Digest());
  CHECK(reads == expect_reads);
}

TEST_CASE("executor: more parked fragments than the park holds still run in planned order") {
  // Txns each write k <- (a key of range 1) for k in 0..8, update k, then write 19 <- 9. Range 0
  // parks the first two (2 per txn) and publishes key 9's counter (slot 2i + 1 of txn i, a key
  // that is never parked). Range 1 starts only once range 0 published it for the txn before the
  // one that fills the park: range 0 then fills it and blocks on its oldest parked write. Whatever the order, the result is
  // the serial one.
  storage::Table table(kLayout, 20), expect(kLayout, 20);
  testing::LoadTable(&table, 20, 1);
  testing::LoadTable(&expect, 20, 1);
  std::vector<Txn> txns;
  constexpr uint32_t kFull = executor::RangeExecutor::kParkCapacity / 2;  // txns that fill the park
  for (uint64_t i = 0; i < kFull + 100; ++i) {
    txns.push_back(MakeTxn(i + 1, {{OpKind::kDepWrite, i % 9, 10 + i % 10}, {OpKind::kUpdate, i % 9}, {OpKind::kDepWrite, 19, 9}}));
  }
  for (const Txn& t : txns) REQUIRE(testing::SerialApply(&expect, t));
  (void)RunRangeZeroFirst(&table, txns, KeyMapper(KeyMapper::Kind::kRange, 2, 20),
                          [&](const executor::DepBoard& b) { return b.Ready(2 * (kFull - 2) + 1); });
  CHECK(table.Digest() == expect.Digest());
}
