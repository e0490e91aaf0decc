// Unit tests of the pure Raft core: one test per claim of the Raft paper (Ongaro & Ousterhout,
// figure 3 and sections 5.2-5.4), plus the Ready/Advance durability contract, restore,
// proposals, check-quorum and compaction. Each test is a fixed script of calls; the randomized
// fault-injecting simulation is tests/sim/raft_sim.
#include <catch2/catch.hpp>

#include <sstream>

#include "replication/raft/core.h"
#include "tests/unit/raft_core/test_cluster.h"

using namespace qrstore;
using namespace qrstore::replication::raft;
using qrstore::replication::raft::testing::LogOfTerms;
using qrstore::replication::raft::testing::TestCluster;

namespace {

const std::vector<NodeId> kThree = {0, 1, 2};

CoreOptions Opts(NodeId id, std::vector<NodeId> members = kThree) {
  CoreOptions o;
  o.group = 7;
  o.id = id;
  o.members = std::move(members);
  o.election_ticks = 10;
  o.heartbeat_ticks = 1;
  o.seed = 42;
  return o;
}

PersistentState Restored(const std::vector<Term>& terms, Term term, NodeId voted = kNoNode,
                         Index commit = 0) {
  PersistentState s;
  s.hard = HardState{term, voted, commit};
  s.entries = LogOfTerms(terms);
  return s;
}

Message Msg(MessageType type, NodeId from, NodeId to, Term term) {
  Message m;
  m.type = type;
  m.group = 7;
  m.from = from;
  m.to = to;
  m.term = term;
  return m;
}

Message VoteReq(NodeId from, NodeId to, Term term, Index last_index, Term last_term) {
  Message m = Msg(MessageType::kVoteRequest, from, to, term);
  m.log_index = last_index;
  m.log_term = last_term;
  return m;
}

Message Append(NodeId from, NodeId to, Term term, Index prev, Term prev_term,
               std::vector<Entry> entries, Index commit) {
  Message m = Msg(MessageType::kAppendRequest, from, to, term);
  m.log_index = prev;
  m.log_term = prev_term;
  m.entries = std::move(entries);
  m.commit = commit;
  return m;
}

Message AppendOk(NodeId from, NodeId to, Term term, Index match) {
  Message m = Msg(MessageType::kAppendResponse, from, to, term);
  m.hint = match;
  m.log_index = match;
  return m;
}

// Takes the pending Ready and acknowledges it as persisted.
Ready Flush(Core& c) {
  if (!c.HasReady()) return Ready{};
  Ready rd = c.TakeReady();
  c.Advance();
  return rd;
}

// Ticks a follower until its election timeout makes it a candidate.
void CampaignNow(Core& c) {
  for (int i = 0; i < 100 && c.role() == Role::kFollower; ++i) c.Tick();
  REQUIRE(c.role() != Role::kFollower);
}

std::vector<Entry> Log(const Core& c) {
  std::vector<Entry> out;
  for (Index i = c.first_index(); i <= c.last_index(); ++i) out.push_back(*c.EntryAt(i));
  return out;
}

const Message* FindMessage(const Ready& rd, MessageType type, NodeId to) {
  for (const auto& m : rd.messages) {
    if (m.type == type && m.to == to) return &m;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("raft election: the preferred member wins term 1 and everyone commits its no-op") {
  TestCluster c(3, /*preferred=*/0);
  c.TickAll();
  c.Deliver();
  REQUIRE(c.Leader() == 0);
  CHECK(c.core(0).term() == 1);
  for (NodeId id : c.members()) {
    CHECK(c.core(id).leader() == 0);
    CHECK(c.core(id).commit_index() == 1);
    REQUIRE(c.core(id).EntryAt(1) != nullptr);
    CHECK(c.core(id).EntryAt(1)->data.empty());  // the leader's no-op
    CHECK(c.core(id).EntryAt(1)->term == 1);
  }
}

TEST_CASE("raft election safety: one vote per term, persisted with the response") {
  Core voter(Opts(2), PersistentState{});
  voter.Step(VoteReq(0, 2, 1, 0, 0));
  Ready rd = voter.TakeReady();
  // The vote and its response travel in one Ready: the driver persists, then sends.
  REQUIRE(rd.hard_state.has_value());
  CHECK(rd.hard_state->term == 1);
  CHECK(rd.hard_state->voted_for == 0);
  const Message* r = FindMessage(rd, MessageType::kVoteResponse, 0);
  REQUIRE(r != nullptr);
  CHECK_FALSE(r->reject);
  voter.Advance();

  voter.Step(VoteReq(1, 2, 1, 5, 1));  // another candidate, same term, better log
  rd = Flush(voter);
  r = FindMessage(rd, MessageType::kVoteResponse, 1);
  REQUIRE(r != nullptr);
  CHECK(r->reject);
  CHECK_FALSE(rd.hard_state.has_value());
  CHECK(voter.voted_for() == 0);

  voter.Step(VoteReq(0, 2, 1, 0, 0));  // a duplicate of the first request is granted again
  rd = Flush(voter);
  r = FindMessage(rd, MessageType::kVoteResponse, 0);
  REQUIRE(r != nullptr);
  CHECK_FALSE(r->reject);
}

TEST_CASE("raft election safety: no leader without a majority, at most one per term") {
  TestCluster c(5);
  c.Isolate(2);
  c.Isolate(3);
  c.Isolate(4);
  CHECK_FALSE(c.RunUntil([&] { return c.Leader() != kNoNode; }, 100));
  c.Heal();
  c.Isolate(4);
  c.Isolate(3);
  REQUIRE(c.RunUntil([&] { return c.Leader() != kNoNode; }, 200));
  const NodeId leader = c.Leader();
  CHECK(leader <= 2);
  for (NodeId id : c.members()) {
    if (id != leader && c.core(id).term() == c.core(leader).term()) {
      CHECK(c.core(id).role() != Role::kLeader);
    }
  }
}

TEST_CASE("raft: no_vote_ticks holds back votes right after a (memory-log) restart") {
  CoreOptions o = Opts(2);
  o.no_vote_ticks = 3;
  Core voter(o, PersistentState{});
  voter.Step(VoteReq(0, 2, 1, 0, 0));
  Ready rd = Flush(voter);
  const Message* r = FindMessage(rd, MessageType::kVoteResponse, 0);
  REQUIRE(r != nullptr);
  CHECK(r->reject);
  CHECK(voter.term() == 1);  // the term is still adopted
  for (int i = 0; i < 3; ++i) voter.Tick();
  voter.Step(VoteReq(0, 2, 1, 0, 0));
  rd = Flush(voter);
  r = FindMessage(rd, MessageType::kVoteResponse, 0);
  REQUIRE(r != nullptr);
  CHECK_FALSE(r->reject);
}

TEST_CASE("raft election restriction: a vote is not granted to a stale log") {
  // Voter log: terms [1, 1, 2], current term 2.
  Core voter(Opts(2), Restored({1, 1, 2}, 2));
  struct Case {
    Term term;
    Index last_index;
    Term last_term;
    bool granted;
  };
  const Case cases[] = {
      {3, 5, 1, false},  // longer log but older last term
      {4, 2, 2, false},  // same last term, shorter
      {5, 3, 2, true},   // same last term and length
  };
  for (const Case& k : cases) {
    voter.Step(VoteReq(0, 2, k.term, k.last_index, k.last_term));
    Ready rd = Flush(voter);
    const Message* r = FindMessage(rd, MessageType::kVoteResponse, 0);
    REQUIRE(r != nullptr);
    CHECK(r->term == k.term);  // a higher-term request moves the voter to that term
    CHECK(r->reject == !k.granted);
  }
  // Shorter but with a newer last term: up to date.
  Core voter3(Opts(2), Restored({1, 1, 2}, 2));
  voter3.Step(VoteReq(1, 2, 3, 1, 3));
  Ready rd3 = Flush(voter3);
  const Message* r3 = FindMessage(rd3, MessageType::kVoteResponse, 1);
  REQUIRE(r3 != nullptr);
  CHECK_FALSE(r3->reject);
}

TEST_CASE("raft: a leader steps down on a higher term, stale senders are told the term") {
  TestCluster c(3, 0);
  const NodeId leader = c.ElectLeader();
  REQUIRE(leader == 0);
  Core& l = c.core(0);
  l.Step(AppendOk(1, 0, l.term() + 4, 0));
  CHECK(l.role() == Role::kFollower);
  CHECK(l.term() == 5);
  CHECK(l.leader() == kNoNode);
  Flush(l);

  // A stale leader (term 2) is answered with term 5 and a rejection.
  l.Step(Append(2, 0, 2, 0, 0, {}, 0));
  Ready rd = Flush(l);
  const Message* r = FindMessage(rd, MessageType::kAppendResponse, 2);
  REQUIRE(r != nullptr);
  CHECK(r->reject);
  CHECK(r->term == 5);
  CHECK(l.term() == 5);
  // A stale candidate likewise.
  l.Step(VoteReq(1, 0, 3, 100, 4));
  rd = Flush(l);
  r = FindMessage(rd, MessageType::kVoteResponse, 1);
  REQUIRE(r != nullptr);
  CHECK(r->reject);
  CHECK(r->term == 5);
}

TEST_CASE("raft leader append-only: a leader never rewrites or removes its entries") {
  TestCluster c(3, 0);
  const NodeId leader = c.ElectLeader();
  for (int i = 0; i < 5; ++i) c.Propose(leader, "x" + std::to_string(i));
  const std::vector<Entry> before = Log(c.core(leader));
  Core& l = c.core(leader);
  const Term term = l.term();
  // Rejections with arbitrary hints, and an (impossible) same-term AppendRequest.
  Message rej = Msg(MessageType::kAppendResponse, 1, 0, term);
  rej.reject = true;
  rej.log_index = 3;
  rej.hint = 1;
  l.Step(rej);
  const uint64_t ignored = l.stats().messages_ignored;
  l.Step(Append(2, 0, term, 1, term, {Entry{term, 2, "evil"}}, 2));
  CHECK(l.stats().messages_ignored == ignored + 1);
  CHECK(l.role() == Role::kLeader);
  const std::vector<Entry> after = Log(l);
  REQUIRE(after.size() >= before.size());
  CHECK(std::equal(before.begin(), before.end(), after.begin()));
}

TEST_CASE("raft log matching: a divergent minority leader's suffix is replaced") {
  TestCluster c(3, 0);
  NodeId leader = c.ElectLeader();
  REQUIRE(leader == 0);
  for (int i = 0; i < 3; ++i) c.Propose(0, "a" + std::to_string(i));
  c.Deliver();
  const Index committed = c.core(0).commit_index();
  CHECK(committed == 4);

  // Leader 0 is cut off and appends three entries nobody else gets.
  c.Isolate(0);
  for (int i = 0; i < 3; ++i) c.Propose(0, "lost" + std::to_string(i));
  c.Deliver();
  CHECK(c.core(0).last_index() == 7);
  CHECK(c.core(0).commit_index() == committed);

  // The others elect a new leader and commit their own entries over those indexes.
  REQUIRE(c.RunUntil([&] {
    NodeId l = kNoNode;
    for (NodeId id : {1u, 2u}) {
      if (c.core(id).role() == Role::kLeader) l = id;
    }
    return l != kNoNode;
  }));
  const NodeId new_leader = c.core(1).role() == Role::kLeader ? 1 : 2;
  for (int i = 0; i < 2; ++i) c.Propose(new_leader, "b" + std::to_string(i));
  c.Deliver();

  c.Heal();
  REQUIRE(c.RunUntil([&] {
    return c.core(0).commit_index() == c.core(new_leader).commit_index() &&
           c.core(0).last_index() == c.core(new_leader).last_index();
  }));
  CHECK(c.core(0).stats().entries_truncated == 3);
  // The conflict hints let the leader skip the whole divergent term in one rejection.
  CHECK(c.core(0).stats().appends_rejected <= 2);
  // Log matching: identical logs, entry for entry.
  for (NodeId id : c.members()) CHECK(Log(c.core(id)) == Log(c.core(new_leader)));
  for (const Entry& e : Log(c.core(0))) CHECK(e.data.view().rfind("lost", 0) == std::string_view::npos);
}

TEST_CASE("raft leader completeness: a new leader holds every committed entry") {
  TestCluster c(5, 0);
  const NodeId leader = c.ElectLeader();
  REQUIRE(leader == 0);
  c.Isolate(3);
  c.Isolate(4);
  for (int i = 0; i < 4; ++i) c.Propose(0, "c" + std::to_string(i));
  c.Deliver();
  const Index committed = c.core(0).commit_index();
  REQUIRE(committed == 5);  // no-op + 4, on 0, 1, 2
  std::vector<Entry> committed_log = Log(c.core(0));

  c.Crash(0);
  c.Heal();
  // 3 and 4 have stale logs: they cannot collect a third vote from 1 or 2.
  REQUIRE(c.RunUntil([&] { return c.Leader() != kNoNode; }));
  const NodeId nl = c.Leader();
  CHECK((nl == 1 || nl == 2));
  const std::vector<Entry> nlog = Log(c.core(nl));
  REQUIRE(nlog.size() >= committed);
  CHECK(std::equal(committed_log.begin(), committed_log.begin() + committed, nlog.begin()));
}

TEST_CASE("raft state machine safety: every member applies the same sequence") {
  TestCluster c(3, 0, /*seed=*/9);
  int proposed = 0;
  for (int round = 0; round < 4; ++round) {
    const NodeId l = c.ElectLeader();
    for (int i = 0; i < 3; ++i) c.Propose(l, "r" + std::to_string(proposed++));
    c.Deliver();
    c.Crash(l);  // lose the leader, then bring it back with its stored log
    c.ElectLeader();
    c.Restart(l);
  }
  const NodeId l = c.ElectLeader();
  REQUIRE(c.RunUntil([&] {
    for (NodeId id : c.members()) {
      if (c.core(id).applied_index() != c.core(l).commit_index()) return false;
    }
    return true;
  }));
  // Crashed members re-apply their log from index 1 after restart: full sequences compare.
  const auto& ref = c.node(l).applied;
  CHECK(ref.size() == c.core(l).commit_index());
  for (NodeId id : c.members()) CHECK(c.node(id).applied == ref);
  int data_entries = 0;
  for (const Entry& e : ref) data_entries += e.data.empty() ? 0 : 1;
  CHECK(data_entries == proposed);
}

TEST_CASE("raft 5.4.2: a leader commits only current-term entries by counting replicas") {
  // Figure 8: the leader of term 4 holds an entry of term 2 at index 2 that a majority has;
  // it must not commit it until its own term-4 entry reaches a majority.
  Core l(Opts(0), Restored({1, 2}, 3));
  CampaignNow(l);
  REQUIRE(l.term() == 4);
  Message grant = Msg(MessageType::kVoteResponse, 1, 0, 4);
  l.Step(grant);
  REQUIRE(l.role() == Role::kLeader);
  REQUIRE(l.last_index() == 3);  // the no-op
  Flush(l);                      // the leader's own copy of 1..3 is now durable

  l.Step(AppendOk(1, 0, 4, 2));  // member 1 has 1..2: index 2 is on a majority
  CHECK(l.commit_index() == 0);
  l.Step(AppendOk(1, 0, 4, 3));  // the term-4 no-op on a majority commits everything
  CHECK(l.commit_index() == 3);
  Ready rd = Flush(l);
  REQUIRE(rd.committed.size() == 3);
  CHECK(rd.committed[1].term == 2);
}

TEST_CASE("raft durability: a leader counts its own copy only after Advance") {
  Core l(Opts(0), PersistentState{});
  CampaignNow(l);
  l.Step(Msg(MessageType::kVoteResponse, 1, 0, l.term()));
  REQUIRE(l.role() == Role::kLeader);
  Flush(l);
  l.Step(AppendOk(1, 0, l.term(), 1));
  REQUIRE(l.commit_index() == 1);

  REQUIRE(l.Propose("x").value() == 2);
  Ready rd = l.TakeReady();
  REQUIRE(rd.entries.size() == 1);
  l.Step(AppendOk(2, 0, l.term(), 2));  // one follower has it; the leader has not synced
  CHECK(l.commit_index() == 1);
  l.Advance();
  CHECK(l.commit_index() == 2);

  // A one-member group commits on its own Advance.
  Core solo(Opts(5, {5}), PersistentState{});
  CampaignNow(solo);
  REQUIRE(solo.role() == Role::kLeader);
  Ready s = solo.TakeReady();
  CHECK(solo.commit_index() == 0);
  CHECK(s.entries.size() == 1);
  solo.Advance();
  CHECK(solo.commit_index() == 1);
}

TEST_CASE("raft 5.3: a follower truncates a conflicting suffix and says so in the Ready") {
  Core f(Opts(1), Restored({1, 1, 2, 2}, 2, kNoNode, 2));
  // Leader of term 3 agrees up to index 2 and has a term-3 entry at 3.
  f.Step(Append(0, 1, 3, 2, 1, {Entry{3, 3, "new"}}, 2));
  CHECK(f.last_index() == 3);
  CHECK(f.EntryAt(3)->term == 3);
  CHECK(f.stats().entries_truncated == 2);
  Ready rd = Flush(f);
  REQUIRE(rd.entries.size() == 1);
  CHECK(rd.entries[0].index == 3);  // <= last stored index: the driver truncates first
  const Message* r = FindMessage(rd, MessageType::kAppendResponse, 0);
  REQUIRE(r != nullptr);
  CHECK_FALSE(r->reject);
  CHECK(r->hint == 3);
}

TEST_CASE("raft 5.3: rejections carry hints, duplicates and reordering never truncate") {
  Core f(Opts(1), Restored({1, 1, 2, 2}, 2, kNoNode, 2));
  // Prev entry with another term: hint = first index of our conflicting term after commit.
  f.Step(Append(0, 1, 3, 4, 3, {}, 2));
  Ready rd = Flush(f);
  const Message* r = FindMessage(rd, MessageType::kAppendResponse, 0);
  REQUIRE(r != nullptr);
  CHECK(r->reject);
  CHECK(r->hint == 3);
  CHECK(r->log_index == 4);
  // Prev beyond our log: hint = last index + 1.
  f.Step(Append(0, 1, 3, 9, 3, {}, 2));
  rd = Flush(f);
  r = FindMessage(rd, MessageType::kAppendResponse, 0);
  REQUIRE(r != nullptr);
  CHECK(r->reject);
  CHECK(r->hint == 5);
  // An old append whose entries we already have: nothing is truncated.
  f.Step(Append(0, 1, 3, 2, 1, {Entry{2, 3, "e3"}}, 2));
  CHECK(f.last_index() == 4);
  CHECK(f.stats().entries_truncated == 0);
  rd = Flush(f);
  r = FindMessage(rd, MessageType::kAppendResponse, 0);
  REQUIRE(r != nullptr);
  CHECK(r->hint == 3);  // the match this message proves, not our last index
  // Commit never passes the last entry the leader vouched for.
  f.Step(Append(0, 1, 3, 2, 1, {Entry{2, 3, "e3"}}, 100));
  CHECK(f.commit_index() == 3);
}

TEST_CASE("raft durability: a persisted commit only covers entries durable before its Ready") {
  // Found by the simulation (seed 45): a follower replacing a stale suffix persisted commit 3
  // in the same Ready as the new entry 3; a crash that kept the hard state but not the
  // entries left a durable commit pointing at the stale entry. The hard state's commit now
  // only covers entries that earlier Readies made durable.
  Core f(Opts(1), Restored({1, 1, 1}, 1));
  f.Step(Append(0, 1, 2, 2, 1, {Entry{2, 3, "new"}}, 3));
  REQUIRE(f.commit_index() == 3);
  Ready rd = f.TakeReady();
  REQUIRE(rd.hard_state.has_value());
  CHECK(rd.hard_state->term == 2);
  CHECK(rd.hard_state->commit == 2);  // entry 3 is not durable yet
  REQUIRE(rd.entries.size() == 1);
  CHECK(rd.committed.size() == 3);    // applying is fine: entry 3 is committed at a quorum
  f.Advance();
  // A commit-only change does not cost a Ready (and fsync) of its own...
  CHECK_FALSE(f.HasReady());
  // ...it rides along with the next one.
  f.Step(Append(0, 1, 2, 3, 2, {}, 3));
  rd = Flush(f);
  REQUIRE(rd.hard_state.has_value());
  CHECK(rd.hard_state->commit == 3);
}

TEST_CASE("raft: a follower that restarts with its persisted log catches up") {
  TestCluster c(3, 0);
  const NodeId l = c.ElectLeader();
  for (int i = 0; i < 5; ++i) c.Propose(l, "p" + std::to_string(i));
  c.Deliver();
  c.Crash(2);
  for (int i = 5; i < 10; ++i) c.Propose(l, "p" + std::to_string(i));
  c.Deliver();
  REQUIRE(c.core(l).commit_index() == 11);
  c.Restart(2);
  CHECK(c.core(2).last_index() == 6);  // no-op + 5, from its own storage
  REQUIRE(c.RunUntil([&] { return c.core(2).applied_index() == 11; }));
  CHECK(c.node(2).applied == c.node(l).applied);
  CHECK(c.node(2).stored.entries.size() == 11);
}

TEST_CASE("raft restore: a newer entry term raises the term without a vote, commit clamped") {
  PersistentState s = Restored({1, 3}, 2, /*voted=*/1, /*commit=*/9);
  Core c(Opts(0), s);
  CHECK(c.term() == 3);
  CHECK(c.voted_for() == kNoNode);
  CHECK(c.commit_index() == 2);
  Ready rd = Flush(c);
  REQUIRE(rd.hard_state.has_value());
  CHECK(rd.hard_state->term == 3);
  CHECK(rd.committed.size() == 2);  // re-delivered to an in-memory application
}

TEST_CASE("raft proposals: refused on followers, empty data refused, memory bounded") {
  TestCluster c(3, 0);
  const NodeId l = c.ElectLeader();
  Result<Index> r = c.core(1).Propose("x");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kUnavailable);
  CHECK(r.status().message().find("leader is member 0") != std::string::npos);
  r = c.core(l).Propose("");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);

  CoreOptions o = Opts(0);
  o.max_uncommitted_bytes = 100;
  Core small(o, PersistentState{});
  CampaignNow(small);
  small.Step(Msg(MessageType::kVoteResponse, 1, 0, small.term()));
  REQUIRE(small.role() == Role::kLeader);
  REQUIRE(small.Propose(std::string(60, 'a')).ok());
  Result<Index> over = small.Propose(std::string(60, 'b'));
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().code() == StatusCode::kResourceExhausted);
}

