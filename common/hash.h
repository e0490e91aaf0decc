// Deterministic 64-bit hashing: the same bytes give the same hash on every host and run.
// Used for state digests, payload checksums and key-to-range mapping. Not cryptographic.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace qrstore {

// SplitMix64 finalizer: a strong bijective mix of one 64-bit word.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Hash of a byte string, seeded. Processes 8 bytes at a time.
inline uint64_t Hash64(const void* data, size_t n, uint64_t seed = 0) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = Mix64(seed ^ (n * 0x100000001b3ULL));
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = Mix64(h ^ w) * 0x9fb21c651e98df25ULL;
    p += 8;
    n -= 8;
  }
  uint64_t tail = 0;
  if (n != 0) std::memcpy(&tail, p, n);  // p may be null when the input is empty
  return Mix64(h ^ tail ^ (static_cast<uint64_t>(n) << 56));
}

inline uint64_t Hash64(std::string_view s, uint64_t seed = 0) { return Hash64(s.data(), s.size(), seed); }

// Hash of bulk data (payloads, frames, log records, checksums). Eight independent lanes
// accumulate 32x32->64-bit products of each word (mixed with a lane key) plus the neighbouring
// lane's word, and are scrambled every 1 KB; the lanes, the tail and the length are folded with
// Mix64 at the end. On CPUs with AVX2 the lanes run as two 256-bit vectors (much faster on
// large inputs: docs/benchmarks-log.md); elsewhere the scalar code computes the SAME value, so a
// checksum written on one host verifies on any other (tested). A different function from
// Hash64: never compare the two. Error detection, not cryptography.
uint64_t BulkHash64(const void* data, size_t n, uint64_t seed);

namespace internal {
// The two implementations behind BulkHash64 (for tests; BulkHash64 picks one at startup).
uint64_t BulkHash64Scalar(const void* data, size_t n, uint64_t seed);
bool BulkHash64HasAvx2();
uint64_t BulkHash64Avx2(const void* data, size_t n, uint64_t seed);  // only if HasAvx2()
}  // namespace internal

inline uint64_t BulkHash64(std::string_view s, uint64_t seed = 0) { return BulkHash64(s.data(), s.size(), seed); }

}  // namespace qrstore
