// A partitioned row in one process (docs/partitioned-rows.md, step 1): P pipelines, one per
// partition, each fed every home's row sub-slices in (batch, home, planner) order, with the
// dependency values of kDepSend fragments handed to the receiving partition's pipeline. The
// state over all partitions must equal a serial run of all txns in that global order.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/row/row_local_link.h"
#include "commit/row_commit.h"
#include "common/clock.h"
#include "engine/pipeline.h"
#include "executor/range_executor.h"
#include "planner/row_planner.h"
#include "storage/ops.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using engine::Pipeline;
using engine::PipelineOptions;
using planner::PlannedSlice;
using storage::KeyMapper;
using storage::Txn;

namespace {

const storage::RecordLayout kLayout{4, 8};
constexpr uint64_t kKeys = 400;

// Drops every message: a row peer that died.
struct DeadRow : executor::RowSender {
  void SendDep(uint32_t, uint64_t, uint32_t, uint32_t, int64_t) override {}
  void SendVotes(uint32_t, uint64_t, uint32_t, const std::vector<executor::RowTxn>&) override {}
};

PipelineOptions RowOptions(uint32_t slices, uint32_t executors, uint32_t in_flight, const KeyMapper& ranges,
                           executor::RowSender* sender, uint32_t partitions = 2, uint32_t me = 0) {
  PipelineOptions o;
  o.planners = slices;
  o.executors = executors;
  o.committers = 1;
  o.batches_in_flight = in_flight;
  o.ranges = ranges;
  o.track_digest = true;
  o.row_sender = sender;
  o.row_partitions = partitions;
  o.row_partition = me;
  return o;
}

std::vector<Txn> Txns(uint64_t seed, size_t n) {
  testing::GenOptions g;
  g.keys = kKeys;
  g.absent = 16;  // ops on absent keys: a kDepSend of one sends 0
  g.max_ops = 8;
  g.dep_per_100 = 30;
  return testing::RandomTxns(seed, n, g);
}

// Txns of batch b for the abort tests: cross-partition dependencies, kAbortIf and kDebit ops
// whose votes fire often; batch 3 has no abortable op anywhere (it resolves without any vote).
testing::GenOptions AbortingTxns(uint64_t b) {
  testing::GenOptions g;
  g.keys = kKeys;
  g.absent = 8;
  g.max_ops = 6;
  g.dep_per_100 = 20;
  g.abort_per_100 = 4;
  g.fire_per_10k = 1500;
  g.debit_per_100 = 20;
  if (b == 3) g.abort_per_100 = g.debit_per_100 = 0;
  return g;
}

}  // namespace

TEST_CASE("row pipelines: P partitions with cross-partition dependencies reach the serial global order's state",
          "[row]") {
  struct Shape {
    uint32_t parts, planners, executors, in_flight;
    KeyMapper::Kind kind;
  };
  for (const Shape& sh : {Shape{2, 1, 2, 2, KeyMapper::Kind::kHash}, Shape{3, 2, 2, 3, KeyMapper::Kind::kRange},
                          Shape{2, 2, 1, 1, KeyMapper::Kind::kRange}}) {
    INFO(sh.parts << " partitions, " << sh.planners << " planners per home, " << sh.executors << " executors, "
                  << sh.in_flight << " batches in flight");
    const KeyMapper parts(sh.kind, sh.parts, kKeys);
    const KeyMapper ranges = KeyMapper::Within(parts, sh.executors);
    const uint32_t slices = sh.parts * sh.planners;  // per batch, on every node
    constexpr uint64_t kBatches = 12;
    cluster::LocalRow row;
    std::vector<std::unique_ptr<cluster::LocalRowLink>> links;
    std::vector<std::unique_ptr<storage::Table>> tables;
    std::vector<std::unique_ptr<Pipeline>> nodes;
    for (uint32_t p = 0; p < sh.parts; ++p) {
      links.push_back(std::make_unique<cluster::LocalRowLink>(&row, p));
      tables.push_back(std::make_unique<storage::Table>(kLayout, kKeys));
      testing::LoadTable(tables.back().get(), kKeys, 1000);
      nodes.push_back(std::make_unique<Pipeline>(RowOptions(slices, sh.executors, sh.in_flight, ranges, links[p].get(), sh.parts, p),
                                                 tables.back().get(), [](const auto&) {}));
      row.nodes.push_back(nodes.back().get());
    }
    for (auto& n : nodes) REQUIRE(n->Start().ok());
    storage::Table ref(kLayout, kKeys);
    testing::LoadTable(&ref, kKeys, 1000);
    storage::Table initial(kLayout, kKeys);
    testing::LoadTable(&initial, kKeys, 1000);
    std::vector<planner::RowPlanner> homes;
    for (uint32_t h = 0; h < sh.parts; ++h) homes.emplace_back(parts, ranges, h);
    std::vector<PlannedSlice> subs;
    size_t sends_planned = 0, multi = 0;
    // The feed: batch by batch, home by home, planner by planner, every partition its sub-slice.
    for (uint64_t b = 0; b < kBatches; ++b) {
      for (uint32_t h = 0; h < sh.parts; ++h) {
        for (uint32_t t = 0; t < sh.planners; ++t) {
          const uint32_t s = h * sh.planners + t;
          const std::vector<Txn> txns = Txns(1 + b * 1000 + s, 60 + (b * 7 + s * 13) % 50);
          homes[h].PlanSlices(b, s, txns, &subs);
          for (const Txn& txn : txns) testing::SerialApply(&ref, txn);
          for (uint32_t p = 0; p < sh.parts; ++p) {
            for (const auto& eq : subs[p].eqs) {
              for (const auto& f : eq) sends_planned += f.kind == planner::FragKind::kDepSend;
            }
            multi += subs[p].txns.size();
            PlannedSlice* slot = nodes[p]->BeginSlice(b, s);
            REQUIRE(slot != nullptr);
            *slot = subs[p];
            nodes[p]->PublishSlice(b, s, 0, /*replicated=*/true);
          }
          multi -= txns.size();
        }
      }
    }
    for (auto& n : nodes) n->EndInput(kBatches);
    for (auto& n : nodes) {
      const Status st = n->WaitIdle(60000);
      INFO(st.ToString());
      REQUIRE(st.ok());
    }
    CHECK(sends_planned > 500);  // cross-partition dependencies were there
    CHECK(multi > 500);          // and txns listed on more than one partition
    CHECK(row.dep_values.load() == sends_planned);
    // Every key: its owner's record is the serial run's; the other nodes never touched it.
    size_t changed = 0;
    for (storage::Key k = 0; k < kKeys; ++k) {
      const uint32_t owner = parts.Of(k);
      for (uint32_t p = 0; p < sh.parts; ++p) {
        const char* want = p == owner ? ref.Find(k) : initial.Find(k);
        INFO("key " << k << " on node " << p << " (owner " << owner << ")");
        REQUIRE(std::memcmp(tables[p]->Find(k), want, kLayout.size()) == 0);
      }
      changed += std::memcmp(ref.Find(k), initial.Find(k), kLayout.size()) != 0;
    }
    CHECK(changed > kKeys / 2);
    for (auto& n : nodes) n->Stop();
  }
}

