// The `none` backend: immediate callbacks, in-process delivery through a shared hub, batch id
// sequencing, roles, retention bound, Stop semantics.
#include <catch2/catch.hpp>

#include <vector>

#include "replication/none/none_replicator.h"

using namespace qrstore;
using namespace qrstore::replication;
using namespace qrstore::replication::none;

namespace {

NoneOptions Opts(const std::string& hub, bool leader, uint64_t retain = 1024) {
  NoneOptions o;
  o.leader = leader;
  o.groups = 2;
  o.planners = 2;
  o.hub = hub;
  o.retain_batches = retain;
  return o;
}

Status ReplicateNow(Replicator& r, ReplicateMeta m, std::string bytes) {
  Status got = Status::Internal("callback did not fire at once");
  r.ReplicateData(m, std::move(bytes), [&](const ReplicateMeta&, Status s) { got = s; });
  return got;
}

}  // namespace

TEST_CASE("none: callback fires at once / a follower on the same hub receives in order / exact bytes") {
  NoneReplicator leader(Opts("none-test-basic", true));
  NoneReplicator follower(Opts("none-test-basic", false));
  REQUIRE(leader.Start().ok());
  REQUIRE(follower.Start().ok());
  std::vector<std::string> got;
  // Parked before the data exists: fires when replicated.
  follower.ReceiveData(ReplicateMeta{1, 1, 0}, [&](const ReplicateMeta& m, Status s, SharedBytes b) {
    CHECK(s.ok());
    CHECK(m.batch_id == 0);
    got.push_back(b.ToString());
  });
  CHECK(got.empty());
  for (uint64_t b = 0; b < 3; ++b) {
    CHECK(ReplicateNow(leader, ReplicateMeta{1, 1, b}, "payload-" + std::to_string(b)).ok());
  }
  REQUIRE(got.size() == 1);
  for (uint64_t b = 1; b < 3; ++b) {
    follower.ReceiveData(ReplicateMeta{1, 1, b}, [&](const ReplicateMeta&, Status s, SharedBytes bytes) {
      CHECK(s.ok());
      got.push_back(bytes.ToString());
    });
  }
  CHECK(got == std::vector<std::string>{"payload-0", "payload-1", "payload-2"});
  CHECK(leader.NextBatchId(1, 1).value() == 3);
  CHECK(follower.NextBatchId(1, 1).value() == 3);  // shared hub
  CHECK(leader.NextBatchId(0, 1).value() == 0);    // streams are independent
  CHECK(leader.IsLeader(1));
  CHECK_FALSE(follower.IsLeader(1));
  CHECK_FALSE(leader.IsLeader(2));
}

TEST_CASE("none: out-of-sequence batch ids / follower writes and unknown streams are rejected") {
  NoneReplicator leader(Opts("none-test-errors", true));
  NoneReplicator follower(Opts("none-test-errors", false));
  REQUIRE(leader.Start().ok());
  REQUIRE(follower.Start().ok());
  CHECK(ReplicateNow(leader, ReplicateMeta{0, 0, 1}, "x").code() == StatusCode::kInvalidArgument);
  CHECK(ReplicateNow(leader, ReplicateMeta{0, 0, 0}, "x").ok());
  CHECK(ReplicateNow(leader, ReplicateMeta{0, 0, 0}, "x").code() == StatusCode::kInvalidArgument);  // duplicate
  CHECK(ReplicateNow(follower, ReplicateMeta{0, 0, 1}, "x").code() == StatusCode::kUnavailable);
  CHECK(ReplicateNow(leader, ReplicateMeta{2, 0, 0}, "x").code() == StatusCode::kInvalidArgument);
  CHECK(ReplicateNow(leader, ReplicateMeta{0, 2, 0}, "x").code() == StatusCode::kInvalidArgument);
  CHECK_FALSE(leader.NextBatchId(5, 0).ok());
}

TEST_CASE("none: retention bound / an evicted batch is a clear kResourceExhausted") {
  NoneReplicator leader(Opts("none-test-retain", true, /*retain=*/2));
  REQUIRE(leader.Start().ok());
  for (uint64_t b = 0; b < 5; ++b) REQUIRE(ReplicateNow(leader, ReplicateMeta{0, 0, b}, std::to_string(b)).ok());
  Status evicted;
  leader.ReceiveData(ReplicateMeta{0, 0, 2}, [&](const ReplicateMeta&, Status s, SharedBytes) { evicted = s; });
  CHECK(evicted.code() == StatusCode::kResourceExhausted);
  CHECK(evicted.message().find("replication.none.retain_batches") != std::string::npos);
  std::string kept;
  leader.ReceiveData(ReplicateMeta{0, 0, 3}, [&](const ReplicateMeta&, Status s, SharedBytes b) {
    CHECK(s.ok());
    kept = b;
  });
  CHECK(kept == "3");
}

TEST_CASE("none: Stop aborts parked receives of that replicator only / calls after Stop abort") {
  NoneReplicator leader(Opts("none-test-stop", true));
  NoneReplicator f1(Opts("none-test-stop", false));
  NoneReplicator f2(Opts("none-test-stop", false));
  REQUIRE(leader.Start().ok());
  REQUIRE(f1.Start().ok());
  REQUIRE(f2.Start().ok());
  Status s1 = Status::Internal("pending"), s2 = Status::Internal("pending");
  f1.ReceiveData(ReplicateMeta{0, 0, 0}, [&](const ReplicateMeta&, Status s, SharedBytes) { s1 = s; });
  f2.ReceiveData(ReplicateMeta{0, 0, 0}, [&](const ReplicateMeta&, Status s, SharedBytes) { s2 = s; });
  f1.Stop();
  CHECK(s1.code() == StatusCode::kAborted);
  CHECK(s2.code() == StatusCode::kInternal);  // still parked
  REQUIRE(ReplicateNow(leader, ReplicateMeta{0, 0, 0}, "a").ok());
  CHECK(s2.ok());
  Status after;
  f1.ReceiveData(ReplicateMeta{0, 0, 0}, [&](const ReplicateMeta&, Status s, SharedBytes) { after = s; });
  CHECK(after.code() == StatusCode::kAborted);
  leader.Stop();
  CHECK(ReplicateNow(leader, ReplicateMeta{0, 0, 1}, "b").code() == StatusCode::kAborted);
}

TEST_CASE("none: a hub outlives its leader while a follower holds it") {
  auto follower = std::make_unique<NoneReplicator>(Opts("none-test-outlive", false));
  REQUIRE(follower->Start().ok());
  {
    NoneReplicator leader(Opts("none-test-outlive", true));
    REQUIRE(leader.Start().ok());
    REQUIRE(ReplicateNow(leader, ReplicateMeta{0, 0, 0}, "kept").ok());
  }
  std::string got;
  follower->ReceiveData(ReplicateMeta{0, 0, 0}, [&](const ReplicateMeta&, Status s, SharedBytes b) {
    CHECK(s.ok());
    got = b;
  });
  CHECK(got == "kept");
}
