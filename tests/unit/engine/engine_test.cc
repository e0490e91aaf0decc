#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/config.h"
#include "engine/engine.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using commit::TxnOutcome;
using commit::TxnStatus;
using engine::Engine;
using storage::Txn;

namespace {

const storage::RecordLayout kLayout{4, 8};

const ConfigSchema& Schema() {
  static const ConfigSchema* schema = [] {
    auto* s = new ConfigSchema;
    Engine::AddConfigKeys(s);
    return s;
  }();
  return *schema;
}

Config MakeConfig(const std::vector<std::string>& overrides) {
  auto c = Config::LoadString(Schema(), "", overrides);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return std::move(c).value();
}

// Collects outcomes (the sink is called from commit threads; assertions stay on the test thread).
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<TxnOutcome> outcomes;
  int calls_in_flight = 0;
  bool overlapped = false;  // two sink calls at once (must never happen)

  commit::CommitSink Sink() {
    return [this](const std::vector<TxnOutcome>& v) {
      std::lock_guard<std::mutex> lk(mu);
      if (++calls_in_flight > 1) overlapped = true;
      outcomes.insert(outcomes.end(), v.begin(), v.end());
      --calls_in_flight;
      cv.notify_all();
    };
  }
  // Waits (bounded: a failure, not a hang) until n outcomes arrived.
  bool WaitFor(size_t n, std::chrono::seconds limit = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, limit, [&] { return outcomes.size() >= n; });
  }
};

struct RunResult {
  uint64_t digest = 0;
  std::vector<uint64_t> ids;            // txn ids in planned order
  std::vector<TxnStatus> statuses;      // in planned order
  engine::EngineStats stats;
};

RunResult RunEngine(const std::vector<std::string>& overrides, const std::vector<Txn>& txns, uint64_t records,
                    int64_t initial) {
  storage::Table table(kLayout, records);
  testing::LoadTable(&table, records, initial);
  Collector col;
  auto engine = Engine::Create(MakeConfig(overrides), &table, col.Sink());
  REQUIRE(engine.ok());
  REQUIRE(engine.value()->Start().ok());
  for (const Txn& t : txns) REQUIRE(engine.value()->Submit(t));
  engine.value()->Finish();
  RunResult r;
  r.stats = engine.value()->Stats();
  engine.value()->Stop();
  REQUIRE_FALSE(col.overlapped);
  REQUIRE(col.outcomes.size() == txns.size());
  for (size_t i = 0; i < col.outcomes.size(); ++i) {
    if (i > 0) REQUIRE(col.outcomes[i - 1].pos < col.outcomes[i].pos);  // delivered in planned order
    r.ids.push_back(col.outcomes[i].txn_id);
    r.statuses.push_back(col.outcomes[i].status);
  }
  r.digest = table.Digest();
  return r;
}

struct Expected {
  uint64_t digest;
  std::vector<uint64_t> ids;
  std::vector<TxnStatus> statuses;
};

Expected Serial(const std::vector<Txn>& txns, uint64_t records, int64_t initial) {
  storage::Table table(kLayout, records);
  testing::LoadTable(&table, records, initial);
  Expected e;
  for (const Txn& t : txns) {
    e.ids.push_back(t.id);
    e.statuses.push_back(testing::SerialApply(&table, t) ? TxnStatus::kCommitted : TxnStatus::kAbortedLogic);
  }
  e.digest = table.Digest();
  return e;
}

}  // namespace

