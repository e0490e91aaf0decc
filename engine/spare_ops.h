// SpareOps: a bounded pool of emptied op vectors that the planner hands back to the submitter,
// so a load generator builds each txn in memory the engine already had instead of allocating
// a fresh vector per txn. Without it every txn's ops are allocated on the submitting thread and
// freed on a planner thread, and glibc's allocator serializes the two on its arena lock.
//
// Keep (planner, after planning a slice) takes the ops vectors of txns, emptied with their
// capacity kept, up to `capacity` pooled vectors; the rest are freed as before. Lend (the
// submitter, after SubmitMany moved its txns out) puts one pooled vector into each given txn
// whose ops hold no memory. Both take the lock once per call, not per txn. Thread-safe.
#pragma once

#include <cstddef>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "storage/txn.h"

namespace qrstore::engine {

class SpareOps {
 public:
  explicit SpareOps(size_t capacity) : capacity_(capacity) {}
  SpareOps(const SpareOps&) = delete;
  SpareOps& operator=(const SpareOps&) = delete;

  void Keep(std::vector<storage::Txn>& txns) EXCLUDES(mu_);
  // For txns[first, first + n): each whose ops have no capacity gets a pooled vector.
  void Lend(std::vector<storage::Txn>& txns, size_t first, size_t n) EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  std::vector<std::vector<storage::Op>> pool_ GUARDED_BY(mu_);
};

}  // namespace qrstore::engine
