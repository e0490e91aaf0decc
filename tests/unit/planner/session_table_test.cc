// SessionTable (planner/session_table.h): verdicts, caps and floors, session eviction, digest
// agreement between replicas that do and do not capture read values, and the canonical
// encoding under truncation and byte flips. Every random script is seeded (fixed seeds).
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "planner/session_table.h"

using namespace qrstore;
using storage::TxnStatus;
using planner::PlannedPos;
using planner::SessionLimits;
using planner::SessionOutcome;
using planner::SessionTable;
using planner::Verdict;

namespace {

PlannedPos Pos(uint64_t batch, uint32_t index = 0) { return PlannedPos{batch, 0, index}; }

SessionLimits Small(uint32_t sessions, uint32_t per_session, uint64_t outcomes, uint64_t value_bytes = 1 << 20) {
  SessionLimits l;
  l.max_sessions = sessions;
  l.max_outcomes_per_session = per_session;
  l.max_outcomes = outcomes;
  l.max_value_bytes = value_bytes;
  return l;
}

Verdict V(const SessionTable& t, uint64_t session, uint64_t seq) { return t.Check(session, seq); }

// Decode(Encode(t)) is accepted (so t keeps every invariant Decode checks), re-encodes to the
// same bytes and has the same digest, which Decode computes from scratch: the incremental digest
// matches a full one.
void RequireSound(const SessionTable& t) {
  const std::string bytes = t.Encode();
  auto back = SessionTable::Decode(bytes, t.limits());
  REQUIRE(back.ok());
  REQUIRE(back->Encode() == bytes);
  REQUIRE(back->Digest() == t.Digest());
  REQUIRE(back->outcomes() == t.outcomes());
  REQUIRE(back->value_bytes() == t.value_bytes());
  REQUIRE(t.sessions() <= t.limits().max_sessions);
  REQUIRE(t.outcomes() <= t.limits().max_outcomes);
  REQUIRE(t.value_bytes() <= t.limits().max_value_bytes);
}

}  // namespace

