// The ZooKeeper leader's retention rules (replication/zookeeper/zk_retention.h), one claim per
// test: what a cleanup round deletes, who is stranded, whom the leader waits for. Pure: no
// server, no threads, no clock.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "replication/zookeeper/zk_retention.h"

using namespace qrstore::replication::zookeeper;

namespace {

const StreamKey kS0{0, 0};

// Owns the kept batches the input's views point into.
class Scenario {
 public:
  Scenario(int followers, uint64_t retain_bytes) {
    in_.followers = followers;
    in_.retain_bytes = retain_bytes;
  }
  // Batches [first, first + count) of `bytes` each, acknowledged and kept.
  Scenario& Stream(StreamKey key, uint64_t first, uint64_t count, uint64_t bytes) {
    auto& m = kept_[key];
    for (uint64_t id = first; id < first + count; ++id) m[id] = KeptBatch{1, bytes};
    return *this;
  }
  Scenario& Follower(const std::string& id, bool live, std::map<StreamKey, uint64_t> next) {
    in_.registered.push_back(RetentionFollower{id, live, std::move(next), {}});
    return *this;
  }
  RetentionInput& Input() { return in_; }
  Scenario& MaxDeletes(size_t n) {
    in_.max_deletes = n;
    return *this;
  }
  RetentionPlan Plan() {
    in_.streams.clear();
    for (const auto& [key, m] : kept_) {
      uint64_t bytes = 0;
      for (const auto& [id, b] : m) bytes += b.bytes;
      in_.streams[key] = RetentionStream{&m, bytes, m.empty() ? 0 : m.rbegin()->first + 1};
    }
    return PlanRetention(in_);
  }

