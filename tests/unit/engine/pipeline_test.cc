// The execution pipeline on its own (engine/pipeline.h): per-batch digests kept incrementally,
// read values, the Invariant-1 gate in speculative and sync mode, failure, and a pipeline fed
// with decoded slices (as a follower is) reaching its leader's state batch by batch.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "common/rng.h"
#include "engine/local_planner.h"
#include "engine/pipeline.h"
#include "planner/eq.h"
#include "planner/input_slice.h"
#include "planner/write_slice.h"
#include "planner/planner.h"
#include "tests/unit/executor/serial_applier.h"
#include "workloads/reference_executor.h"

using namespace qrstore;
using commit::BatchInfo;
using commit::TxnOutcome;
using commit::TxnStatus;
using engine::LocalPlanner;
using engine::LocalPlannerOptions;
using engine::Pipeline;
using engine::PipelineOptions;
using storage::Txn;

namespace {

const storage::RecordLayout kLayout{4, 8};
constexpr uint64_t kKeys = 300;

// What a sink and a batch hook saw (copied: outcome views die with the sink call).
struct Seen {
  struct Txn {
    uint64_t id = 0;
    commit::PlannedPos pos;
    TxnStatus status = TxnStatus::kCommitted;
    std::string values;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Txn> txns;
  std::vector<BatchInfo> batches;

  commit::CommitSink Sink() {
    return [this](const std::vector<TxnOutcome>& v) {
      std::lock_guard<std::mutex> lk(mu);
      for (const TxnOutcome& o : v) txns.push_back(Txn{o.txn_id, o.pos, o.status, std::string(o.values)});
      cv.notify_all();
    };
  }
  commit::BatchHook Hook() {
    return [this](const BatchInfo& b) {
      std::lock_guard<std::mutex> lk(mu);
      batches.push_back(b);
      cv.notify_all();
    };
  }
  size_t Count() {
    std::lock_guard<std::mutex> lk(mu);
    return txns.size();
  }
  // Bounded wait: a failure, not a hang.
  bool WaitTxns(size_t n) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(30), [&] { return txns.size() >= n; });
  }
};

PipelineOptions Options(uint32_t planners, uint32_t executors, uint32_t in_flight) {
  PipelineOptions o;
  o.planners = planners;
  o.executors = executors;
  o.committers = 2;
  o.batches_in_flight = in_flight;
  o.ranges = storage::KeyMapper(storage::KeyMapper::Kind::kHash, executors, 0);
  o.capture_reads = true;
  o.track_digest = true;
  return o;
}

LocalPlannerOptions PlannerOptions(const PipelineOptions& p, uint32_t batch_txns) {
  LocalPlannerOptions o;
  o.batch_txns = batch_txns;
  o.batch_timeout_ns = 1'000'000'000;  // batches close full (or at the end of input)
  o.planners = p.planners;
  o.client_queue_txns = 64;
  o.ranges = p.ranges;
  return o;
}

std::vector<Txn> Workload(uint64_t seed, size_t n) {
  testing::GenOptions g;
  g.keys = kKeys;
  g.max_ops = 8;
  g.abort_per_100 = 5;
  g.debit_per_100 = 10;
  return testing::RandomTxns(seed, n, g);
}

// The reference: the same txns applied serially in planned order; per batch, the digest after it
// and every committed txn's read values.
struct Reference {
  std::map<uint64_t, uint64_t> digest_after;  // batch -> digest
  std::map<uint64_t, std::string> reads;      // txn id -> read values (committed)
  std::map<uint64_t, bool> committed;
};
Reference Replay(const std::vector<Txn>& txns, std::vector<Seen::Txn> seen) {
  std::sort(seen.begin(), seen.end(), [](const Seen::Txn& a, const Seen::Txn& b) { return a.pos < b.pos; });
  std::map<uint64_t, const Txn*> by_id;
  for (const Txn& t : txns) by_id[t.id] = &t;
  workloads::ReferenceExecutor ref(kLayout, kKeys);
  testing::LoadTable(ref.mutable_table(), kKeys, 1000);
  Reference out;
  for (size_t i = 0; i < seen.size(); ++i) {
    std::string reads;
    auto r = ref.Apply(*by_id.at(seen[i].id), true, &reads);
    REQUIRE(r.ok());
    out.committed[seen[i].id] = r.value();
    if (r.value()) out.reads[seen[i].id] = reads;
    if (i + 1 == seen.size() || seen[i + 1].pos.batch != seen[i].pos.batch) {
      out.digest_after[seen[i].pos.batch] = ref.table().Digest();
    }
  }
  return out;
}

