// A bounded multi-producer multi-consumer FIFO queue: the way qrstore threads hand work to
// each other. Capacity is fixed at construction; Push blocks while full (back-pressure),
// Pop blocks while empty. Close() wakes everyone: later pushes fail, pops drain what is
// left and then fail. Blocking calls take an optional timeout so owners can check stop
// flags. Thread-safe. Idle threads sleep on a condition variable; nothing spins. A consumer
// that wants many items at once (PopManyFor) is woken when they are there, not once per push.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <optional>
#include <vector>

#include "common/check.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace qrstore {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity) { QR_CHECK(capacity > 0); }
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Blocks while full. Returns false if the queue is closed (the item is not taken).
  bool Push(T item) {
    MutexUniqueLock lock(mu_);
    not_full_.wait(lock.native(), [&]() REQUIRES(mu_) { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    const bool reached = ReachedWantLocked(1);
    lock.Unlock();
    WakeAfterPush(1, reached);
    return true;
  }

  // Pushes items[first..] in order, moving them out, under as few lock acquisitions as the space
  // allows (blocks while full; other pushers may interleave between chunks). Returns how many
  // were taken: all of them, or fewer once the queue is closed.
  size_t PushMany(std::vector<T>& items, size_t first = 0) {
    size_t i = first;
    while (i < items.size()) {
      MutexUniqueLock lock(mu_);
      not_full_.wait(lock.native(), [&]() REQUIRES(mu_) { return closed_ || items_.size() < capacity_; });
      if (closed_) break;
      const size_t before = i;
      while (i < items.size() && items_.size() < capacity_) items_.push_back(std::move(items[i++]));
      const bool reached = ReachedWantLocked(i - before);
      lock.Unlock();
      WakeAfterPush(i - before, reached);
    }
    return i - first;
  }

  // Blocks up to `timeout` while full. Returns false on timeout or close.
  template <typename Rep, typename Period>
  bool PushFor(T& item, std::chrono::duration<Rep, Period> timeout) {
    MutexUniqueLock lock(mu_);
    if (!not_full_.wait_for(lock.native(), timeout, [&]() REQUIRES(mu_) {
        return closed_ || items_.size() < capacity_;
      })) {
      return false;
    }
    if (closed_) return false;
    items_.push_back(std::move(item));
    const bool reached = ReachedWantLocked(1);
    lock.Unlock();
    WakeAfterPush(1, reached);
    return true;
  }

  // Never blocks. Returns false if full or closed.
  bool TryPush(T& item) {
    MutexUniqueLock lock(mu_);
    if (closed_ || items_.size() >= capacity_) return false;
    items_.push_back(std::move(item));
    const bool reached = ReachedWantLocked(1);
    lock.Unlock();
    WakeAfterPush(1, reached);
    return true;
  }

  // Blocks while empty and open. nullopt once closed and drained.
  std::optional<T> Pop() {
    MutexUniqueLock lock(mu_);
    not_empty_.wait(lock.native(), [&]() REQUIRES(mu_) { return closed_ || !items_.empty(); });
    std::optional<T> out = TakeLocked();
    lock.Unlock();
    if (out) not_full_.notify_one();
    return out;
  }

  // Blocks up to `timeout`. nullopt on timeout, or once closed and drained.
  template <typename Rep, typename Period>
  std::optional<T> PopFor(std::chrono::duration<Rep, Period> timeout) {
    MutexUniqueLock lock(mu_);
    not_empty_.wait_for(lock.native(), timeout, [&]() REQUIRES(mu_) { return closed_ || !items_.empty(); });
    std::optional<T> out = TakeLocked();
    lock.Unlock();
    if (out) not_full_.notify_one();
    return out;
  }

  // Kick(): wakes every thread blocked in PopUnlessKicked (a consumer that waits for an item or
  // for news from elsewhere, e.g. a peer opening a batch). Kicks are counted, never lost: a
  // PopUnlessKicked that started after `*seen` kicks returns at once if more happened since.
  void Kick() {
    {
      MutexLock lock(mu_);
      ++kicks_;
    }
    not_empty_.notify_all();
  }
  uint64_t kicks() const {
    MutexLock lock(mu_);
    return kicks_;
  }
  // PopFor(timeout), but also returns nullopt when the kick count differs from *seen (updating
  // *seen); the caller tells closed-and-drained from kicked or timed out by closed().
  template <typename Rep, typename Period>
  std::optional<T> PopUnlessKicked(uint64_t* seen, std::chrono::duration<Rep, Period> timeout) {
    MutexUniqueLock lock(mu_);
    not_empty_.wait_for(lock.native(), timeout, [&]() REQUIRES(mu_) {
      return closed_ || !items_.empty() || kicks_ != *seen;
    });
    *seen = kicks_;
    std::optional<T> out = TakeLocked();
    lock.Unlock();
    if (out) not_full_.notify_one();
    return out;
  }

  std::optional<T> TryPop() {
    MutexUniqueLock lock(mu_);
    std::optional<T> out = TakeLocked();
    lock.Unlock();
    if (out) not_full_.notify_one();
    return out;
  }

  // Never blocks. Moves up to `max` items to the back of *out under one lock acquisition (one
  // wake-up of blocked pushers instead of one per item); returns how many.
  size_t TryPopMany(std::vector<T>* out, size_t max) {
    MutexUniqueLock lock(mu_);
    const size_t n = TakeManyLocked(out, max);
    lock.Unlock();
    if (n > 0) not_full_.notify_all();
    return n;
  }

  // Blocks up to `timeout` until at least `want` items are queued (or the queue is full, or
  // closed), then moves up to `max` items to the back of *out, as TryPopMany; returns how many
  // (0: timed out empty, or closed and drained). Pushes wake it only once `want` is reached, so
  // a consumer collecting a batch sleeps until the batch is there or its deadline, instead of
  // waking for every push. want >= 1.
  template <typename Rep, typename Period>
  size_t PopManyFor(std::vector<T>* out, size_t max, size_t want, std::chrono::duration<Rep, Period> timeout) {
    QR_CHECK(want >= 1);
    want = std::min(want, capacity_);
    MutexUniqueLock lock(mu_);
    if (!closed_ && items_.size() < want) {
      wants_.push_back(want);
      enough_.wait_for(lock.native(), timeout, [&]() REQUIRES(mu_) { return closed_ || items_.size() >= want; });
      wants_.erase(std::find(wants_.begin(), wants_.end(), want));
    }
    const size_t n = TakeManyLocked(out, max);
    lock.Unlock();
    if (n > 0) not_full_.notify_all();
    return n;
  }

  void Close() {
    {
      MutexLock lock(mu_);
      closed_ = true;
    }
    not_empty_.notify_all();
    not_full_.notify_all();
    enough_.notify_all();
  }

  bool closed() const {
    MutexLock lock(mu_);
    return closed_;
  }
  size_t size() const {
    MutexLock lock(mu_);
    return items_.size();
  }
  size_t capacity() const { return capacity_; }

 private:
  // After `added` items were pushed: whether the queue just reached some PopManyFor waiter's
  // `want`. The caller then unlocks and calls WakeAfterPush.
  bool ReachedWantLocked(size_t added) const REQUIRES(mu_) {
    const size_t now = items_.size();
    bool reached = false;
    for (size_t w : wants_) reached |= now >= w && now - added < w;
    return reached;
  }

  // Unlocked, after `added` items were pushed: wakes a popper (every one when several items
  // came), and the PopManyFor waiters when the push reached one's `want`.
  void WakeAfterPush(size_t added, bool reached) {
    if (added == 1) {
      not_empty_.notify_one();
    } else {
      not_empty_.notify_all();
    }
    if (reached) enough_.notify_all();
  }

  // Moves up to `max` items to the back of *out; the caller then unlocks and, if any were
  // moved, wakes blocked pushers once.
  size_t TakeManyLocked(std::vector<T>* out, size_t max) REQUIRES(mu_) {
    size_t n = 0;
    while (n < max && !items_.empty()) {
      out->push_back(std::move(items_.front()));
      items_.pop_front();
      ++n;
    }
    return n;
  }

  // The front item, if any; the caller then unlocks and, if there was one, wakes a pusher.
  std::optional<T> TakeLocked() REQUIRES(mu_) {
    if (items_.empty()) return std::nullopt;
    std::optional<T> out(std::move(items_.front()));
    items_.pop_front();
    return out;
  }

  const size_t capacity_;
  mutable Mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::condition_variable enough_;  // PopManyFor waiters
  std::deque<T> items_ GUARDED_BY(mu_);
  std::vector<size_t> wants_ GUARDED_BY(mu_);  // the `want` of each thread in PopManyFor
  bool closed_ GUARDED_BY(mu_) = false;
  uint64_t kicks_ GUARDED_BY(mu_) = 0;
};

}  // namespace qrstore
