// Integration tests of the ZooKeeper backend's leader election, epochs and fencing, against a
// real ZooKeeper server ($QRSTORE_ZK_HOSTS, or one started by zk_test_util.h): a group of three
// members (the configured leader "m0", followers "m1" and "m2", F = 2) in one process, each with
// its own session. Failover when the leader stops; a deposed leader whose writes ZooKeeper refuses
// (fencing); a leader whose session expires; a fresh group led by the configured leader although
// the followers started first.
#include <catch2/catch.hpp>

#include "replication/zookeeper/zk_session.h"
#include "tests/integration/zookeeper/zk_test_util.h"

using namespace qrstore;
using namespace qrstore::replication;
using namespace qrstore::replication::zookeeper;
using namespace qrstore::replication::zookeeper::testing;

namespace {

// 3,500 B (four 1,000-byte chunks: the chunk writes are fenced too) every fifth batch, else 100 B.
size_t ElectionSize(uint64_t id) { return id % 5 == 0 ? 3500 : 100; }

ZkOptions Member(const std::string& hosts, const std::string& root, bool leader, const std::string& id,
                 uint32_t planners) {
  ZkOptions o = Options(hosts, root, leader, planners);
  o.followers = 2;
  o.follower_id = id;
  o.chunk_bytes = 1000;
  o.session_timeout_ms = 2000;  // the test server's tickTime is 1 s: the shortest it grants
  o.op_deadline_ms = 15000;
  return o;
}

// One member's receives, in any role: OK deliveries must come in order per stream, exactly once,
// with the bytes Payload() gives; kAborted ones are recorded apart; anything else is an error.
class Collector {
 public:
  ReceiveCallback Callback() {
    return [this](const ReplicateMeta& m, Status s, SharedBytes b) { Add(m, s, b); };
  }
  void Add(const ReplicateMeta& m, const Status& s, std::string_view bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (s.code() == StatusCode::kAborted) {
      aborted_[m.planner].push_back(m.batch_id);
    } else if (!s.ok()) {
      errors_.push_back("batch " + std::to_string(m.batch_id) + ": " + s.ToString());
    } else {
      auto& v = ok_[m.planner];
      if (!v.empty() && v.back() + 1 != m.batch_id) {
        errors_.push_back("p" + std::to_string(m.planner) + ": batch " + std::to_string(m.batch_id) + " after " +
                          std::to_string(v.back()));
      }
      if (bytes != Payload(m.group, m.planner, m.batch_id, ElectionSize(m.batch_id))) {
        errors_.push_back("p" + std::to_string(m.planner) + ": wrong bytes for batch " + std::to_string(m.batch_id));
      }
      v.push_back(m.batch_id);
    }
    cv_.notify_all();
  }
  bool WaitFor(const std::function<bool()>& pred, int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return pred() || !errors_.empty(); }) &&
           pred();
  }
  // Under WaitFor's predicate, or once the run settled.
  std::vector<uint64_t>& ok(uint32_t p) { return ok_[p]; }
  std::vector<uint64_t>& aborted(uint32_t p) { return aborted_[p]; }
  std::vector<uint64_t> OkNow(uint32_t p) {
    std::lock_guard<std::mutex> lock(mu_);
    return ok_[p];
  }
  std::vector<uint64_t> AbortedNow(uint32_t p) {
    std::lock_guard<std::mutex> lock(mu_);
    return aborted_[p];
  }
  std::vector<std::string> errors() {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint32_t, std::vector<uint64_t>> ok_;       // guarded by mu_
  std::map<uint32_t, std::vector<uint64_t>> aborted_;  // guarded by mu_
  std::vector<std::string> errors_;                    // guarded by mu_
};

// One ReplicateData's outcome.
class OneAck {
 public:
  ReplicateCallback Callback() {
    return [this](const ReplicateMeta&, Status s) {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = s;
      done_ = true;
      cv_.notify_all();
    };
  }
  bool Wait(int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return done_; });
  }
  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;             // guarded by mu_
  Status status_ = Status::Ok();  // guarded by mu_
};

