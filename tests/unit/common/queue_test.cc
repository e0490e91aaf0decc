#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/bounded_queue.h"
#include "common/thread.h"

using namespace qrstore;

TEST_CASE("bounded queue: FIFO, bounded, close drains") {
  BoundedQueue<int> q(2);
  int x = 1, y = 2, z = 3;
  CHECK(q.TryPush(x));
  CHECK(q.TryPush(y));
  CHECK_FALSE(q.TryPush(z));  // full
  CHECK(q.size() == 2);
  CHECK(*q.Pop() == 1);
  q.Close();
  CHECK_FALSE(q.Push(4));
  CHECK(*q.Pop() == 2);
  CHECK_FALSE(q.Pop().has_value());
}

TEST_CASE("bounded queue: many producers and consumers lose nothing") {
  BoundedQueue<int> q(8);
  constexpr int kProducers = 3, kPerProducer = 2000;
  std::atomic<long> sum{0};
  std::atomic<int> count{0};
  std::vector<NamedThread> consumers;
  for (int c = 0; c < 2; ++c) {
    consumers.emplace_back("consumer-" + std::to_string(c), [&] {
      while (auto v = q.Pop()) {
        sum.fetch_add(*v, std::memory_order_relaxed);
        count.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  {
    std::vector<NamedThread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back("producer-" + std::to_string(p), [&, p] {
        for (int i = 0; i < kPerProducer; ++i) REQUIRE(q.Push(p * kPerProducer + i));
      });
    }
  }  // producers joined
  q.Close();
  for (auto& c : consumers) c.Join();
  long n = kProducers * kPerProducer;
  CHECK(count.load() == n);
  CHECK(sum.load() == n * (n - 1) / 2);
}

TEST_CASE("bounded queue: PopFor times out when empty") {
  BoundedQueue<int> q(1);
  CHECK_FALSE(q.PopFor(std::chrono::milliseconds(1)).has_value());
}

TEST_CASE("bounded queue: Kick wakes a PopUnlessKicked waiter, and a kick before the wait is not lost") {
  BoundedQueue<int> q(4);
  uint64_t seen = q.kicks();
  q.Kick();  // before the wait: the wait returns at once
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(q.PopUnlessKicked(&seen, std::chrono::seconds(10)).has_value());
  CHECK(seen == 1);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  std::thread kicker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    q.Kick();
  });
  t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(q.PopUnlessKicked(&seen, std::chrono::seconds(10)).has_value());
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  kicker.join();
  CHECK_FALSE(q.closed());
  REQUIRE(q.Push(7));
  CHECK(q.PopUnlessKicked(&seen, std::chrono::seconds(10)).value() == 7);
  CHECK_FALSE(q.PopUnlessKicked(&seen, std::chrono::milliseconds(20)).has_value());  // timed out
}
