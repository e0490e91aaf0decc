// ExecutorStage (executor/executor_stage.h) on its own: the test is the front-end and the commit
// stage around a BatchRing (executor/batch_ring.h), claiming slots, publishing slices and freeing
// a slot once its batch is executed. The executor threads must reach the serial state batch by
// batch (aborts undone, dependency values across ranges), mark each batch executed in order, and
// hand over digest deltas that add up to the table's digest.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "executor/batch_ring.h"
#include "executor/executor_stage.h"
#include "planner/planner.h"
#include "storage/key_map.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using executor::Fate;
using storage::KeyMapper;
using storage::Txn;

namespace {

// Halts the ring when the test leaves its scope, also through a failed REQUIRE: the stage's
// destructor joins its threads, which leave only once the ring is halted (a failure, not a hang).
struct HaltOnExit {
  executor::BatchRing& ring;
  ~HaltOnExit() {
    std::lock_guard<std::mutex> lk(ring.mu);
    ring.stop = true;
    ring.NotifyAllLocked();
  }
};

// Wants an image after every odd batch (the even ones: none, so both decisions occur) and keeps
// each image's digest and record count. Called with the ring's mu held.
struct DigestSink : executor::ImageSink {
  explicit DigestSink(const storage::Table& t) { image.Prepare(t); }
  storage::TableImage* Want(uint64_t b) override {
    asked.push_back(b);
    return b % 2 == 1 ? &image : nullptr;
  }
  void Taken(uint64_t b) override { taken.push_back({b, image.Digest(), image.records()}); }
  struct Taken_ {
    uint64_t batch, digest, records;
  };
  storage::TableImage image;
  std::vector<uint64_t> asked;
  std::vector<Taken_> taken;
};
}  // namespace

TEST_CASE("executor stage: batches handed through the ring reach the serial state, digest deltas add up", "[stage]") {
  const storage::RecordLayout layout{4, 8};
  constexpr uint64_t kKeys = 150;
  constexpr uint32_t kPlanners = 2, kExecutors = 3;
  constexpr uint64_t kFirst = 5, kEnd = 12;
  const KeyMapper ranges(KeyMapper::Kind::kHash, kExecutors, 0);
  storage::Table table(layout, kKeys);
  testing::LoadTable(&table, kKeys, 1000);
  storage::Table expect(layout, kKeys);
  testing::LoadTable(&expect, kKeys, 1000);
  uint64_t digest = table.Digest();
  // With images: the executors stop at every odd batch's end and copy the table (checkpoints).
  const bool images = GENERATE(false, true);
  CAPTURE(images);
  DigestSink sink(table);
  std::map<uint64_t, uint64_t> serial_digest;  // batch -> the serial table's digest after it

  executor::BatchRing ring(/*batches_in_flight=*/2, kPlanners, kExecutors, kFirst);
  executor::ExecutorStageOptions opt;
  opt.track_digest = true;
  opt.capture_reads = true;
  if (images) opt.image_sink = &sink;
  executor::ExecutorStage stage(opt, &ring, &table);
  stage.Start();
  HaltOnExit halt_on_exit{ring};  // after `stage`: runs first

  planner::Planner planner(ranges);
  testing::GenOptions g;
  g.keys = kKeys;
  g.abort_per_100 = 5;
  g.debit_per_100 = 10;
  uint64_t aborted = 0;
  for (uint64_t b = kFirst; b < kEnd; ++b) {
    std::vector<std::vector<Txn>> parts(kPlanners);
    for (uint32_t p = 0; p < kPlanners; ++p) parts[p] = testing::RandomTxns(100 + b * kPlanners + p, 40, g);
    executor::BatchSlot& slot = ring.Slot(b);
    {
      std::lock_guard<std::mutex> lk(ring.mu);
      REQUIRE(ring.committed + ring.size() > b);  // this test frees each slot before the next batch
      slot.Claim(b);
      for (auto& ss : slot.slices) ss->begun = true;
    }
    // The later slice first: executors still run slice 0 before slice 1.
    for (uint32_t p = kPlanners; p-- > 0;) {
      executor::SliceState& ss = *slot.slices[p];
      planner.PlanSlice(b, p, parts[p], &ss.plan);
      stage.PrepareSlice(ss);
      {
        std::lock_guard<std::mutex> lk(ring.mu);
        ss.published = true;
        ss.replicated = true;
        ++slot.replicated_slices;
      }
      ring.published_cv.notify_all();
    }
    {
      std::unique_lock<std::mutex> lk(ring.mu);
      const bool executed = ring.executed_cv.wait_for(lk, std::chrono::seconds(30), [&] { return slot.executed; });
      REQUIRE(executed);  // bounded: a failure, not a hang
      REQUIRE(slot.exec_done == kExecutors);
      for (uint64_t d : slot.digest_deltas) digest += d;
      digest += slot.resolver_delta;
      ring.committed = b + 1;  // the commit stage's part: the slot is free for batch b + 2
    }
    ring.admit_cv.notify_all();
    // The executors are on batch b + 1's slot now (waiting for it): slot b's fates are final.
    for (uint32_t p = 0; p < kPlanners; ++p) {
      for (uint32_t i = 0; i < parts[p].size(); ++i) {
        const bool committed = testing::SerialApply(&expect, parts[p][i]);
        aborted += committed ? 0 : 1;
        INFO("batch " << b << " slice " << p << " txn " << i);
        CHECK(slot.fates.Of(p, i) == (committed ? Fate::kCommit : Fate::kLogic));
      }
    }
    serial_digest[b] = expect.Digest();
  }
  CHECK(aborted > 0);  // the resolver had work to do

  // Halt, as Pipeline::Stop does: the executors wait for batch kEnd and leave.
  {
    std::lock_guard<std::mutex> lk(ring.mu);
    ring.stop = true;
    stage.ReleaseRowWaitsLocked();
    ring.NotifyAllLocked();
  }
  stage.Join();
  for (uint64_t k = 0; k < kKeys; ++k) {
    INFO("key " << k);
    CHECK(std::memcmp(table.Find(k), expect.Find(k), layout.size()) == 0);
  }
  CHECK(digest == table.Digest());
  CHECK(digest == expect.Digest());
  if (images) {
    // Every boundary was asked once, in order (the last batch's too: the executors reach it
    // before they find batch kEnd will not come); each odd batch's image is the serial state
    // after that batch, whatever the executors did after it.
    std::vector<uint64_t> want;
    for (uint64_t b = kFirst; b < kEnd; ++b) want.push_back(b);
    CHECK(sink.asked == want);
    std::vector<uint64_t> taken;
    for (const auto& t : sink.taken) {
      INFO("image of batch " << t.batch);
      taken.push_back(t.batch);
      CHECK(t.digest == serial_digest.at(t.batch));
      CHECK(t.records == kKeys);
    }
    // Batch 11's image races the halt (executors at its barrier leave when halted): either.
    if (taken.size() == 4) CHECK(taken.back() == 11);
    if (taken.size() == 4) taken.pop_back();
    CHECK(taken == std::vector<uint64_t>{5, 7, 9});
  }
}