// A leader's run: starts its pipeline and planner, submits every txn, ends the input, waits until
// everything committed, stops both; returns the batch the input ended at.
uint64_t RunLeader(Pipeline& leader, LocalPlanner& front, const std::vector<Txn>& txns) {
  REQUIRE(leader.Start().ok());
  REQUIRE(front.Start().ok());
  for (const Txn& t : txns) REQUIRE(front.Submit(t));
  front.CloseInput();
  REQUIRE(leader.WaitIdle().ok());
  const uint64_t end = front.end_batch();
  leader.Stop();
  front.Stop();
  return end;
}

// A follower fed every batch below `end`: ends its input, waits, stops, and checks that it
// committed each batch with the leader's digest.
void FinishFollower(Pipeline& follower, uint64_t end, Seen& follower_seen, Seen& leader_seen) {
  follower.EndInput(end);
  REQUIRE(follower.WaitIdle().ok());
  follower.Stop();
  REQUIRE(follower_seen.batches.size() == end);
  for (uint64_t b = 0; b < end; ++b) CHECK(follower_seen.batches[b].digest == leader_seen.batches[b].digest);
}

}  // namespace

TEST_CASE("pipeline: per-batch digests, read values and fates equal a serial replay of the planned order") {
  for (uint32_t planners : {1u, 2u}) {
    for (uint32_t in_flight : {1u, 3u}) {
      INFO("planners " << planners << " batches_in_flight " << in_flight);
      const std::vector<Txn> txns = Workload(11 + planners * 7 + in_flight, 3000);
      storage::Table table(kLayout, kKeys);
      testing::LoadTable(&table, kKeys, 1000);
      const uint64_t initial = table.Digest();
      Seen seen;
      PipelineOptions po = Options(planners, 3, in_flight);
      Pipeline pipeline(po, &table, seen.Sink(), seen.Hook());
      LocalPlanner front(PlannerOptions(po, 200), &pipeline);
      REQUIRE(pipeline.Start().ok());
      REQUIRE(front.Start().ok());
      for (const Txn& t : txns) REQUIRE(front.Submit(t));
      front.CloseInput();
      REQUIRE(pipeline.WaitIdle().ok());
      pipeline.Stop();
      front.Stop();
      REQUIRE(seen.txns.size() == txns.size());
      const Reference ref = Replay(txns, seen.txns);
      size_t reads_checked = 0, aborted = 0;
      for (const Seen::Txn& t : seen.txns) {
        REQUIRE(ref.committed.at(t.id) == (t.status == TxnStatus::kCommitted));
        if (t.status == TxnStatus::kCommitted) {
          REQUIRE(t.values == ref.reads.at(t.id));
          reads_checked += t.values.size() / kLayout.size();
        } else {
          REQUIRE(t.values.empty());
          ++aborted;
        }
      }
      CHECK(reads_checked > 1000);
      CHECK(aborted > 10);
      REQUIRE(seen.batches.size() == ref.digest_after.size());
      for (size_t i = 0; i < seen.batches.size(); ++i) {
        REQUIRE(seen.batches[i].batch == i);  // hooks in batch order
        REQUIRE(seen.batches[i].digest == ref.digest_after.at(i));
      }
      CHECK(pipeline.Stats().last_digest == table.Digest());
      CHECK(table.Digest() != initial);
    }
  }
}