TEST_CASE("row pipelines: bad dependency values and votes fail the node naming them", "[row]") {
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, kKeys);
  const KeyMapper ranges = KeyMapper::Within(parts, 2);
  // Txn: x (partition 0) <- y (partition 1), so partition 0's sub-slice has one kDepRecv at
  // slot 0, and a local x <- y at slot 1.
  Txn t;
  t.id = 1;
  t.ops.push_back(storage::Op{storage::OpKind::kDepWrite, 10, 300, 0});
  t.ops.push_back(storage::Op{storage::OpKind::kDepWrite, 20, 110, 0});
  planner::RowPlanner home(parts, ranges, 0);
  std::vector<PlannedSlice> subs;
  home.PlanSlices(0, 0, {t}, &subs);
  REQUIRE(subs[0].dep_slots == 2);
  DeadRow dead;
  auto run = [&](const std::function<void(Pipeline&)>& deliver, const std::string& expect) {
    storage::Table table(kLayout, kKeys);
    testing::LoadTable(&table, kKeys, 1000);
    Pipeline node(RowOptions(1, 2, 2, ranges, &dead), &table, [](const auto&) {});
    REQUIRE(node.Start().ok());
    deliver(node);
    const Status st = node.WaitIdle(10000);
    INFO(st.ToString());
    REQUIRE_FALSE(st.ok());
    CHECK(st.message().find(expect) != std::string::npos);
    node.Stop();
  };
  auto publish = [&](Pipeline& n, const PlannedSlice& s) {
    PlannedSlice* slot = n.BeginSlice(0, 0);
    REQUIRE(slot != nullptr);
    *slot = s;
    n.PublishSlice(0, 0, 0, true);
    n.EndInput(1);
  };
  SECTION("a value for the local slot") {
    run([&](Pipeline& n) {
      n.DeliverDepValue(0, 0, 1, 5);  // before its sub-slice: checked when it is published
      publish(n, subs[0]);
    }, "slot 1: not a slot the row fills");
  }
  SECTION("a value twice") {
    run([&](Pipeline& n) {
      n.DeliverDepValue(0, 0, 0, 5);
      n.DeliverDepValue(0, 0, 0, 6);
      publish(n, subs[0]);
    }, "slot 0: filled twice");
  }
  SECTION("a slot past the sub-slice's") {
    run([&](Pipeline& n) {
      publish(n, subs[0]);
      n.DeliverDepValue(0, 0, 7, 5);
    }, "slot 7: past its 2 slots");
  }
  SECTION("a batch far ahead") {
    run([&](Pipeline& n) { n.DeliverDepValue(100, 0, 0, 5); }, "batches ahead of the last committed one");
  }
  SECTION("votes from itself, or twice from a peer") {
    run([&](Pipeline& n) { n.DeliverVotes(0, 0, 0, {}); }, "not a peer of partition 0");
    run([&](Pipeline& n) {
      n.DeliverVotes(0, 1, 0, {});
      n.DeliverVotes(0, 1, 0, {});
    }, "round 0 from partition 1: given twice");
  }
}

