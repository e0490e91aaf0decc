// A partitioned row in one process (docs/partitioned-rows.md, step 1): P pipelines, one per
// partition, each fed every home's row sub-slices in (batch, home, planner) order, with the
// dependency values of kDepSend fragments handed to the receiving partition's pipeline. The
// state over all partitions must equal a serial run of all txns in that global order.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/pipeline.h"
#include "common/clock.h"
#include "executor/range_executor.h"
#include "planner/row_planner.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using cluster::Pipeline;
using cluster::PipelineOptions;
using planner::PlannedSlice;
using storage::KeyMapper;
using storage::Txn;

namespace {

const storage::RecordLayout kLayout{4, 8};
constexpr uint64_t kKeys = 400;

// Hands each value to the receiving partition's pipeline, as the row transport will.
struct InProcessRow : executor::RowSender {
  std::vector<Pipeline*> nodes;
  std::atomic<uint64_t> sent{0};
  void SendDep(uint32_t partition, uint64_t batch, uint32_t slice, uint32_t slot, int64_t value) override {
    sent.fetch_add(1, std::memory_order_relaxed);
    nodes.at(partition)->DeliverDepValue(batch, slice, slot, value);
  }
};

// Drops every value: a row peer that died.
struct DeadRow : executor::RowSender {
  void SendDep(uint32_t, uint64_t, uint32_t, uint32_t, int64_t) override {}
};

PipelineOptions RowOptions(uint32_t slices, uint32_t executors, uint32_t in_flight, const KeyMapper& ranges,
                           executor::RowSender* sender) {
  PipelineOptions o;
  o.planners = slices;
  o.executors = executors;
  o.committers = 1;
  o.batches_in_flight = in_flight;
  o.ranges = ranges;
  o.track_digest = true;
  o.row_sender = sender;
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
    InProcessRow row;
    std::vector<std::unique_ptr<storage::Table>> tables;
    std::vector<std::unique_ptr<Pipeline>> nodes;
    for (uint32_t p = 0; p < sh.parts; ++p) {
      tables.push_back(std::make_unique<storage::Table>(kLayout, kKeys));
      testing::LoadTable(tables.back().get(), kKeys, 1000);
      nodes.push_back(std::make_unique<Pipeline>(RowOptions(slices, sh.executors, sh.in_flight, ranges, &row),
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
    CHECK(row.sent.load() == sends_planned);
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

TEST_CASE("row pipelines: bad dependency values fail the node naming the slot; aborts are refused for now", "[row]") {
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
  SECTION("a sub-slice that may abort") {
    Txn a = t;
    a.ops.push_back(storage::Op{storage::OpKind::kAbortIf, 11, 0, 5000});
    home.PlanSlices(0, 0, {a}, &subs);
    run([&](Pipeline& n) { publish(n, subs[0]); }, "aborts in a partitioned row are not built yet");
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