std::vector<uint64_t> Range(uint64_t from, uint64_t to) {
  std::vector<uint64_t> v;
  for (uint64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

// Replicates batches [from, to) of stream p on `leader` and waits for all acks (OK expected).
void ReplicateAll(Replicator* leader, uint32_t p, uint64_t from, uint64_t to, Recorder* rec) {
  for (uint64_t id = from; id < to; ++id) {
    leader->ReplicateData(ReplicateMeta{0, p, id}, Payload(0, p, id, ElectionSize(id)),
                          [rec](const ReplicateMeta& m, Status s) { rec->Acked(m, s); });
  }
}

void Receive(Replicator* member, uint32_t p, uint64_t from, uint64_t to, Collector* c) {
  for (uint64_t id = from; id < to; ++id) member->ReceiveData(ReplicateMeta{0, p, id}, c->Callback());
}

// The epoch each marker of stream p says it was written in, by batch id.
std::map<uint64_t, uint64_t> MarkerEpochs(ZkInspector& zk, const std::string& root, uint32_t p) {
  std::map<uint64_t, uint64_t> out;
  const std::string stream = StreamPath(root, 0, p);
  for (const auto& c : zk.Children(stream)) {
    auto parsed = ParseChildName(c);
    if (!parsed || parsed->kind != ChildName::Kind::kMarker) continue;
    std::string data;
    if (!zk.Get(stream + "/" + c, &data)) continue;
    MarkerHeader h;
    std::string_view chunk0;
    REQUIRE(DecodeMarker(data, &h, &chunk0).ok());
    out[parsed->batch_id] = h.epoch;
  }
  return out;
}

// Waits until both followers are candidates that know m0 leads in epoch 1.
void WaitFollowersSeeM0(Replicator* a, Replicator* b) {
  for (Replicator* r : {a, b}) {
    REQUIRE(PollUntil(
        [&] {
          LeaderView v = r->Leader(0);
          return v.known && !v.self && v.id == "m0" && v.term == 1;
        },
        5000));
  }
}

}  // namespace

TEST_CASE("zk election: the leader stops, a follower takes over its streams (F=2, 2 planners)", "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("failover");
  RootGuard guard(hosts, root);
  Recorder lrec, wrec;
  lrec.size_fn_ = wrec.size_fn_ = ElectionSize;
  Collector ca, cb, cback;  // outlive the replicators that call into them
  auto leader = MustStart(Member(hosts, root, true, "m0", 2));
  auto a = MustStart(Member(hosts, root, false, "m1", 2));
  auto b = MustStart(Member(hosts, root, false, "m2", 2));
  REQUIRE(leader->IsLeader(0));
  CHECK(leader->Leader(0).self);
  CHECK(leader->Leader(0).term == 1);
  WaitFollowersSeeM0(a.get(), b.get());
  CHECK_FALSE(a->IsLeader(0));
  CHECK_FALSE(b->IsLeader(0));

  // The old leader writes 20 batches of p0 and 19 of p1 (one short); both followers read 0..9.
  ReplicateAll(leader.get(), 0, 0, 20, &lrec);
  ReplicateAll(leader.get(), 1, 0, 19, &lrec);
  Receive(a.get(), 0, 0, 10, &ca);
  Receive(a.get(), 1, 0, 10, &ca);
  Receive(b.get(), 0, 0, 10, &cb);
  Receive(b.get(), 1, 0, 10, &cb);
  REQUIRE(lrec.WaitFor([&] { return lrec.acked(0) == 20 && lrec.acked(1) == 19; }, 15000));
  for (Collector* c : {&ca, &cb}) {
    REQUIRE(c->WaitFor([&] { return c->ok(0).size() == 10 && c->ok(1).size() == 10; }, 15000));
  }

  leader->Stop();  // its session closes: its election znode goes at once
  {
    // Its progress znode says what it has (everything it wrote), for its successor's cleanup (and,
    // with no checkpoints told (RetainFrom), that a restart of it starts there too: keep_from).
    ZkInspector zk(hosts);
    std::string bytes;
    REQUIRE(zk.Get(ConsumerPath(root, "m0"), &bytes));
    std::vector<StreamProgress> progress;
    REQUIRE(DecodeProgress(bytes, &progress).ok());
    CHECK(progress == std::vector<StreamProgress>{{0, 0, 20, 20}, {0, 1, 19, 19}});
  }
  Replicator* w = nullptr;
  REQUIRE(PollUntil(
      [&] {
        w = a->IsLeader(0) ? a.get() : b->IsLeader(0) ? b.get() : nullptr;
        return w != nullptr;
      },
      5000));
  Replicator* o = w == a.get() ? b.get() : a.get();
  Collector& cw = w == a.get() ? ca : cb;
  Collector& co = w == a.get() ? cb : ca;
  CHECK_FALSE(o->IsLeader(0));
  const LeaderView wv = w->Leader(0);
  INFO("new leader " << wv.id << " in epoch " << wv.term);
  CHECK(wv.known);
  CHECK(wv.self);
  CHECK(wv.id == (w == a.get() ? "m1" : "m2"));
  CHECK(wv.term > 1);
  CHECK(PollUntil(
      [&] {
        LeaderView ov = o->Leader(0);
        return ov.known && !ov.self && ov.id == wv.id && ov.term == wv.term;
      },
      5000));
  REQUIRE(w->NextBatchId(0, 0).ok());
  CHECK(w->NextBatchId(0, 0).value() == 20);
  CHECK(w->NextBatchId(0, 1).value() == 19);

  // What the server does now: receive everything below NextBatchId (here: posted after the
  // promotion, together with receives posted ahead up to batch 24), then CancelReceives.
  for (uint32_t p = 0; p < 2; ++p) {
    Receive(w, p, 10, 25, &cw);
    Receive(o, p, 10, 30, &co);
  }
  REQUIRE(cw.WaitFor([&] { return cw.ok(0).size() == 20 && cw.ok(1).size() == 19; }, 15000));
  CHECK(cw.AbortedNow(0).empty());
  w->CancelReceives(0);
  REQUIRE(cw.WaitFor([&] { return cw.aborted(0).size() == 5 && cw.aborted(1).size() == 6; }, 5000));
  std::vector<uint64_t> aborted0 = cw.AbortedNow(0), aborted1 = cw.AbortedNow(1);
  std::sort(aborted0.begin(), aborted0.end());
  std::sort(aborted1.begin(), aborted1.end());
  CHECK(aborted0 == Range(20, 25));
  CHECK(aborted1 == Range(19, 25));

  // The new leader pads p1 to 20, then writes 20..29 on both streams.
  ReplicateAll(w, 1, 19, 20, &wrec);
  REQUIRE(wrec.WaitFor([&] { return wrec.acked(1) == 1; }, 15000));
  ReplicateAll(w, 0, 20, 30, &wrec);
  ReplicateAll(w, 1, 20, 30, &wrec);
  REQUIRE(wrec.WaitFor([&] { return wrec.acked(0) == 10 && wrec.acked(1) == 11; }, 15000));
  REQUIRE(co.WaitFor([&] { return co.ok(0).size() == 30 && co.ok(1).size() == 30; }, 15000));

  for (const auto& e : cw.errors()) UNSCOPED_INFO("new leader: " << e);
  for (const auto& e : co.errors()) UNSCOPED_INFO("other follower: " << e);
  for (const auto& e : wrec.errors()) UNSCOPED_INFO("new leader's acks: " << e);
  CHECK(cw.errors().empty());
  CHECK(co.errors().empty());
  CHECK(wrec.errors().empty());
  CHECK(lrec.errors().empty());
  // Every batch exactly once, in order: the promoted member got 0..19 / 0..18 from its
  // predecessor and none of its own; the other follower 0..29 of both streams, nothing aborted.
  CHECK(cw.OkNow(0) == Range(0, 20));
  CHECK(cw.OkNow(1) == Range(0, 19));
  CHECK(co.OkNow(0) == Range(0, 30));
  CHECK(co.OkNow(1) == Range(0, 30));
  CHECK(co.AbortedNow(0).empty());
  CHECK(co.AbortedNow(1).empty());
  // The markers still in ZooKeeper say who wrote them (cleanup may have removed old ones).
  ZkInspector zk(hosts);
  for (uint32_t p = 0; p < 2; ++p) {
    INFO("planner " << p);
    auto epochs = MarkerEpochs(zk, root, p);
    const uint64_t first_new = p == 0 ? 20 : 19;
    for (const auto& [id, epoch] : epochs) {
      INFO("batch " << id);
      CHECK(epoch == (id < first_new ? 1 : wv.term));
    }
    CHECK(epochs.count(29) == 1);
  }
  ZkStats st;
  REQUIRE(GetZkStats(*w, &st));
  CHECK(st.elections_won == 1);
  CHECK(st.writes_fenced == 0);
  // Later receives on the new leader still work (for another range: here, its own batch 29).
  OneReceive later;
  w->ReceiveData(ReplicateMeta{0, 0, 29}, later.Callback());
  REQUIRE(later.Wait(10000));
  CHECK(later.status().ok());

  // The old leader comes back (still replication.role=leader): the group has a leader, so it is
  // only a candidate; it reads as a follower from where its progress says it stopped.
  auto back = MustStart(Member(hosts, root, true, "m0", 2));
  CHECK_FALSE(back->IsLeader(0));
  CHECK(PollUntil(
      [&] {
        LeaderView v = back->Leader(0);
        return v.known && !v.self && v.id == wv.id && v.term == wv.term;
      },
      5000));
  CHECK(back->NextBatchId(0, 0).value() == 20);
  CHECK(back->NextBatchId(0, 1).value() == 19);
  OneAck refused;
  back->ReplicateData(ReplicateMeta{0, 0, 30}, "x", refused.Callback());
  REQUIRE(refused.Wait(5000));
  CHECK(refused.status().code() == StatusCode::kUnavailable);
  CHECK(refused.status().message().find("leader: '" + wv.id + "'") != std::string::npos);
  Receive(back.get(), 0, 20, 30, &cback);
  Receive(back.get(), 1, 19, 30, &cback);
  REQUIRE(cback.WaitFor([&] { return cback.ok(0).size() == 10 && cback.ok(1).size() == 11; }, 15000));
  for (const auto& e : cback.errors()) UNSCOPED_INFO("old leader, back: " << e);
  CHECK(cback.errors().empty());
  CHECK(cback.OkNow(0) == Range(20, 30));
  CHECK(cback.OkNow(1) == Range(19, 30));
  back->Stop();
  w->Stop();
  o->Stop();
}

TEST_CASE("zk election: ZooKeeper refuses a deposed leader's writes (fencing), which then fail kUnavailable",
          "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("fencing");
  RootGuard guard(hosts, root);
  Recorder lrec, wrec;
  lrec.size_fn_ = wrec.size_fn_ = ElectionSize;
  Collector ca, cb;
  auto leader = MustStart(Member(hosts, root, true, "m0", 2));
  auto a = MustStart(Member(hosts, root, false, "m1", 2));
  auto b = MustStart(Member(hosts, root, false, "m2", 2));
  REQUIRE(leader->IsLeader(0));
  WaitFollowersSeeM0(a.get(), b.get());
  ReplicateAll(leader.get(), 0, 0, 10, &lrec);
  ReplicateAll(leader.get(), 1, 0, 10, &lrec);
  REQUIRE(lrec.WaitFor([&] { return lrec.acked(0) == 10 && lrec.acked(1) == 10; }, 15000));

  // The old leader is cut off from its notifications (as in a long pause), and ZooKeeper drops
  // its election znode (as when it expired a session the leader has not heard about yet).
  REQUIRE(MuteEpochWatchForTest(leader.get(), true).ok());
  ZkInspector zk(hosts);
  const std::string dir = ElectionPath(root, 0);
  std::string m0_node;
  for (const auto& c : zk.Children(dir)) {
    std::string data;
    if (zk.Get(dir + "/" + c, &data) && data == "m0") m0_node = c;
  }
  REQUIRE_FALSE(m0_node.empty());
  REQUIRE(zk.Delete(dir + "/" + m0_node) == ZOK);
  Replicator* w = nullptr;
  REQUIRE(PollUntil(
      [&] {
        w = a->IsLeader(0) ? a.get() : b->IsLeader(0) ? b.get() : nullptr;
        return w != nullptr;
      },
      5000));
  Replicator* o = w == a.get() ? b.get() : a.get();
  Collector& co = w == a.get() ? cb : ca;
  const uint64_t term = w->Leader(0).term;
  CHECK(term == 2);
  // The old leader still believes it leads: only ZooKeeper can stop it now.
  CHECK(leader->IsLeader(0));
  OneAck marker_only, chunked;
  // Batch 10 of p0 is 3,500 B (chunks first), batch 11 of p1... p1's batch 10 too; foreign bytes,
  // so that any of them in ZooKeeper would show as wrong bytes at the other follower.
  leader->ReplicateData(ReplicateMeta{0, 0, 10}, Payload(7, 7, 10, 3500), chunked.Callback());
  leader->ReplicateData(ReplicateMeta{0, 1, 10}, Payload(7, 7, 11, 3500), marker_only.Callback());
  REQUIRE(chunked.Wait(10000));
  REQUIRE(marker_only.Wait(10000));
  INFO(chunked.status().ToString() << " / " << marker_only.status().ToString());
  CHECK(chunked.status().code() == StatusCode::kUnavailable);
  CHECK(marker_only.status().code() == StatusCode::kUnavailable);
  CHECK_FALSE(leader->IsLeader(0));
  CHECK_FALSE(leader->Leader(0).self);
  OneAck later;
  leader->ReplicateData(ReplicateMeta{0, 0, 10}, Payload(7, 7, 12, 100), later.Callback());
  REQUIRE(later.Wait(5000));
  CHECK(later.status().code() == StatusCode::kUnavailable);
  CHECK(leader->NextBatchId(0, 0).status().code() == StatusCode::kUnavailable);
  ZkStats lst;
  REQUIRE(GetZkStats(*leader, &lst));
  CHECK(lst.writes_fenced >= 1);  // refused by ZooKeeper's epoch check, not by the leader itself
  CHECK(lst.depositions == 1);
  // Nothing of batch 10 is in ZooKeeper: the refused multi-ops left no chunk and no marker.
  for (uint32_t p = 0; p < 2; ++p) {
    for (const auto& c : zk.Children(StreamPath(root, 0, p))) {
      auto parsed = ParseChildName(c);
      REQUIRE(parsed);
      CHECK(parsed->batch_id < 10);
    }
  }

  // The new leader writes batch 10 on; the other follower reads the old leader's 0..9 and the
  // new leader's 10..14, each with the right bytes, and every marker names its writer's epoch.
  ReplicateAll(w, 0, 10, 15, &wrec);
  ReplicateAll(w, 1, 10, 15, &wrec);
  REQUIRE(wrec.WaitFor([&] { return wrec.acked(0) == 5 && wrec.acked(1) == 5; }, 15000));
  Receive(o, 0, 0, 15, &co);
  Receive(o, 1, 0, 15, &co);
  REQUIRE(co.WaitFor([&] { return co.ok(0).size() == 15 && co.ok(1).size() == 15; }, 15000));
  for (const auto& e : co.errors()) UNSCOPED_INFO(e);
  CHECK(co.errors().empty());
  CHECK(co.OkNow(0) == Range(0, 15));
  for (uint32_t p = 0; p < 2; ++p) {
    for (const auto& [id, epoch] : MarkerEpochs(zk, root, p)) {
      INFO("p" << p << " batch " << id);
      CHECK(epoch == (id < 10 ? 1 : term));
    }
  }
  leader->Stop();
  w->Stop();
  o->Stop();
}

TEST_CASE("zk election: a leader whose session expires stops leading for good, and a follower takes over",
          "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("expired-leader");
  RootGuard guard(hosts, root);
  Recorder lrec;
  lrec.size_fn_ = ElectionSize;
  auto leader = MustStart(Member(hosts, root, true, "m0", 1));
  auto a = MustStart(Member(hosts, root, false, "m1", 1));
  auto b = MustStart(Member(hosts, root, false, "m2", 1));
  REQUIRE(leader->IsLeader(0));
  WaitFollowersSeeM0(a.get(), b.get());
  ReplicateAll(leader.get(), 0, 0, 5, &lrec);
  REQUIRE(lrec.WaitFor([&] { return lrec.acked(0) == 5; }, 15000));
  REQUIRE(ForceSessionExpiryForTest(leader.get()).ok());  // returns once a new session exists
  CHECK_FALSE(leader->IsLeader(0));
  OneAck after;
  leader->ReplicateData(ReplicateMeta{0, 0, 5}, Payload(0, 0, 5, ElectionSize(5)), after.Callback());
  REQUIRE(after.Wait(5000));
  CHECK(after.status().code() == StatusCode::kUnavailable);
  REQUIRE(PollUntil([&] { return a->IsLeader(0) || b->IsLeader(0); }, 5000));
  Replicator* w = a->IsLeader(0) ? a.get() : b.get();
  CHECK(w->NextBatchId(0, 0).value() == 5);
  CHECK(w->Leader(0).term == 2);
  // The old leader does not come back, also not after the new one is gone.
  w->Stop();
  Replicator* o = w == a.get() ? b.get() : a.get();
  REQUIRE(PollUntil([&] { return o->IsLeader(0); }, 5000));
  CHECK(o->Leader(0).term == 3);
  CHECK_FALSE(leader->IsLeader(0));
  ZkStats st;
  REQUIRE(GetZkStats(*leader, &st));
  CHECK(st.depositions == 1);
  leader->Stop();
  o->Stop();
}

TEST_CASE("zk election: a fresh group is led by the configured leader even when the followers start first",
          "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("fresh");
  RootGuard guard(hosts, root);
  auto a = MustStart(Member(hosts, root, false, "m1", 1));
  auto b = MustStart(Member(hosts, root, false, "m2", 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // long enough to have run if they would
  CHECK_FALSE(a->IsLeader(0));
  CHECK_FALSE(b->IsLeader(0));
  CHECK_FALSE(a->Leader(0).known);
  ZkInspector zk(hosts);
  CHECK(zk.Children(ElectionPath(root, 0)).empty());  // no candidate before the group had a leader
  CHECK_FALSE(zk.Exists(EpochPath(root, 0)));
  auto leader = MustStart(Member(hosts, root, true, "m0", 1));
  CHECK(leader->IsLeader(0));  // when Start returns
  CHECK(leader->Leader(0).term == 1);
  WaitFollowersSeeM0(a.get(), b.get());
  CHECK(zk.Children(ElectionPath(root, 0)).size() == 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(leader->IsLeader(0));
  CHECK_FALSE(a->IsLeader(0));
  CHECK_FALSE(b->IsLeader(0));
  std::string data;
  REQUIRE(zk.Get(EpochPath(root, 0), &data));
  CHECK(data == "m0");
  leader->Stop();
  a->Stop();
  b->Stop();
}

TEST_CASE("zk election: a fenced write is applied only while the epoch holds, else ZooKeeper refuses it",
          "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("fenced-ops");
  RootGuard guard(hosts, root);
  ZkInspector zk(hosts);
  for (const auto& prefix : PathPrefixes(root)) zk.Create(prefix, "");
  const std::string epoch = root + "/epoch";
  REQUIRE(zk.Create(epoch, "") == ZOK);  // version 0
  Inbox inbox;
  ZkSession session(&inbox);
  REQUIRE(session.Open(hosts, 6000).ok());
  std::deque<ZkEvent> events;
  auto next_event = [&](ZkEvent::Kind kind) {
    const int64_t deadline = NowNanos() + 10'000'000'000;
    while (NowNanos() < deadline) {
      if (events.empty()) inbox.WaitAndTake(&events, deadline);
      while (!events.empty()) {
        ZkEvent ev = std::move(events.front());
        events.pop_front();
        if (ev.kind == kind) return ev;
      }
    }
    FAIL("no event");
    return ZkEvent{};
  };
  while (next_event(ZkEvent::Kind::kSession).state != ZOO_CONNECTED_STATE) {
  }
  auto run = [&](ZkSession::FencedKind kind, const std::string& check, int version, const std::string& path,
                 const std::string& data) {
    session.Fenced(kind, check, version, path, data, OpTag::Make(OpTag::Type::kCreateChunk));
    return next_event(ZkEvent::Kind::kCompletion);
  };
  using K = ZkSession::FencedKind;
  ZkEvent ev = run(K::kCreate, epoch, 0, root + "/a", "one");
  CHECK(ev.rc == ZOK);
  CHECK_FALSE(ev.fenced);
  ev = run(K::kCreate, epoch, 0, root + "/a", "two");  // the write's own failure, not fencing
  CHECK(ev.rc == ZNODEEXISTS);
  CHECK_FALSE(ev.fenced);
  ev = run(K::kSet, epoch, 0, root + "/a", "three");
  CHECK(ev.rc == ZOK);
  std::string data;
  REQUIRE(zk.Get(root + "/a", &data));
  CHECK(data == "three");
  REQUIRE(zk.Set(epoch, "new leader") == ZOK);  // a successor's bump: version 1
  ev = run(K::kCreate, epoch, 0, root + "/b", "x");
  CHECK(ev.rc == ZBADVERSION);
  CHECK(ev.fenced);
  CHECK_FALSE(zk.Exists(root + "/b"));
  ev = run(K::kSet, epoch, 0, root + "/a", "four");
  CHECK(ev.fenced);
  ev = run(K::kDelete, epoch, 0, root + "/a", "");
  CHECK(ev.rc == ZBADVERSION);
  CHECK(ev.fenced);
  REQUIRE(zk.Get(root + "/a", &data));
  CHECK(data == "three");
  ev = run(K::kDelete, epoch, 1, root + "/a", "");  // the current epoch may
  CHECK(ev.rc == ZOK);
  CHECK_FALSE(zk.Exists(root + "/a"));
  ev = run(K::kCreate, root + "/no-epoch", 0, root + "/c", "x");  // a missing epoch znode fences too
  CHECK(ev.rc == ZNONODE);
  CHECK(ev.fenced);
  session.Close();
}

// libzookeeper's zoo_amulti frees the check op's path when the handle turned unrecoverable
// before the write op was built (it hands an uninitialized pointer to free()): ZkSession::Fenced
// refuses on such a handle, and otherwise hands the library a copy it may free.
TEST_CASE("zk session: a fenced write on an expired session is refused, and no path of ours is freed twice",
          "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("fenced-expired");
  RootGuard guard(hosts, root);
  ZkInspector zk(hosts);
  for (const auto& prefix : PathPrefixes(root)) zk.Create(prefix, "");
  const std::string epoch = root + "/epoch-of-a-long-name";  // on the heap, not in the string
  REQUIRE(zk.Create(epoch, "") == ZOK);
  Inbox inbox;
  ZkSession session(&inbox);
  REQUIRE(session.Open(hosts, 4000).ok());
  std::deque<ZkEvent> events;
  auto next_event = [&](ZkEvent::Kind kind, int64_t within_ns) {
    const int64_t deadline = NowNanos() + within_ns;
    while (NowNanos() < deadline) {
      if (events.empty()) inbox.WaitAndTake(&events, deadline);
      while (!events.empty()) {
        ZkEvent ev = std::move(events.front());
        events.pop_front();
        if (ev.kind == kind) return ev;
      }
    }
    return ZkEvent{};
  };
  REQUIRE(next_event(ZkEvent::Kind::kSession, 10'000'000'000).state == ZOO_CONNECTED_STATE);
  // Expire the session: a second handle attaches to it and closes it. The session's own client
  // may take it back before the close, so this is tried a bounded number of times.
  bool expired = false;
  for (int attempt = 0; attempt < 5 && !expired; ++attempt) {
    clientid_t id;
    REQUIRE(session.ClientId(&id));
    zhandle_t* other = zookeeper_init(hosts.c_str(), nullptr, 4000, &id, nullptr, 0);
    REQUIRE(other != nullptr);
    const int64_t deadline = NowNanos() + 10'000'000'000;
    while (zoo_state(other) != ZOO_CONNECTED_STATE && NowNanos() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    zookeeper_close(other);
    for (;;) {
      const ZkEvent ev = next_event(ZkEvent::Kind::kSession, 5'000'000'000);
      if (ev.kind != ZkEvent::Kind::kSession) break;  // none within 5 s
      if (ev.state == ZOO_EXPIRED_SESSION_STATE) {
        expired = true;
        break;
      }
    }
  }
  REQUIRE(expired);
  REQUIRE(zoo_state(session.handle()) == ZOO_EXPIRED_SESSION_STATE);
  const std::string path = root + "/written-after-expiry";
  // Refused before the library is called.
  session.Fenced(ZkSession::FencedKind::kCreate, epoch, 0, path, "x", OpTag::Make(OpTag::Type::kCreateChunk));
  ZkEvent ev = next_event(ZkEvent::Kind::kCompletion, 5'000'000'000);
  REQUIRE(ev.kind == ZkEvent::Kind::kCompletion);
  CHECK(ev.rc == ZINVALIDSTATE);
  // As if the handle had turned unrecoverable just after that check: the library gets the
  // multi, fails to build the check op, and frees its path; the copy it frees is ours to give.
  const uint64_t given_before = ZkSession::given_away();
  session.set_check_state_before_multi(false);
  session.Fenced(ZkSession::FencedKind::kCreate, epoch, 0, path, "x", OpTag::Make(OpTag::Type::kCreateChunk));
  ev = next_event(ZkEvent::Kind::kCompletion, 5'000'000'000);
  REQUIRE(ev.kind == ZkEvent::Kind::kCompletion);
  CHECK(ev.rc != ZOK);
  CHECK(ZkSession::given_away() == given_before + 1);
  CHECK(epoch == root + "/epoch-of-a-long-name");  // the caller's strings are intact
  session.Close();
  CHECK_FALSE(zk.Exists(path));
}

TEST_CASE("zk election: a stranded follower withdraws: it never leads a group whose batches it lost",
          "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("withdrawn");
  RootGuard guard(hosts, root);
  Recorder lrec;
  lrec.size_fn_ = ElectionSize;
  Collector c1;
  ZkOptions lo = Member(hosts, root, true, "m0", 1);
  lo.retain_bytes = 4000;  // past it the leader deletes what m1 (the majority's follower) has read
  lo.cleanup_interval_ms = 20;
  ZkOptions o1 = Member(hosts, root, false, "m1", 1);
  o1.progress_interval_ms = 20;
  ZkOptions o2 = Member(hosts, root, false, "m2", 1);
  o2.poll_ms = 50;
  auto leader = MustStart(lo);
  auto a = MustStart(o1);
  auto b = MustStart(o2);
  WaitFollowersSeeM0(a.get(), b.get());
  Receive(a.get(), 0, 0, 40, &c1);
  ReplicateAll(leader.get(), 0, 0, 40, &lrec);
  REQUIRE(lrec.WaitFor([&] { return lrec.acked(0) == 40; }, 15000));
  REQUIRE(c1.WaitFor([&] { return c1.ok(0).size() == 40; }, 15000));
  ZkInspector zk(hosts);
  REQUIRE(PollUntil([&] { return !zk.Exists(StreamPath(root, 0, 0) + "/" + MarkerName(0)); }, 5000));
  // m2 asks for batch 0, long gone: kNotFound, it knows it is stranded, and leaves the line.
  OneReceive gone;
  b->ReceiveData(ReplicateMeta{0, 0, 0}, gone.Callback());
  REQUIRE(gone.Wait(10000));
  CHECK(gone.status().code() == StatusCode::kNotFound);
  CHECK_FALSE(b->Health(0).self_stranded.empty());
  CHECK(PollUntil([&] { return zk.Children(ElectionPath(root, 0)).size() == 2; }, 5000));
  // The leader stops: m1 takes over; m1 stops: m2 does not (it could not deliver 0..39).
  leader->Stop();
  REQUIRE(PollUntil([&] { return a->IsLeader(0); }, 5000));
  CHECK_FALSE(b->IsLeader(0));
  a->Stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK_FALSE(b->IsLeader(0));
  CHECK_FALSE(b->Health(0).self_stranded.empty());
  b->Stop();
}
