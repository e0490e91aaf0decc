// RaftReplicator end to end, in one process: three members over real nng TCP on 127.0.0.1
// (ports chosen free at run time). Covers election of the preferred leader, ReplicateData
// callbacks, exact in-order delivery at followers (several groups and planner streams, a
// 5 MB payload), sequence checks, leader failover with NextBatchId continuing each stream,
// and catch-up of restarted members (memory log and disk log).
#include <stdlib.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "replication/raft/log_storage.h"
#include "tests/integration/raft/raft_test_util.h"

namespace qrstore::replication::raft {
namespace {

using testing::Collector;
using testing::FreePorts;
using testing::MakeReplicator;
using testing::Payload;
using testing::WaitFor;

constexpr int kTimeoutMs = 15000;

std::string TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "qrstore-raft-it-XXXXXX").string();
  char* d = ::mkdtemp(tmpl.data());
  REQUIRE(d != nullptr);
  return tmpl;
}

// A 4 MB log that lets a live follower lack at most 1 MB (payloads up to 1 MB): what the flow
// control and stranding tests replicate five times over.
std::vector<std::string> SmallLogBudget() {
  return {"replication.max_payload_bytes=1048576", "replication.raft.max_log_bytes=4194304",
          "replication.raft.max_lag_bytes=1048576", "replication.raft.max_uncommitted_bytes=1048576"};
}

size_t PayloadSize(uint64_t batch) { return 1000 + (batch * 7919) % 20000; }

// Replicates batches [from, to) of (group, planner) on `leader`; requires every callback OK.
void ReplicateRange(RaftReplicator& leader, uint32_t group, uint32_t planner, uint64_t from, uint64_t to) {
  Collector c;
  for (uint64_t b = from; b < to; ++b) {
    leader.ReplicateData({group, planner, b}, Payload(planner, b, PayloadSize(b)), c.ReplicateCb());
  }
  REQUIRE(c.WaitCount(to - from, kTimeoutMs));
  for (const auto& [b, st] : c.statuses()) {
    INFO("batch " << b << ": " << st.ToString());
    REQUIRE(st.ok());
  }
}

// Asks `member` for batches [from, to) of (group, planner) and checks exact bytes and order.
void ExpectReceive(RaftReplicator& member, uint32_t group, uint32_t planner, uint64_t from, uint64_t to,
                   int timeout_ms = kTimeoutMs) {
  Collector c;
  for (uint64_t b = from; b < to; ++b) member.ReceiveData({group, planner, b}, c.ReceiveCb());
  REQUIRE(c.WaitCount(to - from, timeout_ms));
  auto statuses = c.statuses();
  auto bytes = c.bytes();
  for (uint64_t b = from; b < to; ++b) {
    INFO("group " << group << " planner " << planner << " batch " << b << ": " << statuses[b].ToString());
    REQUIRE(statuses[b].ok());
    REQUIRE(bytes[b] == Payload(planner, b, PayloadSize(b)));
  }
  std::vector<uint64_t> expected;
  for (uint64_t b = from; b < to; ++b) expected.push_back(b);
  REQUIRE(c.order() == expected);
}

int WaitForLeader(const std::vector<std::unique_ptr<RaftReplicator>>& r, uint32_t group) {
  int leader = -1;
  WaitFor(
      [&] {
        for (size_t i = 0; i < r.size(); ++i) {
          if (r[i] && r[i]->IsLeader(group)) leader = static_cast<int>(i);
        }
        return leader >= 0;
      },
      kTimeoutMs);
  return leader;
}