TEST_CASE("row pipelines: a node waiting for a value from a dead peer stops when told, without hanging", "[row]") {
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, kKeys);
  const KeyMapper ranges = KeyMapper::Within(parts, 2);
  Txn t;
  t.id = 1;
  t.ops.push_back(storage::Op{storage::OpKind::kDepWrite, 10, 300, 0});
  planner::RowPlanner home(parts, ranges, 0);
  std::vector<PlannedSlice> subs;
  home.PlanSlices(0, 0, {t}, &subs);
  storage::Table table(kLayout, kKeys);
  testing::LoadTable(&table, kKeys, 1000);
  DeadRow dead;
  Pipeline node(RowOptions(1, 2, 2, ranges, &dead), &table, [](const auto&) {});
  REQUIRE(node.Start().ok());
  PlannedSlice* slot = node.BeginSlice(0, 0);
  REQUIRE(slot != nullptr);
  *slot = subs[0];
  node.PublishSlice(0, 0, 0, true);
  node.EndInput(1);
  // The value never comes: the batch cannot finish.
  CHECK(node.WaitIdle(200).code() == StatusCode::kTimeout);
  const int64_t t0 = NowNanos();
  node.Fail(Status::Unavailable("row peer (1, 0) unreachable"));
  node.Stop();  // joins the executor that was waiting
  CHECK(NowNanos() - t0 < int64_t{5'000'000'000});
  CHECK(node.health().message() == "row peer (1, 0) unreachable");
}

TEST_CASE("row pipelines: a halt while a batch resolves stops both executors at the same slice, neither waits for "
          "the other",
          "[row]") {
  // Batch 0 may abort: its last executor resolves it with the peer's votes while the other waits
  // for the result. The node fails inside the resolution (on_row_resolved): the waiting executor
  // leaves at once, the resolving one finishes batch 0. Batch 1, published before the failure,
  // has a dependency each way between the two executors' ranges: if the resolving executor went
  // on into it, it would wait for a value the one that left never publishes, and Stop would
  // never return.
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, kKeys);
  const KeyMapper ranges = KeyMapper::Within(parts, 2);
  REQUIRE(parts.Of(10) == 0);
  REQUIRE(parts.Of(150) == 0);
  REQUIRE(ranges.Of(10) != ranges.Of(150));
  Txn may_abort;
  may_abort.id = 1;
  may_abort.ops.push_back(storage::Op{storage::OpKind::kAbortIf, 30, 0, 0});  // arg 0: never fires
  may_abort.ops.push_back(storage::Op{storage::OpKind::kUpdate, 160, 1, 0});
  Txn both_ways;
  both_ways.id = 2;
  both_ways.ops.push_back(storage::Op{storage::OpKind::kDepWrite, 10, 150, 0});
  both_ways.ops.push_back(storage::Op{storage::OpKind::kDepWrite, 160, 20, 0});
  planner::RowPlanner home(parts, ranges, 0);
  std::vector<PlannedSlice> b0, b1;
  home.PlanSlices(0, 0, {may_abort}, &b0);
  home.PlanSlices(1, 0, {both_ways}, &b1);
  REQUIRE(b0[0].may_abort);
  REQUIRE(b1[0].dep_slots == 2);
  for (int run = 0; run < 20; ++run) {
    INFO("run " << run);
    storage::Table table(kLayout, kKeys);
    testing::LoadTable(&table, kKeys, 1000);
    DeadRow dead;
    Pipeline* self = nullptr;
    std::atomic<int> resolved{0};
    PipelineOptions po = RowOptions(1, 2, 2, ranges, &dead);
    po.on_row_resolved = [&](uint64_t, const std::vector<executor::RowTxn>&, const std::vector<executor::RowTxn>&) {
      self->Fail(Status::Unavailable("failed while batch 0 resolves"));
      // Time for the waiting executor to see the halt before this one finishes batch 0.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ++resolved;
    };
    Pipeline node(po, &table, [](const auto&) {});
    self = &node;
    REQUIRE(node.Start().ok());
    for (uint64_t b = 0; b < 2; ++b) {
      PlannedSlice* slot = node.BeginSlice(b, 0);
      REQUIRE(slot != nullptr);
      *slot = (b == 0 ? b0 : b1)[0];
      node.PublishSlice(b, 0, 0, true);
    }
    node.EndInput(2);
    node.DeliverVotes(0, 1, 0, {});  // the peer's round 0: nothing fired there
    // Stop joins both executors; it must return (a watchdog makes a hang a failure).
    std::atomic<bool> stopped{false};
    std::thread watchdog([&] {
      const int64_t deadline = NowNanos() + 30'000'000'000;
      while (!stopped.load() && NowNanos() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!stopped.load()) {
        std::fprintf(stderr, "run %d: Stop did not return in 30 s: an executor waits for a value from one that left\n", run);
        std::abort();
      }
    });
    const int64_t t0 = NowNanos();
    while (resolved.load() == 0 && NowNanos() - t0 < 10'000'000'000) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(resolved.load() == 1);
    node.Stop();
    stopped.store(true);
    watchdog.join();
    CHECK(node.health().message() == "failed while batch 0 resolves");
    CHECK(node.Stats().committed_batches == 0);
  }
}

namespace {

// The cascade rule (docs/partitioned-rows.md, section 4) applied to one batch's txns in global
// order on one table: returns each txn's fate and leaves the table as the committed txns alone
// make it.
//  1. Fired: a run of every txn, every op, aborts or not (what the parallel run does): a
//     kAbortIf that fires or a short kDebit.
//  2. Aborted: the fired ones, plus, to a fixpoint, every txn that accessed a key an aborted
//     txn wrote before it.
//  3. The state: the batch's starting state with the committed txns applied serially.
enum class Fate { kCommit, kLogic, kCascade };
std::vector<Fate> CascadeBatch(storage::Table* table, const std::vector<Txn>& txns, std::vector<std::string>* reads) {
  const storage::RecordLayout& layout = table->layout();
  storage::Table spec(layout, kKeys);
  testing::LoadTable(&spec, kKeys, 0);
  table->ForEach([&](storage::Key k, const char* rec) { std::memcpy(spec.Find(k), rec, layout.size()); });
  const size_t n = txns.size();
  std::vector<uint8_t> fired(n, 0), aborted(n, 0);
  // Per op: did it write (a record changed hands)? For the taint of step 2.
  std::vector<std::vector<uint8_t>> wrote(n);
  for (size_t i = 0; i < n; ++i) {
    for (const storage::Op& op : txns[i].ops) {
      char* rec = spec.Find(op.key);
      int64_t src = 0;
      if (op.kind == storage::OpKind::kDepWrite) {
        const char* y = spec.Find(op.src_key);
        src = y != nullptr ? storage::GetCounter(y) : 0;
      }
      bool w = false;
      if (rec != nullptr) {
        switch (op.kind) {
          case storage::OpKind::kRead: break;
          case storage::OpKind::kUpdate: storage::ApplyUpdate(rec, layout, txns[i].id, op.key); w = true; break;
          case storage::OpKind::kDepWrite: storage::ApplyDepWrite(rec, layout, txns[i].id, src); w = true; break;
          case storage::OpKind::kAbortIf: fired[i] |= storage::AbortFires(storage::GetCounter(rec), txns[i].id, op.arg); break;
          case storage::OpKind::kDebit:
            if (storage::ApplyDebit(rec, op.arg)) w = true; else fired[i] = 1;
            break;
          case storage::OpKind::kCredit: storage::ApplyCredit(rec, op.arg); w = true; break;
        }
      }
      wrote[i].push_back(w);
    }
    aborted[i] = fired[i];
  }
  for (bool changed = true; changed;) {
    changed = false;
    std::set<storage::Key> tainted;
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < txns[i].ops.size(); ++j) {
        const storage::Op& op = txns[i].ops[j];
        const bool hit = tainted.count(op.key) != 0 || (op.kind == storage::OpKind::kDepWrite && tainted.count(op.src_key) != 0);
        if (hit && !aborted[i]) {
          aborted[i] = 1;
          changed = true;
        }
        if (aborted[i] && wrote[i][j]) tainted.insert(op.key);
      }
    }
  }
  std::vector<Fate> fates(n);
  reads->assign(n, "");
  for (size_t i = 0; i < n; ++i) {
    fates[i] = fired[i] ? Fate::kLogic : aborted[i] ? Fate::kCascade : Fate::kCommit;
    if (aborted[i]) continue;
    // Serially, op by op, keeping what each kRead sees (zeros for an absent key): none of these
    // aborts, having seen only committed values.
    for (const storage::Op& op : txns[i].ops) {
      if (op.kind == storage::OpKind::kRead) {
        const char* rec = table->Find(op.key);
        (*reads)[i] += rec != nullptr ? std::string(rec, layout.size()) : std::string(layout.size(), '\0');
      }
      Txn one;
      one.id = txns[i].id;
      one.ops = {op};
      REQUIRE(testing::SerialApply(table, one));
    }
  }
  return fates;
}

}  // namespace

