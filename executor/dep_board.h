// DepBoard: the dependency-value slots of one planned slice at run time. For a kDepWrite
// x <- y the executor owning y's range publishes y's counter into the slot (kDepRead); the
// executor owning x's range waits for it. Each slot is written once per use and read once.
//
// Threads: Reset by the thread that owns the slice before handing it to executors (the
// hand-off through the engine's mutex orders it before any Publish/Wait); Publish and Wait
// from executor threads. Waits are always for a fragment of the same transaction that the
// planner placed at the same or an earlier position in another EQ, so they end (see
// planner/eq.h); a waiter spins briefly, then blocks in std::atomic::wait (a futex), never
// spinning forever.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "common/check.h"

namespace qrstore::executor {

class DepBoard {
 public:
  // Makes `n` slots available, all not ready. Keeps the allocation when it is big enough.
  void Reset(uint32_t n) {
    if (n > capacity_) {
      capacity_ = n;
      slots_ = std::make_unique<Slot[]>(n);
    }
    for (uint32_t i = 0; i < n; ++i) slots_[i].ready.store(0, std::memory_order_relaxed);
    size_ = n;
  }
  uint32_t size() const { return size_; }

  void Publish(uint32_t i, int64_t value) {
    QR_CHECK_LT(i, size_);
    Slot& s = slots_[i];
    s.value = value;
    s.ready.store(1, std::memory_order_release);  // orders `value` before the flag
    s.ready.notify_all();  // cheap when nobody waits (libstdc++ counts waiters)
  }

  // Whether slot i's value is published (Wait(i) would return at once).
  bool Ready(uint32_t i) const {
    QR_CHECK_LT(i, size_);
    return slots_[i].ready.load(std::memory_order_acquire) != 0;
  }

  // Slot i's published value; Ready(i) must hold (a row node compares a repeated value with it).
  int64_t Value(uint32_t i) const {
    QR_CHECK(Ready(i), "dependency slot %u read before it was published", i);
    return slots_[i].value;
  }

  int64_t Wait(uint32_t i) {
    QR_CHECK_LT(i, size_);
    Slot& s = slots_[i];
    for (int spin = 0; spin < kSpins; ++spin) {
      if (s.ready.load(std::memory_order_acquire) != 0) return s.value;
      __builtin_ia32_pause();
    }
    while (s.ready.load(std::memory_order_acquire) == 0) s.ready.wait(0, std::memory_order_acquire);
    return s.value;
  }

 private:
  // Short: on a 2-core machine the publisher may need this core.
  static constexpr int kSpins = 128;
  struct Slot {
    std::atomic<uint32_t> ready{0};
    int64_t value = 0;  // written before `ready` is released, read after it is acquired
  };
  std::unique_ptr<Slot[]> slots_;
  uint32_t capacity_ = 0;
  uint32_t size_ = 0;
};

}  // namespace qrstore::executor
