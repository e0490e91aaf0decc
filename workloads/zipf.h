// ZipfGenerator: draws keys in [0, n) with P(rank r) proportional to 1 / (r + 1)^theta, where
// rank 0 is the most popular key. One generator is immutable after Create and may be shared by
// threads; randomness comes only from the caller's seeded Rng (no global RNG), so a draw is a
// pure function of (generator parameters, Rng state).
//
// Methods, by theta:
//   theta == 0        exactly uniform: Rng::Uniform(n).
//   0 < theta < 1     the YCSB / Gray et al. ("Quickly generating billion-record synthetic
//                     databases", SIGMOD 1994) closed form with zeta(n) precomputed once in
//                     Create (an approximation of the exact distribution, as YCSB uses).
//   theta >= 1        rejection-inversion sampling (Hormann & Derflinger 1996), exact for any
//                     theta > 0 and continuous through theta == 1 (its integral switches from a
//                     power to a logarithm there; the helper functions below avoid the 0/0).
//
// Scrambling (optional, like YCSB's "scrambled zipfian"): the rank is mapped to a key by a
// seeded BIJECTION of [0, n) (an invertible mixer on the next power of two, cycle-walked into
// range), so the distribution over keys is a permutation of the distribution over ranks: hot
// keys spread over executor ranges and partitions instead of clustering at key 0, and unlike
// YCSB's hash-mod-n no two ranks collide on one key.
#pragma once

#include <cstdint>

#include "common/rng.h"
#include "common/status.h"

namespace qrstore::workloads {

class ZipfGenerator {
 public:
  // n >= 1; theta in [0, 10]. scramble_seed selects the rank-to-key permutation.
  static Result<ZipfGenerator> Create(uint64_t n, double theta, bool scramble, uint64_t scramble_seed = 0);

  // A key in [0, n).
  uint64_t Next(Rng& rng) const { return scramble_ ? Scramble(NextRank(rng)) : NextRank(rng); }
  // A rank in [0, n): 0 is the most popular.
  uint64_t NextRank(Rng& rng) const;
  // The key that rank `rank` maps to (identity when not scrambling). A bijection of [0, n).
  uint64_t KeyOfRank(uint64_t rank) const { return scramble_ ? Scramble(rank) : rank; }

  uint64_t n() const { return n_; }
  double theta() const { return theta_; }

  // zeta(n, theta) = sum_{i=1..n} i^-theta. Exact summation up to 2^24 terms, beyond that the
  // first 2^20 terms plus an Euler-Maclaurin tail (relative error far below 1e-12).
  static double Zeta(uint64_t n, double theta);

 private:
  ZipfGenerator() = default;
  uint64_t Scramble(uint64_t rank) const;
  uint64_t Permute(uint64_t x) const;  // a bijection of [0, 2^bits_)

  enum class Method : uint8_t { kUniform, kGray, kRejectionInversion };
  uint64_t n_ = 1;
  double theta_ = 0;
  Method method_ = Method::kUniform;
  // Gray et al.
  double zetan_ = 1, alpha_ = 1, eta_ = 0, half_pow_theta_ = 1;
  // Rejection-inversion over ranks 1..n (returned as rank - 1).
  double h_integral_x1_ = 0, h_integral_n_ = 0, s_ = 0;
  // Scrambling.
  bool scramble_ = false;
  uint32_t bits_ = 1;
  uint64_t mask_ = 1;
  uint64_t key_a_ = 0, key_b_ = 0;
};

}  // namespace qrstore::workloads
