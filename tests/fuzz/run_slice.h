// Shared by the slice fuzz targets (fuzz_slice, fuzz_input_slice, fuzz_write_slice): how an
// input's first byte picks the executor ranges, and a run of one slice through a small engine
// that must finish. A Pipeline with one executor thread per range of
// `ranges` over a table of kFuzzKeys records (two 8-byte fields, counters at 1000; keys beyond
// it are absent and do nothing) runs `slice` as batch 0 of planner 0; every txn must get its
// outcome within 10 s (a hang aborts, naming the txn count and `what`) and the pipeline's digest
// must be the table's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/check.h"
#include "engine/pipeline.h"
#include "planner/eq.h"
#include "storage/key_map.h"
#include "storage/record.h"
#include "storage/table.h"

namespace qrstore::fuzz {

constexpr uint64_t kFuzzKeys = 256;
constexpr uint32_t kFuzzMaxExecutors = 8;
inline const storage::RecordLayout kFuzzLayout{2, 8};

// The executor ranges an input's first byte picks: 1 + (byte >> 1) % 8 of them, bit 0 range
// mapping (else hash), over kFuzzKeys keys.
inline storage::KeyMapper FuzzRanges(uint8_t mode) {
  return storage::KeyMapper((mode & 1) != 0 ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash,
                            1 + static_cast<uint32_t>((mode >> 1) % kFuzzMaxExecutors), kFuzzKeys);
}

// kFuzzKeys records of kFuzzLayout, counters at 1000.
inline void LoadFuzzTable(storage::Table* table) {
  std::string rec(kFuzzLayout.size(), '\0');
  for (uint64_t k = 0; k < kFuzzKeys; ++k) {
    storage::InitRecord(rec.data(), kFuzzLayout, k, 1000);
    QR_CHECK(table->Insert(k, rec.data()).ok());
  }
}

// Runs `slice` on `table` as described above; the outcomes go to *outcomes if given.
inline void RunSliceOn(storage::Table* table, const planner::PlannedSlice& slice, const storage::KeyMapper& ranges,
                       const char* what, std::vector<commit::TxnOutcome>* outcomes = nullptr) {
  engine::PipelineOptions po;
  po.planners = 1;
  po.executors = ranges.buckets();
  po.committers = 1;
  po.batches_in_flight = 2;
  po.ranges = ranges;
  po.capture_reads = true;
  po.track_digest = true;
  size_t delivered = 0;
  engine::Pipeline pipeline(po, table, [&](const std::vector<commit::TxnOutcome>& v) {
    delivered += v.size();
    if (outcomes != nullptr) outcomes->insert(outcomes->end(), v.begin(), v.end());
  });
  QR_CHECK(pipeline.Start().ok());
  planner::PlannedSlice* slot = pipeline.BeginSlice(0, 0);
  QR_CHECK(slot != nullptr);
  *slot = slice;  // renumbered: the pipeline's only slice
  slot->batch = 0;
  slot->planner = 0;
  pipeline.PublishSlice(0, 0, 0, true);
  pipeline.EndInput(1);
  const Status st = pipeline.WaitIdle(10'000);
  QR_CHECK(st.ok(), "%s of %zu txns did not finish: %s", what, slice.txns.size(), st.ToString().c_str());
  pipeline.Stop();
  QR_CHECK_EQ(delivered, slice.txns.size());
  QR_CHECK_EQ(pipeline.Stats().last_digest, table->Digest());
}

inline void RunSlice(const planner::PlannedSlice& slice, const storage::KeyMapper& ranges, const char* what) {
  storage::Table table(kFuzzLayout, kFuzzKeys);
  LoadFuzzTable(&table);
  RunSliceOn(&table, slice, ranges, what);
}

}  // namespace qrstore::fuzz
