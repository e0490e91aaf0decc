// The follower's front-end (cluster/follower_feed.h) over the in-process `none` hub: slices a
// leader replicated are replayed to the leader's state; a corrupted or misplaced slice stops the
// apply with an error naming batch and planner, without hanging; the end marker ends the input.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "cluster/follower_feed.h"
#include "cluster/pipeline.h"
#include "common/clock.h"
#include "planner/eq.h"
#include "planner/planner.h"
#include "replication/none/none_replicator.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using cluster::FollowerFeed;
using cluster::FollowerFeedOptions;
using cluster::Pipeline;
using cluster::PipelineOptions;

namespace {

const storage::RecordLayout kLayout{2, 8};
constexpr uint64_t kKeys = 100;

struct Rig {
  explicit Rig(const std::string& hub, uint32_t planners = 2) {
    replication::none::NoneOptions lo;
    lo.planners = planners;
    lo.hub = hub;
    lo.leader = true;
    leader = std::make_unique<replication::none::NoneReplicator>(lo);
    replication::none::NoneOptions fo = lo;
    fo.leader = false;
    follower = std::make_unique<replication::none::NoneReplicator>(fo);
    REQUIRE(leader->Start().ok());
    REQUIRE(follower->Start().ok());
    testing::LoadTable(&table, kKeys, 0);
    po.planners = planners;
    po.executors = 2;
    po.committers = 1;
    po.batches_in_flight = 2;
    po.ranges = storage::KeyMapper(storage::KeyMapper::Kind::kHash, 2, 0);
    po.track_digest = true;
    pipeline = std::make_unique<Pipeline>(po, &table, [](const std::vector<commit::TxnOutcome>&) {});
    REQUIRE(pipeline->Start().ok());
    FollowerFeedOptions fopt;
    fopt.planners = planners;
    fopt.ranges = po.ranges;
    feed = std::make_unique<FollowerFeed>(fopt, pipeline.get(), follower.get());
    REQUIRE(feed->Start().ok());
  }
  ~Rig() {
    feed->Stop();
    pipeline->Stop();
    follower->Stop();
    leader->Stop();
  }
  void Replicate(uint64_t b, uint32_t p, std::string bytes) {
    Status got = Status::Internal("no callback");
    leader->ReplicateData(replication::ReplicateMeta{0, p, b}, std::move(bytes),
                          [&](const replication::ReplicateMeta&, Status st) { got = st; });
    REQUIRE(got.ok());  // the none backend calls back inline
  }
  std::string Slice(uint64_t b, uint32_t p, uint64_t seed) {
    auto txns = testing::RandomTxns(seed, 20, testing::GenOptions{kKeys, 0, 4, 20, 0, 0, 0});
    planner::Planner planner(po.ranges);
    planner::PlannedSlice s;
    planner.PlanSlice(b, p, txns, &s);
    return planner::EncodeSlice(s);
  }
  // Bounded wait for the feed to stop with an error (a failure, not a hang).
  Status WaitError() {
    const int64_t deadline = NowNanos() + 10'000'000'000;
    while (feed->health().ok() && NowNanos() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return feed->health();
  }

  storage::Table table{kLayout, kKeys};
  PipelineOptions po;
  std::unique_ptr<replication::Replicator> leader, follower;
  std::unique_ptr<Pipeline> pipeline;
  std::unique_ptr<FollowerFeed> feed;
};

}  // namespace

TEST_CASE("follower feed: replays replicated slices in order and ends at the end marker") {
  Rig rig("feed-ok");
  storage::Table expect(kLayout, kKeys);
  testing::LoadTable(&expect, kKeys, 0);
  for (uint64_t b = 0; b < 5; ++b) {
    for (uint32_t p = 0; p < 2; ++p) {
      rig.Replicate(b, p, rig.Slice(b, p, b * 2 + p + 1));
      for (const auto& t : testing::RandomTxns(b * 2 + p + 1, 20, testing::GenOptions{kKeys, 0, 4, 20, 0, 0, 0})) {
        testing::SerialApply(&expect, t);
      }
    }
  }
  for (uint32_t p = 0; p < 2; ++p) rig.Replicate(5, p, cluster::EncodeEndMarker(5));
  REQUIRE(rig.pipeline->WaitIdle(10000).ok());
  uint64_t end = 0;
  CHECK(rig.feed->ended(&end));
  CHECK(end == 5);
  CHECK(rig.feed->health().ok());
  CHECK(rig.table.Digest() == expect.Digest());
  CHECK(rig.pipeline->Stats().last_digest == expect.Digest());
}

TEST_CASE("follower feed: a corrupted slice stops the apply with an error naming batch and planner") {
  Rig rig("feed-corrupt");
  rig.Replicate(0, 0, rig.Slice(0, 0, 1));
  rig.Replicate(0, 1, rig.Slice(0, 1, 2));
  const int64_t deadline = NowNanos() + 10'000'000'000;
  while (rig.pipeline->committed_batches() < 1 && NowNanos() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(rig.pipeline->committed_batches() == 1);
  std::string bad = rig.Slice(1, 0, 3);
  bad[bad.size() / 2] ^= 0x5a;
  bad.resize(bad.size() - 3);
  rig.Replicate(1, 0, bad);
  Status st = rig.WaitError();
  CHECK(st.code() == StatusCode::kCorruption);
  CHECK(st.message().find("batch 1, planner 0") != std::string::npos);
  CHECK(rig.pipeline->health().code() == StatusCode::kCorruption);
  CHECK(rig.pipeline->committed_batches() == 1);  // batch 0 was applied, nothing after
}

TEST_CASE("follower feed: a well-formed slice of another batch, planner or executor count is refused") {
  {
    Rig rig("feed-misplaced");
    rig.Replicate(0, 0, rig.Slice(0, 1, 1));  // planner 1's slice in planner 0's stream
    Status st = rig.WaitError();
    CHECK(st.message().find("batch 0, planner 0") != std::string::npos);
    CHECK(st.message().find("carries batch 0, planner 1") != std::string::npos);
  }
  {
    Rig rig("feed-ranges");
    planner::Planner three(storage::KeyMapper(storage::KeyMapper::Kind::kHash, 3, 0));
    planner::PlannedSlice s;
    three.PlanSlice(0, 0, testing::RandomTxns(1, 5, testing::GenOptions{}), &s);
    rig.Replicate(0, 0, planner::EncodeSlice(s));
    Status st = rig.WaitError();
    CHECK(st.message().find("3 EQs for 2 executor ranges") != std::string::npos);
  }
}