TEST_CASE("engine: config defaults load and bad combinations name their keys") {
  storage::Table table(kLayout, 10);
  auto sink = [](const std::vector<TxnOutcome>&) {};
  CHECK(Engine::Create(MakeConfig({}), &table, sink).ok());
  Config c = MakeConfig({});
  CHECK(c.GetInt("batch.txns") == 10000);
  CHECK(c.GetInt("batch.timeout_ms") == 10);
  CHECK(c.GetInt("threads.planners") == 1);
  CHECK(c.GetInt("threads.executors") == 2);
  CHECK(c.GetInt("threads.committers") == 1);
  CHECK(c.GetString("engine.sync") == "thread");
  CHECK(c.GetInt("engine.partitions") == 1);

  auto bad = Engine::Create(MakeConfig({"engine.range_function=range", "engine.key_space=3", "threads.executors=4",
                                        "batch.txns=2", "threads.planners=3"}),
                            &table, sink);
  REQUIRE_FALSE(bad.ok());
  const std::string& m = bad.status().message();
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(m.find("engine.key_space") != std::string::npos);
  CHECK(m.find("threads.executors") != std::string::npos);
  CHECK(m.find("threads.planners") != std::string::npos);
  CHECK(m.find("batch.txns") != std::string::npos);
  // engine.batches_in_flight=1 is refused by the key's range (one message), whatever engine.sync
  // is; it once passed the range and failed a later cross-check.
  for (const char* sync : {"engine.sync=thread", "engine.sync=node"}) {
    auto one = Config::LoadString(Schema(), "", {"engine.batches_in_flight=1", sync});
    REQUIRE_FALSE(one.ok());
    CHECK(one.status().message() ==
          "invalid configuration:\n  command line: engine.batches_in_flight: must be in [2, 16] (got '1')");
  }
  CHECK(Engine::Create(MakeConfig({"engine.batches_in_flight=2"}), &table, sink).ok());
  CHECK_FALSE(Engine::Create(MakeConfig({}), &table, nullptr).ok());
  // Value checks are the schema's: out-of-range and unknown choices name the key.
  auto v = Config::LoadString(Schema(), "", {"threads.executors=0", "engine.sync=fast"});
  REQUIRE_FALSE(v.ok());
  CHECK(v.status().message().find("threads.executors") != std::string::npos);
  CHECK(v.status().message().find("engine.sync") != std::string::npos);
}

TEST_CASE("engine: every txn gets one outcome, in submit order, equal to the serial run", "[concurrency]") {
  testing::GenOptions g;
  g.keys = 300;
  g.dep_per_100 = 20;
  auto txns = testing::RandomTxns(5, 3000, g);
  Expected e = Serial(txns, 300, 0);
  RunResult r = RunEngine({"batch.txns=64", "threads.planners=3", "threads.executors=3", "threads.committers=2"},
                          txns, 300, 0);
  CHECK(r.ids == e.ids);
  CHECK(r.statuses == e.statuses);
  CHECK(r.digest == e.digest);
  CHECK(r.stats.committed == 3000);
  CHECK(r.stats.aborted == 0);
  CHECK(r.stats.batches >= 3000 / 64);
}

TEST_CASE("engine: same input, same results with 1-3 planners, 1/2/4 executors, both sync modes",
          "[concurrency]") {
  // Dense conflicts, dependencies, aborts, short debits and absent keys on a 60-record table,
  // small batches and a 1 ms timeout so that batch boundaries vary with timing.
  testing::GenOptions g;
  g.keys = 60;
  g.absent = 2;
  g.dep_per_100 = 20;
  g.abort_per_100 = 8;
  g.fire_per_10k = 2500;
  g.debit_per_100 = 20;
  auto txns = testing::RandomTxns(77, 1500, g);
  Expected e = Serial(txns, 60, 1000);
  size_t aborted = std::count(e.statuses.begin(), e.statuses.end(), TxnStatus::kAbortedLogic);
  REQUIRE(aborted > 20);
  for (const char* sync : {"thread", "node"}) {
    for (int planners : {1, 2, 3}) {
      for (int executors : {1, 2, 4}) {
        INFO("sync " << sync << " planners " << planners << " executors " << executors);
        RunResult r = RunEngine({"batch.txns=37", "batch.timeout_ms=1", std::string("engine.sync=") + sync,
                                 "threads.planners=" + std::to_string(planners),
                                 "threads.executors=" + std::to_string(executors)},
                                txns, 60, 1000);
        REQUIRE(r.ids == e.ids);
        REQUIRE(r.statuses == e.statuses);
        REQUIRE(r.digest == e.digest);
        CHECK(r.stats.aborted == aborted);
      }
    }
  }
}

