#include "engine/spare_ops.h"

#include <algorithm>
#include <utility>

namespace qrstore::engine {

void SpareOps::Keep(std::vector<storage::Txn>& txns) {
  if (capacity_ == 0) return;
  MutexLock lock(mu_);
  if (pool_.capacity() < capacity_) pool_.reserve(capacity_);
  for (storage::Txn& t : txns) {
    if (pool_.size() >= capacity_) break;
    if (t.ops.capacity() == 0) continue;
    t.ops.clear();
    pool_.push_back(std::move(t.ops));
  }
}

void SpareOps::Lend(std::vector<storage::Txn>& txns, size_t first, size_t n) {
  const size_t end = std::min(txns.size(), first + n);
  MutexLock lock(mu_);
  for (size_t i = first; i < end && !pool_.empty(); ++i) {
    if (txns[i].ops.capacity() != 0) continue;
    txns[i].ops = std::move(pool_.back());
    pool_.pop_back();
  }
}

size_t SpareOps::size() const {
  MutexLock lock(mu_);
  return pool_.size();
}

}  // namespace qrstore::engine
