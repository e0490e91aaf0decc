// The row transport (cluster/row/row_transport.h) between real loopback connections: frames of any
// size arrive in order with their sender named, a peer that closes early fails the others
// naming it, a closed connection after ExpectClose is quiet, and an oversized frame is refused.
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


struct Node {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<uint32_t, std::string>> got;
  std::vector<std::string> failures;
  std::unique_ptr<RowTransport> t;

  Node(uint32_t me, const std::vector<std::string>& addrs, size_t max_frame = size_t{1} << 26) {
    RowTransportOptions o;
    o.me = me;
    o.addresses = addrs;
    o.max_frame_bytes = max_frame;
    t = std::make_unique<RowTransport>(
        o,
        [this](uint32_t from, std::string_view f) {
          std::lock_guard<std::mutex> lk(mu);
          got.emplace_back(from, std::string(f));
          cv.notify_all();
        },
        [this](const Status& s) {
          std::lock_guard<std::mutex> lk(mu);
          failures.push_back(s.message());
          cv.notify_all();
        });
  }
  template <typename P>
  bool WaitFor(P pred) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(10), pred);
  }
};

// Listens on every node, then connects them all (each Connect waits for the others to dial in).
void ConnectAll(std::vector<std::unique_ptr<Node>>& nodes) {
  for (auto& n : nodes) REQUIRE(n->t->Listen().ok());
  std::vector<std::thread> ts;
  std::vector<Status> st(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) ts.emplace_back([&, i] { st[i] = nodes[i]->t->Connect(10000); });
  for (auto& t : ts) t.join();
  for (auto& s : st) REQUIRE(s.ok());
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

TEST_CASE("row transport: a peer closing early fails the others naming it; after ExpectClose it is quiet") {
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
  for (auto& n : nodes) n->t->Stop();
}

TEST_CASE("row transport: an oversized frame fails the receiver; Connect names a peer that never comes") {
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