TEST_CASE("engine: an aborted txn leaves no trace, a later txn reading its write re-reads",
          "[concurrency]") {
  std::vector<Txn> txns(3);
  txns[0].id = 1;
  txns[0].ops = {{storage::OpKind::kUpdate, 5}, {storage::OpKind::kAbortIf, 6, 0, 10000}};  // always fires
  txns[1].id = 2;
  txns[1].ops = {{storage::OpKind::kDepWrite, 7, 5}};
  txns[2].id = 3;
  txns[2].ops = {{storage::OpKind::kUpdate, 8}};
  Expected e = Serial(txns, 10, 0);
  for (const char* fn : {"hash", "range"}) {
    RunResult r = RunEngine({"batch.txns=10", "engine.key_space=10", std::string("engine.range_function=") + fn}, txns,
                            10, 0);
    CHECK(r.statuses == std::vector<TxnStatus>{TxnStatus::kAbortedLogic, TxnStatus::kCommitted, TxnStatus::kCommitted});
    CHECK(r.digest == e.digest);
    CHECK(r.stats.aborted == 1);
    CHECK(r.stats.reexecuted == 2);
  }
}

TEST_CASE("engine: transfers conserve money", "[concurrency]") {
  std::vector<Txn> txns;
  Rng rng(3);
  for (uint64_t i = 0; i < 2000; ++i) {
    Txn t;
    t.id = i + 1;
    const uint64_t a = rng.Next() % 50, b = (a + 1 + rng.Next() % 49) % 50, amount = rng.Next() % 1500;
    t.ops = {{storage::OpKind::kDebit, a, 0, amount}, {storage::OpKind::kCredit, b, 0, amount}};
    txns.push_back(t);
  }
  Expected e = Serial(txns, 50, 1000);
  RunResult r = RunEngine({"batch.txns=100", "threads.planners=2", "threads.executors=2"}, txns, 50, 1000);
  CHECK(r.statuses == e.statuses);
  CHECK(r.digest == e.digest);
  CHECK(r.stats.aborted > 0);
  CHECK(r.stats.committed + r.stats.aborted == 2000);
}

TEST_CASE("engine: full batches without a timeout, and stats", "[concurrency]") {
  testing::GenOptions g;
  auto txns = testing::RandomTxns(1, 1000, g);
  RunResult r = RunEngine({"batch.txns=100", "batch.timeout_ms=60000", "threads.planners=3"}, txns, 200, 0);
  CHECK(r.stats.batches == 10);
  CHECK(r.stats.batches_closed_by_timeout == 0);
  CHECK(r.stats.mean_exec_ms >= 0);
  CHECK(r.stats.mean_plan_ms >= 0);
}

TEST_CASE("engine: a partial batch closes by timeout without Finish", "[concurrency]") {
  storage::Table table(kLayout, 100);
  testing::LoadTable(&table, 100, 0);
  Collector col;
  auto engine = Engine::Create(MakeConfig({"batch.txns=1000", "batch.timeout_ms=2", "threads.planners=2"}), &table,
                               col.Sink());
  REQUIRE(engine.ok());
  REQUIRE(engine.value()->Start().ok());
  testing::GenOptions g;
  g.keys = 100;
  for (const Txn& t : testing::RandomTxns(2, 10, g)) REQUIRE(engine.value()->Submit(t));
  REQUIRE(col.WaitFor(10));
  engine::EngineStats s = engine.value()->Stats();
  CHECK(s.committed == 10);
  CHECK(s.batches_closed_by_timeout >= 1);
  // Every batch here closed by its timeout (none fills), so each was open at least that long.
  CHECK(s.batches_closed_by_timeout == s.batches);
  CHECK(s.mean_cut_ms >= 2.0);
  engine.value()->Finish();
  engine.value()->Stop();
}

