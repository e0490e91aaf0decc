#include <catch2/catch.hpp>

#include "cluster/sessions/session_store.h"
#include "storage/ops.h"
#include "storage/record.h"

using namespace qrstore;
using namespace qrstore::cluster;
using commit::PlannedPos;
using commit::TxnOutcome;
using commit::TxnStatus;
using proto::ResultCode;

namespace {

storage::Txn SessionTxn(uint64_t session, uint64_t seq, uint32_t client = 7, bool reads = false) {
  storage::Txn t;
  t.id = session * 1000 + seq;
  t.client = client;
  t.session = session;
  t.seq = seq;
  t.ops.push_back(storage::Op{reads ? storage::OpKind::kRead : storage::OpKind::kUpdate, seq, 0, 0});
  return t;
}

storage::Txn OpenTxn() {
  storage::Txn t;
  t.session = storage::kOpenSession;
  return t;
}

// The outcomes a slice of `txns` planned at (batch, 0) would get (all committed unless told).
std::vector<TxnOutcome> Outcomes(uint64_t batch, const std::vector<storage::Txn>& txns,
                                 TxnStatus status = TxnStatus::kCommitted) {
  std::vector<TxnOutcome> out;
  for (uint32_t i = 0; i < txns.size(); ++i) {
    TxnOutcome o;
    o.txn_id = txns[i].id;
    o.client = txns[i].client;
    o.status = status;
    o.pos = PlannedPos{batch, 0, i};
    o.session = txns[i].session;
    o.seq = txns[i].seq;
    out.push_back(o);
  }
  return out;
}

struct Applied {
  std::vector<std::pair<size_t, uint64_t>> opened;
  std::vector<SessionAnswer> answers;
};
Applied Apply(SessionStore& s, const std::vector<TxnOutcome>& o) {
  Applied a;
  s.Apply(o, &a.opened, &a.answers);
  return a;
}

}  // namespace

TEST_CASE("session store: opens in log order, admits new txns, answers what was decided") {
  planner::SessionLimits limits;
  SessionStore leader(limits), follower(limits);
  // Two open-session entries and a txn without a session in one slice: ids 1 and 2.
  std::vector<storage::Txn> slice = {OpenTxn(), storage::Txn{}, OpenTxn()};
  std::vector<SessionAnswer> answers;
  leader.Admit(0, 0, &slice, 0, &answers);
  CHECK(slice.size() == 3);
  CHECK(answers.empty());
  for (SessionStore* s : {&leader, &follower}) {
    Applied a = Apply(*s, Outcomes(0, slice));
    REQUIRE(a.opened.size() == 2);
    CHECK(a.opened[0] == std::make_pair(size_t{0}, uint64_t{1}));
    CHECK(a.opened[1] == std::make_pair(size_t{2}, uint64_t{2}));
  }
  CHECK(leader.sessions() == 2);

  // Batch 1: session 1 seqs 1 and 2 (new), a plain txn between them: all kept, in order.
  std::vector<storage::Txn> b1 = {SessionTxn(1, 1), storage::Txn{}, SessionTxn(1, 2, 7, /*reads=*/true)};
  leader.Admit(1, 0, &b1, 0, &answers);
  REQUIRE(b1.size() == 3);
  CHECK(b1[2].seq == 2);
  CHECK(answers.empty());
  // Batch 2, before batch 1 committed: seq 2 again (in flight: it waits), an unknown session,
  // a seq far ahead, then seq 3 (new).
  std::vector<storage::Txn> b2 = {SessionTxn(1, 2, 8, true), SessionTxn(99, 1), SessionTxn(2, limits.max_outcomes_per_session + 5),
                                  SessionTxn(1, 3)};
  leader.Admit(2, 0, &b2, 0, &answers);
  REQUIRE(b2.size() == 1);
  CHECK(b2[0].seq == 3);
  REQUIRE(answers.size() == 2);
  CHECK(answers[0].code == ResultCode::kRejected);
  CHECK(answers[0].session == 99);
  CHECK(answers[0].detail.find("unknown") != std::string::npos);
  CHECK(answers[1].code == ResultCode::kRejected);
  CHECK(answers[1].session == 2);
  answers.clear();

  // Batch 1 commits: the waiting duplicate of seq 2 gets the original's outcome, values and all.
  std::vector<TxnOutcome> o1 = Outcomes(1, b1);
  const std::string values(16, 'v');
  o1[2].reads = 2;
  o1[2].values = values;
  Applied a1 = Apply(leader, o1);
  REQUIRE(a1.answers.size() == 1);
  CHECK(a1.answers[0].client == 8);
  CHECK(a1.answers[0].code == ResultCode::kCommitted);
  CHECK(a1.answers[0].pos == (PlannedPos{1, 0, 2}));
  CHECK(a1.answers[0].values == values);
  CHECK(Apply(follower, o1).answers.empty());

  // Asked again later: decided, answered from the table (no values kept: a txn that reads says
  // so; one that reads nothing is plainly committed), never planned.
  std::vector<storage::Txn> b3 = {SessionTxn(1, 2, 9, true), SessionTxn(1, 1, 9)};
  leader.Admit(3, 0, &b3, 0, &answers);
  CHECK(b3.empty());
  REQUIRE(answers.size() == 2);
  CHECK(answers[0].code == ResultCode::kCommittedNoValues);
  CHECK(answers[0].pos == (PlannedPos{1, 0, 2}));
  CHECK(answers[1].code == ResultCode::kCommitted);
  CHECK(answers[1].pos == (PlannedPos{1, 0, 0}));
  answers.clear();

  // Batch 2 commits (aborted): both replicas hold the same table.
  Apply(leader, Outcomes(2, b2, TxnStatus::kAbortedLogic));
  Apply(follower, Outcomes(2, b2, TxnStatus::kAbortedLogic));
  CHECK(leader.Digest() == follower.Digest());
  CHECK(leader.outcomes() == 3);
  std::vector<storage::Txn> b4 = {SessionTxn(1, 3)};
  leader.Admit(4, 0, &b4, 0, &answers);
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].code == ResultCode::kAbortedLogic);
  CHECK(leader.counters().duplicates == 4);
  CHECK(leader.counters().refused == 2);
}