TEST_CASE("row pipelines: aborts across partitions follow the cascade rule on every partition", "[row]") {
  for (uint32_t nparts : {2u, 3u}) {
    INFO(nparts << " partitions");
    const uint32_t planners = 2, executors = 2;
    const KeyMapper parts(KeyMapper::Kind::kHash, nparts, kKeys);
    const KeyMapper ranges = KeyMapper::Within(parts, executors);
    const uint32_t slices = nparts * planners;
    constexpr uint64_t kBatches = 10;
    cluster::LocalRow row;
    std::vector<std::unique_ptr<cluster::LocalRowLink>> links;
    std::vector<std::unique_ptr<storage::Table>> tables;
    std::vector<std::unique_ptr<Pipeline>> nodes;
    std::vector<std::vector<std::vector<uint8_t>>> fed_empty(kBatches, std::vector<std::vector<uint8_t>>(slices, std::vector<uint8_t>(nparts, 0)));
    // Outcomes by (batch, slice, home index), from every node that lists the txn; and each
    // home's RowCommit, fed every node's report of its slices (what BatchDone will carry).
    std::mutex mu;
    std::map<std::tuple<uint64_t, uint32_t, uint32_t>, std::set<commit::TxnStatus>> seen;
    std::map<std::tuple<uint64_t, uint32_t, uint32_t>, std::pair<commit::TxnStatus, std::string>> at_home;
    size_t duplicates = 0;  // guarded by mu (Catch2's REQUIRE is for the test's thread only)
    std::vector<std::unique_ptr<commit::RowCommit>> commits;
    for (uint32_t h = 0; h < nparts; ++h) {
      commits.push_back(std::make_unique<commit::RowCommit>(
          parts, kLayout.size(), [&](uint64_t b, uint32_t s, const commit::RowHomeSlice& v) {
            std::lock_guard<std::mutex> lk(mu);
            for (uint32_t i = 0; i < v.txns.size(); ++i) {
              const auto value = std::make_pair(v.txns[i].status, std::string(v.ValuesOf(v.txns[i])));
              duplicates += at_home.emplace(std::make_tuple(b, s, i), value).second ? 0 : 1;
            }
          }));
    }
    for (uint32_t p = 0; p < nparts; ++p) {
      links.push_back(std::make_unique<cluster::LocalRowLink>(&row, p));
      tables.push_back(std::make_unique<storage::Table>(kLayout, kKeys));
      testing::LoadTable(tables.back().get(), kKeys, 1000);
      auto sink = [&, p](const std::vector<commit::TxnOutcome>& v) {
        if (v.empty()) return;  // the empty sub-slices report below, through the hook
        commit::RowSliceReport report;
        {
          std::lock_guard<std::mutex> lk(mu);
          for (const auto& o : v) {
            seen[{o.pos.batch, o.pos.planner, o.home_index}].insert(o.status);
            report.Add(o.home_index, o.status, o.values);
          }
        }
        commits[v.front().pos.planner / planners]->Report(p, v.front().pos.batch, v.front().pos.planner, std::move(report));
      };
      // A sub-slice with no txns here gets no sink call: its (empty) report goes with the batch.
      auto hook = [&, p](const commit::BatchInfo& info) {
        for (uint32_t s = 0; s < slices; ++s) {
          if (fed_empty[info.batch][s][p]) commits[s / planners]->Report(p, info.batch, s, {});
        }
      };
      PipelineOptions po = RowOptions(slices, executors, 2, ranges, links[p].get(), nparts, p);
      po.capture_reads = true;
      nodes.push_back(std::make_unique<Pipeline>(po, tables.back().get(), sink, hook));
      row.nodes.push_back(nodes.back().get());
    }
    for (auto& n : nodes) REQUIRE(n->Start().ok());
    storage::Table ref(kLayout, kKeys);
    testing::LoadTable(&ref, kKeys, 1000);
    std::vector<planner::RowPlanner> homes;
    for (uint32_t h = 0; h < nparts; ++h) homes.emplace_back(parts, ranges, h);
    std::map<std::tuple<uint64_t, uint32_t, uint32_t>, Fate> want;
    std::map<std::tuple<uint64_t, uint32_t, uint32_t>, std::string> want_reads;
    std::vector<PlannedSlice> subs;
    for (uint64_t b = 0; b < kBatches; ++b) {
      std::vector<Txn> batch;  // the batch in global order, for the oracle
      std::vector<std::pair<uint32_t, uint32_t>> where;
      for (uint32_t s = 0; s < slices; ++s) {
        const testing::GenOptions g = AbortingTxns(b);
        const std::vector<Txn> txns = testing::RandomTxns(7 + b * 100 + s, 40 + (b + s) % 20, g);
        homes[s / planners].PlanSlices(b, s, txns, &subs);
        for (uint32_t i = 0; i < txns.size(); ++i) {
          batch.push_back(txns[i]);
          where.emplace_back(s, i);
        }
        for (uint32_t p = 0; p < nparts; ++p) fed_empty[b][s][p] = subs[p].txns.empty();
        commits[s / planners]->Plan(b, s, txns);
        for (uint32_t p = 0; p < nparts; ++p) {
          PlannedSlice* slot = nodes[p]->BeginSlice(b, s);
          REQUIRE(slot != nullptr);
          *slot = subs[p];
          nodes[p]->PublishSlice(b, s, 0, true);
        }
      }
      std::vector<std::string> reads;
      const std::vector<Fate> fates = CascadeBatch(&ref, batch, &reads);
      for (size_t i = 0; i < batch.size(); ++i) {
        want[{b, where[i].first, where[i].second}] = fates[i];
        want_reads[{b, where[i].first, where[i].second}] = reads[i];
      }
    }
    for (auto& n : nodes) n->EndInput(kBatches);
    for (auto& n : nodes) {
      const Status st = n->WaitIdle(60000);
      INFO(st.ToString());
      REQUIRE(st.ok());
    }
    for (auto& n : nodes) n->Stop();
    // Every node's record of every key it owns is the cascade oracle's.
    for (storage::Key k = 0; k < kKeys; ++k) {
      INFO("key " << k);
      REQUIRE(std::memcmp(tables[parts.Of(k)]->Find(k), ref.Find(k), kLayout.size()) == 0);
    }
    // Every node that lists a txn gives it the oracle's fate.
    size_t logic = 0, cascade = 0, listed = 0;
    for (const auto& [id, f] : want) {
      const commit::TxnStatus expect = f == Fate::kCommit   ? commit::TxnStatus::kCommitted
                                       : f == Fate::kLogic  ? commit::TxnStatus::kAbortedLogic
                                                            : commit::TxnStatus::kAbortedCascade;
      logic += f == Fate::kLogic;
      cascade += f == Fate::kCascade;
      auto it = seen.find(id);
      if (it == seen.end()) continue;  // a txn without ops
      ++listed;
      INFO("batch " << std::get<0>(id) << " slice " << std::get<1>(id) << " txn " << std::get<2>(id));
      REQUIRE(it->second == std::set<commit::TxnStatus>{expect});
    }
    CHECK(listed + 20 > want.size());
    // Each home's outcomes, once every partition reported: the oracle's fates and, for committed
    // txns, the values of their reads in op order, gathered from the partitions that ran them.
    for (auto& c : commits) REQUIRE(c->health().ok());
    CHECK(duplicates == 0);
    REQUIRE(at_home.size() == want.size());
    size_t values_checked = 0;
    for (const auto& [id, f] : want) {
      const auto& [status, values] = at_home.at(id);
      INFO("home outcome of batch " << std::get<0>(id) << " slice " << std::get<1>(id) << " txn " << std::get<2>(id));
      REQUIRE(status == (f == Fate::kCommit   ? commit::TxnStatus::kCommitted
                         : f == Fate::kLogic  ? commit::TxnStatus::kAbortedLogic
                                              : commit::TxnStatus::kAbortedCascade));
      REQUIRE(values == (f == Fate::kCommit ? want_reads.at(id) : std::string()));
      values_checked += values.size() / kLayout.size();
    }
    CHECK(values_checked > 200);
    CHECK(logic > 20);
    CHECK(cascade > 20);
    CHECK(row.vote_msgs.load() > 0);
  }
}

