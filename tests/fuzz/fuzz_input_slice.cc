// Fuzz target: a slice's sequenced input as a follower receives it under replication.point =
// input (planner/input_slice.h), decoded, planned and run. Contract: DecodeInputSlice never
// crashes and a refusal is kCorruption saying why; an accepted input re-encodes to exactly the
// same bytes (the encoding is canonical: varints refuse overlong forms, src_key is only there
// for kDepWrite); the decoded txns planned with Planner::PlanSlice make a slice that passes
// ValidateSlice for that (batch, planner) and the executor ranges, and survives EncodeSlice /
// DecodeSlice (a follower checks neither: it trusts its own planner with whatever the decoder
// accepted); and a slice of at most 512 txns runs through a small engine (a Pipeline with one
// executor thread per range over a 256-record table; keys beyond it are absent) and finishes
// within 10 s with one outcome per txn: a hang is a failure (the watchdog aborts with the txn
// count). The input's first byte picks the executor count (1 + (byte >> 1) % 8) and how ranges
// map keys (bit 0: range, else hash, over 256 keys); the rest is the input slice's bytes.
// No custom mutator: the format is flat (varints and kind bytes), so libFuzzer's byte-level
// mutations with the dictionary's magic reach the planner and the engine often enough.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "engine/pipeline.h"
#include "planner/eq.h"
#include "planner/input_slice.h"
#include "planner/planner.h"
#include "storage/key_map.h"
#include "storage/record.h"
#include "storage/table.h"
#include "tests/fuzz/run_slice.h"

using namespace qrstore;

namespace {
constexpr size_t kMaxRunTxns = 512;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const storage::KeyMapper ranges = fuzz::FuzzRanges(data[0]);
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);

  uint64_t batch = 0;
  uint32_t planner_id = 0;
  std::vector<storage::Txn> txns;
  const Status st = planner::DecodeInputSlice(bytes, &batch, &planner_id, &txns);
  if (!st.ok()) {
    QR_CHECK(st.code() == StatusCode::kCorruption && !st.message().empty(), "refused with %s",
             st.ToString().c_str());
    return 0;
  }
  QR_CHECK(planner::IsInputSlice(bytes));
  const std::string again = planner::EncodeInputSlice(batch, planner_id, txns);
  QR_CHECK(again == bytes, "an accepted input slice of %zu bytes re-encodes to %zu different bytes", bytes.size(),
           again.size());

  // What a follower does with it: plan it, without validating what it planned.
  const planner::Planner planner(ranges);
  planner::PlannedSlice slice;
  planner.PlanSlice(batch, planner_id, txns, &slice);
  QR_CHECK_EQ(slice.txns.size(), txns.size());
  const Status valid = planner::ValidateSlice(slice, ranges, batch, planner_id);
  QR_CHECK(valid.ok(), "a planned input slice fails validation: %s", valid.ToString().c_str());
  planner::PlannedSlice decoded;
  const Status round = planner::DecodeSlice(planner::EncodeSlice(slice), &decoded);
  QR_CHECK(round.ok(), "a planned input slice fails the slice decoder: %s", round.ToString().c_str());
  QR_CHECK(decoded == slice, "a planned input slice does not survive a round trip");

  if (txns.size() > kMaxRunTxns) return 0;
  fuzz::RunSlice(slice, ranges, "a planned input slice");
  return 0;
}
