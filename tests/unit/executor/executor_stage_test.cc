// ExecutorStage (executor/executor_stage.h) on its own: the test is the front-end and the commit
// stage around a BatchRing (executor/batch_ring.h), claiming slots, publishing slices and freeing
// a slot once its batch is executed. The executor threads must reach the serial state batch by
// batch (aborts undone, dependency values across ranges), mark each batch executed in order, and
// hand over digest deltas that add up to the table's digest.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/rng.h"
#include "common/mutex.h"
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
    MutexLock lk(ring.mu);
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

// Copy-on-write: wants an image after every odd batch while its writer is idle. The image of
// batch b is completed by its own thread (as the checkpoint writer does) only once the test says
// batch b + 1 is executed (BatchExecuted), so the executors ran a whole batch over an armed table:
// what they wrote first was preserved by them, the rest copied by the writer beside them.
struct CowSink : executor::ImageSink {
  explicit CowSink(storage::Table& t) : table(t) {
    image.Prepare(t);
    writer = std::thread([this] { Loop(); });
  }
  ~CowSink() override {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv.notify_all();
    writer.join();
  }
  bool CopyOnWrite() const override { return true; }
  storage::TableImage* Want(uint64_t b) override {
    std::lock_guard<std::mutex> lk(mu);
    if (b % 2 == 0 || busy) return nullptr;
    busy = true;
    return &image;
  }
  void Taken(uint64_t b) override {
    {
      std::lock_guard<std::mutex> lk(mu);
      armed_batch = b;
      armed = true;
    }
    cv.notify_all();
  }
  void BatchExecuted(uint64_t b) {
    {
      std::lock_guard<std::mutex> lk(mu);
      executed = b + 1;
    }
    cv.notify_all();
  }
  void Loop() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stop || (armed && executed > armed_batch + 1); });
      if (!armed) return;  // stopping (an armed image is completed first)
      const uint64_t b = armed_batch;
      lk.unlock();
      image.CompleteCopy(table);
      const DigestSink::Taken_ t{b, image.Digest(), image.records()};
      const uint64_t by_executors = image.preserved();
      lk.lock();
      taken.push_back(t);
      preserved.push_back(by_executors);
      armed = busy = false;
      cv.notify_all();  // WaitWriter
    }
  }
  // Waits until the writer completed every image it can complete now: none is armed, or the armed
  // one waits for a batch that was not executed. False after 30 s.
  bool WaitWriter() {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(30), [&] { return !(armed && executed > armed_batch + 1); });
  }
  storage::Table& table;
  storage::TableImage image;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false, busy = false, armed = false;
  uint64_t armed_batch = 0, executed = 0;
  std::vector<DigestSink::Taken_> taken;
  std::vector<uint64_t> preserved;
  std::thread writer;
};
// Plays the front-end and the commit stage for batch b: claims its slot (the test frees each
// slot before the next batch), plans and publishes parts[p] as slice p (slice 1 before 0 with
// `later_first`), waits until the batch is executed and frees the slot for batch b + 2. The slot
// (fates, read values, digest deltas) stays as it is until then.
executor::BatchSlot& RunBatch(executor::BatchRing& ring, executor::ExecutorStage& stage, const planner::Planner& planner,
                              uint64_t b, const std::vector<std::vector<Txn>>& parts, bool later_first) {
  executor::BatchSlot& slot = ring.Slot(b);
  {
    MutexLock lk(ring.mu);
    REQUIRE(ring.committed + ring.size() > b);
    slot.Claim(b);
    for (auto& ss : slot.slices) ss->begun = true;
  }
  const uint32_t n = static_cast<uint32_t>(parts.size());
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t p = later_first ? n - 1 - k : k;
    executor::SliceState& ss = *slot.slices[p];
    planner.PlanSlice(b, p, parts[p], &ss.plan);
    stage.PrepareSlice(ss);
    {
      MutexLock lk(ring.mu);
      ss.published = true;
      ss.replicated = true;
      ++slot.replicated_slices;
    }
    ring.published_cv.notify_all();
  }
  {
    MutexUniqueLock lk(ring.mu);
    const bool executed = ring.executed_cv.wait_for(lk.native(), std::chrono::seconds(30), [&]() REQUIRES(ring.mu) {
      return slot.executed;
    });
    REQUIRE(executed);  // bounded: a failure, not a hang
    ring.committed = b + 1;  // the commit stage's part: the slot is free for batch b + 2
  }
  ring.admit_cv.notify_all();
  return slot;
}

}  // namespace

