// Fuzz target: a planned slice as a follower receives it (planner/eq.h), decoded, validated and
// run. Contract: DecodeSlice never crashes and rejects with a Status saying why; a decoded slice
// re-encodes to a slice that decodes to the same value; a slice that also passes ValidateSlice
// for the executor count it carries (at most 8 here) runs through a small engine (a Pipeline
// with one executor thread per EQ over a 256-record table) and finishes within 10 s: a hang is a
// failure (the watchdog aborts with the input's size). The input's first byte picks how ranges
// map keys (hash or range), the rest is the slice's bytes.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "cluster/pipeline.h"
#include "common/check.h"
#include "planner/eq.h"
#include "storage/record.h"
#include "storage/table.h"

using namespace qrstore;

namespace {
constexpr uint64_t kKeys = 256;
constexpr size_t kMaxExecutors = 8;

void Run(const planner::PlannedSlice& decoded, const storage::KeyMapper& ranges) {
  const storage::RecordLayout layout{2, 8};
  storage::Table table(layout, kKeys);
  std::string rec(layout.size(), '\0');
  for (uint64_t k = 0; k < kKeys; ++k) {
    storage::InitRecord(rec.data(), layout, k, 1000);
    QR_CHECK(table.Insert(k, rec.data()).ok());
  }
  cluster::PipelineOptions po;
  po.planners = 1;
  po.executors = ranges.buckets();
  po.committers = 1;
  po.batches_in_flight = 2;
  po.ranges = ranges;
  po.capture_reads = true;
  po.track_digest = true;
  size_t outcomes = 0;
  cluster::Pipeline pipeline(po, &table, [&](const std::vector<commit::TxnOutcome>& v) { outcomes += v.size(); });
  QR_CHECK(pipeline.Start().ok());
  planner::PlannedSlice* slot = pipeline.BeginSlice(0, 0);
  QR_CHECK(slot != nullptr);
  *slot = decoded;
  slot->batch = 0;
  slot->planner = 0;
  pipeline.PublishSlice(0, 0, 0, true);
  pipeline.EndInput(1);
  // The watchdog: a slice that passed validation must never make an executor wait forever.
  Status st = pipeline.WaitIdle(10'000);
  QR_CHECK(st.ok(), "a validated slice of %zu txns did not finish: %s", decoded.txns.size(), st.ToString().c_str());
  pipeline.Stop();
  QR_CHECK_EQ(outcomes, decoded.txns.size());
  QR_CHECK_EQ(pipeline.Stats().last_digest, table.Digest());
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool range_map = (data[0] & 1) != 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  planner::PlannedSlice s;
  Status st = planner::DecodeSlice(bytes, &s);
  if (!st.ok()) {
    QR_CHECK(st.code() == StatusCode::kCorruption && !st.message().empty());
    return 0;
  }
  planner::PlannedSlice again;
  QR_CHECK(planner::DecodeSlice(planner::EncodeSlice(s), &again).ok(), "a decoded slice re-encodes to garbage");
  QR_CHECK(again == s, "a decoded slice does not survive a round trip");
  if (s.eqs.size() > kMaxExecutors) return 0;
  const auto n = static_cast<uint32_t>(s.eqs.size());
  const storage::KeyMapper ranges(range_map ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash, n,
                                  kKeys);
  if (!planner::ValidateSlice(s, ranges, s.batch, s.planner).ok()) return 0;
  Run(s, ranges);
  return 0;
}
