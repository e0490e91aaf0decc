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
#include <mutex>
#include <optional>
#include <vector>

#include "common/check.h"

namespace qrstore {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity) { QR_CHECK(capacity > 0); }
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Blocks while full. Returns false if the queue is closed (the item is not taken).
  bool Push(T item) {
    std::unique_lock<std::mutex> lock(mu_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    WakeAfterPush(lock, 1);
    return true;
  }

  // Pushes items[first..] in order, moving them out, under as few lock acquisitions as the space
  // allows (blocks while full; other pushers may interleave between chunks). Returns how many
  // were taken: all of them, or fewer once the queue is closed.
  size_t PushMany(std::vector<T>& items, size_t first = 0) {
    size_t i = first;
    while (i < items.size()) {
      std::unique_lock<std::mutex> lock(mu_);
      not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
      if (closed_) break;
      const size_t before = i;
      while (i < items.size() && items_.size() < capacity_) items_.push_back(std::move(items[i++]));
      WakeAfterPush(lock, i - before);
    }
    return i - first;
  }

  // Blocks up to `timeout` while full. Returns false on timeout or close.
  template <typename Rep, typename Period>
  bool PushFor(T& item, std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!not_full_.wait_for(lock, timeout, [&] { return closed_ || items_.size() < capacity_; })) {
      return false;
    }
    if (closed_) return false;
    items_.push_back(std::move(item));
    WakeAfterPush(lock, 1);
    return true;
  }

  // Never blocks. Returns false if full or closed.
  bool TryPush(T& item) {
    std::unique_lock<std::mutex> lock(mu_);
    if (closed_ || items_.size() >= capacity_) return false;
    items_.push_back(std::move(item));
    WakeAfterPush(lock, 1);
    return true;
  }

  // Blocks while empty and open. nullopt once closed and drained.
  std::optional<T> Pop() {
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
    return TakeLocked(lock);
  }

  // Blocks up to `timeout`. nullopt on timeout, or once closed and drained.
  template <typename Rep, typename Period>
  std::optional<T> PopFor(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait_for(lock, timeout, [&] { return closed_ || !items_.empty(); });
    return TakeLocked(lock);
  }

  // Kick(): wakes every thread blocked in PopUnlessKicked (a consumer that waits for an item or
  // for news from elsewhere, e.g. a peer opening a batch). Kicks are counted, never lost: a
  // PopUnlessKicked that started after `*seen` kicks returns at once if more happened since.
  void Kick() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++kicks_;
    }
    not_empty_.notify_all();
  }
  uint64_t kicks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return kicks_;
  }
  // PopFor(timeout), but also returns nullopt when the kick count differs from *seen (updating
  // *seen); the caller tells closed-and-drained from kicked or timed out by closed().
  template <typename Rep, typename Period>
  std::optional<T> PopUnlessKicked(uint64_t* seen, std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait_for(lock, timeout, [&] { return closed_ || !items_.empty() || kicks_ != *seen; });
    *seen = kicks_;
    return TakeLocked(lock);
  }

  std::optional<T> TryPop() {
    std::unique_lock<std::mutex> lock(mu_);
    return TakeLocked(lock);
  }

  // Never blocks. Moves up to `max` items to the back of *out under one lock acquisition (one
  // wake-up of blocked pushers instead of one per item); returns how many.
  size_t TryPopMany(std::vector<T>* out, size_t max) {
    std::unique_lock<std::mutex> lock(mu_);
    return TakeManyLocked(lock, out, max);
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
    std::unique_lock<std::mutex> lock(mu_);
    if (!closed_ && items_.size() < want) {
      wants_.push_back(want);
      enough_.wait_for(lock, timeout, [&] { return closed_ || items_.size() >= want; });
      wants_.erase(std::find(wants_.begin(), wants_.end(), want));
    }
    return TakeManyLocked(lock, out, max);
  }

  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    not_empty_.notify_all();
    not_full_.notify_all();
    enough_.notify_all();
  }

  bool closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }
  size_t capacity() const { return capacity_; }

 private:
  // After `added` items were pushed (lock held): unlocks, wakes a popper (every one when several
  // items came), and the PopManyFor waiters when the queue just reached one's `want`.
  void WakeAfterPush(std::unique_lock<std::mutex>& lock, size_t added) {
    const size_t now = items_.size();
    bool reached = false;
    for (size_t w : wants_) reached |= now >= w && now - added < w;
    lock.unlock();
    if (added == 1) {
      not_empty_.notify_one();
    } else {
      not_empty_.notify_all();
    }
    if (reached) enough_.notify_all();
  }

  // Moves up to `max` items to the back of *out, unlocks, wakes blocked pushers once.
  size_t TakeManyLocked(std::unique_lock<std::mutex>& lock, std::vector<T>* out, size_t max) {
    size_t n = 0;
    while (n < max && !items_.empty()) {
      out->push_back(std::move(items_.front()));
      items_.pop_front();
      ++n;
    }
    lock.unlock();
    if (n > 0) not_full_.notify_all();
    return n;
  }

  std::optional<T> TakeLocked(std::unique_lock<std::mutex>& lock) {
    if (items_.empty()) return std::nullopt;
    std::optional<T> out(std::move(items_.front()));
    items_.pop_front();
    lock.unlock();
    not_full_.notify_one();
    return out;
  }

  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::condition_variable enough_;  // PopManyFor waiters
  std::deque<T> items_;  // guarded by mu_
  std::vector<size_t> wants_;  // guarded by mu_: the `want` of each thread in PopManyFor
  bool closed_ = false;  // guarded by mu_
  uint64_t kicks_ = 0;   // guarded by mu_
};

}  // namespace qrstore
