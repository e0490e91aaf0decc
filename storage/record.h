// Fixed-size record layout: `fields` fields of `field_bytes` bytes each. Field 0 starts with a
// little-endian int64 counter (YCSB's update counter; transfer's account balance). Records are
// raw bytes owned by a Table; these helpers read and write them in place.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/hash.h"
#include "storage/txn.h"

namespace qrstore::storage {

struct RecordLayout {
  uint32_t fields = 10;
  uint32_t field_bytes = 10;  // >= 8 so field 0 can hold the counter
  uint32_t size() const { return fields * field_bytes; }
};

inline int64_t GetCounter(const char* rec) {
  int64_t v;
  std::memcpy(&v, rec, sizeof v);
  return v;
}
inline void SetCounter(char* rec, int64_t v) { std::memcpy(rec, &v, sizeof v); }

// Fills `n` bytes deterministically from a 64-bit seed.
inline void FillBytes(char* dst, uint32_t n, uint64_t seed) {
  uint64_t x = seed;
  while (n >= 8) {
    x = Mix64(x);
    std::memcpy(dst, &x, 8);
    dst += 8;
    n -= 8;
  }
  if (n > 0) {
    x = Mix64(x);
    std::memcpy(dst, &x, n);
  }
}

// The initial image of record `key`: counter = `counter`, rest of field 0 zero, other fields
// derived from the key.
inline void InitRecord(char* rec, const RecordLayout& layout, Key key, int64_t counter) {
  std::memset(rec, 0, layout.field_bytes);
  SetCounter(rec, counter);
  if (layout.fields > 1) FillBytes(rec + layout.field_bytes, (layout.fields - 1) * layout.field_bytes, key);
}

}  // namespace qrstore::storage
