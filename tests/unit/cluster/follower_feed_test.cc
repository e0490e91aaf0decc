// The follower's front-end (cluster/follow/follower_feed.h) over the in-process `none` hub: slices a
// leader replicated are replayed to the leader's state; a corrupted or misplaced slice stops the
// apply with an error naming batch and planner, without hanging; the end marker ends the input.
#include <catch2/catch.hpp>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "cluster/follow/follower_feed.h"
#include "common/clock.h"
#include "engine/pipeline.h"
#include "planner/eq.h"
#include "planner/input_slice.h"
#include "planner/write_slice.h"
#include "planner/planner.h"
#include "replication/none/none_replicator.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using cluster::FollowerFeed;
using cluster::FollowerFeedOptions;
using engine::Pipeline;
using engine::PipelineOptions;

namespace {

const storage::RecordLayout kLayout{2, 8};
constexpr uint64_t kKeys = 100;

struct Rig {
  explicit Rig(const std::string& hub, uint32_t planners = 2, bool continue_after_end = false, bool plan_input = false,
               bool apply_writes = false)
      : input(plan_input) {
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
    pipeline = std::make_unique<Pipeline>(po, &table, [this](const std::vector<commit::TxnOutcome>& o) {
      std::lock_guard<std::mutex> lk(mu);
      for (const auto& x : o) outcome_batches.insert(x.pos.batch);
    });
    REQUIRE(pipeline->Start().ok());
    FollowerFeedOptions fopt;
    fopt.planners = planners;
    fopt.ranges = po.ranges;
    fopt.continue_after_end = continue_after_end;
    fopt.plan_input = plan_input;
    fopt.apply_writes = apply_writes;
    fopt.record_bytes = kLayout.size();
    fopt.executors = po.executors;
    feed = std::make_unique<FollowerFeed>(
        fopt, pipeline.get(), follower.get(),
        [this](uint64_t end) {
          std::lock_guard<std::mutex> lk(mu);
          ends.push_back(end);
        },
        [this] {
          std::lock_guard<std::mutex> lk(mu);
          ++resumes;
        });
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
  // What the leader replicates for slice (b, p): the planned slice, or with plan_input its input.
  std::string Slice(uint64_t b, uint32_t p, uint64_t seed) {
    auto txns = testing::RandomTxns(seed, 20, testing::GenOptions{kKeys, 0, 4, 20, 0, 0, 0});
    if (input) return planner::EncodeInputSlice(b, p, txns);
    planner::Planner planner(po.ranges);
    planner::PlannedSlice s;
    planner.PlanSlice(b, p, txns, &s);
    return planner::EncodeSlice(s);
  }
  // Batch b of both streams (seeds 2b+1, 2b+2), applied to `expect` by the serial reference too.
  void ReplicateBatch(uint64_t b, storage::Table* expect) {
    for (uint32_t p = 0; p < 2; ++p) {
      Replicate(b, p, Slice(b, p, b * 2 + p + 1));
      for (const auto& t : testing::RandomTxns(b * 2 + p + 1, 20, testing::GenOptions{kKeys, 0, 4, 20, 0, 0, 0})) {
        testing::SerialApply(expect, t);
      }
    }
  }
  // Bounded wait for the feed to stop with an error (a failure, not a hang).
  Status WaitError() {
    const int64_t deadline = NowNanos() + 10'000'000'000;
    while (feed->health().ok() && NowNanos() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return feed->health();
  }

  const bool input;
  storage::Table table{kLayout, kKeys};
  std::mutex mu;
  std::set<uint64_t> outcome_batches;  // guarded by mu: batches whose outcomes the sink got
  std::vector<uint64_t> ends;          // guarded by mu: on_end calls
  int resumes = 0;                     // guarded by mu: on_resume calls
  PipelineOptions po;
  std::unique_ptr<replication::Replicator> leader, follower;
  std::unique_ptr<Pipeline> pipeline;
  std::unique_ptr<FollowerFeed> feed;
};

}  // namespace

TEST_CASE("follower feed: replays replicated slices (or plans replicated inputs) in order and ends at the end "
          "marker") {
  for (bool input : {false, true}) {
    INFO("plan_input " << input);
    Rig rig(input ? "feed-ok-input" : "feed-ok", 2, false, input);
    storage::Table expect(kLayout, kKeys);
    testing::LoadTable(&expect, kKeys, 0);
    for (uint64_t b = 0; b < 5; ++b) rig.ReplicateBatch(b, &expect);
    for (uint32_t p = 0; p < 2; ++p) rig.Replicate(5, p, cluster::EncodeEndMarker(5));
    REQUIRE(rig.pipeline->WaitIdle(10000).ok());
    uint64_t end = 0;
    CHECK(rig.feed->ended(&end));
    CHECK(end == 5);
    CHECK(rig.feed->health().ok());
    CHECK(rig.table.Digest() == expect.Digest());
    CHECK(rig.pipeline->Stats().last_digest == expect.Digest());
  }
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

TEST_CASE("follower feed, plan_input and apply_writes: a damaged or misplaced entry stops the apply naming it") {
  {
    Rig rig("feed-input-corrupt", 2, false, true);
    rig.Replicate(0, 0, rig.Slice(0, 0, 1));
    rig.Replicate(0, 1, rig.Slice(0, 1, 2));
    std::string bad = rig.Slice(1, 0, 3);
    bad.resize(bad.size() - 3);
    rig.Replicate(1, 0, bad);
    Status st = rig.WaitError();
    CHECK(st.code() == StatusCode::kCorruption);
    CHECK(st.message().find("bad input (batch 1, planner 0)") != std::string::npos);
    CHECK(rig.pipeline->committed_batches() <= 1);
  }
  {
    Rig rig("feed-input-misplaced", 2, false, true);
    rig.Replicate(0, 0, rig.Slice(0, 1, 1));  // planner 1's input in planner 0's stream
    Status st = rig.WaitError();
    CHECK(st.message().find("batch 0, planner 0") != std::string::npos);
    CHECK(st.message().find("input of batch 0, planner 1") != std::string::npos);
  }
  {
    Rig rig("feed-input-a-slice", 2, false, true);  // a planned slice where an input belongs
    planner::Planner planner(rig.po.ranges);
    planner::PlannedSlice s;
    planner.PlanSlice(0, 0, testing::RandomTxns(1, 5, testing::GenOptions{}), &s);
    rig.Replicate(0, 0, planner::EncodeSlice(s));
    CHECK(rig.WaitError().message().find("bad magic") != std::string::npos);
  }
  {
    // replication.point = writes: an entry the leader's execution left, then a damaged one.
    Rig rig("feed-writes", 2, false, false, /*apply_writes=*/true);
    planner::PlannedSlice s;
    s.Reset(0, 0, 2);
    s.txns.resize(1);
    s.txns[0].txn_id = 5;
    std::vector<std::vector<storage::Key>> keys(2);
    std::vector<std::string> images(2);
    keys[rig.po.ranges.Of(3)].push_back(3);
    images[rig.po.ranges.Of(3)] = std::string(kLayout.size(), '\x7');
    rig.Replicate(0, 0, planner::EncodeWriteSlice(s, {0}, &keys, &images, kLayout.size()));
    s.Reset(0, 1, 2);
    rig.Replicate(0, 1, planner::EncodeWriteSlice(s, {}, nullptr, nullptr, kLayout.size()));
    const int64_t deadline = NowNanos() + 10'000'000'000;
    while (rig.pipeline->committed_batches() < 1 && NowNanos() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(rig.pipeline->committed_batches() == 1);
    CHECK(std::string(rig.table.Find(3), kLayout.size()) == images[rig.po.ranges.Of(3)]);
    s.Reset(1, 0, 2);
    std::string bad = planner::EncodeWriteSlice(s, {}, &keys, &images, kLayout.size());
    bad.resize(bad.size() - 1);
    rig.Replicate(1, 0, bad);
    Status st = rig.WaitError();
    CHECK(st.message().find("bad writes (batch 1, planner 0)") != std::string::npos);
  }
}

TEST_CASE("follower feed: DrainTo applies every batch below the streams' ends and no more, a promoted node pads and "
          "delivers outcomes from there on") {
  Rig rig("feed-drain");
  rig.pipeline->DeliverOutcomesFrom(UINT64_MAX);  // a follower: its outcomes go nowhere
  storage::Table expect(kLayout, kKeys);
  testing::LoadTable(&expect, kKeys, 0);
  // The old leader's streams: planner 0 reached batch 3, planner 1 only batch 2 (it died
  // between its planners' slices of batch 3).
  for (uint64_t b = 0; b < 4; ++b) {
    for (uint32_t p = 0; p < 2; ++p) {
      if (b == 3 && p == 1) continue;
      rig.Replicate(b, p, rig.Slice(b, p, b * 2 + p + 1));
      for (const auto& t : testing::RandomTxns(b * 2 + p + 1, 20, testing::GenOptions{kKeys, 0, 4, 20, 0, 0, 0})) {
        testing::SerialApply(&expect, t);
      }
    }
  }
  // A stream short of what DrainTo asks for: a bounded wait that names it.
  Status st = rig.feed->DrainTo({6, 3}, 200);
  REQUIRE(st.code() == StatusCode::kTimeout);
  CHECK(st.message().find("stream 0 at batch 4 of 6") != std::string::npos);
  // The streams' real ends: everything below them is applied, then the replay threads end.
  REQUIRE(rig.feed->DrainTo({4, 3}, 10000).ok());
  rig.feed->Stop();
  rig.follower->CancelReceives(0);  // the window it had posted beyond the ends
  CHECK(rig.feed->received_batches() == 3);
  // A later batch of the stream (the new leader's own) never reaches this feed.
  rig.Replicate(3, 1, rig.Slice(3, 1, 99));
  // The promoted node pads (3, 1) with an empty slice and plans batch 4 itself.
  rig.pipeline->DeliverOutcomesFrom(4);
  planner::PlannedSlice* pad = rig.pipeline->BeginSlice(3, 1);
  REQUIRE(pad != nullptr);
  pad->Reset(3, 1, 2);
  rig.pipeline->PublishSlice(3, 1, 0, /*replicated=*/true);
  auto own = testing::RandomTxns(77, 20, testing::GenOptions{kKeys, 0, 4, 20, 0, 0, 0});
  for (uint32_t p = 0; p < 2; ++p) {
    planner::PlannedSlice* s = rig.pipeline->BeginSlice(4, p);
    REQUIRE(s != nullptr);
    planner::Planner planner(rig.po.ranges);
    planner.PlanSlice(4, p, p == 0 ? own : std::vector<storage::Txn>{}, s);
    rig.pipeline->PublishSlice(4, p, 0, /*replicated=*/true);
  }
  for (const auto& t : own) testing::SerialApply(&expect, t);
  rig.pipeline->EndInput(5);
  REQUIRE(rig.pipeline->WaitIdle(10000).ok());
  CHECK(rig.table.Digest() == expect.Digest());
  std::lock_guard<std::mutex> lk(rig.mu);
  CHECK(rig.outcome_batches == std::set<uint64_t>{4});  // none of the replayed batches' outcomes
}

TEST_CASE("follower feed, continue_after_end: an end marker is an empty batch, the group goes on after it under a "
          "new leader, and the next marker ends it again") {
  Rig rig("feed-continue", 2, /*continue_after_end=*/true);
  storage::Table expect(kLayout, kKeys);
  testing::LoadTable(&expect, kKeys, 0);
  for (uint64_t b = 0; b < 3; ++b) rig.ReplicateBatch(b, &expect);
  // The old leader stopped cleanly: markers at batch 3. Only one stream's so far: not ended.
  rig.Replicate(3, 0, cluster::EncodeEndMarker(3));
  uint64_t end = 0;
  CHECK_FALSE(rig.feed->WaitEnded(100, &end));
  rig.Replicate(3, 1, cluster::EncodeEndMarker(3));
  REQUIRE(rig.feed->WaitEnded(10000, &end));
  CHECK(end == 3);
  // The marker is batch 3 (empty) and the input goes on: a promotion's drain to the streams'
  // ends (4: the marker counts) completes, and batch 3 commits.
  REQUIRE(rig.feed->DrainTo({4, 4}, 10000).ok());
  const int64_t deadline = NowNanos() + 10'000'000'000;
  while (rig.pipeline->committed_batches() < 4 && NowNanos() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CHECK(rig.pipeline->committed_batches() == 4);
  CHECK(rig.table.Digest() == expect.Digest());
  // on_end runs on the replay thread after the state WaitEnded and DrainTo look at: wait for it.
  while (NowNanos() < deadline) {
    {
      std::lock_guard<std::mutex> lk(rig.mu);
      if (!rig.ends.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  {
    std::lock_guard<std::mutex> lk(rig.mu);
    CHECK(rig.ends == std::vector<uint64_t>{3});
    CHECK(rig.resumes == 0);
  }
}

TEST_CASE("follower feed, continue_after_end: batches after a marker resume the feed (ended no more), a later marker "
          "ends it where the node's stop ends its input") {
  Rig rig("feed-resume", 2, /*continue_after_end=*/true);
  storage::Table expect(kLayout, kKeys);
  testing::LoadTable(&expect, kKeys, 0);
  rig.ReplicateBatch(0, &expect);
  for (uint32_t p = 0; p < 2; ++p) rig.Replicate(1, p, cluster::EncodeEndMarker(1));
  uint64_t end = 0;
  REQUIRE(rig.feed->WaitEnded(10000, &end));
  CHECK(end == 1);
  // A new leader's batches 2 and 3, then its own clean stop at 4.
  rig.ReplicateBatch(2, &expect);
  rig.ReplicateBatch(3, &expect);
  for (uint32_t p = 0; p < 2; ++p) rig.Replicate(4, p, cluster::EncodeEndMarker(4));
  // Until the feed applied batch 2 it still says it ended at 1: wait for the marker of 4.
  const int64_t deadline = NowNanos() + 10'000'000'000;
  while (!(rig.feed->WaitEnded(100, &end) && end == 4) && NowNanos() < deadline) {
  }
  CHECK(end == 4);
  // The node's stop: the input ends after the marker's batch.
  rig.feed->Stop();
  rig.pipeline->EndInput(end + 1);
  REQUIRE(rig.pipeline->WaitIdle(10000).ok());
  CHECK(rig.pipeline->committed_batches() == 5);
  CHECK(rig.table.Digest() == expect.Digest());
  CHECK(rig.feed->health().ok());
  const int64_t ends_deadline = NowNanos() + 10'000'000'000;  // on_end runs after WaitEnded sees the end
  while (NowNanos() < ends_deadline) {
    {
      std::lock_guard<std::mutex> lk(rig.mu);
      if (rig.ends.size() >= 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::lock_guard<std::mutex> lk(rig.mu);
  CHECK(rig.ends == std::vector<uint64_t>{1, 4});
  CHECK(rig.resumes == 1);
}