TEST_CASE("engine: Stop and Finish edge cases never hang", "[concurrency]") {
  storage::Table table(kLayout, 100);
  testing::LoadTable(&table, 100, 0);
  testing::GenOptions g;
  g.keys = 100;
  g.dep_per_100 = 30;
  auto txns = testing::RandomTxns(4, 5000, g);

  SECTION("Stop without Start, twice") {
    Collector col;
    auto engine = Engine::Create(MakeConfig({}), &table, col.Sink());
    REQUIRE(engine.ok());
    engine.value()->Stop();
    engine.value()->Stop();
    CHECK_FALSE(engine.value()->Submit(txns[0]));
    CHECK_FALSE(engine.value()->Start().ok());
  }
  SECTION("Finish without Start returns and closes the input") {
    Collector col;
    auto engine = Engine::Create(MakeConfig({}), &table, col.Sink());
    REQUIRE(engine.ok());
    engine.value()->Finish();
    CHECK_FALSE(engine.value()->Submit(txns[0]));
  }
  SECTION("Finish with zero txns") {
    Collector col;
    auto engine = Engine::Create(MakeConfig({"threads.planners=3"}), &table, col.Sink());
    REQUIRE(engine.ok());
    REQUIRE(engine.value()->Start().ok());
    engine.value()->Finish();
    CHECK(col.outcomes.empty());
    CHECK(engine.value()->Stats().batches == 0);
    CHECK_FALSE(engine.value()->Submit(txns[0]));
    CHECK_FALSE(engine.value()->Start().ok());
  }
  SECTION("Stop with input mid-batch and a full client queue") {
    Collector col;
    // A long timeout: the open batch is still waiting for txns when Stop comes.
    auto engine = Engine::Create(MakeConfig({"batch.txns=3000", "batch.timeout_ms=60000", "threads.planners=2",
                                             "threads.executors=3", "engine.client_queue_txns=100"}),
                                 &table, col.Sink());
    REQUIRE(engine.ok());
    REQUIRE(engine.value()->Start().ok());
    for (size_t i = 0; i < 2500; ++i) REQUIRE(engine.value()->Submit(txns[i]));
    engine.value()->Stop();
    CHECK(col.outcomes.size() <= 2500);
    CHECK_FALSE(engine.value()->Submit(txns[0]));
    engine.value()->Finish();  // after Stop: returns at once
  }
  SECTION("Stop while batches are executing, then destroy") {
    Collector col;
    auto engine = Engine::Create(MakeConfig({"batch.txns=50", "threads.executors=4"}), &table, col.Sink());
    REQUIRE(engine.ok());
    REQUIRE(engine.value()->Start().ok());
    for (size_t i = 0; i < 3000; ++i) REQUIRE(engine.value()->Submit(txns[i]));
    engine.value()->Stop();
    // Outcomes delivered before Stop are a prefix of the submit order.
    for (size_t i = 0; i < col.outcomes.size(); ++i) REQUIRE(col.outcomes[i].txn_id == txns[i].id);
  }
  SECTION("Submit from a thread blocked on a full queue is released by Stop") {
    Collector col;
    auto engine = Engine::Create(MakeConfig({"engine.client_queue_txns=1", "batch.txns=1000",
                                             "batch.timeout_ms=60000", "engine.sync=node"}),
                                 &table, col.Sink());
    REQUIRE(engine.ok());
    REQUIRE(engine.value()->Start().ok());
    std::atomic<size_t> accepted{0};
    std::thread submitter([&] {
      for (const Txn& t : txns) {
        if (!engine.value()->Submit(t)) break;
        accepted.fetch_add(1, std::memory_order_relaxed);
      }
    });
    engine.value()->Stop();
    submitter.join();
    CHECK(accepted.load() < txns.size());
  }
}

