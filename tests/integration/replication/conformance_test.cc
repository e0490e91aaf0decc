// The replication conformance suite: the same assertions for every backend (this binary's
// backend is QRSTORE_CONFORMANCE_BACKEND), through the real factory and the framing decorator:
//  - per stream order, no gaps, no duplicates, exact bytes, with 2 groups x 2 planners
//    replicated in parallel (with and without Snappy);
//  - large payloads (3-5 MB);
//  - durability of an acknowledged batch: once ReplicateData said OK, the batch outlives the
//    leader. raft: the leader is stopped, the survivors elect a new leader and deliver every
//    acknowledged batch; zookeeper: a follower with a fresh session reads every acknowledged
//    batch after the leader is gone; none: "durable" means in this process's memory, so the
//    check is that a follower created after the leader is gone still reads them (the hub
//    lives as long as any member holds it). Then a new leader resumes at NextBatchId;
//  - contract errors: out-of-sequence batch ids, writes on a follower, Stop aborts receives.
// Process-level tests (real qrstore-repl-node processes, killed leaders, a ZooKeeper
// ensemble) are in process_test.cc.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include "common/clock.h"
#include "replication/tools/member.h"
#include "replication/tools/payload.h"
#include "replication/tools/process.h"
#include "tests/integration/replication/harness.h"

using namespace qrstore;
using namespace qrstore::replication;
using namespace qrstore::replication::conformance;
using qrstore::replication::tools::StreamReceiver;

namespace {

// Raft settings for a loaded 2-core test machine: elections only after 0.5-1 s of silence.
std::vector<std::string> Extra() {
  if (Backend() == "raft") return {"replication.raft.tick_ms=10", "replication.raft.election_ticks=50"};
  return {};
}

Status ReplicateSync(Replicator* r, const ReplicateMeta& meta, std::string bytes, int64_t timeout_ms = 30000) {
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  r->ReplicateData(meta, std::move(bytes), [p](const ReplicateMeta&, Status s) { p->set_value(std::move(s)); });
  if (f.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    return Status::Timeout("ReplicateData callback did not fire within " + std::to_string(timeout_ms) + " ms");
  }
  return f.get();
}

// A member with a receiver writing a deliveries file in a temp dir.
struct Reader {
  std::unique_ptr<Replicator> replicator;
  std::unique_ptr<StreamReceiver> receiver;
  std::string path;
  FILE* file = nullptr;

  Reader(const GroupSpec& spec, uint32_t member, const std::string& dir) {
    Result<std::unique_ptr<Replicator>> r = spec.Create(member);
    REQUIRE(r.ok());
    replicator = std::move(r).value();
    REQUIRE(replicator->Start().ok());
    path = dir + "/member-" + std::to_string(member) + ".deliveries";
    file = std::fopen(path.c_str(), "w");
    REQUIRE(file != nullptr);
    receiver = std::make_unique<StreamReceiver>(replicator.get(), spec.groups(), spec.planners(),
                                                "m" + std::to_string(member), file);
    receiver->Start();
  }
  void Stop() {
    if (replicator) replicator->Stop();
    if (receiver) receiver->Stop();
    if (file != nullptr) std::fclose(file);
    file = nullptr;
  }
  ~Reader() { Stop(); }
};

struct TempDir {
  std::string path;
  TempDir() {
    Result<std::string> d = tools::MakeTempDir("qrstore-conformance-");
    REQUIRE(d.ok());
    path = d.value();
  }
  ~TempDir() { tools::RemoveTree(path); }
};

}  // namespace

