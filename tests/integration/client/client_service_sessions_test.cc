// ClientService (cluster/port/client_service.h) with client sessions, over a real socket on
// 127.0.0.1: an open-session request answered by its entry's outcome, and session txns answered
// out of turn (Answer, as the leader's planners do for duplicates) from one thread while engine
// outcomes for the others arrive from another (as the commit sink does). The reply must hold
// every txn's answer at its own position. Labelled concurrency: TSan runs it.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "client/client.h"
#include "cluster/port/client_service.h"
#include "cluster/sessions/session_store.h"
#include "common/thread.h"
#include "tests/integration/raft/raft_test_util.h"

using namespace qrstore;
namespace proto = cluster::proto;
using proto::ResultCode;

namespace {

// What the engine was handed, for the test's "planner" and "committer" threads.
struct Engine {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<storage::Txn> txns;  // guarded by mu
  size_t Submit(std::vector<storage::Txn>& t) {
    {
      std::lock_guard<std::mutex> lk(mu);
      for (auto& x : t) txns.push_back(std::move(x));
    }
    cv.notify_all();
    return t.size();
  }
  std::vector<storage::Txn> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lk(mu);
    REQUIRE(cv.wait_for(lk, std::chrono::seconds(10), [&] { return txns.size() >= n; }));
    return txns;
  }
};

// Frames the client received.
struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<uint8_t, std::string>> frames;  // guarded by mu
  std::pair<uint8_t, std::string> Next(size_t i) {
    std::unique_lock<std::mutex> lk(mu);
    REQUIRE(cv.wait_for(lk, std::chrono::seconds(10), [&] { return frames.size() > i; }));
    return frames[i];
  }
};

commit::TxnOutcome OutcomeOf(const storage::Txn& t, uint32_t index) {
  commit::TxnOutcome o;
  o.txn_id = t.id;
  o.client = t.client;
  o.pos = commit::PlannedPos{7, 0, index};
  o.session = t.session;
  o.seq = t.seq;
  return o;
}

}  // namespace

TEST_CASE("client service: a session opens through its entry, answers out of turn land at their own positions") {
  Engine engine;
  cluster::ClientServiceOptions so;
  so.node = "n0";
  so.listen_address = "127.0.0.1:" + std::to_string(replication::raft::testing::FreePorts(1)[0]);
  so.records = 1000;
  so.record_bytes = 8;
  cluster::ClientServiceHandler h;
  h.submit = [&](std::vector<storage::Txn>& t) { return engine.Submit(t); };
  h.status = [] { return proto::NodeStatus{}; };
  h.sessions = true;
  cluster::ClientService service(so, h);
  REQUIRE(service.Start().ok());

  Inbox inbox;
  client::ClientConnectionOptions co;
  co.on_frame = [&](uint8_t type, std::string_view body) {
    {
      std::lock_guard<std::mutex> lk(inbox.mu);
      inbox.frames.emplace_back(type, std::string(body));
    }
    inbox.cv.notify_all();
    return Status::Ok();
  };
  auto conn = client::ClientConnection::Connect(so.listen_address, co);
  REQUIRE(conn.ok());

  // Open: the entry reaches the engine; its outcome (with the id the table gave it) answers.
  REQUIRE(conn.value()->Send(proto::MsgType::kOpenSession, proto::EncodeOpenSession({99})).ok());
  const std::vector<storage::Txn> open = engine.WaitFor(1);
  REQUIRE(open[0].session == storage::kOpenSession);
  service.OnOutcomes({OutcomeOf(open[0], 0)}, {{0, 5}});
  auto f = inbox.Next(0);
  REQUIRE(f.first == static_cast<uint8_t>(proto::MsgType::kSessionOpened));
  proto::SessionOpened so2;
  REQUIRE(proto::DecodeSessionOpened(f.second, &so2).ok());
  CHECK(so2.request_id == 99);
  CHECK(so2.session == 5);

  // 200 txns of session 5 in two requests: even seqs are "duplicates" answered by Answer on one
  // thread, odd ones get engine outcomes from another, each after the answer before it.
  constexpr uint64_t kTxns = 200;
  for (uint64_t r = 0; r < 2; ++r) {
    proto::TxnRequestWriter w;
    w.Begin(r + 1, 5);
    for (uint64_t i = 0; i < kTxns / 2; ++i) {
      storage::Txn t;
      t.id = r * 1000 + i;
      t.seq = r * (kTxns / 2) + i + 1;
      t.ops.push_back(storage::Op{storage::OpKind::kUpdate, i, 0, 0});
      w.Add(t);
    }
    REQUIRE(conn.value()->Send(proto::MsgType::kTxnRequest, w.FinishView()).ok());
  }
  const std::vector<storage::Txn> all = engine.WaitFor(1 + kTxns);
  std::mutex turn_mu;
  std::condition_variable turn_cv;
  uint64_t answered_up_to = 0;  // guarded by turn_mu: every even seq <= this is answered
  NamedThread answerer("t-answer", [&] {
    for (uint64_t seq = 2; seq <= kTxns; seq += 2) {
      const storage::Txn& t = all[seq];  // all[0] is the open entry
      cluster::SessionAnswer a;
      a.client = t.client;
      a.session = 5;
      a.seq = seq;
      a.code = ResultCode::kCommittedNoValues;
      a.pos = commit::PlannedPos{3, 0, static_cast<uint32_t>(seq)};
      service.Answer(std::vector<cluster::SessionAnswer>{a});
      {
        std::lock_guard<std::mutex> lk(turn_mu);
        answered_up_to = seq;
      }
      turn_cv.notify_all();
    }
  });
  NamedThread committer("t-commit", [&] {
    for (uint64_t seq = 1; seq <= kTxns; seq += 2) {
      {
        std::unique_lock<std::mutex> lk(turn_mu);
        turn_cv.wait(lk, [&] { return answered_up_to + 1 >= seq; });
      }
      service.OnOutcomes({OutcomeOf(all[seq], static_cast<uint32_t>(seq))});
    }
  });
  answerer.Join();
  committer.Join();
  for (size_t r = 0; r < 2; ++r) {
    f = inbox.Next(1 + r);
    REQUIRE(f.first == static_cast<uint8_t>(proto::MsgType::kTxnReply));
    proto::TxnReply reply;
    REQUIRE(proto::DecodeTxnReply(f.second, &reply).ok());
    CHECK(reply.request_id == r + 1);
    REQUIRE(reply.results.size() == kTxns / 2);
    for (size_t i = 0; i < reply.results.size(); ++i) {
      const uint64_t seq = r * (kTxns / 2) + i + 1;
      INFO("seq " << seq);
      CHECK(reply.results[i].code == (seq % 2 == 0 ? ResultCode::kCommittedNoValues : ResultCode::kCommitted));
      CHECK(reply.results[i].index == seq);
    }
  }
  CHECK(service.pending_txns() == 0);
  conn.value()->Close();
  service.Stop(1000);
}
