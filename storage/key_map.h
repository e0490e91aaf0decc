// KeyMapper: which of `n` buckets (executor ranges, or partitions) a key belongs to. A pure,
// deterministic function of (kind, n, key_space, key), cheap enough for every op on the
// planning hot path. Immutable after construction; safe to share between threads.
//   kHash:  a Mix64 hash of the key, mapped to [0, n) by multiply-shift (uniform, no modulo).
//   kRange: [0, key_space) split into n contiguous ranges of ceil(key_space / n) keys;
//           keys >= key_space belong to the last bucket.
#pragma once

#include <cstdint>

#include "common/check.h"
#include "common/hash.h"
#include "storage/txn.h"

namespace qrstore::storage {

class KeyMapper {
 public:
  enum class Kind : uint8_t { kHash, kRange };

  KeyMapper() = default;
  KeyMapper(Kind kind, uint32_t n, uint64_t key_space) : kind_(kind), n_(n) {
    QR_CHECK(n >= 1);
    if (kind == Kind::kRange) {
      QR_CHECK(key_space >= n, "range mapping needs key_space >= buckets");
      width_ = (key_space + n - 1) / n;
    }
  }

  uint32_t buckets() const { return n_; }
  Kind kind() const { return kind_; }

  uint32_t Of(Key key) const {
    if (n_ == 1) return 0;
    if (kind_ == Kind::kHash) {
      return static_cast<uint32_t>((static_cast<unsigned __int128>(Mix64(key)) * n_) >> 64);
    }
    uint64_t b = key / width_;
    return b >= n_ ? n_ - 1 : static_cast<uint32_t>(b);
  }

 private:
  Kind kind_ = Kind::kHash;
  uint32_t n_ = 1;
  uint64_t width_ = 1;
};

}  // namespace qrstore::storage