namespace {

// A row leader's sender that also hands each dependency value to the receiving partition's
// follower, as that partition's batch-end record will (Rule 2): the follower gets exactly the
// values its leader received.
struct TeeLink final : executor::RowSender {
  cluster::LocalRowLink row;
  std::vector<Pipeline*>* followers;
  TeeLink(cluster::LocalRow* r, uint32_t me, std::vector<Pipeline*>* f) : row(r, me), followers(f) {}
  void SendDep(uint32_t partition, uint64_t batch, uint32_t slice, uint32_t slot, int64_t value) override {
    row.SendDep(partition, batch, slice, slot, value);
    if (Pipeline* f = followers->at(partition)) f->DeliverDepValue(batch, slice, slot, value);
  }
  void SendVotes(uint32_t partition, uint64_t batch, uint32_t round, const std::vector<executor::RowTxn>& ids) override {
    row.SendVotes(partition, batch, round, ids);
  }
};

}  // namespace

TEST_CASE("row pipelines, Rule 2: a follower replays its partition from its leader's sub-slices, received values and "
          "abort results alone", "[row]") {
  // docs/partitioned-rows.md 9.4: no row peers for a follower. Each partition's follower gets
  // the sub-slices its leader got, the dependency values its leader received, and its leader's
  // abort result of each batch that may abort; it sends nothing. It must end with its leader's
  // table and fates. With `corrupt`, partition 0's follower is given empty results: it must fail
  // at the first batch where a vote fired on its partition, naming it.
  const bool corrupt = GENERATE(false, true);
  CAPTURE(corrupt);
  constexpr uint32_t kParts = 2, kPlanners = 2, kExecutors = 2;
  constexpr uint64_t kBatches = 10;
  const KeyMapper parts(KeyMapper::Kind::kHash, kParts, kKeys);
  const KeyMapper ranges = KeyMapper::Within(parts, kExecutors);
  const uint32_t slices = kParts * kPlanners;
  cluster::LocalRow row;
  std::vector<Pipeline*> follower_of(kParts, nullptr);
  std::vector<std::unique_ptr<TeeLink>> links;
  std::vector<std::unique_ptr<storage::Table>> tables;  // leaders 0..P-1, then followers
  std::vector<std::unique_ptr<Pipeline>> nodes;         // the same order
  executor::DropRowSender drop;
  std::mutex mu;
  // (batch, slice, home index) -> status, per node
  std::vector<std::map<std::tuple<uint64_t, uint32_t, uint32_t>, commit::TxnStatus>> fates(2 * kParts);
  std::atomic<uint64_t> results{0}, aborted_results{0};
  auto sink_of = [&](uint32_t n) {
    return [&, n](const std::vector<commit::TxnOutcome>& v) {
      std::lock_guard<std::mutex> lk(mu);
      for (const auto& o : v) fates[n][{o.pos.batch, o.pos.planner, o.home_index}] = o.status;
    };
  };
  for (uint32_t p = 0; p < kParts; ++p) {
    links.push_back(std::make_unique<TeeLink>(&row, p, &follower_of));
    tables.push_back(std::make_unique<storage::Table>(kLayout, kKeys));
    testing::LoadTable(tables.back().get(), kKeys, 1000);
    PipelineOptions po = RowOptions(slices, kExecutors, 2, ranges, links[p].get(), kParts, p);
    po.on_row_resolved = [&, p](uint64_t b, const std::vector<executor::RowTxn>& fired,
                                const std::vector<executor::RowTxn>& aborted) {
      results.fetch_add(1);
      if (!aborted.empty()) aborted_results.fetch_add(1);
      if (corrupt && p == 0) {
        // Nothing aborted, says the record: the first batch where a vote fired on partition 0
        // shows the follower otherwise. (One where votes fired only elsewhere cannot: the
        // follower takes its leader's word for the other partitions.)
        follower_of[p]->DeliverResolved(b, {}, {});
        return;
      }
      follower_of[p]->DeliverResolved(b, fired, aborted);
    };
    nodes.push_back(std::make_unique<Pipeline>(po, tables.back().get(), sink_of(p)));
    row.nodes.push_back(nodes.back().get());
  }
  for (uint32_t p = 0; p < kParts; ++p) {
    tables.push_back(std::make_unique<storage::Table>(kLayout, kKeys));
    testing::LoadTable(tables.back().get(), kKeys, 1000);
    PipelineOptions po = RowOptions(slices, kExecutors, 2, ranges, &drop, kParts, p);
    po.row_resolved_by_leader = true;
    nodes.push_back(std::make_unique<Pipeline>(po, tables.back().get(), sink_of(kParts + p)));
    follower_of[p] = nodes.back().get();
  }
  for (auto& n : nodes) REQUIRE(n->Start().ok());
  std::vector<planner::RowPlanner> homes;
  for (uint32_t h = 0; h < kParts; ++h) homes.emplace_back(parts, ranges, h);
  std::vector<PlannedSlice> subs;
  for (uint64_t b = 0; b < kBatches; ++b) {
    for (uint32_t s = 0; s < slices; ++s) {
      const testing::GenOptions g = AbortingTxns(b);
      const std::vector<Txn> txns = testing::RandomTxns(11 + b * 100 + s, 40 + (b + s) % 20, g);
      homes[s / kPlanners].PlanSlices(b, s, txns, &subs);
      for (uint32_t p = 0; p < kParts; ++p) {
        for (Pipeline* n : {nodes[p].get(), follower_of[p]}) {
          PlannedSlice* slot = n->BeginSlice(b, s);
          if (corrupt && slot == nullptr) continue;  // the follower failed: it takes no more
          REQUIRE(slot != nullptr);
          *slot = subs[p];
          n->PublishSlice(b, s, 0, true);
        }
      }
    }
  }
  for (auto& n : nodes) n->EndInput(kBatches);
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    const Status st = nodes[n]->WaitIdle(60000);
    INFO("node " << n << ": " << st.ToString());
    if (corrupt && n == kParts) {
      REQUIRE_FALSE(st.ok());
      CHECK(st.message().find("the leader's abort result disagrees with this node's run") != std::string::npos);
      CHECK(st.message().find("fired here, not on the leader") != std::string::npos);
    } else {
      REQUIRE(st.ok());
    }
  }
  CHECK(results.load() > 0);
  CHECK(aborted_results.load() > 0);  // cascades and fired votes were in the records
  const uint32_t checked = corrupt ? 1 : kParts;  // with `corrupt`, partition 1's pair only
  for (uint32_t p = kParts - checked; p < kParts; ++p) {
    INFO("partition " << p);
    CHECK(fates[p].size() > 200);
    CHECK(fates[p] == fates[kParts + p]);
    size_t aborted = 0;
    for (const auto& [k, st] : fates[p]) aborted += st != commit::TxnStatus::kCommitted;
    CHECK(aborted > 0);
    for (storage::Key k = 0; k < kKeys; ++k) {
      INFO("key " << k);
      REQUIRE(std::memcmp(tables[p]->Find(k), tables[kParts + p]->Find(k), kLayout.size()) == 0);
    }
  }
  for (auto& n : nodes) n->Stop();
}