TEST_CASE("raft replicator: elect then replicate then fail over and continue", "[raft][integration]") {
  const auto ports = FreePorts(3);
  std::vector<std::unique_ptr<RaftReplicator>> r;
  // Elections after 2-4 s: the raft thread handles the 5 MB entry below in one loop iteration,
  // which took more than the default 0.5 s under ThreadSanitizer on a loaded host, long enough
  // for the leader to step down (CheckQuorum) before the test looked.
  for (int i = 0; i < 3; ++i) {
    r.push_back(MakeReplicator(ports, i,
                               {"replication.groups=2", "replication.planners=2", "replication.raft.election_ticks=200"}));
    REQUIRE(r.back() != nullptr);
  }
  for (auto& m : r) REQUIRE(m->Start().ok());

  // The preferred leader (member 0) wins the first election of both groups.
  REQUIRE(WaitForLeader(r, 0) == 0);
  REQUIRE(WaitForLeader(r, 1) == 0);
  REQUIRE(r[0]->NextBatchId(0, 0).value() == 0);
  REQUIRE(r[0]->NextBatchId(1, 1).value() == 0);
  REQUIRE(!r[1]->NextBatchId(0, 0).ok());
  REQUIRE(!r[1]->IsLeader(0));

  // Followers ask first (ReceiveData before the data exists), then the leader replicates.
  Collector f1, f2;
  constexpr uint64_t kSmall = 40;
  for (uint64_t b = 0; b <= kSmall; ++b) {
    r[1]->ReceiveData({0, 0, b}, f1.ReceiveCb());
    r[2]->ReceiveData({0, 0, b}, f2.ReceiveCb());
  }
  Collector lead;
  for (uint64_t b = 0; b < kSmall; ++b) r[0]->ReplicateData({0, 0, b}, Payload(0, b, PayloadSize(b)), lead.ReplicateCb());
  const std::string big = Payload(0, kSmall, 5 << 20);  // 5 MB in one entry
  r[0]->ReplicateData({0, 0, kSmall}, big, lead.ReplicateCb());
  REQUIRE(lead.WaitCount(kSmall + 1, kTimeoutMs));
  for (const auto& [b, st] : lead.statuses()) {
    INFO("batch " << b << ": " << st.ToString());
    REQUIRE(st.ok());
  }
  for (Collector* f : {&f1, &f2}) {
    REQUIRE(f->WaitCount(kSmall + 1, kTimeoutMs));
    auto bytes = f->bytes();
    for (uint64_t b = 0; b < kSmall; ++b) REQUIRE(bytes[b] == Payload(0, b, PayloadSize(b)));
    REQUIRE(bytes[kSmall].size() == big.size());
    REQUIRE(bytes[kSmall] == big);
    std::vector<uint64_t> expected;
    for (uint64_t b = 0; b <= kSmall; ++b) expected.push_back(b);
    REQUIRE(f->order() == expected);
  }
  REQUIRE(r[0]->NextBatchId(0, 0).value() == kSmall + 1);

  // Other streams are independent: group 1 planner 1, and group 0 planner 1.
  ReplicateRange(*r[0], 1, 1, 0, 10);
  ReplicateRange(*r[0], 0, 1, 0, 5);
  ExpectReceive(*r[2], 1, 1, 0, 10);
  ExpectReceive(*r[1], 0, 1, 0, 5);

  // Out-of-sequence batch ids are refused without touching the stream.
  Collector bad;
  r[0]->ReplicateData({0, 0, 3}, "stale", bad.ReplicateCb());
  r[0]->ReplicateData({0, 0, kSmall + 5}, "gap", bad.ReplicateCb());
  REQUIRE(bad.WaitCount(2, kTimeoutMs));
  REQUIRE(bad.statuses()[3].code() == StatusCode::kInvalidArgument);
  REQUIRE(bad.statuses()[kSmall + 5].code() == StatusCode::kInvalidArgument);
  // Proposals at a follower are refused.
  Collector notleader;
  r[1]->ReplicateData({0, 0, kSmall + 1}, "x", notleader.ReplicateCb());
  REQUIRE(notleader.WaitCount(1, kTimeoutMs));
  REQUIRE(notleader.statuses()[kSmall + 1].code() == StatusCode::kUnavailable);

  // Who leads, as each member knows it.
  REQUIRE(r[0]->Leader(0).self);
  WaitFor([&] { return r[1]->Leader(0).known && r[2]->Leader(0).known; }, kTimeoutMs);
  const replication::LeaderView before = r[1]->Leader(0);
  REQUIRE((before.known && !before.self && before.member == 0 && before.term > 0));

  // The followers post receives ahead of the stream, as a follower's feed does.
  Collector ahead1, ahead2;
  for (uint64_t b = kSmall + 1; b <= kSmall + 3; ++b) {
    r[1]->ReceiveData({0, 0, b}, ahead1.ReceiveCb());
    r[2]->ReceiveData({0, 0, b}, ahead2.ReceiveCb());
  }

  // Fail over: stop the leader; a survivor is elected and continues every stream.
  r[0]->Stop();
  r[0].reset();
  const int nl = WaitForLeader(r, 0);
  REQUIRE(nl >= 1);
  const int follower = nl == 1 ? 2 : 1;
  // The new leader cancels the receives it posted for batches it now replicates itself: they
  // fail at once (kAborted), and its own proposals below never satisfy them.
  Collector& own_ahead = nl == 1 ? ahead1 : ahead2;
  Collector& other_ahead = nl == 1 ? ahead2 : ahead1;
  r[nl]->CancelReceives(0);
  REQUIRE(own_ahead.WaitCount(3, kTimeoutMs));
  for (const auto& [b, st] : own_ahead.statuses()) {
    INFO("batch " << b << ": " << st.ToString());
    REQUIRE(st.code() == StatusCode::kAborted);
  }
  REQUIRE(r[nl]->Leader(0).self);
  WaitFor([&] { return r[follower]->Leader(0).member == static_cast<uint32_t>(nl); }, kTimeoutMs);
  REQUIRE(r[follower]->Leader(0).member == static_cast<uint32_t>(nl));
  REQUIRE(r[follower]->Leader(0).term > before.term);
  REQUIRE(r[nl]->NextBatchId(0, 0).value() == kSmall + 1);
  REQUIRE(r[nl]->NextBatchId(0, 1).value() == 5);
  REQUIRE(WaitForLeader(r, 1) >= 1);
  const int nl1 = WaitForLeader(r, 1);
  REQUIRE(r[nl1]->NextBatchId(1, 1).value() == 10);

  ReplicateRange(*r[nl], 0, 0, kSmall + 1, kSmall + 21);
  ReplicateRange(*r[nl1], 1, 1, 10, 20);
  ExpectReceive(*r[follower], 0, 0, kSmall + 4, kSmall + 21);  // [kSmall + 1, + 3]: asked for before
  ExpectReceive(*r[nl1 == 1 ? 2 : 1], 1, 1, 10, 20);
  REQUIRE(r[follower]->GroupStatus(0).duplicates_dropped == 0);
  // The other follower's receives posted before the failover were served by the new leader's
  // batches, exactly; the new leader's cancelled ones stayed cancelled.
  REQUIRE(other_ahead.WaitCount(3, kTimeoutMs));
  for (uint64_t b = kSmall + 1; b <= kSmall + 3; ++b) {
    REQUIRE(other_ahead.statuses()[b].ok());
    REQUIRE(other_ahead.bytes()[b] == Payload(0, b, PayloadSize(b)));
  }
  REQUIRE(own_ahead.statuses().size() == 3);
  for (const auto& [b, st] : own_ahead.statuses()) REQUIRE(st.code() == StatusCode::kAborted);

  for (auto& m : r) {
    if (m) m->Stop();
  }
}