TEST_CASE("executor stage: batches handed through the ring reach the serial state, digest deltas add up", "[stage]") {
  const storage::RecordLayout layout{4, 8};
  constexpr uint64_t kKeys = 150;
  constexpr uint32_t kPlanners = 2, kExecutors = 3;
  constexpr uint64_t kFirst = 5, kEnd = 12;
  const KeyMapper ranges(KeyMapper::Kind::kHash, kExecutors, 0);
  // With images: the executors stop at every odd batch's end and copy the table (checkpoints);
  // copy-on-write: nobody stops, a writer thread completes each image beside them; with a sparse
  // record in the table, copy-on-write stops them at the boundary to copy it.
  const int mode = GENERATE(0, 1, 2, 3);  // no images, paused copies, copy-on-write, with a sparse record
  const bool images = mode == 1;
  CAPTURE(mode);
  // (capacity kKeys + 1: dense key kKeys stays absent, txns draw keys below kKeys)
  storage::Table table(layout, kKeys + 1);
  testing::LoadTable(&table, kKeys, 1000);
  storage::Table expect(layout, kKeys + 1);
  testing::LoadTable(&expect, kKeys, 1000);
  uint64_t records = kKeys;
  if (mode == 3) {
    std::string rec(layout.size(), '\0');
    storage::InitRecord(rec.data(), layout, 1ull << 40, 7);
    REQUIRE(table.Insert(1ull << 40, rec.data()).ok());
    REQUIRE(expect.Insert(1ull << 40, rec.data()).ok());
    REQUIRE(table.sparse_size() == 1);
    ++records;
  }
  uint64_t digest = table.Digest();
  DigestSink sink(table);
  CowSink cow(table);
  std::map<uint64_t, uint64_t> serial_digest;  // batch -> the serial table's digest after it

  executor::BatchRing ring(/*batches_in_flight=*/2, kPlanners, kExecutors, kFirst);
  executor::ExecutorStageOptions opt;
  opt.track_digest = true;
  opt.capture_reads = true;
  if (images) opt.image_sink = &sink;
  if (mode >= 2) opt.image_sink = &cow;
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
    // The later slice first: executors still run slice 0 before slice 1.
    executor::BatchSlot& slot = RunBatch(ring, stage, planner, b, parts, /*later_first=*/true);
    REQUIRE(slot.exec_done == kExecutors);
    for (uint64_t d : slot.digest_deltas) digest += d;
    digest += slot.resolver_delta;
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
    cow.BatchExecuted(b);
  }
  CHECK(aborted > 0);  // the resolver had work to do

  // Halt, as Pipeline::Stop does: the executors wait for batch kEnd and leave.
  {
    MutexLock lk(ring.mu);
    MutexAlias held(ring.mu, stage.ring_mu());
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
  if (mode >= 2) {
    // The writer completes an image on its own thread: on a busy host it may not have run yet.
    REQUIRE(cow.WaitWriter());
    std::lock_guard<std::mutex> lk(cow.mu);
    // Every image completed is the serial state after its batch, though the executors ran the
    // next batch over the armed table before the writer copied what they had not preserved.
    // Which odd batches got one depends on when the writer was idle; batch 5's always did.
    REQUIRE(!cow.taken.empty());
    CHECK(cow.taken.front().batch == 5);
    CHECK(cow.preserved.front() > 0);  // batch 6 wrote records the image had not copied yet
    for (size_t i = 0; i < cow.taken.size(); ++i) {
      const auto& t = cow.taken[i];
      INFO("copy-on-write image of batch " << t.batch);
      CHECK(t.batch % 2 == 1);
      CHECK(t.digest == serial_digest.at(t.batch));
      CHECK(t.records == records);
    }
  }
}

