// planner/sorted_ring.h against std::map under random inserts, look-ups and erases (in order
// and out of order, through growth and wrap-around).
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "common/rng.h"
#include "planner/sorted_ring.h"

using namespace qrstore;

TEST_CASE("sorted ring: same items, order and answers as a std::map under random operations") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    planner::SortedRing<std::string> ring;
    std::map<uint64_t, std::string> ref;
    uint64_t next = 1;
    for (int step = 0; step < 4000; ++step) {
      const uint64_t r = rng.Uniform(100);
      if (r < 45) {  // mostly appended at the top, sometimes anywhere
        const uint64_t k = r < 35 ? next++ + rng.Uniform(3) : rng.Uniform(next + 5);
        if (ref.count(k) == 0) {
          ring.Insert(k, std::to_string(k));
          ref.emplace(k, std::to_string(k));
          next = std::max(next, k + 1);
        }
      } else if (r < 75 && !ref.empty()) {  // mostly the smallest
        ring.PopFront();
        ref.erase(ref.begin());
      } else if (r < 90) {
        const uint64_t k = rng.Uniform(next + 2);
        CHECK(ring.Erase(k) == (ref.erase(k) == 1));
      } else {
        const uint64_t k = rng.Uniform(next + 2);
        const auto* f = ring.Find(k);
        REQUIRE((f != nullptr) == (ref.count(k) == 1));
        if (f != nullptr) CHECK(f->second == ref.at(k));
      }
      REQUIRE(ring.size() == ref.size());
    }
    size_t i = 0;
    for (const auto& [k, v] : ref) {
      CHECK(ring[i].first == k);
      CHECK(ring[i].second == v);
      ++i;
    }
    if (!ref.empty()) CHECK(ring.back().first == ref.rbegin()->first);
  }
}