// Failover inside a row (docs/partitioned-rows.md 9.5): a peer's successor re-sends values and
// votes this node may hold. Partition 0's node alone runs batch 0 (one txn: x <- y from
// partition 1 into slot 0, and a kAbortIf that never fires, so the batch votes); the test stands
// in for partition 1, delivering before the sub-slice is published (`early`), once the batch
// executed and its voting round was consumed but before it committed (`executed`, through the
// batch-end gate), and after it committed (`late`).
TEST_CASE("row pipelines, repeats: with AcceptRepeats an equal repeat is dropped, a different one fails naming both",
          "[row][repeats]") {
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, kKeys);
  const KeyMapper ranges = KeyMapper::Within(parts, 2);
  Txn t;
  t.id = 1;
  t.ops.push_back(storage::Op{storage::OpKind::kDepWrite, 10, 300, 0});
  t.ops.push_back(storage::Op{storage::OpKind::kAbortIf, 30, 0, 0});  // arg 0: never fires
  planner::RowPlanner home(parts, ranges, 0);
  std::vector<PlannedSlice> subs;
  home.PlanSlices(0, 0, {t}, &subs);
  REQUIRE(subs[0].dep_slots == 1);
  REQUIRE(subs[0].may_abort);
  DeadRow dead;
  using Step = std::function<void(Pipeline&)>;
  const Step none = [](Pipeline&) {};
  // Returns the node's health at the end and key 10's record.
  auto run = [&](bool repeats, const Step& early, const Step& executed, const Step& late) {
    storage::Table table(kLayout, kKeys);
    testing::LoadTable(&table, kKeys, 1000);
    Pipeline* self = nullptr;
    PipelineOptions po = RowOptions(1, 2, 2, ranges, &dead);
    po.batch_end_gate = true;
    po.on_batch_executed = [&](uint64_t b) {
      executed(*self);
      self->MarkBatchEnd(b);
    };
    Pipeline node(po, &table, [](const auto&) {});
    self = &node;
    if (repeats) {
      node.AcceptRepeats();
      node.AcceptRepeats();  // idempotent
    }
    REQUIRE(node.Start().ok());
    early(node);
    // nullptr: what `early` delivered failed the node already.
    if (PlannedSlice* slot = node.BeginSlice(0, 0); slot != nullptr) {
      *slot = subs[0];
      node.PublishSlice(0, 0, 0, true);
    }
    node.EndInput(1);
    Status st = node.WaitIdle(10000);
    if (st.ok()) {
      late(node);
      st = node.health();
    }
    node.Stop();
    return std::make_pair(st, std::string(table.Find(10), kLayout.size()));
  };
  const Step value_and_votes = [](Pipeline& n) {
    n.DeliverDepValue(0, 0, 0, 5);
    n.DeliverVotes(0, 1, 0, {});
  };
  const auto [once, record] = run(false, value_and_votes, none, none);
  REQUIRE(once.ok());
  storage::Table initial(kLayout, kKeys);
  testing::LoadTable(&initial, kKeys, 1000);
  REQUIRE(record != std::string(initial.Find(10), kLayout.size()));  // the value was written

  SECTION("equal repeats, early, after the round was consumed and after the commit, are dropped") {
    const auto [st, rec] = run(
        true,
        [](Pipeline& n) {
          n.DeliverDepValue(0, 0, 0, 5);
          n.DeliverDepValue(0, 0, 0, 5);  // both kept early: the second dropped when the sub-slice comes
          n.DeliverVotes(0, 1, 0, {});
          n.DeliverVotes(0, 1, 0, {});  // round 0 still being collected
        },
        [](Pipeline& n) {
          n.DeliverDepValue(0, 0, 0, 5);  // the slot is filled, the batch not committed
          n.DeliverVotes(0, 1, 0, {});    // round 0 was consumed: not fed into a round 1
        },
        [](Pipeline& n) {
          // Batch 0 committed: dropped whatever they say (they were used, or it could not have
          // committed).
          n.DeliverDepValue(0, 0, 0, 5);
          n.DeliverDepValue(0, 0, 0, 7);
          n.DeliverVotes(0, 1, 0, {});
          n.DeliverVotes(0, 1, 1, {executor::RowTxn{0, 0}});
        });
    INFO(st.ToString());
    REQUIRE(st.ok());
    CHECK(rec == record);
  }
  SECTION("a different value or different votes, early or once the slot is filled and the round consumed, fail "
          "naming both") {
    const std::vector<std::pair<Step, std::string>> cases = {
        {[](Pipeline& n) { n.DeliverDepValue(0, 0, 0, 6); },
         "dependency value for slice (0, 0) slot 0: a repeat differs from the value the slot holds (5 held, 6 "
         "repeated)"},
        {[](Pipeline& n) { n.DeliverVotes(0, 1, 0, {executor::RowTxn{0, 0}}); },
         "abort votes of batch 0 round 0 from partition 1: a repeat differs from the votes given before: {} before, "
         "{(slice 0, home 0)} now"},
    };
    for (const auto& c : cases) {
      // Not a structured binding: clang 14 cannot capture one in a lambda.
      const Step& repeat = c.first;
      const std::string& expect = c.second;
      for (const bool early : {true, false}) {
        const Step first_then_repeat = [&](Pipeline& n) {
          value_and_votes(n);
          repeat(n);
        };
        const auto [st, rec] = run(true, early ? first_then_repeat : value_and_votes, early ? none : repeat, none);
        INFO(expect << (early ? ", early: " : ", once executed: ") << st.ToString());
        REQUIRE_FALSE(st.ok());
        CHECK(st.code() == StatusCode::kCorruption);
        CHECK(st.message().find(expect) != std::string::npos);
      }
    }
  }
  SECTION("without AcceptRepeats every repeat still fails, and so does a late value or vote") {
    const std::vector<std::pair<std::tuple<Step, Step, Step>, std::string>> cases = {
        {{[&](Pipeline& n) {
            value_and_votes(n);
            n.DeliverDepValue(0, 0, 0, 5);
          }, none, none}, "slot 0: filled twice"},
        {{value_and_votes, [](Pipeline& n) { n.DeliverDepValue(0, 0, 0, 5); }, none}, "slot 0: filled twice"},
        {{value_and_votes, none, [](Pipeline& n) { n.DeliverDepValue(0, 0, 0, 5); }}, "the batch committed already"},
        {{[&](Pipeline& n) {
            value_and_votes(n);
            n.DeliverVotes(0, 1, 0, {});
          }, none, none}, "round 0 from partition 1: given twice"},
        {{value_and_votes, none, [](Pipeline& n) { n.DeliverVotes(0, 1, 0, {}); }}, "batch out of the window [1, 5)"},
    };
    for (const auto& [steps, expect] : cases) {
      const auto [st, rec] = run(false, std::get<0>(steps), std::get<1>(steps), std::get<2>(steps));
      INFO(expect << ": " << st.ToString());
      REQUIRE_FALSE(st.ok());
      CHECK(st.message().find(expect) != std::string::npos);
    }
  }
}

