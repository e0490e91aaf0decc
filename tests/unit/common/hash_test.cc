// BulkHash64: the AVX2 and scalar implementations agree bit for bit (a checksum written on one
// host must verify on any other), and every single-bit flip changes the hash.
#include <string>

#include <catch2/catch.hpp>

#include "common/hash.h"
#include "common/rng.h"

namespace qrstore {
namespace {

std::string RandomBytes(Rng& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng.Next());
  return s;
}

TEST_CASE("BulkHash64: the AVX2 and scalar implementations give the same value", "[hash]") {
  Rng rng(7);
  if (!internal::BulkHash64HasAvx2()) {
    // Nothing to compare on this CPU: check the dispatcher picks the scalar code.
    const std::string d = RandomBytes(rng, 5000);
    REQUIRE(BulkHash64(d, 3) == internal::BulkHash64Scalar(d.data(), d.size(), 3));
    return;
  }
  const std::string data = RandomBytes(rng, 70000);
  // Every length around the stripe (64 B) and block (1 KB) boundaries, and some large ones.
  for (size_t n = 0; n <= 2200; ++n) {
    INFO("length " << n);
    REQUIRE(internal::BulkHash64Avx2(data.data(), n, 5) == internal::BulkHash64Scalar(data.data(), n, 5));
  }
  for (size_t n : {4095, 4096, 4097, 65536, 70000}) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{1}, UINT64_MAX}) {
      INFO("length " << n << " seed " << seed);
      REQUIRE(internal::BulkHash64Avx2(data.data(), n, seed) == internal::BulkHash64Scalar(data.data(), n, seed));
      // Unaligned starts too.
      REQUIRE(internal::BulkHash64Avx2(data.data() + 3, n - 3, seed) ==
              internal::BulkHash64Scalar(data.data() + 3, n - 3, seed));
    }
  }
  REQUIRE(BulkHash64(data, 9) == internal::BulkHash64Scalar(data.data(), data.size(), 9));
}

TEST_CASE("BulkHash64: every single-bit flip, the length and the seed change the hash", "[hash]") {
  Rng rng(11);
  const std::string data = RandomBytes(rng, 3000);  // two full blocks, stripes and a tail
  const uint64_t h = BulkHash64(data, 1);
  for (size_t byte = 0; byte < data.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = data;
      bad[byte] = static_cast<char>(bad[byte] ^ (1 << bit));
      INFO("byte " << byte << " bit " << bit);
      REQUIRE(BulkHash64(bad, 1) != h);
    }
  }
  REQUIRE(BulkHash64(std::string_view(data).substr(0, 2999), 1) != h);
  REQUIRE(BulkHash64(data, 2) != h);
  // Zero bytes still count: all-zero inputs of different lengths differ.
  REQUIRE(BulkHash64(std::string(1024, '\0'), 0) != BulkHash64(std::string(1088, '\0'), 0));
}

}  // namespace
}  // namespace qrstore
