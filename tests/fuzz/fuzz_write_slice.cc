// Fuzz target: a slice's writes as a follower receives them under replication.point = writes
// (planner/write_slice.h), decoded, installed and committed. Contract: DecodeWriteSlice, given
// the (batch, planner) the bytes name, never crashes and a refusal is kCorruption saying why;
// an accepted slice is refused for any other batch, and re-encodes to exactly the same bytes
// (the encoding is canonical: varints refuse overlong forms, keys strictly increase; a range
// count of 0 and one of every range, all empty, are told apart by which encoding matches); and
// the decoded slice runs through a small engine (a Pipeline with one executor thread per range
// over a 256-record table; keys beyond it are absent and install nothing) and finishes within
// 10 s with one outcome per txn, each with the status its fate gives (so as many aborts as
// nonzero fates), the pipeline's digest equal to the table's, every present installed key's
// record equal to its image and every other record as it was. The input's first byte picks the
// executor count (1 + (byte >> 1) % 8) and how ranges map keys (bit 0: range, else hash, over
// 256 keys); the rest is the write slice's bytes.
// No custom mutator: the format is flat (varints, fate bytes, raw images), so libFuzzer's
// byte-level mutations with the dictionary's magic reach the engine often enough.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "common/codec.h"
#include "engine/pipeline.h"
#include "planner/eq.h"
#include "planner/write_slice.h"
#include "storage/key_map.h"
#include "storage/record.h"
#include "storage/table.h"
#include "tests/fuzz/run_slice.h"

using namespace qrstore;

namespace {
constexpr uint64_t kKeys = fuzz::kFuzzKeys;
const storage::RecordLayout kLayout = fuzz::kFuzzLayout;

// The (batch, planner) the bytes name, read permissively (0, 0 when they cannot be read: the
// decoder refuses those anyway). A planner beyond uint32 is passed truncated, which the decoder
// must then refuse as the wrong planner.
void NamedSlice(std::string_view bytes, uint64_t* batch, uint32_t* planner_id) {
  *batch = 0;
  *planner_id = 0;
  if (!planner::IsWriteSlice(bytes)) return;
  Reader r(bytes.substr(sizeof planner::kWriteMagic));
  uint64_t b = 0, p = 0;
  if (!r.GetVarint(&b) || !r.GetVarint(&p)) return;
  *batch = b;
  *planner_id = static_cast<uint32_t>(p);
}

void CheckRefusal(const Status& st, const char* what) {
  QR_CHECK(st.code() == StatusCode::kCorruption && !st.message().empty(), "%s: refused with %s", what,
           st.ToString().c_str());
}

// Runs `slice` as the only slice (batch 0, planner 0) of a Pipeline over a fresh table and checks
// what it left.
void RunWriteSlice(const planner::PlannedSlice& slice, const storage::KeyMapper& ranges) {
  const uint32_t rec_size = kLayout.size();
  storage::Table table(kLayout, kKeys);
  fuzz::LoadFuzzTable(&table);
  std::vector<std::string> before(kKeys);
  for (uint64_t k = 0; k < kKeys; ++k) before[k].assign(table.Find(k), rec_size);
  std::vector<commit::TxnOutcome> outcomes;
  fuzz::RunSliceOn(&table, slice, ranges, "a write slice", &outcomes);

  const planner::SliceWrites& w = slice.writes;
  QR_CHECK_EQ(outcomes.size(), slice.txns.size());
  uint64_t nonzero = 0, aborted = 0;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const commit::TxnOutcome& o = outcomes[i];
    QR_CHECK_EQ(o.txn_id, slice.txns[i].txn_id);
    QR_CHECK_EQ(o.pos.index, i);
    const commit::TxnStatus want = w.fates[i] == 0 ? commit::TxnStatus::kCommitted : commit::TxnStatus::kAbortedLogic;
    QR_CHECK(o.status == want, "txn %zu of fate %u has status %s", i, static_cast<unsigned>(w.fates[i]),
             commit::TxnStatusName(o.status));
    nonzero += w.fates[i] != 0 ? 1 : 0;
    aborted += o.status != commit::TxnStatus::kCommitted ? 1 : 0;
  }
  QR_CHECK_EQ(aborted, nonzero);