TEST_CASE("raft check-quorum: a leader cut off from the majority steps down") {
  TestCluster c(3, 0);
  REQUIRE(c.ElectLeader() == 0);
  c.Isolate(0);
  int ticks = 0;
  while (c.core(0).role() == Role::kLeader && ticks < 100) {
    c.TickAll();
    c.Deliver();
    ++ticks;
  }
  CHECK(c.core(0).role() != Role::kLeader);
  // Within two checks of two election timeouts (the first may still count answers from before
  // the cut), and not within one timeout: a working leader survives a timeout of silence.
  CHECK(ticks <= 4 * 10);
  CHECK(ticks > 10);
  CHECK_FALSE(c.core(0).Propose("x").ok());
}

TEST_CASE("raft pipelining: appends are bounded in size and in flight") {
  CoreOptions o = Opts(0);
  o.max_append_bytes = 10;
  o.max_inflight_appends = 2;
  Core l(o, PersistentState{});
  CampaignNow(l);
  l.Step(Msg(MessageType::kVoteResponse, 1, 0, l.term()));
  REQUIRE(l.role() == Role::kLeader);
  Flush(l);
  l.Step(AppendOk(1, 0, l.term(), 1));  // member 1 leaves probe mode
  Flush(l);
  for (int i = 0; i < 6; ++i) REQUIRE(l.Propose("abcdef").ok());  // 6 bytes each
  Ready rd = l.TakeReady();
  int to1 = 0;
  for (const auto& m : rd.messages) {
    if (m.to != 1 || m.type != MessageType::kAppendRequest) continue;
    ++to1;
    CHECK(m.entries.size() == 1);  // 12 bytes > 10: one entry per message
  }
  CHECK(to1 == 2);  // the in-flight limit
  l.Advance();
}

