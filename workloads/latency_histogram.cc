#include "workloads/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace qrstore::workloads {

int LatencyHistogram::BucketOf(uint64_t v) {
  if (v < static_cast<uint64_t>(kSub)) return static_cast<int>(v);
  int e = 63 - __builtin_clzll(v);  // e >= kSubBits
  int sub = static_cast<int>((v >> (e - kSubBits)) & (kSub - 1));
  return (e - kSubBits + 1) * kSub + sub;
}

uint64_t LatencyHistogram::UpperEdge(int bucket) {
  if (bucket < kSub) return static_cast<uint64_t>(bucket);
  int e = bucket / kSub + kSubBits - 1;
  uint64_t sub = static_cast<uint64_t>(bucket % kSub);
  uint64_t lo = (uint64_t{1} << e) | (sub << (e - kSubBits));
  uint64_t width = uint64_t{1} << (e - kSubBits);
  return lo + (width - 1);  // may wrap only for the very last bucket of 2^64: unreachable from int64
}

void LatencyHistogram::Record(int64_t value) {
  if (value < 0) value = 0;  // clock quirks: a latency is never negative
  ++counts_[BucketOf(static_cast<uint64_t>(value))];
  if (count_ == 0 || value < min_) min_ = value;
  if (count_ == 0 || value > max_) max_ = value;
  ++count_;
  sum_ += value;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (int i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  min_ = count_ ? std::min(min_, other.min_) : other.min_;
  max_ = count_ ? std::max(max_, other.max_) : other.max_;
  count_ += other.count_;
  sum_ += other.sum_;
}

int64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // Rank of the wanted value, 1-based: at least one value even for q == 0.
  auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      auto edge = static_cast<int64_t>(UpperEdge(i));
      return std::clamp(edge, min_, max_);
    }
  }
  return max_;
}

}  // namespace qrstore::workloads