TEST_CASE("pipeline: a pipeline fed the decoded slices of another reaches the same digest after every batch") {
  // The follower path: the leader's slices encoded, decoded, validated and fed in order.
  const std::vector<Txn> txns = Workload(5, 2000);
  storage::Table leader_table(kLayout, kKeys), follower_table(kLayout, kKeys);
  testing::LoadTable(&leader_table, kKeys, 1000);
  testing::LoadTable(&follower_table, kKeys, 1000);
  PipelineOptions po = Options(2, 2, 3);
  std::mutex mu;
  std::vector<std::pair<std::pair<uint64_t, uint32_t>, std::string>> encoded;  // ((b, p), bytes)
  Seen leader_seen, follower_seen;
  Pipeline leader(po, &leader_table, leader_seen.Sink(), leader_seen.Hook());
  LocalPlanner front(PlannerOptions(po, 150), &leader, [&](const planner::PlannedSlice& s, std::string) {
    std::lock_guard<std::mutex> lk(mu);
    encoded.push_back({{s.batch, s.planner}, planner::EncodeSlice(s)});
    leader.MarkReplicated(s.batch, s.planner);
  });
  const uint64_t end = RunLeader(leader, front, txns);

  PipelineOptions fo = po;
  fo.capture_reads = false;  // followers answer no client
  Pipeline follower(fo, &follower_table, follower_seen.Sink(), follower_seen.Hook());
  REQUIRE(follower.Start().ok());
  std::sort(encoded.begin(), encoded.end());
  for (const auto& [bp, bytes] : encoded) {
    planner::PlannedSlice* slot = follower.BeginSlice(bp.first, bp.second);
    REQUIRE(slot != nullptr);
    REQUIRE(planner::DecodeSlice(bytes, slot).ok());
    REQUIRE(planner::ValidateSlice(*slot, fo.ranges, bp.first, bp.second).ok());
    follower.PublishSlice(bp.first, bp.second, 0, true);
  }
  follower.EndInput(end);
  REQUIRE(follower.WaitIdle().ok());
  follower.Stop();
  REQUIRE(leader_seen.batches.size() == end);
  REQUIRE(follower_seen.batches.size() == end);
  for (uint64_t b = 0; b < end; ++b) CHECK(follower_seen.batches[b].digest == leader_seen.batches[b].digest);
  CHECK(follower_table.Digest() == leader_table.Digest());
  CHECK(follower_seen.txns.size() == txns.size());
}

