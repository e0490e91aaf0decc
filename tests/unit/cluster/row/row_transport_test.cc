// The row transport (cluster/row/row_transport.h) between real loopback connections: frames of any
// size arrive in order with their sender named, a peer that closes early fails the others
// naming it, a closed connection after ExpectClose is quiet, and an oversized frame is refused.
// With tolerate_peer_loss: a peer's end is reported once and does not fail the others, its
// successor (higher epoch, new address) replaces it, a dial-in whose epoch is not higher is
// refused, and a replaced connection delivers nothing more.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/row/row_transport.h"
#include "common/clock.h"
#include "tests/unit/cluster/row/loopback_addresses.h"

using namespace qrstore;
using namespace qrstore::cluster;

namespace {


RowTransportOptions Options(uint32_t me, const std::vector<std::string>& addrs, size_t max_frame = size_t{1} << 26) {
  RowTransportOptions o;
  o.me = me;
  o.addresses = addrs;
  o.max_frame_bytes = max_frame;
  return o;
}

RowTransportOptions Tolerant(uint32_t me, const std::vector<std::string>& addrs, uint64_t epoch,
                             const std::string& net = "nng") {
  RowTransportOptions o = Options(me, addrs);
  o.tolerate_peer_loss = true;
  o.epoch = epoch;
  o.net = net;
  return o;
}

struct Node {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<uint32_t, std::string>> got;
  std::vector<std::string> failures;
  std::vector<std::pair<uint32_t, std::string>> lost;  // lost handler calls: partition, why
  // While `hold`, the frame handler blocks (as it never should): back-pressure on the sender.
  bool hold = false;
  size_t arrived = 0;  // frame handler calls begun
  std::unique_ptr<RowTransport> t;

  Node(uint32_t me, const std::vector<std::string>& addrs, size_t max_frame = size_t{1} << 26)
      : Node(Options(me, addrs, max_frame)) {}
  explicit Node(const RowTransportOptions& o) {
    t = std::make_unique<RowTransport>(
        o,
        [this](uint32_t from, std::string_view f) {
          std::unique_lock<std::mutex> lk(mu);
          ++arrived;
          cv.notify_all();
          cv.wait(lk, [&] { return !hold; });
          got.emplace_back(from, std::string(f));
        },
        [this](const Status& s) {
          std::lock_guard<std::mutex> lk(mu);
          failures.push_back(s.message());
          cv.notify_all();
        },
        [this](uint32_t p, const Status& why) {
          std::lock_guard<std::mutex> lk(mu);
          lost.emplace_back(p, why.message());
          cv.notify_all();
        });
  }
  template <typename P>
  bool WaitFor(P pred) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(10), pred);
  }
  // The frames received from `from`, in order.
  std::vector<std::string> From(uint32_t from) {
    std::lock_guard<std::mutex> lk(mu);
    std::vector<std::string> out;
    for (const auto& [f, frame] : got) {
      if (f == from) out.push_back(frame);
    }
    return out;
  }
  size_t CountFrom(uint32_t from) { return From(from).size(); }
  size_t Lost() {
    std::lock_guard<std::mutex> lk(mu);
    return lost.size();
  }
  size_t Failures() {
    std::lock_guard<std::mutex> lk(mu);
    return failures.size();
  }
};

