// The member halves used by the tools and the conformance suite: the receiver must hand
// batches on in order whatever order the backend's callbacks come in, and must flag
// duplicates and wrong content (it is the checker of the conformance suite, so it is checked
// here against a scripted backend); the driver must stop at its batch limit and log acks.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>

#include "replication/none/none_replicator.h"
#include "replication/tools/member.h"
#include "replication/tools/payload.h"

using namespace qrstore;
using namespace qrstore::replication;
using namespace qrstore::replication::tools;

namespace {

// Records ReceiveData requests; the test thread answers them in any order it likes.
class ScriptedBackend final : public Replicator {
 public:
  struct Request {
    ReplicateMeta meta;
    ReceiveCallback cb;
  };
  Status Start() override { return Status::Ok(); }
  void Stop() override {
    std::deque<Request> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left.swap(requests_);
    }
    for (auto& r : left) r.cb(r.meta, Status::Aborted("stopped"), {});
  }
  void ReplicateData(const ReplicateMeta& meta, std::string, ReplicateCallback cb) override {
    cb(meta, Status::Unavailable("scripted backend"));
  }
  void ReceiveData(const ReplicateMeta& meta, ReceiveCallback cb) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(Request{meta, std::move(cb)});
    }
    cv_.notify_all();
  }
  Result<uint64_t> NextBatchId(uint32_t, uint32_t) const override { return uint64_t{0}; }
  bool IsLeader(uint32_t) const override { return false; }
  std::string Name() const override { return "scripted"; }
  GroupHealth Health(uint32_t) const override { return {}; }
  LeaderView Leader(uint32_t) const override { return {}; }
  void CancelReceives(uint32_t) override {}
  void RetainFrom(uint32_t, uint64_t) override {}
  void HoldFrom(uint32_t, uint64_t, int64_t) override {}
  bool LogFromStart(uint32_t) const override { return true; }
  LogSyncTotals LogSyncs() const override { return {}; }

  // Waits for n outstanding requests and takes them.
  std::deque<Request> Take(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    REQUIRE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return requests_.size() >= n; }));
    std::deque<Request> out;
    for (size_t i = 0; i < n; ++i) {
      out.push_back(std::move(requests_.front()));
      requests_.pop_front();
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> requests_;
};

void Answer(ScriptedBackend::Request& r) {
  r.cb(r.meta, Status::Ok(), MakePayload(r.meta.group, r.meta.planner, r.meta.batch_id, 500));
}

}  // namespace

TEST_CASE("receiver: out-of-order callbacks are handed on in batch order") {
  ScriptedBackend backend;
  StreamReceiver receiver(&backend, 1, 1, "t", nullptr, /*window=*/4);
  receiver.Start();
  std::deque<ScriptedBackend::Request> reqs = backend.Take(4);  // batches 0..3 asked at once
  for (size_t i = 0; i < reqs.size(); ++i) CHECK(reqs[i].meta.batch_id == i);
  Answer(reqs[3]);
  Answer(reqs[1]);
  Answer(reqs[2]);
  CHECK_FALSE(receiver.WaitDelivered(1, 100));  // batch 0 still missing: nothing handed on
  Answer(reqs[0]);
  CHECK(receiver.WaitDelivered(4, 10000));
  std::deque<ScriptedBackend::Request> more = backend.Take(4);  // window moved to 4..7
  CHECK(more.front().meta.batch_id == 4);
  backend.Stop();
  receiver.Stop();
  CHECK(receiver.errors() == 0);
  CHECK(receiver.PerStream() == std::vector<uint64_t>{4});
}

TEST_CASE("receiver: a duplicate callback and wrong content are errors") {
  {
    ScriptedBackend backend;
    StreamReceiver receiver(&backend, 1, 1, "dup", nullptr, 2);
    receiver.Start();
    std::deque<ScriptedBackend::Request> reqs = backend.Take(2);
    ReceiveCallback first = reqs[0].cb;
    Answer(reqs[0]);
    first(reqs[0].meta, Status::Ok(), MakePayload(0, 0, 0, 500));  // the same batch again
    CHECK_FALSE(receiver.WaitDelivered(2, 10000));
    backend.Stop();
    receiver.Stop();
    CHECK(receiver.errors() >= 1);
  }
  {
    ScriptedBackend backend;
    StreamReceiver receiver(&backend, 1, 1, "bad", nullptr, 1);
    receiver.Start();
    std::deque<ScriptedBackend::Request> reqs = backend.Take(1);
    std::string wrong = MakePayload(0, 0, 0, 500);
    wrong[300] ^= 1;
    reqs[0].cb(reqs[0].meta, Status::Ok(), wrong);
    CHECK_FALSE(receiver.WaitDelivered(1, 10000));
    backend.Stop();
    receiver.Stop();
    CHECK(receiver.errors() == 1);
    CHECK(receiver.first_error().find("differs at byte 300") != std::string::npos);
  }
}

TEST_CASE("driver: stops at its batch limit and logs each acknowledged batch") {
  none::NoneOptions o;
  o.hub = "member-test-driver";
  o.planners = 2;
  none::NoneReplicator leader(o);
  REQUIRE(leader.Start().ok());
  FILE* acks = std::tmpfile();
  REQUIRE(acks != nullptr);
  DriverOptions d;
  d.planners = 2;
  d.payload_bytes = 100;
  d.inflight = 3;
  d.batches_per_stream = 10;
  d.acks = acks;
  uint64_t hooked = 0;
  Driver driver(&leader, d, [&](const ReplicateMeta&, int64_t latency_ns) {
    CHECK(latency_ns >= 0);
    ++hooked;
  });
  for (int i = 0; i < 100 && !(driver.AllStreamsComplete() && driver.inflight() == 0); ++i) driver.Poll(10);
  CHECK(driver.AllStreamsComplete());
  CHECK(driver.acked() == 20);
  CHECK(hooked == 20);
  CHECK(leader.NextBatchId(0, 0).value() == 10);
  CHECK(leader.NextBatchId(0, 1).value() == 10);
  std::rewind(acks);
  int lines = 0;
  unsigned g, p;
  unsigned long long b;
  while (std::fscanf(acks, "%u %u %llu", &g, &p, &b) == 3) ++lines;
  CHECK(lines == 20);
  std::fclose(acks);
  leader.Stop();
}

TEST_CASE("driver: a member that does not lead issues nothing") {
  none::NoneOptions o;
  o.hub = "member-test-follower";
  o.leader = false;
  none::NoneReplicator follower(o);
  REQUIRE(follower.Start().ok());
  DriverOptions d;
  d.batches_per_stream = 5;
  Driver driver(&follower, d, nullptr);
  driver.Poll(1);
  CHECK(driver.inflight() == 0);
  CHECK(driver.acked() == 0);
  CHECK(driver.failed() == 0);
  CHECK_FALSE(driver.AllStreamsComplete());
  follower.Stop();
}
