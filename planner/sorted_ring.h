// SortedRing<V>: (key, value) items in ascending key order, in a ring buffer. Built for the
// session table (planner/session_table.h), whose per-session outcomes and in-flight marks are
// appended at the largest key and dropped at the smallest almost always: both O(1), no
// allocation once warm, no tree to rebalance (std::map made the table's Record most of a
// follower's commit thread). Look-ups are binary searches; an insert or erase elsewhere shifts
// the items after it (O(size), rare: a client's retries out of order). Nothing is allocated
// while empty. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/check.h"

namespace qrstore::planner {

template <typename V>
class SortedRing {
 public:
  using Item = std::pair<uint64_t, V>;

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  Item& operator[](size_t i) { return buf_[Slot(i)]; }
  const Item& operator[](size_t i) const { return buf_[Slot(i)]; }
  Item& front() { return (*this)[0]; }
  const Item& front() const { return (*this)[0]; }
  const Item& back() const { return (*this)[n_ - 1]; }

  // The index of the first item whose key is >= k (size() if none).
  size_t LowerBound(uint64_t k) const {
    size_t lo = 0, hi = n_;
    if (n_ > 0 && back().first < k) return n_;  // the common miss: beyond the largest
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if ((*this)[mid].first < k) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }
  // The item with key k, or nullptr.
  Item* Find(uint64_t k) {
    const size_t i = LowerBound(k);
    return i < n_ && (*this)[i].first == k ? &(*this)[i] : nullptr;
  }
  const Item* Find(uint64_t k) const { return const_cast<SortedRing*>(this)->Find(k); }

  // Adds (k, v); k must not be present (checked). O(1) when k is above every key.
  void Insert(uint64_t k, V v) {
    const size_t at = LowerBound(k);
    QR_CHECK(at == n_ || (*this)[at].first != k, "SortedRing: key %llu twice", static_cast<unsigned long long>(k));
    if (n_ == buf_.size()) Grow();
    buf_[Slot(n_)] = Item(k, std::move(v));
    ++n_;
    for (size_t i = n_ - 1; i > at; --i) std::swap((*this)[i], (*this)[i - 1]);
  }
  void PopFront() {
    buf_[head_] = Item();  // (frees what the value holds)
    head_ = (head_ + 1) & (buf_.size() - 1);
    --n_;
  }
  void EraseAt(size_t i) {
    if (i == 0) return PopFront();
    for (size_t j = i; j + 1 < n_; ++j) std::swap((*this)[j], (*this)[j + 1]);
    (*this)[n_ - 1] = Item();
    --n_;
  }
  // Erases key k if present; true if it was.
  bool Erase(uint64_t k) {
    if (n_ > 0 && front().first == k) {
      PopFront();
      return true;
    }
    const size_t i = LowerBound(k);
    if (i == n_ || (*this)[i].first != k) return false;
    EraseAt(i);
    return true;
  }
  void clear() {
    std::vector<Item>().swap(buf_);
    head_ = n_ = 0;
  }
  // Bytes held by the buffer (capacity, not size).
  size_t BufferBytes() const { return buf_.size() * sizeof(Item); }

 private:
  size_t Slot(size_t i) const { return (head_ + i) & (buf_.size() - 1); }
  void Grow() {
    std::vector<Item> bigger(buf_.empty() ? 4 : buf_.size() * 2);  // a power of two
    for (size_t i = 0; i < n_; ++i) bigger[i] = std::move((*this)[i]);
    buf_.swap(bigger);
    head_ = 0;
  }

  std::vector<Item> buf_;  // size 0 or a power of two
  size_t head_ = 0;
  size_t n_ = 0;
};

}  // namespace qrstore::planner