TEST_CASE("session table: limits are validated, naming the bad field") {
  CHECK(SessionLimits().Validate().ok());
  SessionLimits l;
  l.max_sessions = 0;
  l.max_outcomes = 0;
  const Status s = l.Validate();
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("max_sessions") != std::string::npos);
  CHECK(s.message().find("max_outcomes") != std::string::npos);
  CHECK(s.message().find("max_outcomes_per_session") == std::string::npos);
  l = SessionLimits();
  l.max_outcomes_per_session = 0;
  CHECK(l.Validate().message().find("max_outcomes_per_session") != std::string::npos);
  CHECK(SessionTable::Decode(SessionTable().Encode(), l).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("session table: sessions open with ids 1, 2, 3 in log order") {
  SessionTable t;
  CHECK(t.next_id() == 1);
  CHECK(t.Open(Pos(1)) == 1);
  CHECK(t.Open(Pos(1, 1)) == 2);
  CHECK(t.Open(Pos(2)) == 3);
  CHECK(t.sessions() == 3);
  CHECK(t.next_id() == 4);
  CHECK(V(t, 3, 1) == Verdict::kNew);
  RequireSound(t);
}

TEST_CASE("session table: a txn goes kNew -> kInFlight -> kDone, answered with its outcome and values") {
  SessionTable t;
  const uint64_t s = t.Open(Pos(1));
  std::string why;
  REQUIRE(t.Check(s, 1, nullptr, &why) == Verdict::kNew);
  CHECK(why == "session 1 seq 1: new (floor 1, highest seq seen 0)");
  t.MarkInFlight(s, 1, Pos(2, 5));
  CHECK(t.in_flight() == 1);
  const uint64_t digest = t.Digest();  // in-flight marks are not replicated state
  CHECK(t.Check(s, 1, nullptr, &why) == Verdict::kInFlight);
  CHECK(why.find("session 1 seq 1") != std::string::npos);
  CHECK(V(t, s, 2) == Verdict::kNew);  // another seq is independent

  REQUIRE(t.Record(s, 1, Pos(2, 5), TxnStatus::kCommitted, "abc", true));
  CHECK(t.in_flight() == 0);
  CHECK(t.Digest() != digest);
  const SessionOutcome* done = nullptr;
  REQUIRE(t.Check(s, 1, &done, &why) == Verdict::kDone);
  CHECK(why == "session 1 seq 1: already decided at batch 2");
  REQUIRE(done != nullptr);
  CHECK(done->status == TxnStatus::kCommitted);
  CHECK(done->pos == Pos(2, 5));
  CHECK(done->values == "abc");
  CHECK(done->values_known);
  CHECK(t.outcomes() == 1);
  CHECK(t.value_bytes() == 3);

  // An aborted txn is an outcome too; values the node did not capture are not kept.
  REQUIRE(t.Record(s, 2, Pos(3), TxnStatus::kAbortedLogic, "ignored", false));
  REQUIRE(t.Check(s, 2, &done) == Verdict::kDone);
  CHECK(done->status == TxnStatus::kAbortedLogic);
  CHECK_FALSE(done->values_known);
  CHECK(done->values.empty());
  CHECK(t.value_bytes() == 3);
  RequireSound(t);
}

TEST_CASE("session table: kUnknownSession for id 0, a never-opened id and an evicted session") {
  SessionTable t(Small(2, 10, 100));
  std::string why;
  CHECK(t.Check(0, 1, nullptr, &why) == Verdict::kUnknownSession);
  CHECK(why.find("session 0") != std::string::npos);
  CHECK(t.Check(7, 1, nullptr, &why) == Verdict::kUnknownSession);
  CHECK(why.find("session 7") != std::string::npos);
  const uint64_t a = t.Open(Pos(1));
  t.Open(Pos(2));
  REQUIRE(t.Record(a, 1, Pos(3), TxnStatus::kCommitted, "", true));
  t.Open(Pos(4));  // session 2 (last active at 2) goes, not a (last active at 3)
  CHECK(V(t, 2, 1) == Verdict::kUnknownSession);
  CHECK(V(t, a, 1) == Verdict::kDone);
  t.Open(Pos(5));  // now a goes
  CHECK(V(t, a, 1) == Verdict::kUnknownSession);
  CHECK(V(t, a, 2) == Verdict::kUnknownSession);
  CHECK(t.outcomes() == 0);
  RequireSound(t);
}

TEST_CASE("session table: kBadSeq for seq 0 and for a seq far ahead of the highest seen") {
  SessionTable t(Small(4, 10, 100));
  const uint64_t s = t.Open(Pos(1));
  std::string why;
  CHECK(t.Check(s, 0, nullptr, &why) == Verdict::kBadSeq);
  CHECK(V(t, s, 10) == Verdict::kNew);
  CHECK(t.Check(s, 11, nullptr, &why) == Verdict::kBadSeq);
  CHECK(why.find("far ahead") != std::string::npos);
  CHECK(why.find("highest seq seen 0") != std::string::npos);
  CHECK(V(t, s, UINT64_MAX) == Verdict::kBadSeq);
  // In-flight seqs count as seen: a client may pipeline past what has committed.
  t.MarkInFlight(s, 5, Pos(2));
  CHECK(V(t, s, 15) == Verdict::kNew);
  CHECK(V(t, s, 16) == Verdict::kBadSeq);
  t.ClearInFlight();
  CHECK(t.in_flight() == 0);
  CHECK(V(t, s, 5) == Verdict::kNew);
  CHECK(V(t, s, 15) == Verdict::kBadSeq);
  REQUIRE(t.Record(s, 8, Pos(3), TxnStatus::kCommitted, "", true));
  CHECK(V(t, s, 18) == Verdict::kNew);
  CHECK(V(t, s, 19) == Verdict::kBadSeq);
  // Seq 0 never enters the table.
  const uint64_t digest = t.Digest();
  CHECK_FALSE(t.Record(s, 0, Pos(4), TxnStatus::kCommitted, "", true));
  CHECK(t.Digest() == digest);
}

TEST_CASE("session table: the per-session cap forgets the session's oldest and raises its floor") {
  SessionTable t(Small(4, 3, 100));
  const uint64_t s = t.Open(Pos(1));
  const uint64_t other = t.Open(Pos(1, 1));
  REQUIRE(t.Record(other, 1, Pos(2), TxnStatus::kCommitted, "", true));
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    REQUIRE(t.Record(s, seq, Pos(2 + seq), TxnStatus::kCommitted, "v", true));
    RequireSound(t);
  }
  CHECK(t.outcomes() == 4);  // 3 of s, 1 of other
  std::string why;
  CHECK(t.Check(s, 1, nullptr, &why) == Verdict::kExpired);
  CHECK(why.find("floor 3") != std::string::npos);
  CHECK(V(t, s, 2) == Verdict::kExpired);
  CHECK(V(t, s, 3) == Verdict::kDone);
  CHECK(V(t, s, 5) == Verdict::kDone);
  CHECK(V(t, s, 6) == Verdict::kNew);
  CHECK(V(t, other, 1) == Verdict::kDone);  // other sessions keep theirs
  // Below the floor a late Record is refused and changes nothing replicated.
  const uint64_t digest = t.Digest();
  CHECK_FALSE(t.Record(s, 2, Pos(9), TxnStatus::kCommitted, "", true));
  CHECK(t.Digest() == digest);
  CHECK(V(t, s, 2) == Verdict::kExpired);
}

