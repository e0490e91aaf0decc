#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "common/rng.h"
#include "storage/key_map.h"
#include "storage/record.h"
#include "storage/table.h"

using namespace qrstore;
using storage::Key;
using storage::RecordLayout;
using storage::Table;

namespace {
std::string Rec(const RecordLayout& l, Key k, int64_t counter) {
  std::string r(l.size(), '\0');
  storage::InitRecord(r.data(), l, k, counter);
  return r;
}
}  // namespace

TEST_CASE("table: insert and find, dense and sparse keys") {
  RecordLayout l{4, 8};
  Table t(l, 100);
  CHECK(t.size() == 0);
  CHECK(t.Find(0) == nullptr);
  CHECK(t.Find(99) == nullptr);
  CHECK(t.Find(1ull << 60) == nullptr);
  std::vector<Key> keys = {0, 1, 63, 64, 99, 100, 12345, ~0ull, 1ull << 40};
  for (Key k : keys) REQUIRE(t.Insert(k, Rec(l, k, static_cast<int64_t>(k % 1000)).data()).ok());
  CHECK(t.size() == keys.size());
  for (Key k : keys) {
    const char* r = t.Find(k);
    REQUIRE(r != nullptr);
    CHECK(std::string(r, l.size()) == Rec(l, k, static_cast<int64_t>(k % 1000)));
  }
  CHECK(t.Find(2) == nullptr);
  CHECK(t.Find(101) == nullptr);
  // In-place writes through Find are what executors do.
  storage::SetCounter(t.Find(12345), 77);
  CHECK(storage::GetCounter(t.Find(12345)) == 77);
}

TEST_CASE("table: duplicate key and full table are errors") {
  RecordLayout l{2, 8};
  Table t(l, 3);
  REQUIRE(t.Insert(1, Rec(l, 1, 0).data()).ok());
  Status dup = t.Insert(1, Rec(l, 1, 0).data());
  CHECK(dup.code() == StatusCode::kInvalidArgument);
  CHECK(dup.message().find("duplicate") != std::string::npos);
  REQUIRE(t.Insert(500, Rec(l, 500, 0).data()).ok());
  CHECK(t.Insert(500, Rec(l, 500, 0).data()).code() == StatusCode::kInvalidArgument);
  REQUIRE(t.Insert(2, Rec(l, 2, 0).data()).ok());
  Status full = t.Insert(0, Rec(l, 0, 0).data());
  CHECK(full.code() == StatusCode::kResourceExhausted);
  CHECK(t.size() == 3);
}

TEST_CASE("table: many sparse keys survive index growth, ForEach visits each once") {
  RecordLayout l{2, 8};
  const uint64_t n = 5000;
  Table t(l, n);
  Rng rng(7);
  std::set<Key> keys;
  while (keys.size() < n) keys.insert(rng.Next() % 3 == 0 ? rng.Next() % n : n + rng.Next());
  for (Key k : keys) REQUIRE(t.Insert(k, Rec(l, k, 1).data()).ok());
  for (Key k : keys) REQUIRE(t.Find(k) != nullptr);
  std::set<Key> seen;
  size_t calls = 0;
  t.ForEach([&](Key k, const char* rec) {
    ++calls;
    seen.insert(k);
    CHECK(std::string(rec, l.size()) == Rec(l, k, 1));
  });
  CHECK(calls == n);
  CHECK(seen == keys);
}

TEST_CASE("table: digest is order-independent and sensitive to every key and byte") {
  RecordLayout l{3, 10};
  std::vector<Key> keys;
  for (Key k = 0; k < 300; ++k) keys.push_back(k * 7 % 1000);  // some dense, some sparse
  Table a(l, 500), b(l, 500);
  for (Key k : keys) REQUIRE(a.Insert(k, Rec(l, k, 5).data()).ok());
  std::vector<Key> rev(keys.rbegin(), keys.rend());
  for (Key k : rev) REQUIRE(b.Insert(k, Rec(l, k, 5).data()).ok());
  CHECK(a.Digest() == b.Digest());
  CHECK(a.Digest() != 0);

  const uint64_t before = a.Digest();
  // Every byte position of a record matters.
  char* r = a.Find(keys[3]);
  for (uint32_t i = 0; i < l.size(); ++i) {
    r[i] ^= 1;
    CHECK(a.Digest() != before);
    r[i] ^= 1;
  }
  CHECK(a.Digest() == before);
  // Same bytes under another key give another digest.
  Table c(l, 10), d(l, 10);
  std::string same = Rec(l, 1, 5);
  REQUIRE(c.Insert(1, same.data()).ok());
  REQUIRE(d.Insert(2, same.data()).ok());
  CHECK(c.Digest() != d.Digest());
  // Swapping two records' contents changes it too (keys bind to bytes).
  Table e(l, 10), f(l, 10);
  REQUIRE(e.Insert(1, Rec(l, 1, 0).data()).ok());
  REQUIRE(e.Insert(2, Rec(l, 2, 0).data()).ok());
  REQUIRE(f.Insert(1, Rec(l, 2, 0).data()).ok());
  REQUIRE(f.Insert(2, Rec(l, 1, 0).data()).ok());
  CHECK(e.Digest() != f.Digest());
}

