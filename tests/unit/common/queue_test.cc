#include <catch2/catch.hpp>

#include <algorithm>
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
  std::atomic<int> push_failures{0};  // Catch's assertions are for the test's own thread only
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
        for (int i = 0; i < kPerProducer; ++i) {
          if (!q.Push(p * kPerProducer + i)) push_failures.fetch_add(1);
        }
      });
    }
  }  // producers joined
  q.Close();
  for (auto& c : consumers) c.Join();
  CHECK(push_failures.load() == 0);
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

TEST_CASE("bounded queue: PopManyFor waits for `want` items (or full, closed, timed out), then takes up to max") {
  BoundedQueue<int> q(8);
  for (int i = 0; i < 3; ++i) REQUIRE(q.Push(i));
  std::vector<int> got;
  SECTION("enough already queued: returns at once with at most max") {
    CHECK(q.PopManyFor(&got, 2, 3, std::chrono::seconds(10)) == 2);
    CHECK(got == std::vector<int>{0, 1});
  }
  SECTION("too few: times out, then takes what is there") {
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(q.PopManyFor(&got, 8, 5, std::chrono::milliseconds(30)) == 3);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(30));
    CHECK(got == std::vector<int>{0, 1, 2});
  }
  SECTION("pushes below `want` do not end the wait; the push that reaches it does") {
    std::atomic<bool> returned{false};
    size_t popped = 0;  // checked once the consumer is joined (Catch asserts on this thread only)
    NamedThread consumer("consumer", [&] {
      popped = q.PopManyFor(&got, 8, 6, std::chrono::seconds(20));
      returned = true;
    });
    REQUIRE(q.Push(3));
    std::vector<int> two{4, 5};
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_FALSE(returned.load());  // 4 of 6
    REQUIRE(q.PushMany(two) == 2);  // 6 of 6: crosses `want` inside one PushMany
    consumer.Join();
    CHECK(popped == 6);
    CHECK(got == std::vector<int>{0, 1, 2, 3, 4, 5});
  }
  SECTION("`want` beyond the capacity is met by a full queue") {
    size_t popped = 0;
    NamedThread consumer("consumer", [&] { popped = q.PopManyFor(&got, 100, 100, std::chrono::seconds(20)); });
    for (int i = 3; i < 8; ++i) REQUIRE(q.Push(i));
    consumer.Join();
    CHECK(popped == 8);
    CHECK(got.size() == 8);
  }
  SECTION("Close ends the wait; a closed queue still drains") {
    size_t popped = 0;
    NamedThread consumer("consumer", [&] { popped = q.PopManyFor(&got, 8, 7, std::chrono::seconds(20)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    q.Close();
    consumer.Join();
    CHECK(popped == 3);
    CHECK(q.PopManyFor(&got, 8, 1, std::chrono::seconds(20)) == 0);
  }
}

TEST_CASE("bounded queue: a PopManyFor consumer beside pushers loses nothing and ends") {
  BoundedQueue<int> q(64);
  constexpr int kProducers = 3, kPerProducer = 3000;
  long sum = 0, count = 0;
  std::atomic<int> push_failures{0};  // Catch's assertions are for the test's own thread only
  NamedThread consumer("consumer", [&] {
    std::vector<int> got;
    for (;;) {
      got.clear();
      // A batch collector: wants 50, waits at most 1 ms for them.
      if (q.PopManyFor(&got, 50, 50, std::chrono::milliseconds(1)) == 0 && q.closed() && q.size() == 0) return;
      for (int v : got) sum += v;
      count += static_cast<long>(got.size());
    }
  });
  {
    std::vector<NamedThread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back("producer-" + std::to_string(p), [&, p] {
        std::vector<int> chunk;
        for (int i = 0; i < kPerProducer; i += 7) {
          chunk.clear();
          for (int k = i; k < std::min(i + 7, kPerProducer); ++k) chunk.push_back(p * kPerProducer + k);
          if (q.PushMany(chunk) != chunk.size()) push_failures.fetch_add(1);
        }
      });
    }
  }
  q.Close();
  consumer.Join();
  CHECK(push_failures.load() == 0);
  const long n = kProducers * kPerProducer;
  CHECK(count == n);
  CHECK(sum == n * (n - 1) / 2);
}
