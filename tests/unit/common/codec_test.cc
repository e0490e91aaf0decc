#include <catch2/catch.hpp>

#include "common/codec.h"
#include "common/hash.h"
#include "common/rng.h"

using namespace qrstore;

TEST_CASE("codec: round trip of every type") {
  Writer w;
  w.PutU8(7);
  w.PutU16(65535);
  w.PutU32(0xdeadbeef);
  w.PutU64(~0ULL);
  w.PutI64(-42);
  w.PutDouble(3.25);
  for (uint64_t v : {0ULL, 127ULL, 128ULL, 300ULL, ~0ULL}) w.PutVarint(v);
  w.PutBytes("hello");
  std::string bytes = w.Release();

  Reader r(bytes);
  uint8_t a; uint16_t b; uint32_t c; uint64_t d; int64_t e; double f;
  REQUIRE(r.GetU8(&a)); CHECK(a == 7);
  REQUIRE(r.GetU16(&b)); CHECK(b == 65535);
  REQUIRE(r.GetU32(&c)); CHECK(c == 0xdeadbeef);
  REQUIRE(r.GetU64(&d)); CHECK(d == ~0ULL);
  REQUIRE(r.GetI64(&e)); CHECK(e == -42);
  REQUIRE(r.GetDouble(&f)); CHECK(f == 3.25);
  for (uint64_t v : {0ULL, 127ULL, 128ULL, 300ULL, ~0ULL}) {
    uint64_t got;
    REQUIRE(r.GetVarint(&got));
    CHECK(got == v);
  }
  std::string s;
  REQUIRE(r.GetBytes(&s));
  CHECK(s == "hello");
  CHECK(r.done());
  CHECK(r.ok());
}

TEST_CASE("codec: every truncation is rejected, never read past the end") {
  Writer w;
  w.PutU64(1);
  w.PutVarint(1ULL << 40);
  w.PutBytes(std::string(100, 'x'));
  std::string bytes = w.Release();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string cut = bytes.substr(0, n);
    Reader r(cut);
    uint64_t x, y;
    std::string s;
    bool all = r.GetU64(&x) && r.GetVarint(&y) && r.GetBytes(&s);
    CHECK_FALSE(all);
    CHECK_FALSE(r.ok());
  }
}

TEST_CASE("codec: corrupt lengths and counts do not allocate") {
  Writer w;
  w.PutVarint(1ULL << 60);  // a length far beyond the buffer
  std::string bytes = w.Release();
  Reader r(bytes);
  std::string s;
  CHECK_FALSE(r.GetBytes(&s));
  Reader r2(bytes);
  uint64_t count;
  CHECK_FALSE(r2.GetCount(&count, 8));
  std::string overlong(11, '\xff');
  Reader r3(overlong);
  uint64_t v;
  CHECK_FALSE(r3.GetVarint(&v));
}

TEST_CASE("reader refuses padded varints, so decoders stay canonical") {
  // 0 as 80 00, 1 as 81 80 00, 127 as ff 00, both through the short and the 10-byte paths.
  for (std::string bytes : {std::string("\x80\x00", 2), std::string("\x81\x80\x00", 3), std::string("\xff\x00", 2),
                            std::string("\x80\x00", 2) + std::string(10, '\x01')}) {
    Reader r(bytes);
    uint64_t v = 0;
    CHECK_FALSE(r.GetVarint(&v));
  }
  Writer w;
  for (uint64_t v : {0ULL, 1ULL, 127ULL, 128ULL, 1ULL << 63, ~0ULL}) w.PutVarint(v);
  w.PutRaw("0123456789", 10);  // so the 10-byte path reads them too
  Reader r(w.data());
  for (uint64_t want : {0ULL, 1ULL, 127ULL, 128ULL, 1ULL << 63, ~0ULL}) {
    uint64_t got = 0;
    REQUIRE(r.GetVarint(&got));
    CHECK(got == want);
  }
}

TEST_CASE("hash and rng are deterministic") {
  CHECK(Hash64("abc") == Hash64("abc"));
  CHECK(Hash64("abc") != Hash64("abd"));
  CHECK(Hash64("abc", 1) != Hash64("abc", 2));
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.Next();
    CHECK(x == b.Next());
    (void)c;
  }
  Rng u(1);
  for (int i = 0; i < 1000; ++i) CHECK(u.Uniform(10) < 10);
}
