#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "workloads/zipf.h"

using qrstore::Rng;
using qrstore::workloads::ZipfGenerator;

namespace {

ZipfGenerator Make(uint64_t n, double theta, bool scramble = false) {
  auto z = ZipfGenerator::Create(n, theta, scramble, 7);
  REQUIRE(z.ok());
  return std::move(z).value();
}

std::vector<uint64_t> RankCounts(const ZipfGenerator& z, uint64_t draws, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint64_t> counts(z.n(), 0);
  for (uint64_t i = 0; i < draws; ++i) {
    uint64_t r = z.NextRank(rng);
    REQUIRE(r < z.n());
    ++counts[r];
  }
  return counts;
}

// Pearson's chi-square of `counts` against the exact Zipf(theta) pmf over ranks.
double ChiSquareVsZipf(const std::vector<uint64_t>& counts, double theta) {
  const double zeta = ZipfGenerator::Zeta(counts.size(), theta);
  uint64_t total = 0;
  for (auto c : counts) total += c;
  double chi = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    double expected = static_cast<double>(total) * std::pow(static_cast<double>(r + 1), -theta) / zeta;
    double d = static_cast<double>(counts[r]) - expected;
    chi += d * d / expected;
  }
  return chi;
}

}  // namespace

TEST_CASE("zipf: theta 0 is uniform (chi-square, loose bound)") {
  // 100 cells, 99 degrees of freedom: mean 99, sd 14. A bound of mean + 6 sd cannot be
  // exceeded by a correct uniform sampler except with negligible probability (fixed seed).
  ZipfGenerator z = Make(100, 0.0);
  auto counts = RankCounts(z, 200000, 1);
  double chi = ChiSquareVsZipf(counts, 0.0);
  INFO("chi-square " << chi);
  CHECK(chi < 99 + 6 * 14);
  // And not suspiciously perfect (e.g. a round-robin "sampler").
  CHECK(chi > 99 - 6 * 14);
}

TEST_CASE("zipf: theta >= 1 (rejection-inversion) matches the exact pmf") {
  for (double theta : {1.0, 1.2, 2.0}) {
    ZipfGenerator z = Make(50, theta);
    auto counts = RankCounts(z, 200000, 11);
    double chi = ChiSquareVsZipf(counts, theta);
    INFO("theta " << theta << " chi-square " << chi);
    CHECK(chi < 49 + 6 * 10);  // 49 dof: mean 49, sd ~9.9
  }
}

TEST_CASE("zipf: theta 0.99 and 1.2 are skewed: the top key is far above uniform") {
  const uint64_t n = 1000, draws = 200000;
  for (double theta : {0.99, 1.2}) {
    ZipfGenerator z = Make(n, theta);
    auto counts = RankCounts(z, draws, 3);
    double top = static_cast<double>(counts[0]) / draws;
    double expect_top = 1.0 / ZipfGenerator::Zeta(n, theta);  // exact for rank 0 in both methods
    INFO("theta " << theta << " top frequency " << top << " expected " << expect_top);
    CHECK(top > 50.0 / n);
    CHECK(top == Approx(expect_top).epsilon(0.05));
    CHECK(counts[0] > counts[1]);
    CHECK(counts[1] > counts[10]);
    CHECK(counts[10] > counts[500]);
  }
}

TEST_CASE("zipf: Gray method for 0 < theta < 1 is close to the exact pmf at the head") {
  ZipfGenerator z = Make(1000, 0.5);
  auto counts = RankCounts(z, 400000, 5);
  double zeta = ZipfGenerator::Zeta(1000, 0.5);
  // Ranks 0 and 1 are exact in Gray's method; deeper ranks are approximate.
  CHECK(static_cast<double>(counts[0]) / 400000 == Approx(1.0 / zeta).epsilon(0.05));
  CHECK(static_cast<double>(counts[1]) / 400000 == Approx(std::pow(2.0, -0.5) / zeta).epsilon(0.05));
}

TEST_CASE("zipf: 1M records: zeta is computed once and draws stay in range") {
  ZipfGenerator z = Make(1000000, 0.99, true);
  Rng rng(9);
  for (int i = 0; i < 100000; ++i) REQUIRE(z.Next(rng) < 1000000);
}

TEST_CASE("zipf: tiny key spaces") {
  Rng rng(1);
  for (double theta : {0.0, 0.5, 0.99, 1.0, 1.2}) {
    ZipfGenerator one = Make(1, theta, true);
    for (int i = 0; i < 100; ++i) REQUIRE(one.Next(rng) == 0);
    ZipfGenerator two = Make(2, theta, true);
    uint64_t seen[2] = {0, 0};
    for (int i = 0; i < 1000; ++i) ++seen[two.Next(rng)];
    CHECK(seen[0] > 0);
    CHECK(seen[1] > 0);
  }
}

TEST_CASE("zipf: invalid parameters are errors") {
  CHECK_FALSE(ZipfGenerator::Create(0, 0.5, false).ok());
  CHECK_FALSE(ZipfGenerator::Create(10, -0.1, false).ok());
  CHECK_FALSE(ZipfGenerator::Create(10, 11, false).ok());
  CHECK_FALSE(ZipfGenerator::Create(10, std::nan(""), false).ok());
}

TEST_CASE("zipf: scrambling is a bijection of 0..n-1 and moves the hot key") {
  for (uint64_t n : {2ULL, 3ULL, 1000ULL, 1024ULL, 1025ULL, 65537ULL}) {
    ZipfGenerator z = Make(n, 0.99, true);
    std::vector<bool> hit(n, false);
    for (uint64_t r = 0; r < n; ++r) {
      uint64_t k = z.KeyOfRank(r);
      REQUIRE(k < n);
      REQUIRE_FALSE(hit[k]);
      hit[k] = true;
    }
  }
  ZipfGenerator z = Make(1000000, 0.99, true);
  // The 16 hottest ranks should not all sit in the bottom 1% of the key space.
  int low = 0;
  for (uint64_t r = 0; r < 16; ++r) low += z.KeyOfRank(r) < 10000 ? 1 : 0;
  CHECK(low < 16);
}

TEST_CASE("zipf: a seed determines the sequence") {
  ZipfGenerator z = Make(100000, 1.2, true);
  Rng a(42), b(42), c(43);
  int same_as_other_seed = 0;
  for (int i = 0; i < 1000; ++i) {
    uint64_t x = z.Next(a);
    REQUIRE(x == z.Next(b));
    same_as_other_seed += x == z.Next(c) ? 1 : 0;
  }
  CHECK(same_as_other_seed < 1000);
}

TEST_CASE("zipf: zeta's Euler-Maclaurin tail matches exact summation") {
  for (double theta : {0.5, 0.99, 1.0, 1.2}) {
    const uint64_t n = 5000000;  // above the exact-summation limit
    double exact = 0;
    for (uint64_t i = n; i >= 1; --i) exact += std::pow(static_cast<double>(i), -theta);
    INFO("theta " << theta);
    CHECK(ZipfGenerator::Zeta(n, theta) == Approx(exact).epsilon(1e-10));
  }
}