TEST_CASE("session table: the global cap forgets the oldest outcome first, a seq below the floor is never kNew") {
  SessionTable t(Small(4, 100, 4));
  const uint64_t a = t.Open(Pos(1));
  const uint64_t b = t.Open(Pos(1, 1));
  REQUIRE(t.Record(a, 1, Pos(2, 0), TxnStatus::kCommitted, "", true));
  REQUIRE(t.Record(b, 1, Pos(2, 1), TxnStatus::kCommitted, "", true));
  REQUIRE(t.Record(b, 2, Pos(2, 2), TxnStatus::kCommitted, "", true));
  REQUIRE(t.Record(a, 2, Pos(2, 3), TxnStatus::kCommitted, "", true));
  CHECK(t.outcomes() == 4);
  REQUIRE(t.Record(b, 3, Pos(3), TxnStatus::kCommitted, "", true));  // a's seq 1 goes
  CHECK(t.outcomes() == 4);
  CHECK(V(t, a, 1) == Verdict::kExpired);
  CHECK(V(t, a, 2) == Verdict::kDone);
  CHECK(V(t, b, 1) == Verdict::kDone);
  REQUIRE(t.Record(a, 3, Pos(4), TxnStatus::kCommitted, "", true));  // b's seq 1 goes
  CHECK(V(t, b, 1) == Verdict::kExpired);
  CHECK(V(t, b, 2) == Verdict::kDone);
  RequireSound(t);

  // A session whose txns committed out of seq order: forgetting its seq 5 raises its floor to 6,
  // so its seq 4, recorded later, is unreachable and forgotten with it.
  SessionTable u(Small(4, 100, 2));
  const uint64_t c = u.Open(Pos(1));
  REQUIRE(u.Record(c, 5, Pos(2), TxnStatus::kCommitted, "", true));
  REQUIRE(u.Record(c, 4, Pos(3), TxnStatus::kCommitted, "", true));
  REQUIRE(u.Record(c, 6, Pos(4), TxnStatus::kCommitted, "", true));
  CHECK(u.outcomes() == 1);
  for (uint64_t seq = 1; seq <= 5; ++seq) CHECK(V(u, c, seq) == Verdict::kExpired);  // 1..3 never ran
  CHECK(V(u, c, 6) == Verdict::kDone);
  CHECK(V(u, c, 7) == Verdict::kNew);
  RequireSound(u);
}

TEST_CASE("session table: the value cap drops the oldest read values, never outcomes, and not the digest") {
  SessionTable leader(Small(4, 100, 100, 10));
  SessionTable follower(Small(4, 100, 100, 10));
  for (SessionTable* t : {&leader, &follower}) t->Open(Pos(1));
  for (uint64_t seq = 1; seq <= 4; ++seq) {
    const std::string values(4, static_cast<char>('a' + seq));
    REQUIRE(leader.Record(1, seq, Pos(1 + seq), TxnStatus::kCommitted, values, true));
    REQUIRE(follower.Record(1, seq, Pos(1 + seq), TxnStatus::kCommitted, "", false));
    CHECK(leader.Digest() == follower.Digest());
    CHECK(leader.value_bytes() <= 10);
  }
  CHECK(leader.outcomes() == 4);
  CHECK(leader.value_bytes() == 8);
  const SessionOutcome* done = nullptr;
  REQUIRE(leader.Check(1, 1, &done) == Verdict::kDone);
  CHECK_FALSE(done->values_known);
  CHECK(done->values.empty());
  REQUIRE(leader.Check(1, 2, &done) == Verdict::kDone);
  CHECK_FALSE(done->values_known);
  REQUIRE(leader.Check(1, 4, &done) == Verdict::kDone);
  CHECK(done->values == "eeee");
  // One value larger than the whole cap is not kept at all (and pushes out no other).
  REQUIRE(leader.Record(1, 5, Pos(9), TxnStatus::kCommitted, std::string(11, 'x'), true));
  REQUIRE(leader.Check(1, 5, &done) == Verdict::kDone);
  CHECK_FALSE(done->values_known);
  CHECK(leader.value_bytes() == 8);
  RequireSound(leader);
  RequireSound(follower);
}