 private:
  std::map<StreamKey, std::map<uint64_t, KeptBatch>> kept_;
  RetentionInput in_;
};

StreamDeletes Deletes(const RetentionPlan& p, StreamKey key) {
  auto it = p.deletes.find(key);
  return it == p.deletes.end() ? StreamDeletes{} : it->second;
}

std::vector<std::string> StrandedIds(const RetentionPlan& p) {
  std::vector<std::string> ids;
  for (const auto& s : p.stranded) ids.push_back(s.id);
  return ids;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("zk retention: a majority of F+1 members needs (F+1)/2 followers") {
  CHECK(NeededFollowers(0) == 0);
  CHECK(NeededFollowers(1) == 1);  // 2 members: both
  CHECK(NeededFollowers(2) == 1);
  CHECK(NeededFollowers(3) == 2);
  CHECK(NeededFollowers(4) == 2);
  CHECK(NeededFollowers(5) == 3);
}

TEST_CASE("zk retention: followers keeping up: consumed batches go, the last consumed stays, nobody loses") {
  Scenario sc(2, 1'000'000);
  sc.Stream(kS0, 0, 100, 1000).Follower("a", true, {{kS0, 100}}).Follower("b", true, {{kS0, 90}});
  RetentionPlan p = sc.Plan();
  CHECK(Deletes(p, kS0).consumed == 89);  // ids 0..88; 89, b's last consumed, is kept
  CHECK(Deletes(p, kS0).evicted == 0);
  CHECK(p.kept_bytes_after == 11 * 1000);
  CHECK(p.stranded.empty());
  CHECK_FALSE(p.held_back);
  CHECK(p.waiting_for.empty());
}

TEST_CASE("zk retention: consumed batches after a follower's checkpoint stay (keep_from), within retain_bytes") {
  Scenario sc(2, 1'000'000);
  sc.Stream(kS0, 0, 100, 1000).Follower("a", true, {{kS0, 100}}).Follower("b", true, {{kS0, 90}});
  RetentionInput& in = sc.Input();
  in.registered[1].keep_from[kS0] = 60;  // b's restart would start at 60
  RetentionPlan p = sc.Plan();
  CHECK(Deletes(p, kS0).consumed == 59);  // ids 0..58: 59 stays too (the last consumed rule)
  CHECK(p.stranded.empty());
  CHECK_FALSE(p.held_back);
  // The byte budget still decides: with 20 KB kept at most, what the majority read goes.
  Scenario tight(2, 20'000);
  tight.Stream(kS0, 0, 100, 1000).Follower("a", true, {{kS0, 100}}).Follower("b", true, {{kS0, 90}});
  tight.Input().registered[1].keep_from[kS0] = 60;
  RetentionPlan q = tight.Plan();
  CHECK(q.kept_bytes_after <= 20'000);
  CHECK(Deletes(q, kS0).evicted > 0);
}

TEST_CASE("zk retention: the batches after the leader's own newest checkpoint stay (leader_keep_from), within "
          "retain_bytes") {
  // Both followers read everything; the leader's checkpoint is of batch 69: a member too far
  // behind fetches that checkpoint and reads on from 70.
  Scenario sc(2, 1'000'000);
  sc.Stream(kS0, 0, 100, 1000).Follower("a", true, {{kS0, 100}}).Follower("b", true, {{kS0, 100}});
  sc.Input().leader_keep_from[0] = 70;
  RetentionPlan p = sc.Plan();
  CHECK(Deletes(p, kS0).consumed == 70);  // ids 0..69
  CHECK(Deletes(p, kS0).evicted == 0);
  CHECK(p.kept_bytes_after == 30 * 1000);
  // Another group's floor does not hold this one.
  Scenario other(2, 1'000'000);
  other.Stream(kS0, 0, 100, 1000).Follower("a", true, {{kS0, 100}}).Follower("b", true, {{kS0, 100}});
  other.Input().leader_keep_from[1] = 10;
  CHECK(Deletes(other.Plan(), kS0).consumed == 99);
  // The byte budget still decides.
  Scenario tight(2, 20'000);
  tight.Stream(kS0, 0, 100, 1000).Follower("a", true, {{kS0, 100}}).Follower("b", true, {{kS0, 100}});
  tight.Input().leader_keep_from[0] = 70;
  RetentionPlan q = tight.Plan();
  CHECK(q.kept_bytes_after <= 20'000);
  CHECK(Deletes(q, kS0).evicted > 0);
}

TEST_CASE("zk retention: a dead follower's progress holds batches back only within retain_bytes") {
  SECTION("within the budget it resumes where it stopped") {
    Scenario sc(2, 1'000'000);
    sc.Stream(kS0, 0, 100, 1000).Follower("a", true, {{kS0, 100}}).Follower("b", false, {{kS0, 10}});
    RetentionPlan p = sc.Plan();
    CHECK(Deletes(p, kS0).consumed == 9);
    CHECK(Deletes(p, kS0).evicted == 0);
    CHECK(p.stranded.empty());
    CHECK_FALSE(p.held_back);
  }
  SECTION("past it the live majority goes on and the dead one is stranded, the leader not held back") {
    Scenario sc(2, 50'000);
    sc.Stream(kS0, 0, 100, 1000).Follower("a", true, {{kS0, 100}}).Follower("b", false, {{kS0, 10}});
    RetentionPlan p = sc.Plan();
    CHECK(Deletes(p, kS0).consumed == 9);
    CHECK(Deletes(p, kS0).evicted == 41);  // ids 9..49: down to 50 batches = retain_bytes
    CHECK(p.kept_bytes_after == 50'000);
    CHECK_FALSE(p.held_back);
    REQUIRE(p.stranded.size() == 1);
    const StrandedFollower& s = p.stranded[0];
    CHECK(s.id == "b");
    CHECK(s.group == 0);
    CHECK(s.planner == 0);
    CHECK(s.next == 10);
    CHECK(s.oldest_kept == 50);
    CHECK(s.by_this_round);
    CHECK(StrandedWarning(s, 50'000) ==
          "follower 'b' fell behind: deleting batches it has not read (it has read [0, 10) of stream g0/p0, the "
          "oldest kept is 50; replication.zookeeper.retain_bytes 50000): it cannot catch up from ZooKeeper any "
          "more and needs a state transfer (with checkpoints, it fetches the leader's)");
    CHECK(Contains(StrandedReason(s, 50'000), "follower 'b' fell behind"));
    CHECK(Contains(StrandedReason(s, 50'000), "needs a state transfer"));
  }
}

TEST_CASE("zk retention: F=2, a live but slow follower is a minority: it loses, the leader goes on") {
  Scenario sc(2, 50'000);
  sc.Stream(kS0, 0, 100, 1000).Follower("fast", true, {{kS0, 100}}).Follower("slow", true, {{kS0, 10}});
  RetentionPlan p = sc.Plan();
  CHECK(Deletes(p, kS0).evicted == 41);
  CHECK_FALSE(p.held_back);
  CHECK(StrandedIds(p) == std::vector<std::string>{"slow"});
}

TEST_CASE("zk retention: F=2, both followers behind: the leader waits for the most advanced one only") {
  Scenario sc(2, 50'000);
  sc.Stream(kS0, 0, 100, 1000).Follower("a", true, {{kS0, 30}}).Follower("b", true, {{kS0, 20}});
  RetentionPlan p = sc.Plan();
  CHECK(Deletes(p, kS0).consumed == 19);
  CHECK(Deletes(p, kS0).evicted == 11);  // ids 19..29: what 'a' has read
  CHECK(p.kept_bytes_after == 70'000);
  CHECK(p.held_back);
  CHECK(Contains(p.waiting_for, "'a' has read [0, 30)"));
  CHECK_FALSE(Contains(p.waiting_for, "'b'"));
  CHECK(Contains(p.waiting_for, "stream g0/p0"));
  CHECK(StrandedIds(p) == std::vector<std::string>{"b"});
}

TEST_CASE("zk retention: F=1, the leader waits for its one follower while it is live, not after") {
  SECTION("live: held back, naming it; it is not stranded") {
    Scenario sc(1, 50'000);
    sc.Stream(kS0, 0, 100, 1000).Follower("n2", true, {{kS0, 20}});
    RetentionPlan p = sc.Plan();
    CHECK(Deletes(p, kS0).consumed == 19);
    CHECK(Deletes(p, kS0).evicted == 1);  // its last consumed batch: nothing it still needs
    CHECK(p.held_back);
    CHECK(Contains(p.waiting_for, "80000 bytes kept > replication.zookeeper.retain_bytes 50000"));
    CHECK(Contains(p.waiting_for, "'n2' has read [0, 20)"));
    CHECK(Contains(p.waiting_for, "needs 1 of its 1 followers"));
    CHECK(p.stranded.empty());
  }
  SECTION("not live: the oldest batches go as with followers = 0; it is stranded") {
    Scenario sc(1, 50'000);
    sc.Stream(kS0, 0, 100, 1000).Follower("n2", false, {{kS0, 20}});
    RetentionPlan p = sc.Plan();
    CHECK(Deletes(p, kS0).consumed + Deletes(p, kS0).evicted == 50);
    CHECK_FALSE(p.held_back);
    CHECK(StrandedIds(p) == std::vector<std::string>{"n2"});
  }
}

TEST_CASE("zk retention: F=3, the leader waits for the 2 most advanced live followers") {
  SECTION("the third one loses") {
    Scenario sc(3, 50'000);
    sc.Stream(kS0, 0, 100, 1000)
        .Follower("a", true, {{kS0, 90}})
        .Follower("b", true, {{kS0, 60}})
        .Follower("c", true, {{kS0, 30}});
    RetentionPlan p = sc.Plan();
    CHECK(Deletes(p, kS0).consumed == 29);
    CHECK(Deletes(p, kS0).evicted == 21);
    CHECK_FALSE(p.held_back);
    CHECK(StrandedIds(p) == std::vector<std::string>{"c"});
  }
  SECTION("held back by the second most advanced, named with the first") {
    Scenario sc(3, 20'000);
    sc.Stream(kS0, 0, 100, 1000)
        .Follower("a", true, {{kS0, 90}})
        .Follower("b", true, {{kS0, 60}})
        .Follower("c", true, {{kS0, 30}});
    RetentionPlan p = sc.Plan();
    CHECK(Deletes(p, kS0).consumed + Deletes(p, kS0).evicted == 60);  // everything b has read
    CHECK(p.held_back);
    CHECK(Contains(p.waiting_for, "2 most advanced live followers"));
    CHECK(Contains(p.waiting_for, "'a' has read [0, 90), 'b' has read [0, 60)"));
    CHECK_FALSE(Contains(p.waiting_for, "'c'"));
  }
  SECTION("two of them dead: the leader waits for the one live follower only") {
    Scenario sc(3, 20'000);
    sc.Stream(kS0, 0, 100, 1000)
        .Follower("a", true, {{kS0, 90}})
        .Follower("b", false, {{kS0, 60}})
        .Follower("c", false, {{kS0, 30}});
    RetentionPlan p = sc.Plan();
    CHECK(Deletes(p, kS0).consumed + Deletes(p, kS0).evicted == 80);  // down to retain_bytes
    CHECK_FALSE(p.held_back);
    CHECK(StrandedIds(p) == std::vector<std::string>{"b", "c"});
  }
}

TEST_CASE("zk retention: followers = 0: the oldest batches past retain_bytes go, each stream keeps its newest") {
  const StreamKey a{0, 0}, b{0, 1};
  SECTION("the stream keeping the most bytes first") {
    Scenario sc(0, 25'000);
    sc.Stream(a, 0, 10, 10'000).Stream(b, 0, 5, 1000);
    RetentionPlan p = sc.Plan();
    CHECK(Deletes(p, a).evicted == 8);
    CHECK(Deletes(p, b).evicted == 0);
    CHECK(p.kept_bytes_after == 25'000);
    CHECK_FALSE(p.held_back);  // no followers: never
  }
  SECTION("never a stream's newest batch") {
    Scenario sc(0, 1);
    sc.Stream(a, 0, 10, 10'000).Stream(b, 0, 5, 1000);
    RetentionPlan p = sc.Plan();
    CHECK(Deletes(p, a).evicted == 9);
    CHECK(Deletes(p, b).evicted == 4);
    CHECK_FALSE(p.held_back);
  }
}

TEST_CASE("zk retention: a follower already stranded holds nothing back, in no rule") {
  Scenario sc(1, 20'000);
  sc.Stream(kS0, 50, 50, 1000).Follower("old", true, {{kS0, 10}});  // batches 0..49 are gone
  RetentionPlan p = sc.Plan();
  CHECK(Deletes(p, kS0).consumed == 0);
  CHECK(Deletes(p, kS0).evicted == 30);
  CHECK_FALSE(p.held_back);
  REQUIRE(p.stranded.size() == 1);
  CHECK_FALSE(p.stranded[0].by_this_round);
  CHECK(Contains(StrandedWarning(p.stranded[0], 20'000), "batches it has not read are gone"));
}

TEST_CASE("zk retention: fewer followers registered than configured: rule 1 waits, the budget still bounds") {
  SECTION("within the budget nothing goes (the missing follower may still start)") {
    Scenario sc(2, 1'000'000);
    sc.Stream(kS0, 0, 100, 1000).Follower("a", true, {{kS0, 100}});
    RetentionPlan p = sc.Plan();
    CHECK(p.deletes.empty());
  }
  SECTION("past it, what the live one has read goes") {
    Scenario sc(2, 50'000);
    sc.Stream(kS0, 0, 100, 1000).Follower("a", true, {{kS0, 100}});
    RetentionPlan p = sc.Plan();
    CHECK(Deletes(p, kS0).consumed == 0);
    CHECK(Deletes(p, kS0).evicted == 50);
    CHECK_FALSE(p.held_back);
  }
  SECTION("nobody registered: as with followers = 0") {
    Scenario sc(2, 50'000);
    sc.Stream(kS0, 0, 100, 1000);
    RetentionPlan p = sc.Plan();
    CHECK(Deletes(p, kS0).evicted == 50);
    CHECK_FALSE(p.held_back);
  }
}

TEST_CASE("zk retention: at most max_deletes per round, a hold for that says so") {
  Scenario sc(1, 1000);
  sc.Stream(kS0, 0, 100, 1000).Follower("a", true, {{kS0, 100}}).MaxDeletes(10);
  RetentionPlan p = sc.Plan();
  CHECK(Deletes(p, kS0).consumed == 10);
  CHECK(Deletes(p, kS0).evicted == 0);
  CHECK(p.held_back);
  CHECK(Contains(p.waiting_for, "more to delete than the 10 deletions of one cleanup round"));
}

TEST_CASE("zk retention: stranded followers come in id order, one entry per group, counting its streams") {
  const StreamKey g0p0{0, 0}, g0p1{0, 1}, g1p0{1, 0};
  Scenario sc(2, 0);  // no budget: only what was gone before
  sc.Stream(g0p0, 10, 5, 100).Stream(g0p1, 10, 5, 100).Stream(g1p0, 10, 5, 100);
  sc.Follower("z", true, {{g0p0, 3}, {g0p1, 4}, {g1p0, 12}});
  sc.Follower("m", false, {{g0p0, 12}, {g0p1, 12}, {g1p0, 2}});
  RetentionPlan p = sc.Plan();
  REQUIRE(p.stranded.size() == 2);
  CHECK(p.stranded[0].id == "m");
  CHECK(p.stranded[0].group == 1);
  CHECK(p.stranded[1].id == "z");
  CHECK(p.stranded[1].group == 0);
  CHECK(p.stranded[1].planner == 0);
  CHECK(p.stranded[1].next == 3);
  CHECK(p.stranded[1].streams == 2);
  CHECK(Contains(StrandedReason(p.stranded[1], 0), "(and 1 more streams of group 0)"));
  // Neither holds anything back on the streams where it is stranded.
  CHECK(Deletes(p, g1p0).consumed == 1);  // z's 12 - 1: m (stranded in group 1) does not count
  CHECK(Deletes(p, g0p0).consumed == 1);  // m's 12 - 1: z (stranded in group 0) does not count
}

TEST_CASE("leader floor: the checkpoint before the newest, lowered while a fetch holds an older one", "[retention]") {
  LeaderFloor f;
  CHECK(f.Floor(0, 0) == UINT64_MAX);  // no checkpoints: nothing kept for the leader's sake
  f.RetainFrom(0, 0);                  // started with no checkpoint: a restart replays from 0
  CHECK(f.Floor(0, 0) == 0);
  f.RetainFrom(0, 20);                 // checkpoint of 19
  CHECK(f.Floor(0, 0) == 0);           // the one before the newest
  f.RetainFrom(0, 40);
  CHECK(f.Floor(0, 0) == 20);
  CHECK(f.RetainedFrom(0) == 40);
  f.RetainFrom(0, 30);                 // never backwards
  CHECK(f.RetainedFrom(0) == 40);
  CHECK(f.Floor(0, 0) == 20);

  // A member fetches the checkpoint of 39 at t = 100; the leader checkpoints twice meanwhile.
  f.HoldFrom(0, 40, /*until=*/1100, /*now=*/100);
  f.RetainFrom(0, 60);
  f.RetainFrom(0, 80);
  CHECK(f.Floor(0, 200) == 40);        // held: without the hold it would be 60
  CHECK(f.Floor(0, 1099) == 40);
  CHECK(f.Floor(0, 1100) == 60);       // expired: back to the checkpoint before the newest
  // Another fetch while one holds: the lower batch, the later expiry.
  f.HoldFrom(0, 80, 2000, 1200);
  f.HoldFrom(0, 60, 1500, 1300);
  CHECK(f.Floor(0, 1400) == 60);
  CHECK(f.Floor(0, 1900) == 60);
  CHECK(f.Floor(0, 2000) == 60);       // expired at 2000: the floor is the one before the newest, 60
  // After expiry a new hold replaces the old one whatever its batch.
  f.RetainFrom(0, 100);
  f.HoldFrom(0, 90, 3000, 2500);
  CHECK(f.Floor(0, 2600) == 80);       // min(before newest = 80, hold 90)
  // Groups are separate.
  CHECK(f.Floor(1, 2600) == UINT64_MAX);
}