TEST_CASE("session store: a seq the session forgot is expired, never run again, the session cap evicts") {
  planner::SessionLimits limits;
  limits.max_sessions = 2;
  limits.max_outcomes_per_session = 2;
  SessionStore s(limits);
  Apply(s, Outcomes(0, {OpenTxn(), OpenTxn()}));
  std::vector<storage::Txn> b1 = {SessionTxn(1, 1), SessionTxn(1, 2), SessionTxn(1, 3)};
  std::vector<SessionAnswer> answers;
  s.Admit(1, 0, &b1, 0, &answers);
  REQUIRE(b1.size() == 3);
  Apply(s, Outcomes(1, b1));
  std::vector<storage::Txn> again = {SessionTxn(1, 1), SessionTxn(1, 3)};
  s.Admit(2, 0, &again, 0, &answers);
  CHECK(again.empty());
  REQUIRE(answers.size() == 2);
  CHECK(answers[0].code == ResultCode::kExpired);
  CHECK(answers[0].detail.find("not executed again") != std::string::npos);
  CHECK(answers[1].code == ResultCode::kCommitted);
  answers.clear();
  // A third session evicts the least recently active (session 2: opened, never used).
  Apply(s, Outcomes(3, {OpenTxn()}));
  CHECK(s.sessions() == 2);
  std::vector<storage::Txn> b4 = {SessionTxn(2, 1), SessionTxn(3, 1)};
  s.Admit(4, 0, &b4, 0, &answers);
  REQUIRE(b4.size() == 1);
  CHECK(b4[0].session == 3);
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].session == 2);
  CHECK(answers[0].code == ResultCode::kRejected);
}