TEST_CASE("table: a digest kept with DigestDelta equals a full scan after any changes") {
  for (const RecordLayout l : {RecordLayout{10, 10}, RecordLayout{1, 8}, RecordLayout{3, 13}}) {
    Table t(l, 64);
    for (Key k = 0; k < 64; ++k) REQUIRE(t.Insert(k, Rec(l, k, 0).data()).ok());
    uint64_t running = t.Digest();
    Rng rng(l.size());
    std::string before(l.size(), '\0');
    for (int i = 0; i < 2000; ++i) {
      const Key k = rng.Uniform(64);
      char* r = t.Find(k);
      std::memcpy(before.data(), r, l.size());
      const int changes = static_cast<int>(rng.Uniform(3));  // 0: an unchanged "write"
      for (int c = 0; c < changes; ++c) r[rng.Uniform(l.size())] = static_cast<char>(rng.Next());
      running += Table::DigestDelta(k, before.data(), r, l.size());
      if (i % 97 == 0) REQUIRE(running == t.Digest());
    }
    CHECK(running == t.Digest());
  }
  // Chunks are bound to their position: swapping two chunks of a record changes the digest.
  RecordLayout l{2, 8};
  Table a(l, 1), b(l, 1);
  std::string x = "AAAAAAAABBBBBBBB", y = "BBBBBBBBAAAAAAAA";
  REQUIRE(a.Insert(0, x.data()).ok());
  REQUIRE(b.Insert(0, y.data()).ok());
  CHECK(a.Digest() != b.Digest());
}

TEST_CASE("key mapper: hash and range mapping") {
  storage::KeyMapper one(storage::KeyMapper::Kind::kHash, 1, 0);
  CHECK(one.Of(123456) == 0);
  storage::KeyMapper h(storage::KeyMapper::Kind::kHash, 4, 0);
  std::vector<int> counts(4, 0);
  for (Key k = 0; k < 40000; ++k) {
    uint32_t b = h.Of(k);
    REQUIRE(b < 4);
    ++counts[b];
    REQUIRE(h.Of(k) == b);
  }
  for (int c : counts) CHECK(std::abs(c - 10000) < 600);
  storage::KeyMapper r(storage::KeyMapper::Kind::kRange, 3, 10);  // widths 4,4,2
  std::vector<uint32_t> got;
  for (Key k = 0; k < 12; ++k) got.push_back(r.Of(k));
  CHECK(got == std::vector<uint32_t>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
  CHECK(r.Of(~0ull) == 2);
}

TEST_CASE("key mapper: Within splits every outer bucket evenly, and a one-bucket outer changes nothing") {
  using storage::KeyMapper;
  for (KeyMapper::Kind kind : {KeyMapper::Kind::kHash, KeyMapper::Kind::kRange}) {
    INFO("kind " << static_cast<int>(kind));
    const uint64_t space = 60000;
    // Not nested: identical to the plain mapper, key by key (also past the key space).
    KeyMapper plain(kind, 5, space);
    KeyMapper nested = KeyMapper::Within(KeyMapper(kind, 1, space), 5);
    for (Key k = 0; k < space + 100; ++k) REQUIRE(nested.Of(k) == plain.Of(k));
    // 3 partitions of 4 ranges: every (partition, range) cell gets about 1/12 of the keys, so
    // the ranges of one partition are not all the same few (a reused hash would do that).
    KeyMapper parts(kind, 3, space);
    KeyMapper ranges = KeyMapper::Within(parts, 4);
    std::vector<int> cells(12, 0);
    for (Key k = 0; k < space; ++k) {
      const uint32_t r = ranges.Of(k);
      REQUIRE(r < 4);
      ++cells[parts.Of(k) * 4 + r];
    }
    for (int c : cells) CHECK(std::abs(c - 5000) < 400);
    CHECK(ranges.Of(~0ull) < 4);
  }
  // Ranges: partition widths 20000, each split in 4 contiguous runs of 5000.
  KeyMapper ranges = KeyMapper::Within(KeyMapper(KeyMapper::Kind::kRange, 3, 60000), 4);
  CHECK(ranges.Of(0) == 0);
  CHECK(ranges.Of(4999) == 0);
  CHECK(ranges.Of(5000) == 1);
  CHECK(ranges.Of(19999) == 3);
  CHECK(ranges.Of(20000) == 0);
  CHECK(ranges.Of(59999) == 3);
  CHECK(ranges.Of(70000) == 3);  // past the key space: the last partition's last range
}

TEST_CASE("table: MemoryBytes counts records and the bitmap, saturating") {
  using qrstore::storage::RecordLayout;
  using qrstore::storage::Table;
  CHECK(Table::MemoryBytes(RecordLayout{10, 10}, 1000) == 1000 * 100 + (1000 / 64 + 1) * 8);
  CHECK(Table::MemoryBytes(RecordLayout{1024, 4096}, uint64_t{1} << 32) == (uint64_t{1} << 54) + ((uint64_t{1} << 26) + 1) * 8);
  CHECK(Table::MemoryBytes(RecordLayout{10, 10}, UINT64_MAX / 50) == UINT64_MAX);
}
