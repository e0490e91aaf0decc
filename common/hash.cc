#include "common/hash.h"

#include <immintrin.h>

namespace qrstore {
namespace {

constexpr size_t kLanes = 8;
constexpr size_t kStripeBytes = kLanes * 8;   // 64
constexpr size_t kStripesPerBlock = 16;       // scramble every 1 KB
constexpr uint64_t kPrime32 = 0x9E3779B1ULL;  // the scramble multiplier (fits 32 bits)

// Per-lane keys (arbitrary odd constants with mixed bits).
constexpr uint64_t kKeys[kLanes] = {0xbe4ba423396cfeb8ULL, 0x1cad21f72c81017cULL, 0xdb979083e96dd4deULL,
                                    0x1f67b3b7a4a44072ULL, 0x78e5c0cc4ee679cbULL, 0x2172ffcc7dd05a82ULL,
                                    0x8e2443f7744608b8ULL, 0x4c263a81e69035e0ULL};
constexpr uint64_t kScrambleKeys[kLanes] = {0xcb00c391bb52283cULL, 0xa32e531b8b65d088ULL, 0x4ef90da297486471ULL,
                                            0xd8acdea946ef1938ULL, 0x3f349ce33f76faa8ULL, 0x1d4f0bc7c7bbdcf9ULL,
                                            0x3159b4cd4be0518aULL, 0x647378d9c97e9fc8ULL};

void InitLanes(uint64_t seed, uint64_t* acc) {
  for (size_t j = 0; j < kLanes; ++j) acc[j] = Mix64(seed + j);
}

uint64_t Finish(const uint64_t* acc, const unsigned char* tail, size_t tail_bytes, size_t total) {
  uint64_t h = static_cast<uint64_t>(total) * 0x100000001b3ULL;
  for (size_t j = 0; j < kLanes; ++j) h = Mix64(h ^ acc[j]) + j;
  return Hash64(tail, tail_bytes, h);
}

inline uint64_t Load64(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

}  // namespace

namespace internal {

uint64_t BulkHash64Scalar(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  const size_t total = n;
  uint64_t acc[kLanes];
  InitLanes(seed, acc);
  size_t stripes_in_block = 0;
  while (n >= kStripeBytes) {
    uint64_t w[kLanes];
    for (size_t j = 0; j < kLanes; ++j) w[j] = Load64(p + 8 * j);
    for (size_t j = 0; j < kLanes; ++j) {
      const uint64_t x = w[j] ^ kKeys[j];
      acc[j] += (x & 0xffffffffULL) * (x >> 32) + w[j ^ 1];
    }
    p += kStripeBytes;
    n -= kStripeBytes;
    if (++stripes_in_block == kStripesPerBlock) {
      stripes_in_block = 0;
      for (size_t j = 0; j < kLanes; ++j) acc[j] = (acc[j] ^ (acc[j] >> 47) ^ kScrambleKeys[j]) * kPrime32;
    }
  }
  return Finish(acc, p, n, total);
}

bool BulkHash64HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

}  // namespace internal
namespace {

#define QR_AVX2 __attribute__((target("avx2"), always_inline)) inline
QR_AVX2 __m256i Accumulate(__m256i acc_v, __m256i w, __m256i key) {
  const __m256i x = _mm256_xor_si256(w, key);
  const __m256i product = _mm256_mul_epu32(x, _mm256_srli_epi64(x, 32));  // lo32 * hi32
  // Lane j gets word j^1: swap the two 64-bit words of each 128-bit half.
  const __m256i swapped = _mm256_shuffle_epi32(w, _MM_SHUFFLE(1, 0, 3, 2));
  return _mm256_add_epi64(acc_v, _mm256_add_epi64(product, swapped));
}
QR_AVX2 __m256i Scramble(__m256i acc_v, __m256i key, __m256i prime) {
  __m256i v = _mm256_xor_si256(acc_v, _mm256_srli_epi64(acc_v, 47));
  v = _mm256_xor_si256(v, key);
  // v * kPrime32 mod 2^64 = lo32(v) * p + (hi32(v) * p << 32).
  const __m256i lo = _mm256_mul_epu32(v, prime);
  const __m256i hi = _mm256_mul_epu32(_mm256_srli_epi64(v, 32), prime);
  return _mm256_add_epi64(lo, _mm256_slli_epi64(hi, 32));
}
#undef QR_AVX2

}  // namespace
namespace internal {

__attribute__((target("avx2"))) uint64_t BulkHash64Avx2(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  const size_t total = n;
  alignas(32) uint64_t acc[kLanes];
  InitLanes(seed, acc);
  __m256i a0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(acc));
  __m256i a1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(acc + 4));
  const __m256i k0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kKeys));
  const __m256i k1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kKeys + 4));
  const __m256i s0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kScrambleKeys));
  const __m256i s1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kScrambleKeys + 4));
  const __m256i prime = _mm256_set1_epi64x(static_cast<int64_t>(kPrime32));
  size_t stripes_in_block = 0;
  while (n >= kStripeBytes) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32));
    a0 = Accumulate(a0, w0, k0);
    a1 = Accumulate(a1, w1, k1);
    p += kStripeBytes;
    n -= kStripeBytes;
    if (++stripes_in_block == kStripesPerBlock) {
      stripes_in_block = 0;
      a0 = Scramble(a0, s0, prime);
      a1 = Scramble(a1, s1, prime);
    }
  }
  _mm256_store_si256(reinterpret_cast<__m256i*>(acc), a0);
  _mm256_store_si256(reinterpret_cast<__m256i*>(acc + 4), a1);
  return Finish(acc, p, n, total);
}

}  // namespace internal

uint64_t BulkHash64(const void* data, size_t n, uint64_t seed) {
  if (internal::BulkHash64HasAvx2()) return internal::BulkHash64Avx2(data, n, seed);
  return internal::BulkHash64Scalar(data, n, seed);
}

}  // namespace qrstore