namespace {

// Every value and vote a row's nodes sent, by receiving partition and batch: what a resumed peer
// re-sends.
struct SentLog {
  struct Value {
    uint32_t slice, slot;
    int64_t value;
  };
  struct Votes {
    uint32_t from, round;
    std::vector<executor::RowTxn> ids;
  };
  std::mutex mu;
  std::map<std::pair<uint32_t, uint64_t>, std::vector<Value>> values;  // guarded by mu
  std::map<std::pair<uint32_t, uint64_t>, std::vector<Votes>> votes;   // guarded by mu
  std::atomic<uint64_t> resent_values{0}, resent_votes{0};

  // Delivers to `node` (partition p) again everything it was sent for batch b; `forget`: the
  // last time.
  void Resend(Pipeline& node, uint32_t p, uint64_t b, bool forget) {
    std::vector<Value> vs;
    std::vector<Votes> ws;
    {
      std::lock_guard<std::mutex> lk(mu);
      vs = values[{p, b}];
      ws = votes[{p, b}];
      if (forget) {
        values.erase({p, b});
        votes.erase({p, b});
      }
    }
    for (const Value& v : vs) node.DeliverDepValue(b, v.slice, v.slot, v.value);
    for (const Votes& w : ws) node.DeliverVotes(b, w.from, w.round, w.ids);
    resent_values.fetch_add(vs.size());
    resent_votes.fetch_add(ws.size());
  }
};

// Node `me`'s sender: logs each message, then delivers it `copies` times.
struct RepeatLink final : executor::RowSender {
  std::vector<Pipeline*>* nodes;
  SentLog* log;
  uint32_t me, copies;
  RepeatLink(std::vector<Pipeline*>* n, SentLog* l, uint32_t m, uint32_t c) : nodes(n), log(l), me(m), copies(c) {}
  void SendDep(uint32_t partition, uint64_t batch, uint32_t slice, uint32_t slot, int64_t value) override {
    {
      std::lock_guard<std::mutex> lk(log->mu);
      log->values[{partition, batch}].push_back({slice, slot, value});
    }
    for (uint32_t c = 0; c < copies; ++c) nodes->at(partition)->DeliverDepValue(batch, slice, slot, value);
  }
  void SendVotes(uint32_t partition, uint64_t batch, uint32_t round, const std::vector<executor::RowTxn>& ids) override {
    {
      std::lock_guard<std::mutex> lk(log->mu);
      log->votes[{partition, batch}].push_back({me, round, ids});
    }
    for (uint32_t c = 0; c < copies; ++c) nodes->at(partition)->DeliverVotes(batch, me, round, ids);
  }
};

}  // namespace