TEST_CASE("streams: 2 groups x 2 planners in parallel: order / no gaps / no duplicates / exact bytes") {
  const std::string compression = GENERATE(std::string("none"), std::string("snappy"));
  INFO("backend " << Backend() << ", compression " << compression);
  constexpr uint64_t kBatches = 60;
  constexpr size_t kBytes = 10000;
  TempDir dir;
  GroupSpec spec(3, 2, 2, compression, Extra());
  Result<std::unique_ptr<Replicator>> created = spec.Create(0);
  REQUIRE(created.ok());
  std::unique_ptr<Replicator> leader = std::move(created).value();
  REQUIRE(leader->Start().ok());
  Reader f1(spec, 1, dir.path), f2(spec, 2, dir.path);
  REQUIRE(WaitLeader(leader.get(), 2, 30000));

  tools::DriverOptions d;
  d.groups = 2;
  d.planners = 2;
  d.payload_bytes = kBytes;
  d.inflight = 8;
  d.batches_per_stream = kBatches;
  tools::Driver driver(leader.get(), d, nullptr);
  const int64_t deadline = NowMillis() + 60000;
  while (!(driver.AllStreamsComplete() && driver.inflight() == 0) && NowMillis() < deadline) driver.Poll(20);
  INFO("acked " << driver.acked() << ", failed " << driver.failed() << " (" << driver.last_failure() << ")");
  REQUIRE(driver.AllStreamsComplete());
  CHECK(driver.acked() == 4 * kBatches);  // no leader change expected: every batch acked here, once
  CHECK(f1.receiver->WaitDelivered(kBatches, 60000));
  CHECK(f2.receiver->WaitDelivered(kBatches, 60000));
  f1.Stop();
  f2.Stop();
  leader->Stop();
  CHECK(f1.receiver->errors() == 0);
  CHECK(f2.receiver->errors() == 0);
  const std::vector<uint64_t> want(4, kBatches);
  CHECK(CheckDeliveries(ReadDeliveries(f1.path), 2, 2, want, kBytes) == "");
  CHECK(CheckDeliveries(ReadDeliveries(f2.path), 2, 2, want, kBytes) == "");
}

TEST_CASE("large payloads (3-5 MB) arrive intact and in order") {
  INFO("backend " << Backend());
  TempDir dir;
  GroupSpec spec(3, 1, 1, "none", Extra());
  std::unique_ptr<Replicator> leader = spec.Create(0).value();
  REQUIRE(leader->Start().ok());
  Reader f1(spec, 1, dir.path), f2(spec, 2, dir.path);
  REQUIRE(WaitLeader(leader.get(), 1, 30000));
  const std::vector<size_t> sizes{3u << 20, 5u << 20, (4u << 20) + 1, 100};
  for (uint64_t b = 0; b < sizes.size(); ++b) {
    Status s = ReplicateSync(leader.get(), ReplicateMeta{0, 0, b}, tools::MakePayload(0, 0, b, sizes[b]), 60000);
    INFO("batch " << b << " of " << sizes[b] << " bytes: " << s.ToString());
    REQUIRE(s.ok());
  }
  CHECK(f1.receiver->WaitDelivered(sizes.size(), 60000));
  CHECK(f2.receiver->WaitDelivered(sizes.size(), 60000));
  f1.Stop();
  f2.Stop();
  leader->Stop();
  for (Reader* f : {&f1, &f2}) {
    INFO(f->receiver->first_error());
    CHECK(f->receiver->errors() == 0);
    std::vector<Delivery> got = ReadDeliveries(f->path);
    REQUIRE(got.size() == sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      CHECK(got[i].batch == i);
      CHECK(got[i].bytes == sizes[i]);
    }
  }
}

