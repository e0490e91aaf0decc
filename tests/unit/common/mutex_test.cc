#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>

#include "common/mutex.h"
#include "common/thread.h"

using namespace qrstore;
using namespace std::chrono_literals;

namespace {

struct Counter {
  Mutex mu;
  std::condition_variable cv;
  int value GUARDED_BY(mu) = 0;
};

// Whether another thread finds mu free (TryLock from the thread that holds it is undefined).
bool FreeElsewhere(Mutex& mu) {
  bool got = false;
  NamedThread t("try-lock", [&] {
    if (mu.TryLock()) {
      got = true;
      mu.Unlock();
    }
  });
  t.Join();
  return got;
}

// A second object that reaches c's mutex through a pointer: the analysis names it c_->mu.
struct CounterView {
  Counter* c_;
  Mutex& mu() const RETURN_CAPABILITY(c_->mu) { return c_->mu; }
  int ValueLocked() const REQUIRES(c_->mu) { return c_->value; }
};

}  // namespace

TEST_CASE("mutex: MutexLock excludes other holders") {
  Counter c;
  constexpr int kThreads = 2, kPerThread = 20000;
  std::vector<NamedThread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back("adder-" + std::to_string(t), [&c] {
      for (int i = 0; i < kPerThread; ++i) {
        MutexLock lock(c.mu);
        ++c.value;
      }
    });
  }
  for (NamedThread& t : threads) t.Join();
  MutexLock lock(c.mu);
  CHECK(c.value == kThreads * kPerThread);
}

TEST_CASE("mutex: TryLock fails while held and succeeds when free") {
  Mutex mu;
  CHECK(FreeElsewhere(mu));
  mu.Lock();
  CHECK_FALSE(FreeElsewhere(mu));
  mu.Unlock();
  CHECK(FreeElsewhere(mu));
  if (mu.TryLock()) {
    CHECK_FALSE(FreeElsewhere(mu));
    mu.Unlock();
  } else {
    FAIL("TryLock did not take a free mutex");
  }
  {
    MutexLock lock(mu);
    CHECK_FALSE(FreeElsewhere(mu));
  }
  CHECK(FreeElsewhere(mu));
}

TEST_CASE("mutex: MutexUniqueLock unlocks and locks again") {
  Mutex mu;
  {
    MutexUniqueLock lock(mu);
    CHECK_FALSE(FreeElsewhere(mu));
    lock.Unlock();
    CHECK(FreeElsewhere(mu));
    lock.Lock();
    CHECK_FALSE(FreeElsewhere(mu));
  }
  CHECK(FreeElsewhere(mu));
  {
    MutexUniqueLock lock(mu);
    lock.Unlock();  // the end of the scope does not unlock again
  }
  CHECK(FreeElsewhere(mu));
}

TEST_CASE("mutex: condition variable waits through MutexUniqueLock") {
  Counter c;
  MutexUniqueLock lock(c.mu);
  SECTION("a wait_for whose predicate stays false times out, the lock held again") {
    const bool woken = c.cv.wait_for(lock.native(), 1ms, [&c]() REQUIRES(c.mu) { return c.value > 0; });
    CHECK_FALSE(woken);
    CHECK_FALSE(FreeElsewhere(c.mu));
  }
  SECTION("a wait_until whose predicate stays false times out") {
    const auto deadline = std::chrono::steady_clock::now() + 1ms;
    CHECK_FALSE(c.cv.wait_until(lock.native(), deadline, [&c]() REQUIRES(c.mu) { return c.value > 0; }));
    CHECK(std::chrono::steady_clock::now() >= deadline);
  }
  SECTION("a wait returns once another thread sets the value under the lock") {
    NamedThread setter("setter", [&c] {
      {
        MutexLock set_lock(c.mu);  // blocks until the wait below releases the mutex
        c.value = 7;
      }
      c.cv.notify_all();
    });
    const bool woken = c.cv.wait_for(lock.native(), 60s, [&c]() REQUIRES(c.mu) { return c.value > 0; });
    CHECK(woken);
    CHECK(c.value == 7);
    lock.Unlock();
    setter.Join();
  }
}

TEST_CASE("mutex: MutexAlias names a held mutex by its other name and takes nothing") {
  Counter c;
  CounterView view{&c};
  MutexLock lock(c.mu);
  c.value = 3;
  {
    MutexAlias held(c.mu, view.mu());
    CHECK(view.ValueLocked() == 3);
  }
  // Still held: the alias neither took nor dropped it.
  CHECK_FALSE(FreeElsewhere(c.mu));
  c.value = 4;
}