TEST_CASE("raft compaction: prefix dropped, replication continues, laggards reported") {
  TestCluster c(3, 0);
  const NodeId l = c.ElectLeader();
  for (int i = 0; i < 10; ++i) c.Propose(l, "k" + std::to_string(i));
  c.Deliver();
  REQUIRE(c.core(l).commit_index() == 11);
  for (NodeId id : c.members()) {
    const Index upto = c.core(id).compactable_index();
    CHECK(upto == 11);
    c.core(id).Compact(upto);
    CHECK(c.core(id).first_index() == 12);
    CHECK(c.core(id).last_index() == 11);
  }
  for (int i = 0; i < 3; ++i) c.Propose(l, "m" + std::to_string(i));
  c.Deliver();
  CHECK(c.core(1).commit_index() == 14);
  CHECK(c.core(l).lagging_members().empty());

  // Member 2 misses entries; the leader compacts past them anyway (the caller's choice).
  c.Crash(2);
  for (int i = 0; i < 3; ++i) c.Propose(l, "n" + std::to_string(i));
  c.Deliver();
  CHECK(c.core(l).compactable_index() == 14);  // member 2's match holds it back
  c.core(l).Compact(c.core(l).applied_index());
  c.Restart(2);
  REQUIRE(c.RunUntil([&] { return !c.core(l).lagging_members().empty(); }, 50));
  CHECK(c.core(l).lagging_members() == std::vector<NodeId>{2});
  // Heartbeats still reach it, so it does not start elections that depose the leader.
  for (int i = 0; i < 50; ++i) {
    c.TickAll();
    c.Deliver();
  }
  CHECK(c.core(l).role() == Role::kLeader);
  CHECK(c.core(2).leader() == l);
}