TEST_CASE("session table: at max_sessions the least recently active session is evicted, ties by smaller id") {
  SessionTable t(Small(3, 100, 100));
  CHECK(t.Open(Pos(1)) == 1);
  CHECK(t.Open(Pos(1)) == 2);  // same position as session 1: a tie
  CHECK(t.Open(Pos(2)) == 3);
  REQUIRE(t.Record(1, 1, Pos(3), TxnStatus::kCommitted, "", true));
  REQUIRE(t.Record(2, 1, Pos(4), TxnStatus::kCommitted, "", true));
  REQUIRE(t.Record(2, 2, Pos(4, 1), TxnStatus::kCommitted, "", true));
  // Activity: 1 at 3, 2 at (4, 1), 3 at 2. Session 3 is the least recently active.
  CHECK(t.Open(Pos(5)) == 4);
  CHECK(t.sessions() == 3);
  CHECK(V(t, 3, 1) == Verdict::kUnknownSession);
  CHECK(V(t, 1, 1) == Verdict::kDone);
  // Now 1 (at 3) goes, with its outcome.
  CHECK(t.Open(Pos(6)) == 5);
  CHECK(V(t, 1, 1) == Verdict::kUnknownSession);
  CHECK(t.outcomes() == 2);
  // Session 2 goes next with both outcomes and its in-flight mark; a late Record for it is refused.
  t.MarkInFlight(2, 3, Pos(7));
  CHECK(t.Open(Pos(7)) == 6);
  CHECK(t.outcomes() == 0);
  CHECK(t.in_flight() == 0);
  CHECK_FALSE(t.Record(2, 3, Pos(8), TxnStatus::kCommitted, "", true));
  RequireSound(t);

  // A pure tie: every session opened at the same position; the smallest id goes first.
  SessionTable u(Small(2, 10, 10));
  u.Open(Pos(1));
  u.Open(Pos(1));
  u.Open(Pos(1));
  CHECK(V(u, 1, 1) == Verdict::kUnknownSession);
  CHECK(V(u, 2, 1) == Verdict::kNew);
  CHECK(V(u, 3, 1) == Verdict::kNew);
}

TEST_CASE("session table: a flood of opens keeps the session count and memory bounded") {
  SessionTable t(Small(16, 4, 64, 1024));
  size_t memory_at_1000 = 0;
  for (uint64_t i = 1; i <= 100000; ++i) {
    const uint64_t s = t.Open(Pos(i));
    REQUIRE(t.Record(s, 1, Pos(i, 1), TxnStatus::kCommitted, "0123456789", true));
    REQUIRE(t.sessions() <= 16);
    REQUIRE(t.outcomes() <= 64);
    if (i == 1000) memory_at_1000 = t.MemoryBytes();
  }
  CHECK(t.next_id() == 100001);
  CHECK(t.sessions() == 16);
  CHECK(t.MemoryBytes() == memory_at_1000);
  CHECK(t.MemoryBytes() < 64 * 1024);
  RequireSound(t);
}

TEST_CASE("session table: Record for an unknown session returns false and changes nothing") {
  SessionTable t;
  const uint64_t s = t.Open(Pos(1));
  REQUIRE(t.Record(s, 1, Pos(2), TxnStatus::kCommitted, "x", true));
  const std::string bytes = t.Encode();
  const uint64_t digest = t.Digest();
  CHECK_FALSE(t.Record(0, 1, Pos(3), TxnStatus::kCommitted, "x", true));
  CHECK_FALSE(t.Record(9, 1, Pos(3), TxnStatus::kCommitted, "x", true));
  // A duplicate of a remembered seq keeps the first outcome.
  CHECK_FALSE(t.Record(s, 1, Pos(3), TxnStatus::kAbortedLogic, "y", true));
  CHECK(t.Digest() == digest);
  CHECK(t.Encode() == bytes);
}

