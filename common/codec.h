// Bounds-checked little-endian binary encoding, used by everything that crosses a thread,
// process or disk boundary (EQs, transaction contexts, Raft messages, replication payloads).
//
// Writer appends to a std::string it owns. Reader walks a byte view and never reads past its
// end: every Get* returns false on truncation and latches an error (ok() turns false), so a
// decoder can read a whole struct and check once. Lengths read from the wire are checked
// against the bytes remaining before anything is allocated, so corrupt input cannot make a
// decoder allocate unbounded memory. Not thread-safe; one owner at a time.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace qrstore {

class Writer {
 public:
  Writer() = default;
  explicit Writer(size_t reserve) { buf_.reserve(reserve); }

  void PutU8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void PutU16(uint16_t v) { PutFixed(v); }
  void PutU32(uint32_t v) { PutFixed(v); }
  void PutU64(uint64_t v) { PutFixed(v); }
  void PutI64(int64_t v) { PutFixed(static_cast<uint64_t>(v)); }
  void PutDouble(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    PutFixed(bits);
  }
  // LEB128 unsigned varint (1..10 bytes), built in a register-sized buffer and appended once.
  void PutVarint(uint64_t v) {
    char tmp[kMaxVarintBytes];
    buf_.append(tmp, static_cast<size_t>(EncodeVarint(tmp, v) - tmp));
  }
  static constexpr size_t kMaxVarintBytes = 10;
  // Writes v's varint at p (room for kMaxVarintBytes needed); returns the end.
  static char* EncodeVarint(char* p, uint64_t v) {
    while (v >= 0x80) {
      *p++ = static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
  }
  // Varint length, then the bytes.
  void PutBytes(std::string_view bytes) {
    PutVarint(bytes.size());
    buf_.append(bytes.data(), bytes.size());
  }
  // Raw bytes with no length prefix (the reader must know the size).
  void PutRaw(const void* data, size_t n) { buf_.append(static_cast<const char*>(data), n); }

  size_t size() const { return buf_.size(); }
  const std::string& data() const { return buf_; }
  std::string Release() { return std::move(buf_); }
  // Overwrite a fixed-width u32 at an earlier offset (for length/count back-patching).
  void PatchU32(size_t offset, uint32_t v) { std::memcpy(buf_.data() + offset, &v, sizeof v); }

 private:
  template <typename T>
  void PutFixed(T v) {
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian hosts only");
    char tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    buf_.append(tmp, sizeof(T));
  }
  std::string buf_;
};

class Reader {
 public:
  explicit Reader(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool GetU8(uint8_t* v) { return GetFixed(v); }
  bool GetU16(uint16_t* v) { return GetFixed(v); }
  bool GetU32(uint32_t* v) { return GetFixed(v); }
  bool GetU64(uint64_t* v) { return GetFixed(v); }
  bool GetI64(int64_t* v) {
    uint64_t u;
    if (!GetFixed(&u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool GetDouble(double* v) {
    uint64_t bits;
    if (!GetFixed(&bits)) return false;
    std::memcpy(v, &bits, sizeof bits);
    return true;
  }
  // Accepts only the shortest encoding (what Writer writes): a padded varint such as 80 00 for
  // 0 is refused, so every decoder built on Reader can be canonical (re-encodes byte for byte).
  __attribute__((always_inline)) bool GetVarint(uint64_t* v) {
    // Most varints on the hot paths (kinds, deltas, small counts) are one byte: inline that.
    if (__builtin_expect(p_ != end_ && static_cast<uint8_t>(*p_) < 0x80, 1)) {
      *v = static_cast<uint8_t>(*p_++);
      return true;
    }
    return GetVarintSlow(v);
  }
  bool GetVarintSlow(uint64_t* v) {
    if (remaining() >= 10) {
      // Ten bytes are there whatever the value: no bounds check per byte, loop unrolled.
      const auto* q = reinterpret_cast<const uint8_t*>(p_);
      uint64_t result = 0;
#pragma GCC unroll 10
      for (int i = 0; i < 10; ++i) {
        const uint64_t byte = q[i];
        result |= (byte & 0x7f) << (7 * i);
        if (byte < 0x80) {
          if (i == 9 && byte > 1) return Fail();  // overflow past 64 bits
          if (i > 0 && byte == 0) return Fail();  // overlong: the writer never pads
          p_ += i + 1;
          *v = result;
          return true;
        }
      }
      return Fail();
    }
    uint64_t result = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
      if (p_ >= end_) return Fail();
      uint8_t byte = static_cast<uint8_t>(*p_++);
      if (shift == 63 && byte > 1) return Fail();  // overflow past 64 bits
      if (shift > 0 && byte == 0) return Fail();   // overlong: the writer never pads
      result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return Fail();
  }
  // A count that prefixes `count` items of at least `min_item_bytes` each: rejected when the
  // remaining bytes cannot hold them, so a corrupt count never drives a huge allocation.
  bool GetCount(uint64_t* count, size_t min_item_bytes) {
    if (!GetVarint(count)) return false;
    if (min_item_bytes > 0 && *count > remaining() / min_item_bytes) return Fail();
    return true;
  }
  // Length-prefixed bytes as a view into the input (valid while the input lives).
  bool GetBytes(std::string_view* out) {
    uint64_t n;
    if (!GetVarint(&n)) return false;
    return GetRaw(n, out);
  }
  bool GetBytes(std::string* out) {
    std::string_view v;
    if (!GetBytes(&v)) return false;
    out->assign(v.data(), v.size());
    return true;
  }
  bool GetRaw(size_t n, std::string_view* out) {
    if (n > remaining()) return Fail();
    *out = std::string_view(p_, n);
    p_ += n;
    return true;
  }
  bool GetRaw(void* dst, size_t n) {
    if (n > remaining()) return Fail();
    std::memcpy(dst, p_, n);
    p_ += n;
    return true;
  }

  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool done() const { return p_ == end_; }
  bool ok() const { return ok_; }

 private:
  template <typename T>
  bool GetFixed(T* v) {
    if (remaining() < sizeof(T)) return Fail();
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  bool Fail() {
    ok_ = false;
    p_ = end_;  // latch: every later read fails too
    return false;
  }
  const char* p_;
  const char* end_;
  bool ok_ = true;
};

// CRC32C-free integrity check for framed payloads: 64-bit hash (see common/hash.h).
}  // namespace qrstore