TEST_CASE("raft flow control: the quorum's lag counts the follower the quorum needs, never one behind it") {
  TestCluster c(3, 0);
  const NodeId l = c.ElectLeader();
  c.Deliver();
  CHECK(c.core(l).quorum_lag_bytes() == 0);
  CHECK(c.core(1).quorum_lag_bytes() == 0);  // followers report nothing
  // Member 2 stops answering; member 1 keeps up: the quorum (l, 1) lacks nothing, whatever
  // member 2 lacks.
  c.Isolate(2);
  c.Propose(l, std::string(1000, 'a'));
  c.Propose(l, std::string(500, 'b'));
  c.Deliver();
  CHECK(c.core(l).commit_index() == c.core(l).last_index());  // the quorum (l, 1) commits
  CHECK(c.core(l).quorum_lag_bytes() == 0);
  auto member = [&](NodeId id) {
    for (const MemberProgress& m : c.core(l).member_progress()) {
      if (m.id == id) return m;
    }
    FAIL("no progress for member " << id);
    return MemberProgress{};
  };
  CHECK(member(2).lag_bytes == 1500);  // what member 2 lacks, shown, not waited for
  CHECK(member(2).live);
  CHECK_FALSE(member(2).stranded);
  CHECK(member(1).lag_bytes == 0);
  CHECK(c.core(l).BytesAfter(c.core(l).last_index()) == 0);
  CHECK(c.core(l).BytesAfter(c.core(l).last_index() - 1) == 500);
  // Now member 1 is cut off too (both still presumed live: no time passed): the quorum needs
  // the better placed of them, member 1 (lacks 700) rather than member 2 (lacks 1500 + 700).
  c.Isolate(1);
  c.Propose(l, std::string(700, 'c'));
  c.Deliver();
  CHECK(c.core(l).quorum_lag_bytes() == 700);
  CHECK(member(2).lag_bytes == 2200);
  // Compaction keeps the positions of what is held right; a position that was compacted away
  // counts as everything held (such a member cannot be caught up: lagging_members()).
  c.Heal();
  REQUIRE(c.RunUntil([&] { return c.core(l).quorum_lag_bytes() == 0 && member(2).lag_bytes == 0; }, 100));
  c.core(l).Compact(c.core(l).applied_index());
  CHECK(c.core(l).BytesAfter(0) == 0);
  // Silent for more than 2 election timeouts: presumed down, not shown live.
  c.Isolate(2);
  REQUIRE(c.RunUntil([&] { return !member(2).live; }, 1000));
  CHECK(c.core(l).role() == Role::kLeader);
}