TEST_CASE("session store: with read values kept, a decided retry gets its original values") {
  planner::SessionLimits limits;
  limits.max_value_bytes = 1 << 20;
  SessionStore s(limits, /*record_bytes=*/8, /*keep_values=*/true);
  Apply(s, Outcomes(0, {OpenTxn()}));
  std::vector<storage::Txn> b1 = {SessionTxn(1, 1, 7, /*reads=*/true), SessionTxn(1, 2, 7, /*reads=*/true)};
  std::vector<SessionAnswer> answers;
  s.Admit(1, 0, &b1, 0, &answers);
  std::vector<TxnOutcome> o1 = Outcomes(1, b1);
  const std::string v1(16, 'a');  // two records of 8 bytes
  o1[0].reads = 2;
  o1[0].values = v1;
  o1[1].status = TxnStatus::kAbortedLogic;
  Apply(s, o1);
  std::vector<storage::Txn> again = {SessionTxn(1, 1, 9, true), SessionTxn(1, 2, 9, true)};
  s.Admit(2, 0, &again, 0, &answers);
  REQUIRE(answers.size() == 2);
  CHECK(answers[0].code == ResultCode::kCommitted);
  CHECK(answers[0].reads == 2);
  CHECK(answers[0].values == v1);
  CHECK(answers[1].code == ResultCode::kAbortedLogic);
  CHECK(answers[1].values.empty());
}

TEST_CASE("session store: a retry of a committed txn that read is planned as its history read, answered with values") {
  planner::SessionLimits limits;
  const storage::RecordLayout layout{4, 8};
  bool covers = true;
  SessionStore leader(limits, layout.size());
  // Keys 5 and 6 exist, 9 does not: an op on it does nothing, a read of it reads zeros.
  leader.EnableHistory(layout, [&covers](uint64_t) { return covers; }, [](storage::Key k) { return k != 9; });
  std::vector<storage::Txn> open = {OpenTxn()};
  std::vector<SessionAnswer> answers;
  leader.Admit(0, 0, &open, 0, &answers);
  Apply(leader, Outcomes(0, open));
  // Session 1's seq 1: reads 5, updates 6 and reads it back, reads 5 again; committed at (1, 0, 0).
  storage::Txn t = SessionTxn(1, 1);
  t.ops = {storage::Op{storage::OpKind::kRead, 5, 0, 0}, storage::Op{storage::OpKind::kUpdate, 6, 0, 0},
           storage::Op{storage::OpKind::kRead, 6, 0, 0}, storage::Op{storage::OpKind::kRead, 5, 0, 0},
           storage::Op{storage::OpKind::kUpdate, 9, 0, 0}, storage::Op{storage::OpKind::kRead, 9, 0, 0}};
  std::vector<storage::Txn> b1 = {t};
  leader.Admit(1, 0, &b1, 0, &answers);
  Apply(leader, Outcomes(1, b1));

  // Sent again: kept in the slice as its history read, a kRead of each key once, no session.
  std::vector<storage::Txn> b5 = {storage::Txn{}, t};
  leader.Admit(5, 0, &b5, 0, &answers);
  CHECK(answers.empty());
  REQUIRE(b5.size() == 2);
  const storage::Txn& r = b5[1];
  CHECK(r.history);
  CHECK(r.session == 0);
  CHECK(r.client == t.client);
  CHECK((PlannedPos{r.history_batch, r.history_planner, r.history_index}) == (PlannedPos{1, 0, 0}));
  REQUIRE(r.ops.size() == 3);
  CHECK((r.ops[0].kind == storage::OpKind::kRead && r.ops[0].key == 5));
  CHECK((r.ops[1].kind == storage::OpKind::kRead && r.ops[1].key == 6));
  CHECK((r.ops[2].kind == storage::OpKind::kRead && r.ops[2].key == 9));
  CHECK(leader.counters().history_reads == 1);

  // Its outcome: the records of 5 and 6 just before the original (and zeros for 9, which the
  // executors give an absent key). The answer runs the original's ops on them: 5, 6 after the
  // update, 5, then zeros for 9 (its update did nothing).
  std::string before(3 * layout.size(), '\0');
  storage::InitRecord(before.data(), layout, 5, 100);
  storage::InitRecord(before.data() + layout.size(), layout, 6, 200);
  std::string six = before.substr(layout.size(), layout.size());
  storage::ApplyUpdate(six.data(), layout, t.id, 6);
  std::vector<TxnOutcome> o5 = Outcomes(5, b5);
  o5[1].history = true;
  o5[1].history_of = PlannedPos{1, 0, 0};
  o5[1].reads = 3;
  o5[1].values = before;
  Applied a5 = Apply(leader, o5);
  REQUIRE(a5.answers.size() == 1);
  const SessionAnswer& a = a5.answers[0];
  CHECK(a.code == ResultCode::kCommitted);
  CHECK((a.session == 1 && a.seq == 1 && a.client == t.client));
  CHECK(a.pos == (PlannedPos{1, 0, 0}));
  CHECK(a.reads == 4);
  CHECK(a.values == before.substr(0, layout.size()) + six + before.substr(0, layout.size()) +
                        std::string(layout.size(), '\0'));
  CHECK(leader.counters().history_misses == 0);

  // A history that no longer reaches back: at once committed-no-values, not planned.
  covers = false;
  std::vector<storage::Txn> b6 = {t};
  leader.Admit(6, 0, &b6, 0, &answers);
  CHECK(b6.empty());
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].code == ResultCode::kCommittedNoValues);
  answers.clear();

  // One that stopped reaching back while its read ran: committed-no-values, counted a miss.
  covers = true;
  std::vector<storage::Txn> b7 = {t};
  leader.Admit(7, 0, &b7, 0, &answers);
  REQUIRE(b7.size() == 1);
  covers = false;
  std::vector<TxnOutcome> o7 = Outcomes(7, b7);
  o7[0].history = true;
  o7[0].history_of = PlannedPos{1, 0, 0};
  o7[0].reads = 3;
  o7[0].values = before;
  Applied a7 = Apply(leader, o7);
  REQUIRE(a7.answers.size() == 1);
  CHECK(a7.answers[0].code == ResultCode::kCommittedNoValues);
  CHECK(leader.counters().history_misses == 1);
}

