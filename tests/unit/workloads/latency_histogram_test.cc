#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "common/rng.h"
#include "workloads/latency_histogram.h"

using qrstore::Rng;
using qrstore::workloads::LatencyHistogram;

TEST_CASE("histogram: small values are exact") {
  LatencyHistogram h;
  CHECK(h.Percentile(0.5) == 0);
  for (int v = 1; v <= 50; ++v) h.Record(v);
  CHECK(h.count() == 50u);
  CHECK(h.min() == 1);
  CHECK(h.max() == 50);
  CHECK(h.Percentile(0.5) == 25);
  CHECK(h.Percentile(1.0) == 50);
  CHECK(h.Percentile(0.0) == 1);
  CHECK(h.mean() == Approx(25.5));
}

TEST_CASE("histogram: percentiles within 1/64 of the exact order statistic") {
  Rng rng(3);
  std::vector<int64_t> values;
  LatencyHistogram h;
  for (int i = 0; i < 100000; ++i) {
    // Log-uniform from 1 us to 1 s.
    double e = 3 + 6 * rng.NextDouble();
    auto v = static_cast<int64_t>(std::pow(10.0, e));
    values.push_back(v);
    h.Record(v);
  }
  std::sort(values.begin(), values.end());
  for (double q : {0.01, 0.5, 0.9, 0.99, 0.999}) {
    int64_t exact = values[static_cast<size_t>(std::ceil(q * values.size())) - 1];
    INFO("q " << q);
    CHECK(static_cast<double>(h.Percentile(q)) >= static_cast<double>(exact));
    CHECK(static_cast<double>(h.Percentile(q)) <= static_cast<double>(exact) * (1 + 1.0 / 64));
  }
  CHECK(h.Percentile(1.0) == values.back());
}

TEST_CASE("histogram: merge equals recording everything in one") {
  LatencyHistogram a, b, all;
  for (int i = 0; i < 1000; ++i) {
    a.Record(i * 1000);
    all.Record(i * 1000);
    b.Record(i * 7 + 3);
    all.Record(i * 7 + 3);
  }
  a.Merge(b);
  CHECK(a.count() == all.count());
  CHECK(a.min() == all.min());
  CHECK(a.max() == all.max());
  for (double q : {0.1, 0.5, 0.99}) CHECK(a.Percentile(q) == all.Percentile(q));
  a.Record(-5);  // clamped to 0
  CHECK(a.min() == 0);
}