// Needs the leader to forget the match index of a member that lost its log (the line marked
// [raft-driver] in core.cc StepAppendResponse): without it the leader resends from the old
// match forever and this test fails.
TEST_CASE("raft replicator: a restarted in-memory follower catches up from the leader", "[raft][integration]") {
  const auto ports = FreePorts(3);
  std::vector<std::unique_ptr<RaftReplicator>> r;
  for (int i = 0; i < 3; ++i) r.push_back(MakeReplicator(ports, i));
  for (auto& m : r) REQUIRE(m->Start().ok());
  REQUIRE(WaitForLeader(r, 0) == 0);
  ReplicateRange(*r[0], 0, 0, 0, 20);
  r[2]->Stop();
  r[2].reset();
  ReplicateRange(*r[0], 0, 0, 20, 40);  // commits with 2 of 3
  r[2] = MakeReplicator(ports, 2);
  REQUIRE(r[2]->Start().ok());
  ExpectReceive(*r[2], 0, 0, 0, 40);  // the whole stream, replayed from the leader's log
  ReplicateRange(*r[0], 0, 0, 40, 50);
  ExpectReceive(*r[2], 0, 0, 40, 50);
  for (auto& m : r) m->Stop();
}

TEST_CASE("raft replicator: a restarted disk-log member recovers its log and catches up", "[raft][integration]") {
  const std::string root = TempDir();
  const auto ports = FreePorts(3);
  auto make = [&](int i) {
    return MakeReplicator(ports, i,
                          {"replication.raft.log=disk", "replication.raft.dir=" + root + "/m" + std::to_string(i),
                           "replication.raft.fsync=batch", "replication.raft.segment_bytes=65536"});
  };
  std::vector<std::unique_ptr<RaftReplicator>> r;
  for (int i = 0; i < 3; ++i) r.push_back(make(i));
  for (auto& m : r) REQUIRE(m->Start().ok());
  REQUIRE(WaitForLeader(r, 0) == 0);
  ReplicateRange(*r[0], 0, 0, 0, 30);
  ExpectReceive(*r[2], 0, 0, 0, 30);
  r[2]->Stop();
  r[2].reset();
  {
    // What member 2 left on disk: its whole log (no-op + 30 batches) with a hard state.
    DiskLogOptions o;
    o.dir = root + "/m2/group-0";
    auto disk = DiskLogStorage::Open(o);
    REQUIRE(disk.ok());
    REQUIRE(disk.value()->last_index() >= 31);
    REQUIRE(disk.value()->Recovered().hard.term >= 1);
    REQUIRE(disk.value()->recovered_truncated_bytes() == 0);
  }
  ReplicateRange(*r[0], 0, 0, 30, 60);
  r[2] = make(2);
  REQUIRE(r[2]->Start().ok());
  ExpectReceive(*r[2], 0, 0, 0, 60);

  // Now the leader restarts from its disk log: the others elect a new leader, which continues
  // the stream; the old leader rejoins as a follower and receives everything.
  r[0]->Stop();
  r[0].reset();
  const int nl = WaitForLeader(r, 0);
  REQUIRE(nl >= 1);
  REQUIRE(r[nl]->NextBatchId(0, 0).value() == 60);
  ReplicateRange(*r[nl], 0, 0, 60, 70);
  r[0] = make(0);
  REQUIRE(r[0]->Start().ok());
  ExpectReceive(*r[0], 0, 0, 0, 70);
  for (auto& m : r) m->Stop();
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
}

}  // namespace
}  // namespace qrstore::replication::raft