TEST_CASE("session store: a row home records by home position and answers a waiting duplicate without values") {
  planner::SessionLimits limits;
  SessionStore leader(limits, 8), follower(limits, 8);
  leader.ForRowHome();
  follower.ForRowHome();
  // Home slice (batch 0, planner 3): an open, a txn with no part at home, an open. The home's
  // own sub-slice lists the opens only, at sub-slice indices 0 and 1 (home indices 0 and 2).
  std::vector<storage::Txn> home = {OpenTxn(), storage::Txn{}, OpenTxn()};
  std::vector<SessionAnswer> answers;
  leader.Admit(0, 3, &home, 0, &answers);
  REQUIRE(home.size() == 3);
  std::vector<TxnOutcome> own = Outcomes(0, {home[0], home[2]});
  own[0].pos.planner = own[1].pos.planner = 3;
  own[0].home_index = 0;
  own[1].home_index = 2;
  for (SessionStore* s : {&leader, &follower}) {
    Applied a = Apply(*s, own);
    REQUIRE(a.opened.size() == 2);  // (index in the outcomes given, id)
    CHECK(a.opened[1] == std::make_pair(size_t{1}, uint64_t{2}));
  }
  // Batch 1: session 1's seq 1 (reads) at home index 1 of the home slice; a retry of it arrives
  // in batch 2 while it is in flight and waits.
  std::vector<storage::Txn> b1 = {storage::Txn{}, SessionTxn(1, 1, 7, /*reads=*/true)};
  leader.Admit(1, 3, &b1, 0, &answers);
  REQUIRE(b1.size() == 2);
  std::vector<storage::Txn> b2 = {SessionTxn(1, 1, 8, true)};
  leader.Admit(2, 3, &b2, 0, &answers);
  CHECK(b2.empty());
  CHECK(answers.empty());
  // Its own sub-slice lists it alone (index 0), with this partition's part of the values only.
  std::vector<TxnOutcome> o1 = Outcomes(1, {b1[1]});
  o1[0].pos.planner = 3;
  o1[0].home_index = 1;
  o1[0].reads = 1;
  o1[0].values = std::string(8, 'p');
  Applied a = Apply(leader, o1);
  REQUIRE(a.answers.size() == 1);
  CHECK(a.answers[0].client == 8);
  CHECK(a.answers[0].code == ResultCode::kCommittedNoValues);  // never a part passed off as the whole
  CHECK(a.answers[0].values.empty());
  CHECK(a.answers[0].pos == (PlannedPos{1, 3, 1}));  // the home position its client was answered with
  Apply(follower, o1);
  CHECK(leader.Digest() == follower.Digest());
  // Asked again: decided at its home position.
  std::vector<storage::Txn> b3 = {SessionTxn(1, 1, 9, true)};
  leader.Admit(3, 3, &b3, 0, &answers);
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].code == ResultCode::kCommittedNoValues);
  CHECK(answers[0].pos == (PlannedPos{1, 3, 1}));
}