  // Every present installed key holds its image, every other record is untouched.
  std::vector<bool> installed(kKeys, false);
  for (size_t r = 0; r < w.keys.size(); ++r) {
    for (size_t i = 0; i < w.keys[r].size(); ++i) {
      const storage::Key k = w.keys[r][i];
      const char* got = table.Find(k);
      if (k >= kKeys) {
        QR_CHECK(got == nullptr, "absent key %llu appeared", static_cast<unsigned long long>(k));
        continue;
      }
      QR_CHECK(got != nullptr);
      QR_CHECK(std::memcmp(got, w.images[r].data() + i * rec_size, rec_size) == 0,
               "key %llu does not hold its image after the install", static_cast<unsigned long long>(k));
      installed[k] = true;
    }
  }
  for (uint64_t k = 0; k < kKeys; ++k) {
    if (installed[k]) continue;
    const char* got = table.Find(k);
    QR_CHECK(got != nullptr && std::memcmp(got, before[k].data(), rec_size) == 0,
             "key %llu changed without an image", static_cast<unsigned long long>(k));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const storage::KeyMapper ranges = fuzz::FuzzRanges(data[0]);
  const uint32_t executors = ranges.buckets();
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const uint32_t rec_size = kLayout.size();

  uint64_t batch = 0;
  uint32_t planner_id = 0;
  NamedSlice(bytes, &batch, &planner_id);
  planner::PlannedSlice slice;
  const Status st = planner::DecodeWriteSlice(bytes, rec_size, ranges, batch, planner_id, &slice);
  if (!st.ok()) {
    CheckRefusal(st, "the write slice");
    return 0;
  }
  QR_CHECK(planner::IsWriteSlice(bytes));
  const planner::SliceWrites& w = slice.writes;
  QR_CHECK(w.given);
  QR_CHECK(slice.batch == batch && slice.planner == planner_id);
  QR_CHECK_EQ(slice.eqs.size(), executors);
  for (const auto& eq : slice.eqs) QR_CHECK(eq.empty());
  QR_CHECK_EQ(w.fates.size(), slice.txns.size());
  QR_CHECK_EQ(w.keys.size(), executors);
  QR_CHECK_EQ(w.images.size(), executors);
  bool any_key = false;
  for (uint32_t r = 0; r < executors; ++r) {
    QR_CHECK_EQ(w.images[r].size(), w.keys[r].size() * rec_size);
    for (size_t i = 0; i < w.keys[r].size(); ++i) {
      QR_CHECK_EQ(ranges.Of(w.keys[r][i]), r);
      QR_CHECK(i == 0 || w.keys[r][i] > w.keys[r][i - 1]);
    }
    any_key = any_key || !w.keys[r].empty();
  }
  for (uint8_t f : w.fates) QR_CHECK(f <= 1, "fate %u accepted", static_cast<unsigned>(f));

  // Canonical: the bytes are exactly one of the encodings of what was decoded (without images
  // only when every range is empty: a range count of 0).
  const std::string with_images = planner::EncodeWriteSlice(slice, w.fates, &w.keys, &w.images, rec_size);
  const bool same = with_images == bytes ||
                    (!any_key && planner::EncodeWriteSlice(slice, w.fates, nullptr, nullptr, rec_size) == bytes);
  QR_CHECK(same, "an accepted write slice of %zu bytes re-encodes to different bytes (%zu with its images)",
           bytes.size(), with_images.size());

  // Any other batch is refused.
  planner::PlannedSlice other;
  const Status wrong = planner::DecodeWriteSlice(bytes, rec_size, ranges, batch + 1, planner_id, &other);
  QR_CHECK(!wrong.ok(), "a write slice of batch %llu accepted as batch %llu", static_cast<unsigned long long>(batch),
           static_cast<unsigned long long>(batch + 1));
  CheckRefusal(wrong, "the write slice for another batch");

  RunWriteSlice(slice, ranges);
  return 0;
}