TEST_CASE("spare ops: the pool keeps at most its capacity and lends only to txns without memory") {
  engine::SpareOps pool(3);
  std::vector<Txn> planned(5);
  for (size_t i = 0; i < planned.size(); ++i) planned[i].ops.resize(i + 1);
  planned[1].ops = {};  // no memory: nothing to keep
  planned[1].ops.shrink_to_fit();
  pool.Keep(planned);
  CHECK(pool.size() == 3);  // txns 0, 2, 3; txn 4 is over the capacity and keeps its ops
  CHECK(planned[4].ops.size() == 5);

  std::vector<Txn> next(4);
  next[0].ops.reserve(7);  // has memory already: left alone
  pool.Lend(next, 0, 3);
  CHECK(next[0].ops.capacity() == 7);
  CHECK(next[1].ops.capacity() > 0);
  CHECK(next[1].ops.empty());
  CHECK(next[2].ops.capacity() > 0);
  CHECK(next[3].ops.capacity() == 0);  // outside the range lent to
  CHECK(pool.size() == 1);
  pool.Lend(next, 3, 5);  // the range is clipped to the vector
  CHECK(next[3].ops.capacity() > 0);
  CHECK(pool.size() == 0);

  engine::SpareOps off(0);  // a planner without recycle_ops: nothing is pooled
  std::vector<Txn> more(2);
  more[0].ops.resize(3);
  off.Keep(more);
  CHECK(off.size() == 0);
  CHECK(more[0].ops.size() == 3);
}

TEST_CASE("engine: SubmitMany keeps the submit order and lends planned txns' ops back", "[concurrency]") {
  testing::GenOptions g;
  g.keys = 300;
  g.dep_per_100 = 20;
  auto txns = testing::RandomTxns(9, 640, g);
  Expected e = Serial(txns, 300, 0);
  storage::Table table(kLayout, 300);
  testing::LoadTable(&table, 300, 0);
  Collector col;
  auto engine = Engine::Create(MakeConfig({"batch.txns=64", "batch.timeout_ms=10000", "threads.planners=1"}), &table,
                               col.Sink());
  REQUIRE(engine.ok());
  REQUIRE(engine.value()->Start().ok());
  size_t lent = 0;
  for (size_t first = 0; first < txns.size(); first += 64) {
    // Each batch is 63 txns by SubmitMany and then the one that fills it by Submit: nothing of
    // it is planned before the lending, so the pool holds exactly the previous batch's 64
    // vectors then (batch.txns is the pool's capacity), and nothing is lent after the batch's
    // planning may have begun (one planner: its slice is the whole batch).
    std::vector<Txn> chunk(txns.begin() + static_cast<std::ptrdiff_t>(first),
                           txns.begin() + static_cast<std::ptrdiff_t>(first + 63));
    REQUIRE(engine.value()->SubmitMany(chunk) == 63);
    for (const Txn& t : chunk) {
      CHECK(t.ops.empty());
      lent += t.ops.capacity() > 0 ? 1 : 0;
    }
    REQUIRE(engine.value()->Submit(txns[first + 63]));
    // Planned before its outcomes come: its op vectors are in the pool now.
    REQUIRE(col.WaitFor(first + 64));
  }
  CHECK(lent == 63 * (txns.size() / 64 - 1));  // every SubmitMany after the first batch's
  engine.value()->Finish();
  engine.value()->Stop();
  std::vector<uint64_t> ids;
  std::vector<TxnStatus> statuses;
  for (const TxnOutcome& o : col.outcomes) {
    ids.push_back(o.txn_id);
    statuses.push_back(o.status);
  }
  CHECK(ids == e.ids);
  CHECK(statuses == e.statuses);
  CHECK(table.Digest() == e.digest);
}