namespace qrstore::replication::raft {
namespace {

TEST_CASE("raft replicator: a follower that does not receive stays bounded and then catches up", "[raft][integration]") {
  const auto ports = testing::FreePorts(3);
  std::vector<std::unique_ptr<RaftReplicator>> r;
  // Member 2 has small budgets (it pauses, then refuses appends beyond 1 MB of log); the
  // others keep the default 256 MB log, so the leader still holds what member 2 will need.
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> extra;
    if (i == 2) {
      extra = {"replication.raft.max_buffered_bytes=200000", "replication.raft.max_log_bytes=1048576",
               "replication.raft.max_lag_bytes=262144", "replication.raft.max_uncommitted_bytes=262144",
               "replication.max_payload_bytes=524288"};
    }
    r.push_back(testing::MakeReplicator(ports, i, extra));
  }
  for (auto& m : r) REQUIRE(m->Start().ok());
  REQUIRE(WaitForLeader(r, 0) == 0);
  // 120 batches of ~100 KB = 12 MB; member 1's application receives, member 2's asks for
  // nothing meanwhile.
  testing::Collector lead, f1;
  constexpr uint64_t kBatches = 120;
  for (uint64_t b = 0; b < kBatches; ++b) r[1]->ReceiveData({0, 0, b}, f1.ReceiveCb());
  for (uint64_t b = 0; b < kBatches; ++b) {
    r[0]->ReplicateData({0, 0, b}, testing::Payload(0, b, 100000), lead.ReplicateCb());
  }
  REQUIRE(lead.WaitCount(kBatches, kTimeoutMs));  // the quorum (0 and 1) is unaffected
  for (const auto& [b, st] : lead.statuses()) REQUIRE(st.ok());
  // Member 2 paused applying: far less than the 12 MB is buffered. The bound is the buffer
  // limit plus at most one Ready of committed entries (max_apply_bytes, at least 4 MB here)
  // plus the batch that crossed the limit.
  REQUIRE(WaitFor([&] { return r[2]->GroupStatus(0).buffered_bytes >= 200000; }, kTimeoutMs));
  // A "nothing more arrives" check needs some time to pass: give member 2 ample time to take
  // everything if it were unbounded (the whole 6 MB reached member 1 already).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const uint64_t buffered = r[2]->GroupStatus(0).buffered_bytes;
  INFO("buffered " << buffered);
  REQUIRE(buffered <= 200000 + (4u << 20) + 100000);
  // Once its application asks, everything arrives, in order, intact.
  testing::Collector f;
  for (uint64_t b = 0; b < kBatches; ++b) r[2]->ReceiveData({0, 0, b}, f.ReceiveCb());
  REQUIRE(f.WaitCount(kBatches, kTimeoutMs));
  auto bytes = f.bytes();
  for (uint64_t b = 0; b < kBatches; ++b) REQUIRE(bytes[b] == testing::Payload(0, b, 100000));
  for (auto& m : r) m->Stop();
}

TEST_CASE("raft replicator: a member whose application then asks only for later batches is not held by what it buffered",
          "[raft][integration]") {
  // A restart from a checkpoint: the member applies its log from the start before its
  // application asks for anything, the old batches fill its buffer and applying pauses; then
  // the application asks only for the batches after its checkpoint. Those must arrive: the
  // buffered older batches will never be asked for (once stuck like this, a restarted raft
  // leader never applied its own term's entries and never served).
  const auto ports = testing::FreePorts(3);
  std::vector<std::unique_ptr<RaftReplicator>> r;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> extra;
    if (i == 2) extra = {"replication.raft.max_buffered_bytes=200000"};
    r.push_back(testing::MakeReplicator(ports, i, extra));
  }
  for (auto& m : r) REQUIRE(m->Start().ok());
  REQUIRE(WaitForLeader(r, 0) == 0);
  testing::Collector lead;
  constexpr uint64_t kBatches = 120, kResume = 100;
  for (uint64_t b = 0; b < kBatches; ++b) {
    r[0]->ReplicateData({0, 0, b}, testing::Payload(0, b, 100000), lead.ReplicateCb());
  }
  REQUIRE(lead.WaitCount(kBatches, kTimeoutMs));
  REQUIRE(WaitFor([&] { return r[2]->GroupStatus(0).buffered_bytes >= 200000; }, kTimeoutMs));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // paused: it holds the oldest ones
  testing::Collector f;
  for (uint64_t b = kResume; b < kBatches; ++b) r[2]->ReceiveData({0, 0, b}, f.ReceiveCb());
  REQUIRE(f.WaitCount(kBatches - kResume, kTimeoutMs));
  auto bytes = f.bytes();
  auto statuses = f.statuses();
  for (uint64_t b = kResume; b < kBatches; ++b) {
    INFO("batch " << b << ": " << statuses[b].ToString());
    REQUIRE(statuses[b].ok());
    REQUIRE(bytes[b] == testing::Payload(0, b, 100000));
  }
  for (auto& m : r) m->Stop();
}

