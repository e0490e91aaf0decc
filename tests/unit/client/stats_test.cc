#include <catch2/catch.hpp>

#include "client/stats.h"

using namespace qrstore;
using namespace qrstore::client;
namespace proto = cluster::proto;

namespace {

proto::NodeStatus Node(uint64_t batches, uint64_t cpu_ns, double exec_ms) {
  proto::NodeStatus s;
  s.node = "n0";
  s.committed_batches = batches;
  s.cpu_ns = cpu_ns;
  s.phases.exec_ms = exec_ms;
  s.phases.plan_ms = 1;
  return s;
}

proto::FollowerView View(const std::string& name, uint64_t applied, bool agrees, uint64_t mismatches = 0) {
  proto::FollowerView v;
  v.node = name;
  v.connected = true;
  v.applied_batches = applied;
  v.checked_batches = applied;
  v.agrees_at_last = agrees;
  v.mismatches = mismatches;
  return v;
}

}  // namespace

TEST_CASE("client stats: the window's phase means come from the cumulative ones") {
  // 10 batches at 2 ms, then 30 more at 6 ms: cumulative 5 ms over 40; the window's 30 at 6.
  auto w = WindowOf(Node(10, 1'000'000'000, 2.0), Node(40, 3'500'000'000, 5.0));
  REQUIRE(w.has_value());
  CHECK(w->batches == 30);
  CHECK(w->cpu_s == Approx(2.5));
  CHECK(w->phases_windowed);
  CHECK(w->phases.exec_ms == Approx(6.0));
  CHECK(w->phases.plan_ms == Approx(1.0));
  CHECK(w->phases.commit_ms == 0);

  // No batch in the window: the cumulative means, marked as such.
  auto idle = WindowOf(Node(40, 1, 5.0), Node(40, 2, 5.0));
  REQUIRE(idle.has_value());
  CHECK_FALSE(idle->phases_windowed);
  CHECK(idle->phases.exec_ms == 5.0);
  CHECK(idle->batches == 0);

  // Rounding never yields a negative phase.
  auto tiny = WindowOf(Node(3, 0, 1.0000001), Node(4, 0, 0.75));
  REQUIRE(tiny.has_value());
  CHECK(tiny->phases.exec_ms >= 0);

  // A restarted node: figures went backwards.
  CHECK_FALSE(WindowOf(Node(40, 100, 1), Node(2, 200, 1)).has_value());
  CHECK_FALSE(WindowOf(Node(2, 300, 1), Node(4, 200, 1)).has_value());
}

TEST_CASE("client stats: replicas agree only when every follower has the leader's last batch and digest") {
  proto::NodeStatus leader = Node(12, 0, 0);
  CHECK(ReplicaAgreement(leader, {}).ok());  // no followers

  leader.followers = {View("n1", 12, true), View("n2", 12, true)};
  CHECK(ReplicaAgreement(leader, {"n1", "n2"}).ok());

  leader.followers[1] = View("n2", 11, false);
  Status behind = ReplicaAgreement(leader, {"n1", "n2"});
  CHECK(behind.code() == StatusCode::kUnavailable);
  CHECK(behind.message() == "n2: applied 11 of n0's 12 committed batches");

  // agrees_at_last alone is not enough: applied must reach the leader's committed batches.
  leader.followers[1] = View("n2", 11, true);
  CHECK_FALSE(ReplicaAgreement(leader, {"n1", "n2"}).ok());

  leader.followers[1] = View("n2", 12, false);
  Status unconfirmed = ReplicaAgreement(leader, {"n1", "n2"});
  CHECK(unconfirmed.code() == StatusCode::kUnavailable);
  CHECK(unconfirmed.message().find("n2: has not confirmed n0's digest") != std::string::npos);

  // A follower of the topology the leader does not list is behind, not silently fine.
  leader.followers = {View("n1", 12, true)};
  Status missing = ReplicaAgreement(leader, {"n1", "n2"});
  CHECK(missing.code() == StatusCode::kUnavailable);
  CHECK(missing.message() == "n2: n0 lists no such follower");

  // A mismatch is final (kCorruption), whatever else holds.
  leader.followers = {View("n1", 12, true), View("n2", 12, true, 1)};
  Status bad = ReplicaAgreement(leader, {"n1", "n2"});
  CHECK(bad.code() == StatusCode::kCorruption);
  CHECK(bad.message() == "n2: 1 of its 12 reported digests differ from n0's");
  CHECK(FollowersCaughtUp(leader, {"n1", "n2"}));
  leader.followers[0] = View("n1", 11, false);
  CHECK_FALSE(FollowersCaughtUp(leader, {"n1", "n2"}));
  CHECK_FALSE(FollowersCaughtUp(leader, {"n1", "n3"}));
  CHECK(FollowersCaughtUp(leader, {}));
  leader.followers = {View("n1", 12, true)};
  leader.digest_mismatches = 2;
  CHECK(ReplicaAgreement(leader, {"n1"}).code() == StatusCode::kCorruption);
}

TEST_CASE("client stats: a stranded follower is named apart, neither waited for nor counted as agreeing") {
  proto::NodeStatus leader = Node(12, 0, 0);
  proto::FollowerView stranded = View("n2", 3, false);
  stranded.stranded = true;
  stranded.note = "its log ends at 40, the leader's starts at 900";
  leader.followers = {View("n1", 12, true), stranded};
  CHECK(ReplicaAgreement(leader, {"n1", "n2"}).ok());  // n1 agrees; n2 is out, not behind
  CHECK(FollowersCaughtUp(leader, {"n1", "n2"}));
  auto out = StrandedFollowers(leader);
  REQUIRE(out.size() == 1);
  CHECK(out[0]->node == "n2");
  // It never hides a mismatch of its own, nor a follower that is behind.
  leader.followers[1].mismatches = 1;
  CHECK(ReplicaAgreement(leader, {"n1", "n2"}).code() == StatusCode::kCorruption);
  leader.followers[1].mismatches = 0;
  leader.followers[0] = View("n1", 11, false);
  CHECK(ReplicaAgreement(leader, {"n1", "n2"}).code() == StatusCode::kUnavailable);
  leader.followers[1].stranded = false;
  CHECK(StrandedFollowers(leader).empty());
}