TEST_CASE("raft flow control: a stranded member is out of the quorum's lag, and is told it is stranded") {
  TestCluster c(3, 0);
  const NodeId l = c.ElectLeader();
  c.Deliver();
  c.Crash(2);
  for (int i = 0; i < 5; ++i) c.Propose(l, std::string(100, 'a'));
  c.Deliver();
  c.core(l).Compact(c.core(l).applied_index());  // past everything member 2 has
  c.Restart(2);
  REQUIRE(c.RunUntil([&] { return c.core(l).lagging_members() == std::vector<NodeId>{2}; }, 50));
  // Live and answering heartbeats, but stranded: it does not count toward the quorum's lag
  // even when it is the only other member heard from.
  c.Isolate(1);
  c.Propose(l, std::string(300, 'b'));
  c.Deliver();
  CHECK(c.core(l).quorum_lag_bytes() == 300);  // member 1's (still presumed live), not 2's
  // The leader's heartbeats tell member 2 where its log starts now; member 1 is not told so.
  REQUIRE(c.RunUntil([&] { return c.core(2).stranded_log_start() == c.core(l).first_index(); }, 50));
  CHECK(c.core(1).stranded_log_start() == 0);
  CHECK(c.core(2).stranded_log_start() > c.core(2).last_index() + 1);
  CHECK(c.core(l).role() == Role::kLeader);
}