TEST_CASE("raft replicator: batches the application skips leave the buffer's byte count", "[raft][integration]") {
  // Committed batches wait for the application; asking for a later one drops the older ones
  // (skipped: it asks in order). Their bytes must leave the count too, or a restarted member
  // carries phantom bytes toward max_buffered_bytes (pausing its apply for good past it).
  const auto ports = testing::FreePorts(3);
  std::vector<std::unique_ptr<RaftReplicator>> r;
  for (int i = 0; i < 3; ++i) r.push_back(testing::MakeReplicator(ports, i));
  for (auto& m : r) REQUIRE(m->Start().ok());
  REQUIRE(WaitForLeader(r, 0) == 0);
  testing::Collector lead;
  constexpr uint64_t kBatches = 10, kBytes = 1000;
  for (uint64_t b = 0; b < kBatches; ++b) {
    r[0]->ReplicateData({0, 0, b}, testing::Payload(0, b, kBytes), lead.ReplicateCb());
  }
  REQUIRE(lead.WaitCount(kBatches, kTimeoutMs));
  REQUIRE(WaitFor([&] { return r[1]->GroupStatus(0).buffered_bytes == kBatches * kBytes; }, kTimeoutMs));
  // Batch 5 is buffered: 0-4 are skipped with it, 6-9 stay.
  testing::Collector f;
  r[1]->ReceiveData({0, 0, 5}, f.ReceiveCb());
  REQUIRE(f.WaitCount(1, kTimeoutMs));
  REQUIRE(WaitFor([&] { return r[1]->GroupStatus(0).buffered_bytes == 4 * kBytes; }, kTimeoutMs));
  // Batch 9: 6-8 skipped, nothing left.
  r[1]->ReceiveData({0, 0, 9}, f.ReceiveCb());
  REQUIRE(f.WaitCount(2, kTimeoutMs));
  REQUIRE(WaitFor([&] { return r[1]->GroupStatus(0).buffered_bytes == 0; }, kTimeoutMs));
  CHECK(r[1]->GroupStatus(0).buffered_bytes == 0);
  for (auto& m : r) m->Stop();
}