namespace {

// One replicated log entry.
struct Entry {
  bool open = false;
  uint64_t session = 0;
  uint64_t seq = 0;
  PlannedPos pos;
  TxnStatus status = TxnStatus::kCommitted;
  std::string values;
};

// A seeded log as a leader would write it: it opens sessions, plans only what Check calls kNew
// (marking it in flight) and commits what it planned in planned order, a few txns later; now
// and then a txn's session is evicted before it commits.
std::vector<Entry> MakeLog(uint64_t seed, size_t steps, const SessionLimits& limits) {
  std::mt19937_64 rng(seed);
  SessionTable leader(limits);
  std::vector<Entry> log, pending;
  uint64_t batch = 1;
  uint32_t index = 0;
  auto next_pos = [&] {
    if (++index == 4) {
      index = 0;
      ++batch;
    }
    return PlannedPos{batch, 0, index};
  };
  for (size_t i = 0; i < steps; ++i) {
    const uint64_t r = rng() % 100;
    if (r < 8) {
      Entry e;
      e.open = true;
      e.pos = next_pos();
      leader.Open(e.pos);
      log.push_back(e);
    } else if (r < 70) {
      const uint64_t session = rng() % (leader.next_id() + 1);
      const uint64_t seq = rng() % 12;
      if (leader.Check(session, seq) != Verdict::kNew) continue;
      Entry e;
      e.session = session;
      e.seq = seq;
      e.pos = next_pos();
      e.status = static_cast<TxnStatus>(rng() % 3);
      e.values = std::string(rng() % 20, static_cast<char>('a' + rng() % 26));
      leader.MarkInFlight(session, seq, e.pos);
      pending.push_back(e);
    } else if (!pending.empty()) {
      const Entry e = pending.front();
      pending.erase(pending.begin());
      leader.Record(e.session, e.seq, e.pos, e.status, e.values, true);
      log.push_back(e);
    }
  }
  return log;
}

bool Apply(SessionTable& t, const Entry& e, bool values_known) {
  if (e.open) {
    t.Open(e.pos);
    return true;
  }
  return t.Record(e.session, e.seq, e.pos, e.status, values_known ? e.values : std::string(), values_known);
}

}  // namespace

TEST_CASE("session table: replicas fed the same log agree on the digest after every step, with or without values") {
  const SessionLimits limits = Small(6, 5, 24, 100);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    const std::vector<Entry> log = MakeLog(seed, 1500, limits);
    SessionTable a(limits), b(limits), blind(limits);
    size_t refused = 0;
    for (const Entry& e : log) {
      const bool applied = Apply(a, e, true);
      REQUIRE(Apply(b, e, true) == applied);
      REQUIRE(Apply(blind, e, false) == applied);
      refused += applied ? 0 : 1;
      REQUIRE(a.Digest() == b.Digest());
      REQUIRE(a.Digest() == blind.Digest());
      REQUIRE(a.Encode() == b.Encode());
      REQUIRE(a.outcomes() == blind.outcomes());
      REQUIRE(blind.value_bytes() == 0);
    }
    RequireSound(a);
    RequireSound(blind);
    CHECK(log.size() > 100);
    if (seed == 1) CHECK(refused > 0);  // some txns outlived their evicted session
  }
}