TEST_CASE("raft snapshots: a stranded member is offered one, takes it when its owner says, and catches up") {
  TestCluster c(3, 0);
  const NodeId l = c.ElectLeader();
  c.Deliver();
  c.Crash(2);
  for (int i = 0; i < 5; ++i) c.Propose(l, "a" + std::to_string(i));
  c.Deliver();
  const Index point = c.core(l).applied_index();
  c.core(l).Compact(point);  // past everything member 2 has
  c.Restart(2);
  // Without a tag the member is only told it is stranded: no offer.
  REQUIRE(c.RunUntil([&] { return c.core(2).stranded_log_start() == point + 1; }, 50));
  CHECK_FALSE(c.core(2).snapshot_offer().has_value());
  CHECK(c.core(l).stats().snapshots_sent == 0);

  c.core(l).SetSnapshotTag(42);
  REQUIRE(c.RunUntil([&] { return c.core(2).snapshot_offer().has_value(); }, 50));
  const SnapshotOffer o = *c.core(2).snapshot_offer();
  CHECK(o.leader == l);
  CHECK(o.index == point);
  CHECK(o.index_term == c.core(l).term());
  CHECK(o.tag == 42);
  // Declined (its owner does nothing) for a while: it stays stranded, answers (so the leader
  // hears from it) and the group goes on.
  for (int i = 0; i < 30; ++i) {
    c.TickAll();
    c.Deliver();
  }
  CHECK(c.core(l).lagging_members() == std::vector<NodeId>{2});
  CHECK(c.core(2).last_index() < point);
  const Index more = c.Propose(l, "after");
  c.Deliver();

  // Taken: the member's log continues after the point, and the leader catches it up from there.
  c.core(2).InstallSnapshot();
  CHECK(c.core(2).first_index() == point + 1);
  CHECK(c.core(2).commit_index() == point);
  CHECK(c.core(2).stats().snapshots_installed == 1);
  c.Process(2);
  CHECK(c.node(2).stored.first_index == point + 1);
  CHECK(c.node(2).stored.entries.empty());
  c.node(2).applied.clear();
  c.Deliver();
  REQUIRE(c.RunUntil([&] { return c.core(2).commit_index() >= more; }, 50));
  CHECK(c.core(l).lagging_members().empty());
  CHECK(c.core(2).stranded_log_start() == 0);
  CHECK_FALSE(c.core(2).snapshot_offer().has_value());
  // It got exactly the entries after the point, in order.
  REQUIRE_FALSE(c.node(2).applied.empty());
  CHECK(c.node(2).applied.front().index == point + 1);
  CHECK(c.node(2).applied.back().data == EntryData("after"));
  // And it restarts from what it stored.
  c.Crash(2);
  c.Restart(2);
  CHECK(c.core(2).first_index() == point + 1);
  CHECK(c.core(2).last_index() >= more);
}

TEST_CASE("raft vote_after_catch_up: a member restarted without its log neither votes nor campaigns until caught up") {
  CoreOptions o;
  o.group = 7;
  o.id = 2;
  o.members = {0, 1, 2};
  o.election_ticks = 10;
  o.pre_vote = true;
  o.vote_after_catch_up = true;
  Core c(o, PersistentState{});
  CHECK_FALSE(c.caught_up());
  for (int i = 0; i < 100; ++i) c.Tick();  // many election timeouts
  CHECK(c.role() == Role::kFollower);
  CHECK_FALSE(c.pre_campaigning());
  CHECK(c.stats().elections_started == 0);
  auto answer = [&](MessageType type, Term term) {
    Message m;
    m.type = type;
    m.group = 7;
    m.from = 1;
    m.to = 2;
    m.term = term;
    c.Step(m);
    Ready rd = c.TakeReady();
    c.Advance();
    REQUIRE(rd.messages.size() == 1);
    return rd.messages[0];
  };
  CHECK(answer(MessageType::kPreVoteRequest, 5).reject);
  CHECK(answer(MessageType::kVoteRequest, 5).reject);
  CHECK(c.voted_for() == kNoNode);
  // An append from the leader of term 5 with everything it committed (here: nothing yet).
  Message a;
  a.type = MessageType::kAppendRequest;
  a.group = 7;
  a.from = 0;
  a.to = 2;
  a.term = 5;
  a.entries.push_back(Entry{5, 1, ""});
  a.commit = 1;
  c.Step(a);
  while (c.HasReady()) {
    Ready rd = c.TakeReady();
    c.Advance();
  }
  CHECK(c.caught_up());
  // Now it votes again (a new term, the log as up to date as its own), once its leader's lease
  // ran out.
  for (int i = 0; i < 25; ++i) c.Tick();
  while (c.HasReady()) {
    Ready rd = c.TakeReady();
    c.Advance();
  }
  Message v;
  v.type = MessageType::kVoteRequest;
  v.group = 7;
  v.from = 1;
  v.to = 2;
  v.term = 6;
  v.log_index = 1;
  v.log_term = 5;
  c.Step(v);
  bool granted = false;
  while (c.HasReady()) {
    Ready rd = c.TakeReady();
    for (const Message& m : rd.messages) granted = granted || (m.type == MessageType::kVoteResponse && !m.reject);
    c.Advance();
  }
  CHECK(granted);
}