TEST_CASE("raft replicator: a live follower that stops receiving never holds the quorum back, it falls out of the log",
          "[raft][integration]") {
  // The leader keeps only 4 MB of log and lets the quorum lack at most 1 MB. Member 2's
  // application asks for nothing, so member 2 pauses and stops taking entries (a paused or
  // overloaded follower). The quorum (0 and 1) must go on regardless: a majority never waits
  // for a minority. The leader compacts past member 2's position, reports it stranded, and
  // its heartbeats tell member 2 so (there are no snapshots yet to bring it back).
  const auto ports = testing::FreePorts(3);
  std::vector<std::unique_ptr<RaftReplicator>> r;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> extra = SmallLogBudget();
    if (i == 2) extra.push_back("replication.raft.max_buffered_bytes=200000");
    r.push_back(testing::MakeReplicator(ports, i, extra));
    REQUIRE(r.back() != nullptr);
  }
  for (auto& m : r) REQUIRE(m->Start().ok());
  REQUIRE(WaitForLeader(r, 0) == 0);
  constexpr uint64_t kBatches = 200;  // 20 MB: five times the leader's log budget
  testing::Collector lead, f1;
  for (uint64_t b = 0; b < kBatches; ++b) r[1]->ReceiveData({0, 0, b}, f1.ReceiveCb());
  for (uint64_t b = 0; b < kBatches; ++b) {
    r[0]->ReplicateData({0, 0, b}, testing::Payload(0, b, 100000), lead.ReplicateCb());
  }
  REQUIRE(lead.WaitCount(kBatches, kTimeoutMs));  // every batch committed without member 2
  for (const auto& [b, st] : lead.statuses()) REQUIRE(st.ok());
  REQUIRE(f1.WaitCount(kBatches, kTimeoutMs));
  CHECK(r[0]->GroupStatus(0).lag_waits == 0);  // the leader never waited for member 2
  REQUIRE(WaitFor([&] { return r[0]->GroupStatus(0).stranded_members == std::vector<NodeId>{2}; }, kTimeoutMs));
  const GroupHealth leader_view = r[0]->Health(0);
  REQUIRE(leader_view.stranded.size() == 1);
  CHECK(leader_view.stranded[0].member == 2);
  CHECK_THAT(leader_view.stranded[0].reason, Catch::Matchers::Contains("cannot be caught up"));
  CHECK(leader_view.self_stranded.empty());
  // Member 2 learns it from the leader's heartbeats; member 1 is not stranded.
  REQUIRE(WaitFor([&] { return r[2]->GroupStatus(0).stranded_leader_log_start > 0; }, kTimeoutMs));
  CHECK_THAT(r[2]->Health(0).self_stranded, Catch::Matchers::Contains("no longer holds the entries this member needs"));
  CHECK(r[1]->Health(0).self_stranded.empty());
  CHECK(r[1]->GroupStatus(0).stranded_leader_log_start == 0);
  for (auto& m : r) m->Stop();
}

TEST_CASE("raft replicator: a member that is down does not stall the leader", "[raft][integration]") {
  // Flow control counts only live followers: with member 2 never started, the leader (with
  // member 1 as its quorum) replicates five times its log budget without waiting for it.
  const auto ports = testing::FreePorts(3);
  std::vector<std::unique_ptr<RaftReplicator>> r;
  for (int i = 0; i < 2; ++i) {
    r.push_back(testing::MakeReplicator(ports, i, SmallLogBudget()));
    REQUIRE(r.back() != nullptr);
  }
  for (auto& m : r) REQUIRE(m->Start().ok());
  REQUIRE(WaitForLeader(r, 0) == 0);
  constexpr uint64_t kBatches = 200;
  testing::Collector lead, f1;
  for (uint64_t b = 0; b < kBatches; ++b) r[1]->ReceiveData({0, 0, b}, f1.ReceiveCb());
  for (uint64_t b = 0; b < kBatches; ++b) {
    r[0]->ReplicateData({0, 0, b}, testing::Payload(0, b, 100000), lead.ReplicateCb());
  }
  REQUIRE(lead.WaitCount(kBatches, kTimeoutMs));
  for (const auto& [b, st] : lead.statuses()) REQUIRE(st.ok());
  REQUIRE(f1.WaitCount(kBatches, kTimeoutMs));
  for (auto& m : r) m->Stop();
}