TEST_CASE("session table: a different entry changes the digest") {
  const SessionLimits limits = Small(6, 5, 24, 100);
  const std::vector<Entry> log = MakeLog(7, 1500, limits);
  SessionTable before(limits);  // the table before entry i
  size_t differed = 0, tried = 0;
  for (const Entry& entry : log) {
    for (int change = 0; change < 4 && !entry.open; ++change) {
      Entry other = entry;
      if (change == 0) other.status = static_cast<TxnStatus>((static_cast<int>(other.status) + 1) % 3);
      if (change == 1) other.pos.index += 100;
      if (change == 2) other.pos.batch += 1;
      if (change == 3) other.seq += 1;
      SessionTable x = before, y = before;
      Apply(x, entry, true);
      Apply(y, other, true);
      ++tried;
      differed += x.Digest() != y.Digest() ? 1 : 0;
      // The digest tells two states apart exactly when their bytes differ (values are equal here).
      REQUIRE((x.Encode() == y.Encode()) == (x.Digest() == y.Digest()));
    }
    Apply(before, entry, true);
  }
  CHECK(tried > 200);
  CHECK(differed * 10 > tried * 9);  // the rest: refused both ways, or forgotten at once
  // The smallest changes: one more session opened; one status flipped.
  SessionTable one(limits), two(limits);
  one.Open(Pos(1));
  two.Open(Pos(1));
  CHECK(one.Digest() == two.Digest());
  two.Open(Pos(2));
  CHECK(one.Digest() != two.Digest());
  one.Open(Pos(2));
  CHECK(one.Digest() == two.Digest());
  REQUIRE(one.Record(2, 1, Pos(3), TxnStatus::kCommitted, "", true));
  REQUIRE(two.Record(2, 1, Pos(3), TxnStatus::kAbortedLogic, "", true));
  CHECK(one.Digest() != two.Digest());
}

TEST_CASE("session table: Encode/Decode round-trips every answer, the values and the digest") {
  const SessionLimits limits = Small(6, 5, 24, 100);
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SessionTable t(limits);
    for (const Entry& e : MakeLog(seed, 500, limits)) Apply(t, e, seed % 2 == 0);
    const std::string bytes = t.Encode();
    auto back = SessionTable::Decode(bytes, limits);
    REQUIRE(back.ok());
    CHECK(back->Encode() == bytes);
    CHECK(back->Digest() == t.Digest());
    CHECK(back->next_id() == t.next_id());
    CHECK(back->sessions() == t.sessions());
    for (uint64_t s = 0; s <= t.next_id(); ++s) {
      for (uint64_t seq = 0; seq <= 20; ++seq) {
        const SessionOutcome* x = nullptr;
        const SessionOutcome* y = nullptr;
        const Verdict v = t.Check(s, seq, &x);
        REQUIRE(back->Check(s, seq, &y) == v);
        if (v != Verdict::kDone) continue;
        CHECK(x->status == y->status);
        CHECK(x->pos == y->pos);
        CHECK(x->values_known == y->values_known);
        CHECK(x->values == y->values);
      }
    }
    // The decoded table goes on like the original.
    const uint64_t id = t.Open(Pos(1000));
    REQUIRE(back->Open(Pos(1000)) == id);
    t.Record(id, 1, Pos(1001), TxnStatus::kCommitted, "z", true);
    back->Record(id, 1, Pos(1001), TxnStatus::kCommitted, "z", true);
    CHECK(back->Encode() == t.Encode());
    CHECK(back->Digest() == t.Digest());
  }
  // A table beyond smaller limits is refused, not trimmed.
  SessionTable t(limits);
  for (int i = 0; i < 3; ++i) t.Open(Pos(1));
  CHECK(SessionTable::Decode(t.Encode(), Small(2, 5, 24, 100)).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("session table: Decode fails cleanly on every truncation and byte flip, or yields a sound table") {
  const SessionLimits limits = Small(6, 5, 24, 100);
  SessionTable t(limits);
  for (const Entry& e : MakeLog(3, 500, limits)) Apply(t, e, true);
  const std::string bytes = t.Encode();
  REQUIRE(bytes.size() > 100);
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = SessionTable::Decode(std::string_view(bytes.data(), n), limits);
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.status().code() == StatusCode::kCorruption);
  }
  CHECK_FALSE(SessionTable::Decode(bytes + "x", limits).ok());
  CHECK_FALSE(SessionTable::Decode("", limits).ok());
  std::mt19937_64 rng(42);
  size_t accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bad = bytes;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    auto r = SessionTable::Decode(bad, limits);
    if (!r.ok()) continue;
    ++accepted;
    REQUIRE(r->Encode() == bad);  // canonical: what it accepts it re-encodes byte for byte
    RequireSound(r.value());
  }
  // Garbage with huge counts allocates nothing big and fails.
  std::string huge = bytes.substr(0, 4) + "\x05";  // next id 5, then a session count of 2^64 - 1
  for (int i = 0; i < 9; ++i) huge.push_back(static_cast<char>(0xff));
  huge.push_back(0x01);
  CHECK_FALSE(SessionTable::Decode(huge, limits).ok());
  SUCCEED("accepted " << accepted << " of 3000 flipped encodings");
}
