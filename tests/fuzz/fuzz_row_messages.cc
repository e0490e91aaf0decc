// Fuzz target: the row messages (cluster/row/row_messages.h), what a node of a partitioned row reads
// from its peers, and the home bundle, home input and batch-end record a group replicates. The
// first byte, modulo 10, picks the decoder (0 sub-slice, 1 dependency values, 2 votes, 3 the one
// PeekRowMessage names, 4 report, 5 control, 6 home bundle, 7 batch end, 8 resume, 9 home
// input); the rest is the message. A batch's writes entry (replication.point = writes) is reached
// through 3 only.
// Contract: no crash and no allocation beyond what the input can hold; a decoded message
// re-encodes to exactly the input (every encoding is canonical); a refused one gets kCorruption
// with a message naming the row message. A decoded sub-slice is also opened for partition 1 of
// a 2-partition row: it passes the receiver's checks or is refused, never half-accepted; so is a
// decoded home bundle's own part (what its home's followers run), and a decoded home input is
// planned as a follower plans it (PlanHomeInput): parts for every partition, or kCorruption; a
// decoded writes entry has images of record size for every key, and every report in it decodes.
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "cluster/row/row_input.h"
#include "cluster/row/row_messages.h"
#include "common/check.h"

using namespace qrstore;
using namespace qrstore::cluster;

namespace {
template <typename M>
void Check(std::string_view bytes) {
  M m;
  const Status s = DecodeRowMessage(bytes, &m);
  if (!s.ok()) {
    QR_CHECK(s.code() == StatusCode::kCorruption && s.message().rfind("row message (", 0) == 0,
             "a refused row message without its kind: %s", s.ToString().c_str());
    return;
  }
  QR_CHECK(EncodeRowMessage(m) == bytes, "a decoded row message re-encodes to other bytes");
  if constexpr (std::is_same_v<M, RowSubSlice>) {
    const storage::KeyMapper parts(storage::KeyMapper::Kind::kRange, 2, 256);
    planner::PlannedSlice out;
    const Status o = OpenRowSubSlice(m, storage::KeyMapper::Within(parts, 2), planner::RowPlace{parts, 1}, &out);
    QR_CHECK(o.ok() || o.code() == StatusCode::kCorruption, "opening a sub-slice: %s", o.ToString().c_str());
    if (o.ok()) QR_CHECK(out.row && out.batch == m.batch && out.planner == m.slice);
  }
  if constexpr (std::is_same_v<M, RowHomeInput>) {
    // A follower plans whatever input decodes (2 partitions, 2 ranges each, 2 planners a home).
    const storage::KeyMapper parts(storage::KeyMapper::Kind::kRange, 2, 256);
    HomeInputParts out;
    const Status o = PlanHomeInput(bytes, m.batch, m.slice, 2, parts, storage::KeyMapper::Within(parts, 2), &out);
    QR_CHECK(o.ok() || o.code() == StatusCode::kCorruption, "planning a home input: %s", o.ToString().c_str());
    if (o.ok()) QR_CHECK(out.parts.size() == 2 && out.from == m.from);
  }
  if constexpr (std::is_same_v<M, RowBatchWrites>) {
    QR_CHECK(m.keys.size() == m.images.size(), "a writes entry with keys and images of other ranges");
    for (size_t r = 0; r < m.keys.size(); ++r) {
      QR_CHECK(m.images[r].size() == m.keys[r].size() * m.record_bytes, "a writes entry's images are not its keys'");
    }
    for (const std::string& frame : m.reports) {
      RowReport rep;
      QR_CHECK(DecodeRowMessage(frame, &rep).ok(), "a writes entry kept a report that does not decode");
    }
  }
  if constexpr (std::is_same_v<M, RowHomeBundle>) {
    QR_CHECK(m.from < m.parts.size(), "a decoded home bundle without its home's part");
    planner::PlannedSlice out;
    const Status o = planner::DecodeSlice(m.parts[m.from], &out);
    QR_CHECK(o.ok() || o.code() == StatusCode::kCorruption, "a home bundle's own part: %s", o.ToString().c_str());
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  uint8_t pick = data[0] % 10;
  if (pick == 3) {
    Result<RowMsgKind> k = PeekRowMessage(bytes);
    if (!k.ok()) return 0;
    switch (k.value()) {  // the selector of the kind it names
      case RowMsgKind::kSubSlice: pick = 0; break;
      case RowMsgKind::kDepValues: pick = 1; break;
      case RowMsgKind::kVotes: pick = 2; break;
      case RowMsgKind::kReport: pick = 4; break;
      case RowMsgKind::kControl: pick = 5; break;
      case RowMsgKind::kHomeBundle: pick = 6; break;
      case RowMsgKind::kBatchEnd: pick = 7; break;
      case RowMsgKind::kResume: pick = 8; break;
      case RowMsgKind::kHomeInput: pick = 9; break;
      case RowMsgKind::kBatchWrites: pick = 10; break;
    }
  }
  switch (pick) {
    case 0: Check<RowSubSlice>(bytes); break;
    case 1: Check<RowDepValues>(bytes); break;
    case 2: Check<RowVotes>(bytes); break;
    case 4: Check<RowReport>(bytes); break;
    case 5: Check<RowControl>(bytes); break;
    case 6: Check<RowHomeBundle>(bytes); break;
    case 7: Check<RowBatchEnd>(bytes); break;
    case 9: Check<RowHomeInput>(bytes); break;
    case 10: Check<RowBatchWrites>(bytes); break;
    default: Check<RowResume>(bytes); break;
  }
  return 0;
}