TEST_CASE("raft replicator: a member the log no longer covers is reported stranded", "[raft][integration]") {
  // Member 2 is down while the leader replicates five times its 4 MB log budget, so the leader
  // compacts past what member 2 (empty log) needs. With no snapshots it can never be caught
  // up: the leader must say so (GroupStatus's stranded_members, and a warning naming it)
  // instead of leaving only a growing lag; member 1, live, is not stranded. Starting member 2
  // then changes nothing: it stays stranded and does not catch up.
  const auto ports = testing::FreePorts(3);
  const std::vector<std::string> extra = SmallLogBudget();
  std::vector<std::unique_ptr<RaftReplicator>> r;
  for (int i = 0; i < 2; ++i) {
    r.push_back(testing::MakeReplicator(ports, i, extra));
    REQUIRE(r.back() != nullptr);
  }
  for (auto& m : r) REQUIRE(m->Start().ok());
  REQUIRE(WaitForLeader(r, 0) == 0);
  constexpr uint64_t kBatches = 200;  // 20 MB
  testing::Collector lead, f1, f2;
  for (uint64_t b = 0; b < kBatches; ++b) r[1]->ReceiveData({0, 0, b}, f1.ReceiveCb());
  // Within the budget nobody is stranded: the log still starts at index 1.
  for (uint64_t b = 0; b < 10; ++b) r[0]->ReplicateData({0, 0, b}, testing::Payload(0, b, 100000), lead.ReplicateCb());
  REQUIRE(lead.WaitCount(10, kTimeoutMs));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // ten ticks: the driver looked
  CHECK(r[0]->GroupStatus(0).stranded_members.empty());
  for (uint64_t b = 10; b < kBatches; ++b) {
    r[0]->ReplicateData({0, 0, b}, testing::Payload(0, b, 100000), lead.ReplicateCb());
  }
  REQUIRE(lead.WaitCount(kBatches, kTimeoutMs));
  REQUIRE(WaitFor([&] { return r[0]->GroupStatus(0).stranded_members == std::vector<NodeId>{2}; }, kTimeoutMs));
  r.push_back(testing::MakeReplicator(ports, 2, extra));
  REQUIRE(r.back() != nullptr);
  REQUIRE(r[2]->Start().ok());
  for (uint64_t b = 0; b < kBatches; ++b) r[2]->ReceiveData({0, 0, b}, f2.ReceiveCb());
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // heartbeats reach it meanwhile
  CHECK(r[0]->GroupStatus(0).stranded_members == std::vector<NodeId>{2});
  // It may get the first few batches (appends its transport queued while it was down, sent
  // before the compaction), never the rest.
  INFO("member 2 received " << f2.statuses().size() << " batches");
  CHECK(f2.statuses().size() < kBatches / 2);
  REQUIRE(f1.WaitCount(kBatches, kTimeoutMs));
  for (auto& m : r) m->Stop();
}