TEST_CASE("pipeline: a follower planning the leader's inputs itself, with other timings, gets its slices byte for "
          "byte and its digests") {
  // replication.point = input: the leader replicates each slice's input (txns after the session
  // check), the follower plans it. Batches are cut by a 2 ms timeout while the submitter sleeps at
  // random, so the cuts depend on timing; what each input holds and its planning must not.
  const std::vector<Txn> txns = Workload(9, 2500);
  storage::Table leader_table(kLayout, kKeys), follower_table(kLayout, kKeys);
  testing::LoadTable(&leader_table, kKeys, 1000);
  testing::LoadTable(&follower_table, kKeys, 1000);
  PipelineOptions po = Options(2, 3, 3);
  std::mutex mu;
  std::map<std::pair<uint64_t, uint32_t>, std::pair<std::string, std::string>> sent;  // (b, p) -> (input, slice)
  Seen leader_seen, follower_seen;
  Pipeline leader(po, &leader_table, leader_seen.Sink(), leader_seen.Hook());
  LocalPlannerOptions lo = PlannerOptions(po, 150);
  lo.batch_timeout_ns = 2'000'000;
  lo.encode_input = true;
  LocalPlanner front(lo, &leader, [&](const planner::PlannedSlice& s, std::string input) {
    std::lock_guard<std::mutex> lk(mu);
    sent[{s.batch, s.planner}] = {std::move(input), planner::EncodeSlice(s)};
    leader.MarkReplicated(s.batch, s.planner);
  });
  REQUIRE(leader.Start().ok());
  REQUIRE(front.Start().ok());
  Rng jitter(77);
  for (size_t i = 0; i < txns.size(); ++i) {
    REQUIRE(front.Submit(txns[i]));
    if (jitter.Next() % 200 == 0) std::this_thread::sleep_for(std::chrono::microseconds(jitter.Next() % 4000));
  }
  front.CloseInput();
  REQUIRE(leader.WaitIdle().ok());
  const uint64_t end = front.end_batch();
  leader.Stop();
  front.Stop();
  REQUIRE(sent.size() == 2 * end);
  CHECK(front.batches_closed_by_timeout() > 0);

  // The follower: one thread per stream, each sleeping at random between slices and taking
  // its stream in its own time, as FollowerFeed's replay threads do.
  PipelineOptions fo = po;
  fo.capture_reads = false;
  Pipeline follower(fo, &follower_table, follower_seen.Sink(), follower_seen.Hook());
  REQUIRE(follower.Start().ok());
  const planner::Planner planner(fo.ranges);
  std::atomic<int> differ{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> streams;
  for (uint32_t p = 0; p < 2; ++p) {
    streams.emplace_back([&, p] {
      Rng r(100 + p);
      std::vector<Txn> decoded;
      for (uint64_t b = 0; b < end; ++b) {
        if (r.Next() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(r.Next() % 3000));
        planner::PlannedSlice* slot = follower.BeginSlice(b, p);
        if (slot == nullptr) {
          ++failed;
          return;
        }
        const auto& [input, slice] = sent.at({b, p});
        uint64_t db = 0;
        uint32_t dp = 0;
        if (!planner::DecodeInputSlice(input, &db, &dp, &decoded).ok() || db != b || dp != p) {
          ++failed;
          return;
        }
        planner.PlanSlice(b, p, decoded, slot);
        if (planner::EncodeSlice(*slot) != slice) ++differ;
        follower.PublishSlice(b, p, 0, true);
      }
    });
  }
  for (auto& t : streams) t.join();
  REQUIRE(failed.load() == 0);
  CHECK(differ.load() == 0);
  FinishFollower(follower, end, follower_seen, leader_seen);
  CHECK(follower_table.Digest() == leader_table.Digest());
  CHECK(follower_seen.txns.size() == txns.size());
}

TEST_CASE("pipeline: a follower installing the leader's captured writes reaches its digests and fates without "
          "executing") {
  // replication.point = writes: the leader captures each batch's last images and fates once it is
  // executed and resolved (aborts re-executed, dependent writes), and holds the batch's commit
  // until they are "replicated"; the follower installs them.
  for (uint32_t planners : {1u, 2u}) {
    INFO("planners " << planners);
    const std::vector<Txn> txns = Workload(31 + planners, 3000);
    storage::Table leader_table(kLayout, kKeys), follower_table(kLayout, kKeys);
    testing::LoadTable(&leader_table, kKeys, 1000);
    testing::LoadTable(&follower_table, kKeys, 1000);
    PipelineOptions po = Options(planners, 3, 3);
    po.capture_writes = true;
    std::mutex mu;
    std::map<std::pair<uint64_t, uint32_t>, std::string> sent;
    Seen leader_seen, follower_seen;
    Pipeline* leader_ptr = nullptr;
    po.on_batch_writes = [&](const executor::ExecutorStageOptions::BatchWrites& w) {
      for (uint32_t p = 0; p < w.slices.size(); ++p) {
        const planner::PlannedSlice& s = *w.slices[p];
        std::vector<uint8_t> fates(s.txns.size());
        for (uint32_t i = 0; i < fates.size(); ++i) fates[i] = static_cast<uint8_t>(w.fates->Of(p, i));
        std::string bytes = planner::EncodeWriteSlice(s, fates, p == 0 ? w.keys : nullptr, p == 0 ? w.images : nullptr,
                                                      kLayout.size());
        {
          std::lock_guard<std::mutex> lk(mu);
          sent[{w.batch, p}] = std::move(bytes);
        }
        leader_ptr->MarkReplicated(w.batch, p);
      }
    };
    Pipeline leader(po, &leader_table, leader_seen.Sink(), leader_seen.Hook());
    leader_ptr = &leader;
    // A hook that replicates nothing: the slices wait for on_batch_writes.
    LocalPlanner front(PlannerOptions(po, 150), &leader, [](const planner::PlannedSlice&, std::string) {});
    const uint64_t end = RunLeader(leader, front, txns);
    REQUIRE(sent.size() == planners * end);
    REQUIRE(leader.Stats().aborted > 10);

    PipelineOptions fo = Options(planners, 3, 3);
    fo.capture_reads = false;
    Pipeline follower(fo, &follower_table, follower_seen.Sink(), follower_seen.Hook());
    REQUIRE(follower.Start().ok());
    for (const auto& [bp, bytes] : sent) {
      planner::PlannedSlice* slot = follower.BeginSlice(bp.first, bp.second);
      REQUIRE(slot != nullptr);
      REQUIRE(planner::DecodeWriteSlice(bytes, kLayout.size(), fo.ranges, bp.first, bp.second, slot).ok());
      follower.PublishSlice(bp.first, bp.second, 0, true);
    }
    FinishFollower(follower, end, follower_seen, leader_seen);
    CHECK(follower_table.Digest() == leader_table.Digest());
    CHECK(follower.Stats().aborted == leader.Stats().aborted);
    REQUIRE(follower_seen.txns.size() == leader_seen.txns.size());
    std::map<uint64_t, std::pair<commit::PlannedPos, TxnStatus>> fate;
    for (const Seen::Txn& t : leader_seen.txns) fate[t.id] = {t.pos, t.status};
    for (const Seen::Txn& t : follower_seen.txns) {
      REQUIRE(fate.count(t.id) == 1);
      CHECK(fate[t.id].first == t.pos);
      CHECK(fate[t.id].second == t.status);
    }
  }
}

TEST_CASE("pipeline: nothing commits before its batch is replicated, sync mode executes only then",
          "[slow]") {
  for (bool sync : {false, true}) {
    INFO((sync ? "sync" : "speculative"));
    storage::Table table(kLayout, kKeys);
    testing::LoadTable(&table, kKeys, 0);
    Seen seen;
    PipelineOptions po = Options(1, 2, 2);
    po.executors_wait_for_replication = sync;
    Pipeline pipeline(po, &table, seen.Sink(), seen.Hook());
    REQUIRE(pipeline.Start().ok());
    // One slice: an update of key 7.
    std::vector<Txn> txns(1);
    txns[0].id = 1;
    txns[0].ops.push_back(storage::Op{storage::OpKind::kUpdate, 7, 0, 0});
    planner::Planner plan(po.ranges);
    planner::PlannedSlice* s = pipeline.BeginSlice(0, 0);
    REQUIRE(s != nullptr);
    plan.PlanSlice(0, 0, txns, s);
    pipeline.PublishSlice(0, 0, 0, /*replicated=*/false);
    // Speculative: executed without waiting (bounded poll); sync: not executed after a while.
    // (Polled through executed_batches, under the pipeline's lock: reading the table while an
    // executor may write it would be a race; once batch 0 is seen executed, its writes are seen.)
    const int64_t deadline = NowNanos() + (sync ? 200'000'000 : 10'000'000'000);
    while (NowNanos() < deadline && pipeline.executed_batches() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    CHECK(pipeline.executed_batches() == (sync ? 0 : 1));
    if (!sync) CHECK(storage::GetCounter(table.Find(7)) == 1);
    CHECK(seen.Count() == 0);  // Invariant 1: no outcome before replication
    pipeline.MarkReplicated(0, 0);
    REQUIRE(seen.WaitTxns(1));
    CHECK(storage::GetCounter(table.Find(7)) == 1);
    pipeline.EndInput(1);
    REQUIRE(pipeline.WaitIdle().ok());
    CHECK(seen.batches.size() == 1);
    CHECK(seen.batches[0].phases.repl_ns > 0);
  }
}

TEST_CASE("pipeline: with the batch-end gate a batch commits only once its batch-end record is confirmed, "
          "in sync mode too") {
  // docs/partitioned-rows.md 9.4 (Rule 2): a row leader with followers logs a record after each
  // batch executed (on_batch_executed) and the batch commits only once MarkBatchEnd came. In
  // sync mode the executors wait for the slices' replication, never for the record (it is only
  // written after them): no deadlock.
  for (bool sync : {false, true}) {
    INFO((sync ? "sync" : "speculative"));
    storage::Table table(kLayout, kKeys);
    testing::LoadTable(&table, kKeys, 0);
    Seen seen;
    PipelineOptions po = Options(2, 2, 3);
    po.executors_wait_for_replication = sync;
    po.batch_end_gate = true;
    std::mutex mu;
    std::condition_variable cv;
    std::vector<uint64_t> executed;  // guarded by mu: on_batch_executed calls, in order
    po.on_batch_executed = [&](uint64_t b) {
      std::lock_guard<std::mutex> lk(mu);
      executed.push_back(b);
      cv.notify_all();
    };
    Pipeline pipeline(po, &table, seen.Sink(), seen.Hook());
    REQUIRE(pipeline.Start().ok());
    planner::Planner plan(po.ranges);
    constexpr uint64_t kBatches = 3;
    for (uint64_t b = 0; b < kBatches; ++b) {
      for (uint32_t p = 0; p < 2; ++p) {
        std::vector<Txn> txns(1);
        txns[0].id = b * 2 + p + 1;
        txns[0].ops.push_back(storage::Op{storage::OpKind::kUpdate, b * 2 + p, 0, 0});
        planner::PlannedSlice* s = pipeline.BeginSlice(b, p);
        REQUIRE(s != nullptr);
        plan.PlanSlice(b, p, txns, s);
        pipeline.PublishSlice(b, p, 0, /*replicated=*/true);
      }
    }
    // Every batch executes (each executed hook in batch order), none commits.
    {
      std::unique_lock<std::mutex> lk(mu);
      REQUIRE(cv.wait_for(lk, std::chrono::seconds(10), [&] { return executed.size() == kBatches; }));
      CHECK(executed == std::vector<uint64_t>{0, 1, 2});
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(seen.Count() == 0);
    CHECK(pipeline.committed_batches() == 0);
    // Batch 1's record first: still nothing (batches commit in order); then 0's: both commit.
    pipeline.MarkBatchEnd(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(seen.Count() == 0);
    pipeline.MarkBatchEnd(0);
    REQUIRE(seen.WaitTxns(4));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(seen.Count() == 4);
    CHECK(pipeline.committed_batches() == 2);
    pipeline.MarkBatchEnd(2);
    pipeline.MarkBatchEnd(2);  // a repeat (a late confirmation of an empty record) is harmless
    pipeline.EndInput(kBatches);
    REQUIRE(pipeline.WaitIdle(10000).ok());
    CHECK(seen.Count() == 6);
  }
}

TEST_CASE("pipeline: after Fail nothing is delivered, waits end with the error and no slice is handed out") {
  storage::Table table(kLayout, kKeys);
  testing::LoadTable(&table, kKeys, 0);
  Seen seen;
  PipelineOptions po = Options(1, 2, 2);
  Pipeline pipeline(po, &table, seen.Sink(), seen.Hook());
  REQUIRE(pipeline.Start().ok());
  std::vector<Txn> txns = Workload(3, 20);
  planner::Planner plan(po.ranges);
  planner::PlannedSlice* s = pipeline.BeginSlice(0, 0);
  REQUIRE(s != nullptr);
  plan.PlanSlice(0, 0, txns, s);
  pipeline.PublishSlice(0, 0, 0, false);  // executed, never replicated
  pipeline.Fail(Status::Unavailable("replication: not leader any more"));
  pipeline.MarkReplicated(0, 0);  // too late: must not deliver
  Status w = pipeline.WaitIdle();
  CHECK(w.code() == StatusCode::kUnavailable);
  CHECK(w.message() == "replication: not leader any more");
  CHECK(pipeline.BeginSlice(1, 0) == nullptr);
  pipeline.Stop();
  CHECK(seen.Count() == 0);
  CHECK(seen.batches.empty());
  CHECK(pipeline.health().code() == StatusCode::kUnavailable);
}

// A sink or a batch hook that fails the pipeline (a row node whose send to a dead peer fails
// inside them) must not hang its own commit thread: Fail from inside returns, nothing is
// delivered after it, and the pipeline stops.
TEST_CASE("pipeline: Fail from inside the sink or the batch hook returns, nothing is delivered after it") {
  for (const bool from_hook : {false, true}) {
    INFO((from_hook ? "from the hook" : "from the sink"));
    storage::Table table(kLayout, kKeys);
    testing::LoadTable(&table, kKeys, 0);
    PipelineOptions po = Options(1, 2, 2);
    std::mutex mu;
    std::condition_variable cv;
    int sink_calls = 0, hook_calls = 0;
    bool failed_inside = false;
    Pipeline* self = nullptr;
    auto fail_once = [&] {
      self->Fail(Status::Unavailable("could not send to row peer 1"));  // must return
      std::lock_guard<std::mutex> lk(mu);
      failed_inside = true;
      cv.notify_all();
    };
    Pipeline pipeline(
        po, &table,
        [&](const std::vector<TxnOutcome>&) {
          {
            std::lock_guard<std::mutex> lk(mu);
            ++sink_calls;
          }
          if (!from_hook) fail_once();
        },
        [&](const BatchInfo&) {
          {
            std::lock_guard<std::mutex> lk(mu);
            ++hook_calls;
          }
          if (from_hook) fail_once();
        });
    self = &pipeline;
    REQUIRE(pipeline.Start().ok());
    planner::Planner plan(po.ranges);
    for (uint64_t b = 0; b < 2; ++b) {
      std::vector<Txn> txns = Workload(10 + b, 20);
      planner::PlannedSlice* s = pipeline.BeginSlice(b, 0);
      if (s == nullptr) break;  // failed already
      plan.PlanSlice(b, 0, txns, s);
      pipeline.PublishSlice(b, 0, 0, true);
    }
    {
      std::unique_lock<std::mutex> lk(mu);
      REQUIRE(cv.wait_for(lk, std::chrono::seconds(30), [&] { return failed_inside; }));  // not a hang
    }
    Status w = pipeline.WaitIdle(30'000);
    CHECK(w.code() == StatusCode::kUnavailable);
    pipeline.Stop();  // joins the commit threads: returns only if none is stuck
    std::lock_guard<std::mutex> lk(mu);
    CHECK(sink_calls == 1);  // batch 1's outcomes came after the Fail: never delivered
    CHECK(hook_calls == (from_hook ? 1 : 0));
  }
}
