#include "replication/tools/payload.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/codec.h"
#include "common/hash.h"
#include "common/rng.h"

namespace qrstore::replication::tools {

namespace {

constexpr uint32_t kPayloadMagic = 0x47505251;  // "QRPG"
constexpr size_t kPoolBytes = 1 << 20;
constexpr size_t kStampEvery = 4096;

// Records shaped like EQ fragments of a YCSB workload: (txn id delta, key, op, field, value).
const std::string& Pool() {
  static const std::string pool = [] {
    Rng rng(0x5eed'9a71'0ad5ULL);
    Writer w(kPoolBytes + 64);
    uint64_t txn = 1000;
    while (w.size() < kPoolBytes) {
      // Fixed-width fields with small values, as an EQ encodes them: long runs of zero bytes
      // and repeated field values are what makes real EQ bytes compress well.
      txn += 1 + rng.Uniform(3);
      w.PutU64(txn);
      w.PutU64(rng.Uniform(1'000'000));                // key
      w.PutU8(static_cast<uint8_t>(rng.Uniform(4)));   // op kind
      w.PutU8(static_cast<uint8_t>(rng.Uniform(10)));  // field
      const char fill = static_cast<char>('a' + rng.Uniform(4));
      for (int i = 0; i < 10; ++i) w.PutU8(static_cast<uint8_t>(i < 7 ? fill : 'a' + rng.Uniform(26)));  // value
      w.PutU32(static_cast<uint32_t>(rng.Uniform(64)));  // small counter
    }
    std::string s = w.Release();
    s.resize(kPoolBytes);
    return s;
  }();
  return pool;
}

void Header(uint32_t group, uint32_t planner, uint64_t batch_id, uint64_t size, char out[kPayloadHeaderBytes]) {
  Writer w(kPayloadHeaderBytes);
  w.PutU32(kPayloadMagic);
  w.PutU32(group);
  w.PutU32(planner);
  w.PutU32(0);
  w.PutU64(batch_id);
  w.PutU64(size);
  std::memcpy(out, w.data().data(), kPayloadHeaderBytes);
}

// Calls fn(offset, data, len) for consecutive segments covering [0, size).
template <typename Fn>
void ForEachSegment(uint32_t group, uint32_t planner, uint64_t batch_id, size_t size, Fn&& fn) {
  char header[kPayloadHeaderBytes];
  Header(group, planner, batch_id, size, header);
  size_t pos = std::min(size, kPayloadHeaderBytes);
  if (!fn(size_t{0}, header, pos)) return;
  const std::string& pool = Pool();
  size_t pool_pos = Mix64((static_cast<uint64_t>(group) << 32) ^ planner ^ Mix64(batch_id)) % kPoolBytes;
  while (pos < size) {
    // A stamp at every multiple of kStampEvery makes batches that share a pool offset differ.
    if (pos % kStampEvery == 0) {
      char stamp[8];
      uint64_t v = Mix64(batch_id ^ pos);
      std::memcpy(stamp, &v, 8);
      size_t n = std::min<size_t>(8, size - pos);
      if (!fn(pos, stamp, n)) return;
      pos += n;
      continue;
    }
    size_t to_stamp = kStampEvery - pos % kStampEvery;
    size_t n = std::min({size - pos, to_stamp, kPoolBytes - pool_pos});
    if (!fn(pos, pool.data() + pool_pos, n)) return;
    pos += n;
    pool_pos = (pool_pos + n) % kPoolBytes;
  }
}

}  // namespace

std::string MakePayload(uint32_t group, uint32_t planner, uint64_t batch_id, size_t size) {
  std::string out(size, '\0');
  ForEachSegment(group, planner, batch_id, size, [&](size_t off, const char* data, size_t n) {
    std::memcpy(out.data() + off, data, n);
    return true;
  });
  return out;
}

Status VerifyPayload(uint32_t group, uint32_t planner, uint64_t batch_id, std::string_view bytes) {
  const std::string where =
      "payload g" + std::to_string(group) + "/p" + std::to_string(planner) + " batch " + std::to_string(batch_id) + ": ";
  if (bytes.size() >= kPayloadHeaderBytes) {
    Reader r(bytes);
    uint32_t magic = 0, g = 0, p = 0, zero = 0;
    uint64_t b = 0, size = 0;
    r.GetU32(&magic);
    r.GetU32(&g);
    r.GetU32(&p);
    r.GetU32(&zero);
    r.GetU64(&b);
    r.GetU64(&size);
    if (magic != kPayloadMagic) return Status::Corruption(where + "not a generated payload (bad magic)");
    if (g != group || p != planner || b != batch_id) {
      return Status::Corruption(where + "carries g" + std::to_string(g) + "/p" + std::to_string(p) + " batch " +
                                std::to_string(b) + " (wrong batch delivered)");
    }
    if (size != bytes.size()) {
      return Status::Corruption(where + "header says " + std::to_string(size) + " bytes, got " +
                                std::to_string(bytes.size()) + " (truncated or padded)");
    }
  }
  size_t bad = bytes.size();
  ForEachSegment(group, planner, batch_id, bytes.size(), [&](size_t off, const char* data, size_t n) {
    if (std::memcmp(bytes.data() + off, data, n) == 0) return true;
    for (size_t i = 0; i < n; ++i) {
      if (bytes[off + i] != data[i]) {
        bad = off + i;
        break;
      }
    }
    return false;
  });
  if (bad != bytes.size()) {
    return Status::Corruption(where + "content differs at byte " + std::to_string(bad) + " of " +
                              std::to_string(bytes.size()));
  }
  return Status::Ok();
}

}  // namespace qrstore::replication::tools
