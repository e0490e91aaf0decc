// KeyMapper: which of `n` buckets (executor ranges, or partitions) a key belongs to. A pure,
// deterministic function of (kind, n, key_space, key), cheap enough for every op on the
// planning hot path. Immutable after construction; safe to share between threads.
//   kHash:  a Mix64 hash of the key, mapped to [0, n) by multiply-shift (uniform, no modulo).
//   kRange: [0, key_space) split into n contiguous ranges of ceil(key_space / n) keys;
//           keys >= key_space belong to the last bucket.
// Within(outer, n) splits each bucket of `outer` again into n (a partition's keys into its
// node's executor ranges), independently of which outer bucket a key is in: for kHash the
// inner bucket comes from the hash bits the outer bucket did not use (Mix64(key) * outer's n,
// mod 2^64), for kRange from the key's offset inside its outer range. With a one-bucket outer
// mapper, Within(outer, n) is KeyMapper(kind, n, key_space): the same function.
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

  // Each bucket of `outer` split into n. kRange needs n <= the outer ranges' width (checked).
  static KeyMapper Within(const KeyMapper& outer, uint32_t n) {
    QR_CHECK(n >= 1);
    KeyMapper m;
    m.kind_ = outer.kind_;
    m.n_ = n;
    m.outer_n_ = outer.n_;
    m.outer_width_ = outer.width_;
    if (outer.kind_ == Kind::kRange) {
      QR_CHECK(outer.width_ >= n, "range mapping needs at least one key per bucket");
      m.width_ = (outer.width_ + n - 1) / n;
    }
    return m;
  }

  uint32_t buckets() const { return n_; }
  Kind kind() const { return kind_; }
  // kRange: keys per bucket, ceil(key_space / n) (1 for kHash).
  uint64_t range_width() const { return width_; }

  uint32_t Of(Key key) const {
    if (n_ == 1) return 0;
    if (kind_ == Kind::kHash) {
      const uint64_t h = Mix64(key) * outer_n_;  // mod 2^64: the bits below the outer bucket's
      return static_cast<uint32_t>((static_cast<unsigned __int128>(h) * n_) >> 64);
    }
    uint64_t offset = key;
    if (outer_n_ > 1) {
      uint64_t ob = key / outer_width_;
      if (ob >= outer_n_) ob = outer_n_ - 1;
      offset = key - ob * outer_width_;
    }
    uint64_t b = offset / width_;
    return b >= n_ ? n_ - 1 : static_cast<uint32_t>(b);
  }

 private:
  Kind kind_ = Kind::kHash;
  uint32_t n_ = 1;
  uint64_t width_ = 1;
  uint32_t outer_n_ = 1;      // Within: the outer mapper's buckets (1: not nested)
  uint64_t outer_width_ = 1;  // Within, kRange: the outer ranges' width
};

}  // namespace qrstore::storage