TEST_CASE("executor stage: a history read returns each key's value just before the txn it names", "[stage][history]") {
  // The read values of retried txns (docs/sessions.md): every range records its writes in a
  // write history; a history read R naming an earlier txn T's position reads, for every key T
  // touches, the value the serial order had just before T, wherever R runs (a later batch, or
  // later in T's own batch), also when the abort resolver re-executed T, R or the txns between.
  const storage::RecordLayout layout{4, 8};
  constexpr uint64_t kKeys = 60;  // few keys: most are written again between T and R
  constexpr uint32_t kPlanners = 2, kExecutors = 3;
  constexpr uint64_t kFirst = 3, kEnd = 12;
  const KeyMapper ranges(KeyMapper::Kind::kHash, kExecutors, 0);
  storage::Table table(layout, kKeys);
  testing::LoadTable(&table, kKeys, 1000);
  storage::Table expect(layout, kKeys);
  testing::LoadTable(&expect, kKeys, 1000);

  executor::BatchRing ring(/*batches_in_flight=*/2, kPlanners, kExecutors, kFirst);
  executor::ExecutorStageOptions opt;
  opt.capture_reads = true;
  opt.history_bytes = 1 << 20;  // holds every write of the run
  executor::ExecutorStage stage(opt, &ring, &table);
  stage.Start();
  HaltOnExit halt_on_exit{ring};
  REQUIRE(stage.HistoryCovers(kFirst));
  REQUIRE_FALSE(stage.HistoryCovers(kFirst - 1));  // before the ring's first batch: never seen

  planner::Planner planner(ranges);
  testing::GenOptions g;
  g.keys = kKeys;
  g.abort_per_100 = 5;
  g.debit_per_100 = 10;
  struct Before {
    uint64_t batch;
    uint32_t planner, index;
    std::vector<storage::Key> keys;  // every key the txn touches, first-touch order
    std::string values;              // their records just before it, serially
  };
  std::vector<Before> befores;  // every txn run so far
  auto keys_of = [](const Txn& t) {
    std::vector<storage::Key> keys;
    auto add = [&](storage::Key k) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    };
    for (const storage::Op& op : t.ops) {
      if (op.kind == storage::OpKind::kDepWrite) add(op.src_key);
      add(op.key);
    }
    return keys;
  };
  qrstore::Rng rng(77);
  uint64_t checked = 0, reexecuted_batches = 0;
  for (uint64_t b = kFirst; b < kEnd; ++b) {
    std::vector<std::vector<Txn>> parts(kPlanners);
    for (uint32_t p = 0; p < kPlanners; ++p) parts[p] = testing::RandomTxns(500 + b * kPlanners + p, 40, g);
    // History reads: some at the end of slice 1 naming txns of slice 0 of this batch, some
    // naming txns of earlier batches (at random places in slice 0).
    std::vector<std::pair<uint32_t, size_t>> reads;  // (slice, index) of a history read
    std::vector<size_t> names;                       // the befores index it names (same-batch: filled below)
    auto history_read = [&](const Before& t, uint64_t id) {
      Txn r;
      r.id = id;
      r.history = true;
      r.history_batch = t.batch;
      r.history_planner = t.planner;
      r.history_index = t.index;
      for (storage::Key k : t.keys) r.ops.push_back(storage::Op{storage::OpKind::kRead, k, 0, 0});
      return r;
    };
    for (int i = 0; i < 8 && !befores.empty(); ++i) {
      const size_t n = befores.size() - 1 - rng.Next() % std::min<size_t>(befores.size(), 120);
      const size_t at = rng.Next() % (parts[0].size() + 1);
      parts[0].insert(parts[0].begin() + static_cast<ptrdiff_t>(at), history_read(befores[n], 900000 + i));
    }
    // Positions are known now that slice 0 is complete; the earlier-batch reads are found by
    // their history flag.
    for (size_t i = 0; i < parts[0].size(); ++i) {
      if (!parts[0][i].history) continue;
      for (size_t n = 0; n < befores.size(); ++n) {
        if (befores[n].batch == parts[0][i].history_batch && befores[n].planner == parts[0][i].history_planner &&
            befores[n].index == parts[0][i].history_index) {
          reads.emplace_back(0, i);
          names.push_back(n);
        }
      }
    }
    // Serially: the records before every txn of the batch, then the txn.
    const size_t first_new = befores.size();
    for (uint32_t p = 0; p < kPlanners; ++p) {
      if (p == 1) {
        // Same-batch reads, at the end of slice 1, naming txns of slice 0 (recorded just now).
        for (int i = 0; i < 6; ++i) {
          const size_t n = first_new + rng.Next() % (befores.size() - first_new);
          if (befores[n].keys.empty()) continue;
          parts[1].push_back(history_read(befores[n], 910000 + i));
          reads.emplace_back(1, parts[1].size() - 1);
          names.push_back(n);
        }
      }
      for (uint32_t i = 0; i < parts[p].size(); ++i) {
        const Txn& t = parts[p][i];
        Before before{b, p, i, keys_of(t), {}};
        for (storage::Key k : before.keys) {
          const char* rec = expect.Find(k);
          before.values += rec != nullptr ? std::string(rec, layout.size()) : std::string(layout.size(), '\0');
        }
        (void)testing::SerialApply(&expect, t);
        if (!t.history) befores.push_back(std::move(before));
      }
    }
    executor::BatchSlot& slot = RunBatch(ring, stage, planner, b, parts, /*later_first=*/false);
    reexecuted_batches += slot.fates.reexecuted > 0 ? 1 : 0;
    for (size_t r = 0; r < reads.size(); ++r) {
      const auto [p, i] = reads[r];
      const executor::SliceState& ss = *slot.slices[p];
      const planner::TxnContext& tc = ss.plan.txns[i];
      const Before& want = befores[names[r]];
      INFO("batch " << b << ": the history read at (" << p << ", " << i << ") of (" << want.batch << ", "
                    << want.planner << ", " << want.index << ")");
      REQUIRE(tc.reads == want.keys.size());
      CHECK(ss.read_values.compare(uint64_t{tc.read_begin} * layout.size(), want.values.size(), want.values) == 0);
      ++checked;
    }
  }
  CHECK(checked > 50);
  CHECK(reexecuted_batches > 0);  // the resolver's part ran
  CHECK(stage.HistoryCovers(kFirst));
}