TEST_CASE("raft replicator: a member behind the log continues from a checkpoint the leader offers",
          "[raft][integration]") {
  // As above, member 2 is down while the leader's log passes its budget, but every member keeps
  // what follows batch 120 (RetainFrom(121): "a checkpoint of batch 120 exists"). Started with an
  // application that waits from batch 0, member 2 is offered to continue after the leader's
  // first index and says it is not there yet (Health().resume_needs_next: the first batch the
  // log holds whole); an application that restarted from a checkpoint of batch 120 (it asks for
  // 121 on) takes the offer by itself and receives every later batch, in order, while the
  // leader never stops.
  const auto ports = testing::FreePorts(3);
  const std::vector<std::string> extra = SmallLogBudget();
  std::vector<std::unique_ptr<RaftReplicator>> r;
  for (int i = 0; i < 2; ++i) {
    r.push_back(testing::MakeReplicator(ports, i, extra));
    REQUIRE(r.back() != nullptr);
  }
  for (auto& m : r) REQUIRE(m->Start().ok());
  REQUIRE(WaitForLeader(r, 0) == 0);
  constexpr uint64_t kBatches = 200;  // 20 MB
  for (auto& m : r) m->RetainFrom(0, 121);
  testing::Collector lead, f1;
  for (uint64_t b = 0; b < kBatches; ++b) r[1]->ReceiveData({0, 0, b}, f1.ReceiveCb());
  for (uint64_t b = 0; b < kBatches; ++b) {
    r[0]->ReplicateData({0, 0, b}, testing::Payload(0, b, 100000), lead.ReplicateCb());
  }
  REQUIRE(lead.WaitCount(kBatches, kTimeoutMs));
  REQUIRE(WaitFor([&] { return r[0]->GroupStatus(0).stranded_members == std::vector<NodeId>{2}; }, kTimeoutMs));
  {
    auto m2 = testing::MakeReplicator(ports, 2, extra);
    REQUIRE(m2 != nullptr);
    REQUIRE(m2->Start().ok());
    testing::Collector early;
    for (uint64_t b = 0; b < 5; ++b) m2->ReceiveData({0, 0, b}, early.ReceiveCb());
    // (the driver reports being stranded once a tick, the offer as it comes)
    GroupHealth h;
    REQUIRE(WaitFor(
        [&] {
          h = m2->Health(0);
          return h.resume_needs_next > 0 && h.self_stranded.find("or later") != std::string::npos;
        },
        kTimeoutMs));
    // The offer names the first batch the leader's log still holds whole: past what member 2
    // waits for, never past the batch after the retained point.
    CHECK(h.resume_needs_next > 5);
    CHECK(h.resume_needs_next <= 121);
    CHECK(h.self_stranded.find("checkpoint of batch " + std::to_string(h.resume_needs_next - 1) + " or later") !=
          std::string::npos);
    CHECK(m2->GroupStatus(0).snapshots_installed == 0);
    m2->Stop();
  }
  // Restarted "from its checkpoint of batch 120".
  r.push_back(testing::MakeReplicator(ports, 2, extra));
  REQUIRE(r.back() != nullptr);
  REQUIRE(r[2]->Start().ok());
  testing::Collector f2;
  for (uint64_t b = 121; b < kBatches + 20; ++b) r[2]->ReceiveData({0, 0, b}, f2.ReceiveCb());
  for (uint64_t b = kBatches; b < kBatches + 20; ++b) {
    r[0]->ReplicateData({0, 0, b}, testing::Payload(0, b, 100000), lead.ReplicateCb());
  }
  REQUIRE(lead.WaitCount(kBatches + 20, kTimeoutMs));
  REQUIRE(f2.WaitCount(kBatches + 20 - 121, kTimeoutMs));
  const auto got = f2.bytes();
  for (const auto& [b, st] : f2.statuses()) {
    INFO("batch " << b);
    REQUIRE(st.ok());
    REQUIRE(got.at(b) == testing::Payload(0, b, 100000));
  }
  CHECK(r[2]->GroupStatus(0).snapshots_installed == 1);
  CHECK(r[2]->Health(0).resume_needs_next == 0);
  REQUIRE(WaitFor([&] { return r[0]->GroupStatus(0).stranded_members.empty(); }, kTimeoutMs));
  REQUIRE(f1.WaitCount(kBatches, kTimeoutMs));
  for (auto& m : r) m->Stop();
}

TEST_CASE("raft replicator: config errors name every bad key", "[raft][integration]") {
  Result<Config> config = Config::LoadString(
      testing::TestSchema(), "",
      {"replication.raft.members=127.0.0.1:1,127.0.0.1:1,nohost", "replication.raft.node_id=5",
       "replication.raft.preferred_leader=7", "replication.raft.heartbeat_ticks=20",
       "replication.raft.election_ticks=10", "replication.raft.log=disk"});
  REQUIRE(config.ok());
  Result<RaftReplicatorOptions> options = RaftOptionsFromConfig(config.value());
  REQUIRE(options.status().code() == StatusCode::kInvalidArgument);
  const std::string& msg = options.status().message();
  INFO(msg);
  for (const char* key : {"replication.raft.node_id", "replication.raft.preferred_leader",
                          "replication.raft.members[2]", "listed twice", "replication.raft.heartbeat_ticks",
                          "replication.raft.dir"}) {
    REQUIRE(msg.find(key) != std::string::npos);
  }
}

}  // namespace
}  // namespace qrstore::replication::raft