TEST_CASE("an acknowledged batch outlives its leader / a new leader resumes at NextBatchId") {
  INFO("backend " << Backend());
  constexpr uint64_t kAcked = 25, kMore = 10;
  constexpr size_t kBytes = 2000;
  TempDir dir;
  GroupSpec spec(3, 1, 1, "snappy", Extra());
  std::unique_ptr<Replicator> leader = spec.Create(0).value();
  REQUIRE(leader->Start().ok());
  std::unique_ptr<Reader> f1, f2, fresh;
  if (Backend() != "zookeeper") {
    // raft: members are fixed; the two followers run from the start and must survive the
    // leader. none: they hold the in-process hub (its "durable storage") once the leader is gone.
    f1 = std::make_unique<Reader>(spec, 1, dir.path);
    f2 = std::make_unique<Reader>(spec, 2, dir.path);
  }
  REQUIRE(WaitLeader(leader.get(), 1, 30000));
  for (uint64_t b = 0; b < kAcked; ++b) {
    REQUIRE(ReplicateSync(leader.get(), ReplicateMeta{0, 0, b}, tools::MakePayload(0, 0, b, kBytes)).ok());
  }
  // Every batch is acknowledged: take the leader away.
  leader->Stop();
  leader.reset();

  Replicator* new_leader = nullptr;
  std::unique_ptr<Replicator> fresh_leader;
  Reader* survivor = nullptr;
  if (Backend() == "raft") {
    // One survivor becomes leader; the other must deliver all acknowledged batches.
    const int64_t deadline = NowMillis() + 30000;
    while (new_leader == nullptr && NowMillis() < deadline) {
      if (f1->replicator->IsLeader(0)) new_leader = f1->replicator.get(), survivor = f2.get();
      else if (f2->replicator->IsLeader(0)) new_leader = f2->replicator.get(), survivor = f1.get();
      else std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(new_leader != nullptr);
  } else {
    // A follower created only now (with a fresh session, for zookeeper) reads what was
    // acknowledged, and a new leader resumes the stream.
    fresh = std::make_unique<Reader>(spec, 3, dir.path);
    survivor = fresh.get();
    fresh_leader = spec.Create(0).value();
    REQUIRE(fresh_leader->Start().ok());
    REQUIRE(WaitLeader(fresh_leader.get(), 1, 30000));
    new_leader = fresh_leader.get();
  }
  CHECK(survivor->receiver->WaitDelivered(kAcked, 30000));
  Result<uint64_t> next = new_leader->NextBatchId(0, 0);
  REQUIRE(next.ok());
  CHECK(next.value() == kAcked);
  for (uint64_t b = kAcked; b < kAcked + kMore; ++b) {
    REQUIRE(ReplicateSync(new_leader, ReplicateMeta{0, 0, b}, tools::MakePayload(0, 0, b, kBytes)).ok());
  }
  CHECK(survivor->receiver->WaitDelivered(kAcked + kMore, 30000));
  if (f1) f1->Stop();
  if (f2) f2->Stop();
  if (fresh) fresh->Stop();
  if (fresh_leader) fresh_leader->Stop();
  INFO(survivor->receiver->first_error());
  CHECK(survivor->receiver->errors() == 0);
  CHECK(CheckDeliveries(ReadDeliveries(survivor->path), 1, 1, {kAcked + kMore}, kBytes) == "");
}

TEST_CASE("contract errors: out-of-sequence ids and follower writes are refused / Stop aborts receives") {
  INFO("backend " << Backend());
  GroupSpec spec(3, 1, 1, "none", Extra());
  std::unique_ptr<Replicator> leader = spec.Create(0).value();
  std::unique_ptr<Replicator> follower = spec.Create(1).value();
  std::unique_ptr<Replicator> third;
  REQUIRE(leader->Start().ok());
  REQUIRE(follower->Start().ok());
  if (Backend() == "raft") {
    third = spec.Create(2).value();  // a quorum for the leader
    REQUIRE(third->Start().ok());
  }
  REQUIRE(WaitLeader(leader.get(), 1, 30000));
  REQUIRE(ReplicateSync(leader.get(), ReplicateMeta{0, 0, 0}, "first").ok());
  Status skipped = ReplicateSync(leader.get(), ReplicateMeta{0, 0, 5}, "gap");
  CHECK(skipped.code() == StatusCode::kInvalidArgument);
  Status repeated = ReplicateSync(leader.get(), ReplicateMeta{0, 0, 0}, "again");
  CHECK(repeated.code() == StatusCode::kInvalidArgument);
  CHECK_FALSE(follower->IsLeader(0));
  Status on_follower = ReplicateSync(follower.get(), ReplicateMeta{0, 0, 1}, "follower write");
  CHECK(on_follower.code() == StatusCode::kUnavailable);

  // A receive for a batch that never comes is aborted by Stop.
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  follower->ReceiveData(ReplicateMeta{0, 0, 1000}, [p](const ReplicateMeta&, Status s, SharedBytes) { p->set_value(s); });
  CHECK(f.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  follower->Stop();
  REQUIRE(f.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(f.get().code() == StatusCode::kAborted);
  if (third) third->Stop();
  leader->Stop();
}
