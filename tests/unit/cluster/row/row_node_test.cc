// RowNode (cluster/row/row_node.h) with followers: Rule 1 of docs/partitioned-rows.md section
// 9.2. Two leaders of a 2-partition row on loopback, each with a stand-in for its replication
// group that records what it is asked to replicate and confirms only when the test says so. A
// home's whole home slice (a RowHomeBundle: every partition's part) goes to its own group first,
// and its peer gets its part only after that group confirmed it: the peer's group is never asked
// to replicate a part whose home slice its home's group does not hold.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/row/row_messages.h"
#include "cluster/row/row_node.h"
#include "common/clock.h"
#include "tests/unit/cluster/row/loopback_addresses.h"
#include "storage/table.h"

using namespace qrstore;
using namespace qrstore::cluster;
using storage::KeyMapper;

namespace {

constexpr uint64_t kKeys = 200;
const storage::RecordLayout kLayout{4, 8};


// What one node asked its group to replicate, in order: (batch, slice, bytes).
struct Group {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::tuple<uint64_t, uint32_t, std::string>> asked;
  template <typename P>
  bool WaitFor(P pred, int seconds = 10) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(seconds), [&] { return pred(asked); });
  }
};

struct Leader {
  Group group;
  std::unique_ptr<storage::Table> table;
  std::unique_ptr<RowNode> node;
  std::vector<Status> failures;
  std::mutex fmu;
};

}  // namespace

TEST_CASE("row node: a home slice goes to its home's group first; its peer gets its part only once that is confirmed",
          "[row]") {
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, kKeys);  // partition 0: keys 0..99, 1: 100..199
  const KeyMapper ranges = KeyMapper::Within(parts, 1);
  const std::vector<std::string> addrs = testing::LoopbackAddresses(2);
  std::vector<std::unique_ptr<Leader>> leaders;
  for (uint32_t p = 0; p < 2; ++p) {
    auto l = std::make_unique<Leader>();
    l->table = std::make_unique<storage::Table>(kLayout, kKeys);
    const std::string zero(kLayout.size(), '\0');
    for (uint64_t k = 0; k < kKeys; ++k) {
      if (parts.Of(k) == p) REQUIRE(l->table->Insert(k, zero.data()).ok());
    }
    RowNodeOptions o;
    o.partition = p;
    o.peer_addresses = addrs;
    o.partitions = parts;
    o.pipeline.planners = 1;
    o.pipeline.executors = 1;
    o.pipeline.batches_in_flight = 3;
    o.pipeline.ranges = ranges;
    o.planner.batch_txns = 100;
    o.planner.batch_timeout_ns = 2'000'000;
    o.planner.planners = 1;
    o.record_bytes = kLayout.size();
    o.connect_timeout_ms = 10'000;
    Group* g = &l->group;
    o.replicate = [g](uint64_t b, uint32_t s, std::string bytes) {
      std::lock_guard<std::mutex> lk(g->mu);
      g->asked.emplace_back(b, s, std::move(bytes));
      g->cv.notify_all();
    };
    Leader* raw = l.get();
    l->node = std::make_unique<RowNode>(
        o, l->table.get(), [](const std::vector<commit::TxnOutcome>&) {}, [](const BatchInfo&) {},
        [raw](const Status& s) {
          std::lock_guard<std::mutex> lk(raw->fmu);
          raw->failures.push_back(s);
        },
        [](uint32_t) {});
    leaders.push_back(std::move(l));
  }
  // Both must listen before either dials: start them together.
  std::vector<Status> started(2);
  {
    std::thread t1([&] { started[1] = leaders[1]->node->Start(); });
    started[0] = leaders[0]->node->Start();
    t1.join();
  }
  REQUIRE(started[0].ok());
  REQUIRE(started[1].ok());

  // Home 0 gets a transaction that writes on both partitions: its home slice has a part for 1.
  std::vector<storage::Txn> txns(1);
  txns[0].id = 1;
  txns[0].ops = {{storage::OpKind::kUpdate, 5, 0, 0}, {storage::OpKind::kUpdate, 150, 0, 0}};
  REQUIRE(leaders[0]->node->SubmitMany(txns) == 1);

  // Home 0's group is asked for the whole home slice of some batch b: a bundle with both parts.
  uint64_t b = 0;
  REQUIRE(leaders[0]->group.WaitFor([&](const auto& asked) {
    for (const auto& [batch, slice, bytes] : asked) {
      RowHomeBundle hb;
      if (slice != 0 || !DecodeRowMessage(bytes, &hb).ok() || hb.parts.size() != 2) continue;
      planner::PlannedSlice part;
      if (planner::DecodeSlice(hb.parts[1], &part).ok() && !part.txns.empty()) {
        b = batch;
        return true;
      }
    }
    return false;
  }));
  // Nothing is confirmed yet: partition 1 never receives home 0's part of batch b, so its group
  // is never asked to replicate slice 0 (home 0's stream) of b, however long we wait.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  {
    std::lock_guard<std::mutex> lk(leaders[1]->group.mu);
    for (const auto& [batch, slice, bytes] : leaders[1]->group.asked) {
      INFO("partition 1's group was asked for batch " << batch << ", slice " << slice);
      CHECK_FALSE((slice == 0 && batch >= b));
    }
  }
  // Home 0's group confirms every home slice it was asked for, in order: the parts leave, and
  // partition 1's group is asked for home 0's part of b, byte for byte the bundle's part.
  std::string expected_part;
  {
    std::lock_guard<std::mutex> lk(leaders[0]->group.mu);
    for (const auto& [batch, slice, bytes] : leaders[0]->group.asked) {
      if (slice != 0 || batch > b) continue;
      if (batch == b) {
        RowHomeBundle hb;
        REQUIRE(DecodeRowMessage(bytes, &hb).ok());
        expected_part = hb.parts[1];
      }
    }
  }
  for (uint64_t x = 0; x <= b; ++x) leaders[0]->node->MarkReplicated(x, 0);
  REQUIRE(leaders[1]->group.WaitFor([&](const auto& asked) {
    for (const auto& [batch, slice, bytes] : asked) {
      if (batch == b && slice == 0) return bytes == expected_part;
    }
    return false;
  }));
  {
    std::lock_guard<std::mutex> lk(leaders[0]->fmu);
    CHECK(leaders[0]->failures.empty());
  }
  for (auto& l : leaders) l->node->Stop();
}