TEST_CASE("row pipelines, repeats: a row whose values and votes all come again ends as the row without repeats",
          "[row][repeats]") {
  // The abort workload on 3 partitions, run twice. With repeats, every node accepts them, every
  // value and vote is delivered twice at once, once more when its batch executed at the receiver
  // (its rounds consumed, the batch not committed: the batch-end gate holds it), and again once
  // the batch committed (two batches later: batch b + 2 is admitted only then). Both runs must
  // end with the same tables and the same fates on every node.
  constexpr uint32_t kParts = 3, kPlanners = 2, kExecutors = 2, kInFlight = 2;
  constexpr uint64_t kBatches = 8;
  const KeyMapper parts(KeyMapper::Kind::kHash, kParts, kKeys);
  const KeyMapper ranges = KeyMapper::Within(parts, kExecutors);
  const uint32_t slices = kParts * kPlanners;
  using Fates = std::map<std::tuple<uint64_t, uint32_t, uint32_t>, commit::TxnStatus>;
  struct Result {
    std::vector<std::string> tables;  // per node, every record
    std::vector<Fates> fates;         // per node
  };
  auto run = [&](bool repeats, SentLog* log) {
    // Declared before the nodes: a failed REQUIRE destroys the nodes (joining their threads) first.
    std::mutex mu;
    Result out;
    out.fates.resize(kParts);
    std::vector<Pipeline*> ptrs(kParts, nullptr);
    std::vector<std::unique_ptr<RepeatLink>> links;
    std::vector<std::unique_ptr<storage::Table>> tables;
    std::vector<std::unique_ptr<Pipeline>> nodes;
    for (uint32_t p = 0; p < kParts; ++p) {
      links.push_back(std::make_unique<RepeatLink>(&ptrs, log, p, repeats ? 2 : 1));
      tables.push_back(std::make_unique<storage::Table>(kLayout, kKeys));
      testing::LoadTable(tables.back().get(), kKeys, 1000);
      PipelineOptions po = RowOptions(slices, kExecutors, kInFlight, ranges, links[p].get(), kParts, p);
      po.batch_end_gate = true;
      po.on_batch_executed = [&, p](uint64_t b) {
        if (repeats) {
          log->Resend(*ptrs[p], p, b, /*forget=*/false);
          // Batch b was admitted once b - kInFlight committed.
          if (b >= kInFlight) log->Resend(*ptrs[p], p, b - kInFlight, /*forget=*/true);
        }
        ptrs[p]->MarkBatchEnd(b);
      };
      auto sink = [&, p](const std::vector<commit::TxnOutcome>& v) {
        std::lock_guard<std::mutex> lk(mu);
        for (const auto& o : v) out.fates[p][{o.pos.batch, o.pos.planner, o.home_index}] = o.status;
      };
      nodes.push_back(std::make_unique<Pipeline>(po, tables.back().get(), sink));
      ptrs[p] = nodes.back().get();
      if (repeats) ptrs[p]->AcceptRepeats();
    }
    for (auto& n : nodes) REQUIRE(n->Start().ok());
    std::vector<planner::RowPlanner> homes;
    for (uint32_t h = 0; h < kParts; ++h) homes.emplace_back(parts, ranges, h);
    std::vector<PlannedSlice> subs;
    for (uint64_t b = 0; b < kBatches; ++b) {
      for (uint32_t s = 0; s < slices; ++s) {
        const std::vector<Txn> txns = testing::RandomTxns(13 + b * 100 + s, 40 + (b + s) % 20, AbortingTxns(b));
        homes[s / kPlanners].PlanSlices(b, s, txns, &subs);
        for (uint32_t p = 0; p < kParts; ++p) {
          PlannedSlice* slot = nodes[p]->BeginSlice(b, s);
          REQUIRE(slot != nullptr);
          *slot = subs[p];
          nodes[p]->PublishSlice(b, s, 0, true);
        }
      }
    }
    for (auto& n : nodes) n->EndInput(kBatches);
    for (uint32_t p = 0; p < kParts; ++p) {
      const Status st = nodes[p]->WaitIdle(60000);
      INFO("node " << p << ": " << st.ToString());
      REQUIRE(st.ok());
    }
    if (repeats) {
      // Everything once more, every batch committed now.
      for (uint32_t p = 0; p < kParts; ++p) {
        for (uint64_t b = 0; b < kBatches; ++b) log->Resend(*nodes[p], p, b, /*forget=*/true);
        INFO("node " << p << ": " << nodes[p]->health().ToString());
        REQUIRE(nodes[p]->health().ok());
      }
    }
    for (auto& n : nodes) n->Stop();
    for (auto& t : tables) {
      std::string all;
      for (storage::Key k = 0; k < kKeys; ++k) all.append(t->Find(k), kLayout.size());
      out.tables.push_back(std::move(all));
    }
    return out;
  };
  SentLog plain_log, repeat_log;
  const Result plain = run(false, &plain_log);
  const Result repeated = run(true, &repeat_log);
  CHECK(repeat_log.resent_values.load() > 100);
  CHECK(repeat_log.resent_votes.load() > 10);
  size_t aborted = 0;
  for (uint32_t p = 0; p < kParts; ++p) {
    INFO("node " << p);
    CHECK(plain.fates[p].size() > 200);
    CHECK(repeated.fates[p] == plain.fates[p]);
    CHECK(repeated.tables[p] == plain.tables[p]);
    for (const auto& [k, st] : plain.fates[p]) aborted += st != commit::TxnStatus::kCommitted;
  }
  CHECK(aborted > 20);  // votes fired and cascaded
}
