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
  std::memcpy(&tail, p, n);
  return Mix64(h ^ tail ^ (static_cast<uint64_t>(n) << 56));
}

inline uint64_t Hash64(std::string_view s, uint64_t seed = 0) { return Hash64(s.data(), s.size(), seed); }

}  // namespace qrstore
