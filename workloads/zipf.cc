#include "workloads/zipf.h"

#include <cmath>
#include <string>

namespace qrstore::workloads {
namespace {

// log1p(t) / t and expm1(t) / t, both -> 1 as t -> 0. Rejection-inversion needs them so that
// H and its inverse stay accurate (and finite) for theta at or near 1.
double Log1pOverX(double t) { return std::fabs(t) > 1e-8 ? std::log1p(t) / t : 1.0 - t * (0.5 - t / 3.0); }
double Expm1OverX(double t) { return std::fabs(t) > 1e-8 ? std::expm1(t) / t : 1.0 + t * (0.5 + t / 6.0); }

// h(x) = x^-s and H, an antiderivative of h: H(x) = (x^(1-s) - 1) / (1 - s), log(x) at s == 1.
double SmallH(double x, double s) { return std::exp(-s * std::log(x)); }
double BigH(double x, double s) {
  double lx = std::log(x);
  return lx * Expm1OverX((1.0 - s) * lx);
}
double BigHInverse(double y, double s) { return std::exp(y * Log1pOverX((1.0 - s) * y)); }

// Rejections are rare (acceptance is above 90% for every theta); this cap only exists so
// that no loop is unbounded. Hitting it returns the last candidate, which is still in range.
constexpr int kMaxRejections = 10000;

}  // namespace

double ZipfGenerator::Zeta(uint64_t n, double theta) {
  constexpr uint64_t kExactLimit = uint64_t{1} << 22;
  constexpr uint64_t kHead = uint64_t{1} << 20;
  uint64_t exact = n <= kExactLimit ? n : kHead;
  double sum = 0;
  // Smallest terms first for accuracy.
  for (uint64_t i = exact; i >= 1; --i) sum += std::pow(static_cast<double>(i), -theta);
  if (exact == n) return sum;
  // Euler-Maclaurin for sum_{i=m+1..n} f(i) with f(x) = x^-theta:
  //   integral_m^n f + (f(n) - f(m)) / 2 + (f'(n) - f'(m)) / 12.
  double m = static_cast<double>(kHead), nn = static_cast<double>(n);
  auto f = [&](double x) { return std::pow(x, -theta); };
  auto df = [&](double x) { return -theta * std::pow(x, -theta - 1); };
  double integral = theta == 1.0 ? std::log(nn / m)
                                 : (std::pow(nn, 1 - theta) - std::pow(m, 1 - theta)) / (1 - theta);
  return sum + integral + (f(nn) - f(m)) / 2 + (df(nn) - df(m)) / 12;
}

Result<ZipfGenerator> ZipfGenerator::Create(uint64_t n, double theta, bool scramble, uint64_t scramble_seed) {
  if (n < 1) return Status::InvalidArgument("zipf: the key space must hold at least one key");
  if (!(theta >= 0 && theta <= 10)) {
    return Status::InvalidArgument("zipf: theta must be in [0, 10], got " + std::to_string(theta));
  }
  ZipfGenerator z;
  z.n_ = n;
  z.theta_ = theta;
  if (theta == 0) {
    z.method_ = Method::kUniform;
  } else if (theta < 1) {
    z.method_ = Method::kGray;
    z.zetan_ = Zeta(n, theta);
    double zeta2 = Zeta(2, theta);
    z.alpha_ = 1.0 / (1.0 - theta);
    z.half_pow_theta_ = std::pow(0.5, theta);
    // For n <= 2 eta's denominator may be 0, but then every draw ends at the rank 0/1 tests.
    double denom = 1.0 - zeta2 / z.zetan_;
    z.eta_ = denom != 0 ? (1.0 - std::pow(2.0 / static_cast<double>(n), 1.0 - theta)) / denom : 0.0;
  } else {
    z.method_ = Method::kRejectionInversion;
    z.h_integral_x1_ = BigH(1.5, theta) - 1.0;
    z.h_integral_n_ = BigH(static_cast<double>(n) + 0.5, theta);
    z.s_ = 2.0 - BigHInverse(BigH(2.5, theta) - SmallH(2.0, theta), theta);
  }
  // Scrambling a uniform distribution changes nothing but costs time: skip it.
  z.scramble_ = scramble && theta != 0 && n > 1;
  uint32_t bits = 1;
  while (bits < 64 && (uint64_t{1} << bits) < n) ++bits;
  z.bits_ = bits;
  z.mask_ = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  z.key_a_ = Mix64(scramble_seed ^ 0x243f6a8885a308d3ULL);
  z.key_b_ = Mix64(scramble_seed ^ 0x13198a2e03707344ULL);
  return z;
}

uint64_t ZipfGenerator::NextRank(Rng& rng) const {
  switch (method_) {
    case Method::kUniform:
      return rng.Uniform(n_);
    case Method::kGray: {
      double u = rng.NextDouble();
      double uz = u * zetan_;
      if (uz < 1.0) return 0;
      if (uz < 1.0 + half_pow_theta_) return 1;
      auto r = static_cast<uint64_t>(static_cast<double>(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_));
      return r < n_ ? r : n_ - 1;
    }
    case Method::kRejectionInversion: {
      uint64_t k = 1;
      for (int attempt = 0; attempt < kMaxRejections; ++attempt) {
        double u = h_integral_n_ + rng.NextDouble() * (h_integral_x1_ - h_integral_n_);
        double x = BigHInverse(u, theta_);
        double kd = std::floor(x + 0.5);
        if (kd < 1) kd = 1;
        if (kd > static_cast<double>(n_)) kd = static_cast<double>(n_);
        k = static_cast<uint64_t>(kd);
        if (kd - x <= s_ || u >= BigH(kd + 0.5, theta_) - SmallH(kd, theta_)) break;
      }
      return k - 1;
    }
  }
  return 0;
}

uint64_t ZipfGenerator::Permute(uint64_t x) const {
  // Each step is a bijection of [0, 2^bits): add a constant, multiply by an odd constant,
  // xor with a right shift of itself (all mod 2^bits). Multiplication carries low bits up,
  // the shifts carry high bits down; three rounds mix well enough for load spreading.
  const uint32_t r = bits_ / 2 > 0 ? bits_ / 2 : 1;
  x = (x + key_a_) & mask_;
  x = (x * 0x9e3779b97f4a7c15ULL) & mask_;
  x ^= x >> r;
  x = (x * 0xbf58476d1ce4e5b9ULL) & mask_;
  x ^= x >> r;
  x = (x + key_b_) & mask_;
  x = (x * 0x94d049bb133111ebULL) & mask_;
  x ^= x >> r;
  return x;
}

uint64_t ZipfGenerator::Scramble(uint64_t rank) const {
  // Cycle walking: apply the permutation of [0, 2^bits) until the value lands in [0, n).
  // This terminates because rank itself is on its own cycle, and since 2^bits < 2n it takes
  // fewer than 2 steps on average. The result is a bijection of [0, n).
  uint64_t x = Permute(rank);
  while (x >= n_) x = Permute(x);
  return x;
}

}  // namespace qrstore::workloads