TEST_CASE("raft snapshots: a member whose log already agrees at the point keeps it") {
  TestCluster c(3, 0);
  const NodeId l = c.ElectLeader();
  for (int i = 0; i < 3; ++i) c.Propose(l, "a" + std::to_string(i));
  c.Deliver();
  c.core(l).SetSnapshotTag(7);
  // A snapshot request for a point member 1 has: answered as a match, no offer, no install.
  Message m;
  m.type = MessageType::kSnapshotRequest;
  m.group = 7;
  m.from = l;
  m.to = 1;
  m.term = c.core(l).term();
  m.log_index = c.core(1).last_index();
  m.log_term = c.core(1).last_term();
  m.commit = c.core(l).commit_index();
  m.hint = 7;
  const Index last = c.core(1).last_index();
  c.core(1).Step(m);
  CHECK_FALSE(c.core(1).snapshot_offer().has_value());
  CHECK(c.core(1).last_index() == last);
  Ready rd = c.core(1).TakeReady();
  CHECK_FALSE(rd.snapshot.has_value());
  REQUIRE(rd.messages.size() == 1);
  CHECK(rd.messages[0].type == MessageType::kAppendResponse);
  CHECK_FALSE(rd.messages[0].reject);
  CHECK(rd.messages[0].hint == last);
  c.core(1).Advance();
}

TEST_CASE("raft pre-vote: a member cut off and back neither raises the term nor deposes the leader") {
  // Without pre-vote (the control) the cut-off member's term climbs with every timeout, and
  // when it comes back its higher term makes the leader step down: one member away decides
  // that the group elects again. With pre-vote its asks go unanswered while away, its term
  // stays put, and coming back changes nothing.
  for (const bool pre_vote : {false, true}) {
    INFO("pre_vote " << pre_vote);
    TestCluster c(3, 0, /*seed=*/7, pre_vote);
    const NodeId l = c.ElectLeader();
    c.Deliver();
    const Term term = c.core(l).term();
    c.Isolate(2);
    for (int i = 0; i < 200; ++i) {  // many election timeouts (10-19 ticks each)
      c.TickAll();
      c.Deliver();
    }
    CHECK(c.core(l).role() == Role::kLeader);  // the majority (l, 1) still works
    if (pre_vote) {
      CHECK(c.core(2).term() == term);
      CHECK(c.core(2).pre_campaigning());
      CHECK(c.core(2).stats().elections_started == 0);
    } else {
      CHECK(c.core(2).term() > term + 5);
    }
    c.Heal();
    for (int i = 0; i < 100; ++i) {
      c.TickAll();
      c.Deliver();
    }
    if (pre_vote) {
      CHECK(c.core(l).role() == Role::kLeader);
      CHECK(c.core(l).term() == term);
      CHECK(c.core(2).leader() == l);
      CHECK_FALSE(c.core(2).pre_campaigning());
    } else {
      CHECK(c.Leader() != kNoNode);
      CHECK(c.core(c.Leader()).term() > term);  // the group had to elect again
    }
  }
}

TEST_CASE("raft pre-vote: a dead leader is replaced, by a member whose log is up to date") {
  TestCluster c(3, 0, /*seed=*/3, /*pre_vote=*/true);
  const NodeId l = c.ElectLeader();
  for (int i = 0; i < 5; ++i) c.Propose(l, "x" + std::to_string(i));
  c.Deliver();
  const Term term = c.core(l).term();
  c.Crash(l);
  REQUIRE(c.RunUntil([&] { return c.Leader() != kNoNode; }, 200));
  const NodeId n = c.Leader();
  CHECK(n != l);
  CHECK(c.core(n).term() == term + 1);  // one pre-vote round, one real election
  CHECK(c.core(n).commit_index() >= 6);
  // A member behind the others' logs gets no pre-vote: crash the new leader's peer after the
  // new leader appended more, and only the up-to-date one can win.
  c.Propose(n, "y");
  c.Deliver();
  c.Restart(l);
  REQUIRE(c.RunUntil([&] { return c.core(l).leader() == n; }, 200));
  CHECK(c.core(n).role() == Role::kLeader);
}

TEST_CASE("raft lease: a member that hears its leader ignores a vote request of a higher term") {
  TestCluster c(3, 0);
  const NodeId l = c.ElectLeader();
  c.Deliver();
  const NodeId f = l == 1 ? 2 : 1;
  const Term term = c.core(f).term();
  // A request for votes in a higher term, from the third member, right after a heartbeat.
  const NodeId other = 3 - l - f;
  Message req;
  req.type = MessageType::kVoteRequest;
  req.group = 7;
  req.from = other;
  req.to = f;
  req.term = term + 5;
  req.log_index = c.core(f).last_index();
  req.log_term = c.core(f).last_term();
  c.core(f).Step(req);
  CHECK(c.core(f).term() == term);  // not adopted
  CHECK(c.core(f).leader() == l);
  CHECK(c.core(f).voted_for() != other);
  // Once its leader is silent for an election timeout, the same request is heard.
  c.Isolate(l);
  for (int i = 0; i < 10; ++i) c.core(f).Tick();
  c.core(f).Step(req);
  CHECK(c.core(f).term() == term + 5);
  CHECK(c.core(f).voted_for() == other);
}

TEST_CASE("raft determinism: the same seed and inputs give the same outputs") {
  auto run = [](uint64_t seed) {
    TestCluster c(5, kNoNode, seed);
    std::ostringstream trace;
    for (int round = 0; round < 3; ++round) {
      const NodeId l = c.ElectLeader();
      trace << "L" << l << "t" << c.core(l).term() << ";";
      c.Propose(l, "d" + std::to_string(round));
      c.Deliver();
      c.Crash(l);
      c.ElectLeader();
      c.Restart(l);
    }
    for (NodeId id : c.members()) trace << c.core(id).term() << "/" << c.core(id).last_index() << ",";
    return trace.str();
  };
  CHECK(run(5) == run(5));
  CHECK(run(6) == run(6));
}

