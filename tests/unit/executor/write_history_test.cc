// WriteHistory (executor/write_history.h) against a plain model: a list of every entry ever
// recorded. FirstAtOrAfter must give the first live entry of the key at or after the position
// among those still held, Covers must turn false exactly when an entry of that batch or later
// is overwritten, and dropped entries must never be answered.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "common/rng.h"
#include "executor/write_history.h"

using qrstore::executor::WriteHistory;

namespace {

constexpr uint32_t kRec = 16;

std::string Image(uint64_t n) {
  std::string s(kRec, '\0');
  std::memcpy(s.data(), &n, sizeof n);
  return s;
}

struct Entry {
  uint64_t key, batch;
  uint32_t planner, txn;
  std::string image;
  bool dropped = false;
};

bool AtOrAfter(const Entry& e, uint64_t b, uint32_t p, uint32_t t) {
  if (e.batch != b) return e.batch > b;
  if (e.planner != p) return e.planner > p;
  return e.txn >= t;
}

}  // namespace

TEST_CASE("write history: the first write at or after a position, in recording order", "[history]") {
  WriteHistory h(kRec, 1 << 20);
  REQUIRE(h.capacity() > 100);
  CHECK(h.FirstAtOrAfter(7, 0, 0, 0) == nullptr);
  h.Record(7, 1, 0, 3, Image(70).data());   // key 7 written by (1, 0, 3)
  h.Record(8, 1, 0, 4, Image(80).data());
  h.Record(7, 1, 1, 0, Image(71).data());   // and again by (1, 1, 0)
  h.Record(7, 2, 0, 0, Image(72).data());
  CHECK(std::string(h.FirstAtOrAfter(7, 1, 0, 0), kRec) == Image(70));
  CHECK(std::string(h.FirstAtOrAfter(7, 1, 0, 3), kRec) == Image(70));  // its own write counts
  CHECK(std::string(h.FirstAtOrAfter(7, 1, 0, 4), kRec) == Image(71));
  CHECK(std::string(h.FirstAtOrAfter(7, 1, 1, 1), kRec) == Image(72));
  CHECK(h.FirstAtOrAfter(7, 2, 0, 1) == nullptr);  // not written since: the caller reads the record
  CHECK(h.FirstAtOrAfter(9, 0, 0, 0) == nullptr);
  CHECK(h.Covers(0));
  // The resolver drops (1, 1, 0)'s entry and records it again after the batch's others.
  h.Drop(2, [](uint32_t p, uint32_t t) { return p == 0 && t == 0; });
  CHECK(h.FirstAtOrAfter(7, 1, 1, 1) == nullptr);
  h.Record(7, 2, 0, 0, Image(73).data());
  CHECK(std::string(h.FirstAtOrAfter(7, 1, 1, 1), kRec) == Image(73));
  CHECK(std::string(h.FirstAtOrAfter(7, 1, 0, 4), kRec) == Image(71));
}

TEST_CASE("write history: answers for nothing before the batch it began at (a node restarted from a checkpoint)",
          "[history]") {
  WriteHistory h(kRec, 1 << 20, /*first_batch=*/10);
  CHECK_FALSE(h.Covers(9));  // writes of batch 9 happened before this process: never seen
  CHECK(h.Covers(10));
  h.Record(7, 10, 0, 0, Image(1).data());
  CHECK_FALSE(h.Covers(0));
  CHECK(h.Covers(11));
  h.Stop();
  CHECK_FALSE(h.Covers(11));
}

TEST_CASE("write history: matches a model through wrap-arounds, drops and lazy indexing", "[history]") {
  const uint64_t seed = GENERATE(1u, 2u, 3u, 4u);
  CAPTURE(seed);
  qrstore::Rng rng(seed);
  // Room for 200 entries: the run records thousands, so it wraps many times.
  const uint64_t slot = (32 + kRec + 7) / 8 * 8;
  WriteHistory h(kRec, 200 * slot);
  REQUIRE(h.capacity() == 200);
  std::vector<Entry> all;
  uint64_t batch = 0;
  uint64_t n = 0;
  uint64_t lookups = 0, found = 0;
  for (int step = 0; step < 4000; ++step) {
    // A batch: txns in (planner, txn) order writing a few of 30 keys.
    ++batch;
    const uint32_t writes = static_cast<uint32_t>(rng.Next() % 12);
    uint32_t planner = 0, txn = 0;
    for (uint32_t w = 0; w < writes; ++w) {
      if (rng.Next() % 3 == 0) {
        ++planner;
        txn = 0;
      } else {
        txn += static_cast<uint32_t>(rng.Next() % 3);
      }
      const uint64_t key = rng.Next() % 30;
      all.push_back(Entry{key, batch, planner, txn, Image(++n)});
      h.Record(key, batch, planner, txn, all.back().image.data());
    }
    if (rng.Next() % 10 == 0) {
      // The resolver's part: drop one txn's entries of this batch.
      const uint32_t dp = static_cast<uint32_t>(rng.Next() % 3), dt = static_cast<uint32_t>(rng.Next() % 4);
      auto drop = [&](uint32_t p, uint32_t t) { return p == dp && t == dt; };
      h.Drop(batch, drop);
      const size_t held_from = all.size() > h.capacity() ? all.size() - h.capacity() : 0;
      for (size_t i = held_from; i < all.size(); ++i) {
        if (all[i].batch == batch && drop(all[i].planner, all[i].txn)) all[i].dropped = true;
      }
    }
    // Lookups only now and then, so the index is built after long gaps and after wraps.
    if (rng.Next() % 7 != 0) continue;
    const size_t held_from = all.size() > h.capacity() ? all.size() - h.capacity() : 0;
    uint64_t dropped_below = 0;
    for (size_t i = 0; i < held_from; ++i) dropped_below = std::max(dropped_below, all[i].batch + 1);
    for (int q = 0; q < 20; ++q) {
      const uint64_t key = rng.Next() % 30;
      const uint64_t b = batch - rng.Next() % 40;
      const uint32_t p = static_cast<uint32_t>(rng.Next() % 3), t = static_cast<uint32_t>(rng.Next() % 4);
      const char* want = nullptr;
      for (size_t i = held_from; i < all.size(); ++i) {
        const Entry& e = all[i];
        if (e.key == key && !e.dropped && AtOrAfter(e, b, p, t)) {
          want = e.image.data();
          break;
        }
      }
      const char* got = h.FirstAtOrAfter(key, b, p, t);
      INFO("step " << step << " key " << key << " at (" << b << ", " << p << ", " << t << ")");
      ++lookups;
      if (want == nullptr) {
        CHECK(got == nullptr);
      } else {
        ++found;
        REQUIRE(got != nullptr);
        CHECK(std::memcmp(got, want, kRec) == 0);
      }
      CHECK(h.Covers(b) == (dropped_below <= b));
    }
  }
  CHECK(found > lookups / 4);  // the lookups did find entries, not only misses
  CHECK(found < lookups);
}