// For what no handler announces (a refused dial-in): polls `pred` for up to 10 s.
template <typename P>
bool Eventually(P pred) {
  const int64_t deadline = NowNanos() + int64_t{10'000'000'000};
  while (!pred()) {
    if (NowNanos() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

std::vector<std::string> Numbered(const std::string& tag, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(tag + std::to_string(i));
  return out;
}

// Sends tag0..tag<n-1> from `from` to partition `to`.
void SendNumbered(Node& from, uint32_t to, const std::string& tag, int n) {
  for (const auto& f : Numbered(tag, n)) REQUIRE(from.t->Send(to, f));
}

// Listens on every node, then connects them all (each Connect waits for the others to dial in).
void ConnectAll(std::vector<std::unique_ptr<Node>>& nodes) {
  for (auto& n : nodes) REQUIRE(n->t->Listen().ok());
  std::vector<std::thread> ts;
  std::vector<Status> st(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) ts.emplace_back([&, i] { st[i] = nodes[i]->t->Connect(10000); });
  for (auto& t : ts) t.join();
  for (auto& s : st) REQUIRE(s.ok());
}

// `addrs.size()` nodes with tolerate_peer_loss at `epoch`, connected.
std::vector<std::unique_ptr<Node>> ConnectedRow(const std::vector<std::string>& addrs, uint64_t epoch,
                                                const std::string& net = "nng", bool tolerate = true) {
  std::vector<std::unique_ptr<Node>> nodes;
  for (uint32_t i = 0; i < addrs.size(); ++i) {
    RowTransportOptions o = Tolerant(i, addrs, epoch, net);
    o.tolerate_peer_loss = tolerate;
    nodes.push_back(std::make_unique<Node>(o));
  }
  ConnectAll(nodes);
  return nodes;
}

// The row's addresses with partition p's moved to a new one (where its successor listens).
std::vector<std::string> Moved(std::vector<std::string> addrs, uint32_t p) {
  addrs[p] = testing::LoopbackAddresses(1)[0];
  return addrs;
}

// `n` dials p's successor at `address` and waits for its dial-in: p is up again.
void DialBack(Node& n, uint32_t p, const std::string& address) {
  REQUIRE(n.t->Redial(p, address, 10000).ok());
  REQUIRE(n.t->WaitDialedIn(p, 10000).ok());
  CHECK(n.t->Up(p));
}

}  // namespace

TEST_CASE("row transport: frames arrive in order, named by sender, small and large") {
  const auto addrs = testing::LoopbackAddresses(3);
  std::vector<std::unique_ptr<Node>> nodes;
  for (uint32_t i = 0; i < 3; ++i) nodes.push_back(std::make_unique<Node>(i, addrs));
  ConnectAll(nodes);
  const std::string big(3 << 20, 'x');  // larger than the reader's buffer
  for (int i = 0; i < 500; ++i) {
    REQUIRE(nodes[0]->t->Send(2, "a" + std::to_string(i)));
    REQUIRE(nodes[1]->t->Send(2, "b" + std::to_string(i)));
    if (i == 250) REQUIRE(nodes[0]->t->Send(2, big));
  }
  REQUIRE(nodes[2]->WaitFor([&] { return nodes[2]->got.size() == 1001; }));
  int next_a = 0, next_b = 0;
  bool saw_big = false;
  for (const auto& [from, f] : nodes[2]->got) {
    if (from == 0 && f == big) {
      CHECK(next_a == 251);
      saw_big = true;
    } else if (from == 0) {
      CHECK(f == "a" + std::to_string(next_a++));
    } else {
      REQUIRE(from == 1);
      CHECK(f == "b" + std::to_string(next_b++));
    }
  }
  CHECK(saw_big);
  CHECK(nodes[2]->failures.empty());
  for (auto& n : nodes) n->t->Stop();
}

TEST_CASE("row transport: a peer closing early fails the others naming it, after ExpectClose it is quiet") {
  const auto addrs = testing::LoopbackAddresses(3);
  std::vector<std::unique_ptr<Node>> nodes;
  for (uint32_t i = 0; i < 3; ++i) nodes.push_back(std::make_unique<Node>(i, addrs));
  ConnectAll(nodes);
  nodes[0]->t->ExpectClose(2);
  nodes[2]->t->Stop();
  REQUIRE(nodes[1]->WaitFor([&] { return !nodes[1]->failures.empty(); }));
  CHECK(nodes[1]->failures[0].find("row peer 2 (" + addrs[2] + ") closed its connection") != std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    std::lock_guard<std::mutex> lk(nodes[0]->mu);
    CHECK(nodes[0]->failures.empty());
  }
  CHECK_FALSE(nodes[1]->t->Send(0, "after the failure"));  // a failed transport sends nothing more
  CHECK(nodes[1]->Lost() == 0);  // without tolerate_peer_loss nothing is "lost": the row failed
  for (auto& n : nodes) n->t->Stop();
}

TEST_CASE("row transport: an oversized frame fails the receiver, Connect names a peer that never comes") {
  const auto addrs = testing::LoopbackAddresses(2);
  std::vector<std::unique_ptr<Node>> nodes;
  nodes.push_back(std::make_unique<Node>(0, addrs, 1 << 20));
  nodes.push_back(std::make_unique<Node>(1, addrs, 1 << 10));
  ConnectAll(nodes);
  REQUIRE(nodes[0]->t->Send(1, std::string(2000, 'y')));
  REQUIRE(nodes[1]->WaitFor([&] { return !nodes[1]->failures.empty(); }));
  CHECK(nodes[1]->failures[0].find("sent a frame of 2000 bytes (at most 1024)") != std::string::npos);
  for (auto& n : nodes) n->t->Stop();

  const auto lonely = testing::LoopbackAddresses(2);
  Node alone(0, lonely);
  REQUIRE(alone.t->Listen().ok());
  const Status s = alone.t->Connect(300);
  CHECK(s.code() == StatusCode::kUnavailable);
  CHECK(s.message().find("row peer 1 (" + lonely[1] + ")") != std::string::npos);
}

TEST_CASE("row transport, failover: a lost peer is reported once, and its successor replaces it") {
  // Both stream layers: replacing a connection leans on Shutdown waking a blocked read or write.
  const std::string net = GENERATE(as<std::string>{}, "nng", "posix");
  CAPTURE(net);
  const auto addrs = testing::LoopbackAddresses(3);
  auto nodes = ConnectedRow(addrs, 1, net);
  CHECK(nodes[0]->t->Up(2));
  CHECK(nodes[1]->t->Up(2));

  // Partition 2's leader dies.
  nodes[2].reset();
  for (int i = 0; i < 2; ++i) {
    Node& n = *nodes[i];
    REQUIRE(n.WaitFor([&] { return !n.lost.empty(); }));
    CHECK(n.lost[0].first == 2);
    CHECK(n.lost[0].second.find("row peer 2 (" + addrs[2] + ")") != std::string::npos);
    CHECK_FALSE(n.t->Up(2));
    CHECK(n.t->Send(2, "dropped while 2 is lost"));  // dropped, not a failure
  }
  // The survivors still talk.
  SendNumbered(*nodes[0], 1, "a", 100);
  SendNumbered(*nodes[1], 0, "b", 100);
  REQUIRE(nodes[1]->WaitFor([&] { return nodes[1]->got.size() == 100; }));
  REQUIRE(nodes[0]->WaitFor([&] { return nodes[0]->got.size() == 100; }));
  CHECK(nodes[1]->From(0) == Numbered("a", 100));
  CHECK(nodes[0]->From(1) == Numbered("b", 100));
  CHECK(nodes[0]->t->Up(1));
  // A Redial that finds nobody names the peer and the address, and changes nothing.
  const std::string nowhere = testing::LoopbackAddresses(1)[0];
  const Status s = nodes[0]->t->Redial(2, nowhere, 300);
  CHECK(s.code() == StatusCode::kUnavailable);
  CHECK(s.message().find("row peer 2 (" + nowhere + ")") != std::string::npos);
  CHECK_FALSE(nodes[0]->t->Up(2));

  // Its successor: a higher epoch, a new address. It dials first; the others take its
  // connection in place of the dead one and dial back at the new address.
  const auto addrs2 = Moved(addrs, 2);
  nodes[2] = std::make_unique<Node>(Tolerant(2, addrs2, 2, net));
  REQUIRE(nodes[2]->t->Listen().ok());
  REQUIRE(nodes[2]->t->DialAll(10000).ok());
  for (int i = 0; i < 2; ++i) DialBack(*nodes[i], 2, addrs2[2]);
  REQUIRE(nodes[2]->t->WaitDialedIn(10000).ok());
  CHECK(nodes[2]->t->Up(0));
  CHECK(nodes[2]->t->Up(1));

  // Every pair, both ways, in order, exactly once (nothing of what was dropped shows up).
  for (auto& n : nodes) {
    std::lock_guard<std::mutex> lk(n->mu);
    n->got.clear();
  }
  for (uint32_t from = 0; from < 3; ++from) {
    for (uint32_t to = 0; to < 3; ++to) {
      if (from != to) SendNumbered(*nodes[from], to, std::to_string(from) + ">" + std::to_string(to) + ":", 300);
    }
  }
  for (uint32_t to = 0; to < 3; ++to) {
    Node& n = *nodes[to];
    REQUIRE(n.WaitFor([&] { return n.got.size() == 600; }));
    for (uint32_t from = 0; from < 3; ++from) {
      if (from != to) CHECK(n.From(from) == Numbered(std::to_string(from) + ">" + std::to_string(to) + ":", 300));
    }
  }
  for (auto& n : nodes) CHECK(n->Failures() == 0);
  CHECK(nodes[0]->Lost() == 1);
  CHECK(nodes[1]->Lost() == 1);
  CHECK(nodes[2]->Lost() == 0);

  // The successor's loss is reported again, naming its new address.
  nodes[2].reset();
  REQUIRE(nodes[0]->WaitFor([&] { return nodes[0]->lost.size() == 2; }));
  CHECK(nodes[0]->lost[1].first == 2);
  CHECK(nodes[0]->lost[1].second.find("row peer 2 (" + addrs2[2] + ")") != std::string::npos);
  CHECK(nodes[0]->Failures() == 0);
  for (auto& n : nodes) {
    if (n) n->t->Stop();
  }
}

TEST_CASE("row transport, failover: a dial-in whose epoch is not higher is refused, the live one keeps working") {
  const bool tolerate = GENERATE(true, false);
  CAPTURE(tolerate);
  const auto addrs = testing::LoopbackAddresses(3);
  auto nodes = ConnectedRow(addrs, 5, "nng", tolerate);
  // Impostors for partition 2, at their own addresses: an equal epoch, a lower one, and (where
  // replacing is off) a higher one. They dial 0 and 1, which refuse them.
  std::vector<uint64_t> epochs = {5, 4};
  if (!tolerate) epochs.push_back(6);
  std::vector<std::unique_ptr<Node>> impostors;
  for (uint64_t epoch : epochs) {
    RowTransportOptions o = Tolerant(2, Moved(addrs, 2), epoch);
    o.tolerate_peer_loss = tolerate;
    impostors.push_back(std::make_unique<Node>(o));
    REQUIRE(impostors.back()->t->DialAll(10000).ok());
    const uint64_t refused = impostors.size();
    REQUIRE(Eventually([&] { return nodes[0]->t->connections_refused() == refused; }));
    REQUIRE(Eventually([&] { return nodes[1]->t->connections_refused() == refused; }));
    // Refusing closes the connection: the impostor's writes fail, soon if not at once (and
    // nothing it sent is delivered, checked below).
    Node& imp = *impostors.back();
    REQUIRE(Eventually([&] {
      imp.t->Send(0, "impostor");
      return (tolerate ? imp.Lost() : imp.Failures()) > 0;
    }));
  }
  CHECK(nodes[0]->t->Up(2));
  SendNumbered(*nodes[2], 0, "real", 50);
  SendNumbered(*nodes[0], 2, "back", 50);
  REQUIRE(nodes[0]->WaitFor([&] { return nodes[0]->got.size() == 50; }));
  REQUIRE(nodes[2]->WaitFor([&] { return nodes[2]->got.size() == 50; }));
  CHECK(nodes[0]->From(2) == Numbered("real", 50));
  CHECK(nodes[2]->From(0) == Numbered("back", 50));
  for (int i = 0; i < 3; ++i) {
    CHECK(nodes[i]->Lost() == 0);
    CHECK(nodes[i]->Failures() == 0);
  }
  for (auto& n : impostors) n->t->Stop();
  for (auto& n : nodes) n->t->Stop();
}

TEST_CASE("row transport, failover: a replaced connection delivers nothing more, its process still alive") {
  // Both stream layers: replacing a connection leans on Shutdown waking a blocked read or write.
  const std::string net = GENERATE(as<std::string>{}, "nng", "posix");
  CAPTURE(net);
  const auto addrs = testing::LoopbackAddresses(3);
  auto nodes = ConnectedRow(addrs, 1, net);
  Node& old = *nodes[2];  // not stopped: it only lost its leadership

  const auto addrs2 = Moved(addrs, 2);
  Node successor(Tolerant(2, addrs2, 2, net));
  REQUIRE(successor.t->Listen().ok());
  REQUIRE(successor.t->DialAll(10000).ok());
  // 0 and 1 had not noticed the old leader's end: the replacement reports it, once.
  for (int i = 0; i < 2; ++i) {
    Node& n = *nodes[i];
    REQUIRE(n.WaitFor([&] { return !n.lost.empty(); }));
    CHECK(n.lost[0].first == 2);
    CHECK(n.lost[0].second.find("superseded by a successor of epoch 2") != std::string::npos);
    CHECK_FALSE(n.t->Up(2));  // its outbound connection still went to the old leader
  }
  // The replacement is in place: what the old leader sends now is not delivered.
  for (uint32_t to = 0; to < 2; ++to) {
    for (const auto& f : Numbered("old", 50)) old.t->Send(to, f);
  }
  for (int i = 0; i < 2; ++i) DialBack(*nodes[i], 2, addrs2[2]);
  REQUIRE(successor.t->WaitDialedIn(10000).ok());
  for (uint32_t to = 0; to < 2; ++to) {
    SendNumbered(successor, to, "new", 50);
    SendNumbered(*nodes[to], 2, "back", 50);
  }
  for (int i = 0; i < 2; ++i) {
    Node& n = *nodes[i];
    REQUIRE(n.WaitFor([&] { return n.got.size() == 50; }));
    CHECK(n.From(2) == Numbered("new", 50));
    CHECK(n.Lost() == 1);
    CHECK(n.Failures() == 0);
  }
  REQUIRE(successor.WaitFor([&] { return successor.got.size() == 100; }));
  CHECK(successor.From(0) == Numbered("back", 50));
  CHECK(successor.From(1) == Numbered("back", 50));
  // The old leader sees its connections closed: both peers lost, no failure.
  REQUIRE(old.WaitFor([&] { return old.lost.size() == 2; }));
  CHECK(old.Failures() == 0);
  {
    std::lock_guard<std::mutex> lk(old.mu);
    CHECK(old.got.empty());
  }
  successor.t->Stop();
  for (auto& n : nodes) n->t->Stop();
}

TEST_CASE("row transport, failover: Redial before the loss was noticed, a writer blocked on the old one returns") {
  const std::string net = GENERATE(as<std::string>{}, "nng", "posix");
  CAPTURE(net);
  const auto addrs = testing::LoopbackAddresses(2);
  auto nodes = ConnectedRow(addrs, 1, net);
  Node& old = *nodes[1];
  {
    std::lock_guard<std::mutex> lk(old.mu);
    old.hold = true;
  }
  // 64 MB toward a reader that does not read: the writer blocks once the kernel's buffers fill.
  std::atomic<int> sends{0};
  std::atomic<bool> all_true{true};
  std::thread writer([&] {
    const std::string big(size_t{1} << 20, 'z');
    for (int i = 0; i < 64; ++i) {
      if (!nodes[0]->t->Send(1, big)) all_true.store(false);
      sends.fetch_add(1);
    }
  });
  // Positioning, not a check: 1's reader is held, and 0's writes stopped advancing.
  REQUIRE(old.WaitFor([&] { return old.arrived > 0; }));
  for (uint64_t last = ~uint64_t{0}; nodes[0]->t->frames_sent() != last && sends.load() < 64;) {
    last = nodes[0]->t->frames_sent();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(sends.load() < 64);  // blocked (loopback buffers hold a few MB, not 64)

  // 0 learns of 1's successor (from its group, say) before its transport noticed anything.
  const auto addrs2 = Moved(addrs, 1);
  Node successor(Tolerant(1, addrs2, 2, net));
  REQUIRE(successor.t->Listen().ok());
  REQUIRE(nodes[0]->t->Redial(1, addrs2[1], 10000).ok());
  CHECK_FALSE(nodes[0]->t->Up(1));  // lost until the successor dials in
  REQUIRE(Eventually([&] { return sends.load() == 64; }));  // the blocked write returned
  writer.join();
  CHECK(all_true.load());  // dropped, not failed: the caller re-sends after the resume
  REQUIRE(successor.t->DialAll(10000).ok());
  REQUIRE(nodes[0]->t->WaitDialedIn(1, 10000).ok());
  REQUIRE(successor.t->WaitDialedIn(10000).ok());
  CHECK(nodes[0]->t->Up(1));
  CHECK(successor.t->Up(0));

  SendNumbered(*nodes[0], 1, "after", 100);
  SendNumbered(successor, 0, "new", 100);
  REQUIRE(successor.WaitFor([&] { return successor.got.size() == 100; }));
  REQUIRE(nodes[0]->WaitFor([&] { return nodes[0]->got.size() == 100; }));
  CHECK(successor.From(0) == Numbered("after", 100));  // none of the writer's frames
  CHECK(nodes[0]->From(1) == Numbered("new", 100));
  CHECK(nodes[0]->Lost() == 0);  // the caller knew: nothing to report
  CHECK(nodes[0]->Failures() == 0);

  {
    std::lock_guard<std::mutex> lk(old.mu);
    old.hold = false;
  }
  old.cv.notify_all();
  REQUIRE(old.WaitFor([&] { return old.lost.size() == 1; }));  // 0 closed its connections to it
  CHECK(old.Failures() == 0);
  successor.t->Stop();
  for (auto& n : nodes) n->t->Stop();
}
