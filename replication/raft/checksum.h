// Checksums of Raft frames and log records: deterministic 64-bit hashes built on
// common/hash.h, with four independent multiply-rotate lanes for bulk data so large payloads
// (several MB) hash at memory speed instead of at the latency of one dependent Mix64 chain
// (measured ~4x faster than Hash64 on 5 MB here). Detects corruption; not cryptographic.
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "common/hash.h"

namespace qrstore::replication::raft {

inline uint64_t BulkChecksum(const void* data, size_t n, uint64_t seed) {
  constexpr uint64_t kMul1 = 0x9e3779b185ebca87ULL;
  constexpr uint64_t kMul2 = 0xc2b2ae3d27d4eb4fULL;
  auto round = [](uint64_t h, uint64_t w) {
    h += w * kMul2;
    h = (h << 31) | (h >> 33);
    return h * kMul1;
  };
  const auto* p = static_cast<const unsigned char*>(data);
  const size_t total = n;
  uint64_t h0 = Mix64(seed), h1 = Mix64(seed + 1), h2 = Mix64(seed + 2), h3 = Mix64(seed + 3);
  while (n >= 32) {
    uint64_t w[4];
    std::memcpy(w, p, 32);
    h0 = round(h0, w[0]);
    h1 = round(h1, w[1]);
    h2 = round(h2, w[2]);
    h3 = round(h3, w[3]);
    p += 32;
    n -= 32;
  }
  const uint64_t lanes = Mix64(h0) ^ Mix64(h1 + 1) ^ Mix64(h2 + 2) ^ Mix64(h3 + 3);
  return Hash64(p, n, lanes ^ (static_cast<uint64_t>(total) * 0x100000001b3ULL));
}

inline uint64_t BulkChecksum(std::string_view s, uint64_t seed) { return BulkChecksum(s.data(), s.size(), seed); }

}  // namespace qrstore::replication::raft