TEST_CASE("raft: messages for other groups, recipients or non-members are ignored") {
  Core f(Opts(1), PersistentState{});
  Message m = VoteReq(0, 1, 5, 0, 0);
  m.group = 8;
  f.Step(m);
  m = VoteReq(0, 2, 5, 0, 0);  // addressed to someone else
  f.Step(m);
  m = VoteReq(9, 1, 5, 0, 0);  // not a member
  f.Step(m);
  CHECK(f.term() == 0);
  CHECK_FALSE(f.HasReady());
  CHECK(f.stats().messages_ignored == 3);
  // Malformed entries (non-consecutive) are ignored, not applied.
  f.Step(Append(0, 1, 1, 0, 0, {Entry{1, 2, "gap"}}, 0));
  CHECK(f.last_index() == 0);
  CHECK(f.stats().messages_ignored == 4);
}

TEST_CASE("raft heartbeats: a follower sent an append within the interval gets none, an idle one does") {
  CoreOptions o = Opts(0);
  o.heartbeat_ticks = 3;
  Core l(o, PersistentState{});
  CampaignNow(l);
  l.Step(Msg(MessageType::kVoteResponse, 1, 0, l.term()));
  REQUIRE(l.role() == Role::kLeader);
  Flush(l);
  l.Step(AppendOk(1, 0, l.term(), 1));  // both leave probe mode at the no-op (index 1)
  l.Step(AppendOk(2, 0, l.term(), 1));
  Flush(l);
  auto appends_to = [](const Ready& rd, NodeId to) {
    int n = 0;
    for (const auto& m : rd.messages) n += m.type == MessageType::kAppendRequest && m.to == to;
    return n;
  };
  // Idle: every heartbeat interval each follower gets exactly one heartbeat.
  for (int i = 0; i < 2; ++i) l.Tick();
  Ready idle;
  l.Tick();
  idle = Flush(l);
  CHECK(appends_to(idle, 1) == 1);
  CHECK(appends_to(idle, 2) == 1);
  // An entry goes to both; the next round, two ticks later, sends them no heartbeat.
  l.Tick();
  REQUIRE(l.Propose("x").ok());
  Ready sent = Flush(l);
  CHECK(appends_to(sent, 1) == 1);
  CHECK(appends_to(sent, 2) == 1);
  l.Tick();
  l.Tick();  // the heartbeat round: 2 ticks after the appends
  Ready quiet = Flush(l);
  CHECK(appends_to(quiet, 1) == 0);
  CHECK(appends_to(quiet, 2) == 0);
  // Member 1 acknowledges (the commit is told to both at once, right after that round); the
  // next round, 3 ticks later, finds a whole interval without a message to either: heartbeats.
  l.Step(AppendOk(1, 0, l.term(), 2));
  Ready told = Flush(l);
  CHECK(appends_to(told, 1) == 1);
  CHECK(appends_to(told, 2) == 1);
  CHECK(l.commit_index() == 2);
  for (int i = 0; i < 2; ++i) l.Tick();
  CHECK(appends_to(Flush(l), 1) == 0);  // no round yet
  l.Tick();
  Ready later = Flush(l);
  CHECK(appends_to(later, 1) == 1);
  CHECK(appends_to(later, 2) == 1);
}

TEST_CASE("raft SetElectionTicks: a longer timeout delays a follower's campaign and a leader's quorum check") {
  TestCluster c(3, 0);
  const NodeId l = c.ElectLeader();
  c.Deliver();
  const NodeId f = l == 1 ? 2 : 1;
  CHECK(c.core(f).election_ticks() == 10);
  for (int id = 0; id < 3; ++id) c.core(static_cast<NodeId>(id)).SetElectionTicks(50);
  CHECK(c.core(f).election_ticks() == 50);

  // The leader falls silent: a follower waits [50, 100) ticks, not [10, 20), before it asks
  // for (pre-)votes.
  c.Isolate(l);
  int ticks = 0;
  while (c.core(f).leader() == l && ticks < 200) {
    c.core(f).Tick();
    ++ticks;
  }
  CHECK(ticks >= 50);
  CHECK(ticks < 100);

  // The cut-off leader checks its quorum every 2 x 50 ticks (the first check still counts the
  // answers from before the cut): it still leads after 90 ticks, not after 210.
  for (int i = 0; i < 90; ++i) c.core(l).Tick();
  CHECK(c.core(l).role() == Role::kLeader);
  for (int i = 0; i < 120; ++i) c.core(l).Tick();
  CHECK(c.core(l).role() != Role::kLeader);
}

TEST_CASE("raft SetElectionTicks: the lease lasts the longer timeout, then the configured one comes back") {
  TestCluster c(3, 0);
  const NodeId l = c.ElectLeader();
  c.Deliver();
  const NodeId f = l == 1 ? 2 : 1;
  const NodeId other = 3 - l - f;
  c.core(f).SetElectionTicks(50);
  const Term term = c.core(f).term();
  const Message req = VoteReq(other, f, term + 1, c.core(f).last_index(), c.core(f).last_term());
  c.Isolate(l);
  // 20 ticks after its leader's last word: past the configured timeout (10), within the longer.
  for (int i = 0; i < 20; ++i) c.core(f).Tick();
  c.core(f).Step(req);
  CHECK(c.core(f).term() == term);  // still in its lease: ignored
  // The configured timeout again (its timer restarts): within 20 ticks it asks for votes.
  c.core(f).SetElectionTicks(10);
  CHECK(c.core(f).election_ticks() == 10);
  int ticks = 0;
  while (c.core(f).leader() == l && ticks < 100) {
    c.core(f).Tick();
    ++ticks;
  }
  CHECK(ticks < 20);
}
