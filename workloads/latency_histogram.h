// LatencyHistogram: an HDR-like histogram of non-negative 64-bit values (nanoseconds here)
// in fixed memory (~30 KB) however many values are recorded, so a long benchmark can keep
// every latency. Values below 64 are counted exactly; above, each power-of-two range is split
// into 64 equal sub-buckets, so a reported percentile is within 1/64 (1.6%) of the true value
// (it reports the upper edge of its bucket, clamped to the largest value seen).
// Not thread-safe: one owner, or an external lock (the benchmark records under its sink lock).
#pragma once

#include <array>
#include <cstdint>

namespace qrstore::workloads {

class LatencyHistogram {
 public:
  void Record(int64_t value);
  void Merge(const LatencyHistogram& other);

  uint64_t count() const { return count_; }
  int64_t min() const { return count_ ? min_ : 0; }
  int64_t max() const { return count_ ? max_ : 0; }
  double mean() const { return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0.0; }
  // The smallest recorded bucket edge v with at least q * count() values <= v; q in [0, 1].
  // 0 when empty.
  int64_t Percentile(double q) const;

 private:
  static constexpr int kSubBits = 6;
  static constexpr int kSub = 1 << kSubBits;
  static constexpr int kBuckets = (64 - kSubBits + 1) * kSub;
  static int BucketOf(uint64_t v);
  static uint64_t UpperEdge(int bucket);

  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  __int128 sum_ = 0;
  int64_t min_ = 0;
  int64_t max_ = 0;
};

}  // namespace qrstore::workloads
