// Row messages: what the nodes of a partitioned row send one another (docs/partitioned-rows.md):
// a home's sub-slice for the receiving partition, the dependency values of its kDepSend
// fragments, abort votes, a partition's report of a home's sub-slice (the ACK with fates and
// read values) and the row's control messages (input ended, finished). cluster/row/row_transport.h
// carries them over nng.
//
// Frame: "QR" magic, version byte (1), kind byte, then the body; integers are varints (minimal:
// the reader refuses padding), values zigzag varints. Every decoder checks counts against the
// bytes left before allocating, refuses trailing bytes, and fails with kCorruption naming the
// message and the defect. Each encoding is canonical: a decoded message re-encodes to the same
// bytes (the fuzz target fuzz_row_messages holds the codec to it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "commit/row_commit.h"
#include "common/status.h"
#include "executor/range_executor.h"
#include "planner/eq.h"

namespace qrstore::cluster {

// kHomeBundle never travels between nodes: it is a home's log entry (see RowHomeBundle).
// kBatchEnd never travels between nodes either: it is a partition leader's log entry (RowBatchEnd).
// Nor does kHomeInput: a group's log entry under replication.point = input (RowHomeInput), nor
// kBatchWrites: a partition leader's log entry under replication.point = writes (RowBatchWrites).
enum class RowMsgKind : uint8_t {
  kSubSlice = 1, kDepValues = 2, kVotes = 3, kReport = 4, kControl = 5, kHomeBundle = 6, kBatchEnd = 7, kResume = 8,
  kHomeInput = 9, kBatchWrites = 10
};
constexpr uint8_t kRowMsgVersion = 1;
constexpr uint32_t kMaxRowItems = 1u << 24;  // values or votes in one message

// Home node `from`'s sub-slice (batch, slice) for the receiving partition: EncodeSlice bytes.
// Under replication.point = input (a row with followers) also the home slice's input
// (planner/input_slice.h: every txn of the home slice, not only the receiver's), which the
// receiver's group logs in place of the sub-slice; empty otherwise.
struct RowSubSlice {
  uint64_t batch = 0;
  uint32_t slice = 0;
  uint32_t from = 0;
  std::string slice_bytes;
  std::string input;
};
// Home `from`'s whole home slice (batch, slice): one part per partition of the row, parts[p]
// the EncodeSlice bytes of the sub-slice for partition p (the home's own part encoded for its
// followers, the others exactly as sent to their partitions). The home's group replicates it
// before any part leaves the home (docs/partitioned-rows.md, section 9.2, Rule 1), so a later
// leader of that group holds every part a peer may have received. Its followers run parts[from].
struct RowHomeBundle {
  uint64_t batch = 0;
  uint32_t slice = 0;
  uint32_t from = 0;
  std::vector<std::string> parts;
};
// Under replication.point = input: home `from`'s home slice (batch, slice) as its input
// (planner/input_slice.h bytes), the entry each group logs for it in place of the home bundle (the
// home's own group) or the sub-slice (every other group): a follower plans it with the home's
// RowPlanner and runs its own partition's part (cluster/row/row_input.h).
struct RowHomeInput {
  uint64_t batch = 0;
  uint32_t slice = 0;
  uint32_t from = 0;
  std::string input;
};
struct RowDepValue {
  uint32_t slot = 0;
  int64_t value = 0;
};
// Values for dependency slots of the receiver's sub-slice (batch, slice).
struct RowDepValues {
  uint64_t batch = 0;
  uint32_t slice = 0;
  std::vector<RowDepValue> values;
};
// What partition `partition`'s leader learned from its row during batch `batch`, for its
// followers to replay the batch from their group's log alone (docs/partitioned-rows.md 9.4,
// Rule 2; not used yet): every dependency value it received for a kDepRecv slot, by (slice,
// slot), strictly increasing, and the batch's resolution when it may abort: `fired`, the txns
// whose abort-capable fragment fired anywhere in the row (voting round 0's union), and `aborted`,
// the final cascade set (fired among them); both sorted, no repeats; `votes`, the leader's own
// votes of the batch, round by round from round 0 (what it sent every peer: RowVotes), so that a
// follower that takes its place can re-send them to a peer's successor that runs the batch again
// (docs/partitioned-rows.md 9.5). Rounds may be empty (nobody added a txn in the last one).
struct RowBatchEndValue {
  uint32_t slice = 0;
  uint32_t slot = 0;
  int64_t value = 0;
};
struct RowBatchEnd {
  uint64_t batch = 0;
  uint32_t partition = 0;
  std::vector<RowBatchEndValue> values;
  std::vector<executor::RowTxn> fired;
  std::vector<executor::RowTxn> aborted;
  std::vector<std::vector<executor::RowTxn>> votes;  // [round]: each sorted, no repeats
};
// A dependency value partition `partition`'s leader sent peer `to` for slot `slot` of sub-slice
// `slice` (a RowBatchWrites entry's).
struct RowSentValue {
  uint32_t to = 0;
  uint32_t slice = 0;
  uint32_t slot = 0;
  int64_t value = 0;
};
// Partition `end.partition`'s log entry of batch `end.batch` under replication.point = writes
// (docs/replication-points.md, "Partitioned rows"), in place of the batch-end record, written once
// the batch's fates are final here and its aborts undone. `end`: the batch-end record as under
// `plan` (received values, the row's result, this leader's votes); its `fired` and `aborted`
// give every fate of a txn with a part here. `sent`: every dependency value this leader sent a
// peer for the batch, strictly increasing by (to, slice, slot). `reports`: its report of every
// sub-slice of the batch whose home is another partition, byte for byte as it sends them (the
// encoded RowReport frames; slices strictly increasing). `keys` / `images`: per executor range,
// the keys the batch wrote here (strictly increasing) and their last images, `record_bytes` each
// (no ranges: nothing written). Its followers install the images and take the fates; what it
// sent is kept for a re-send to a peer's successor, should one of them lead.
struct RowBatchWrites {
  RowBatchEnd end;
  std::vector<RowSentValue> sent;
  std::vector<std::string> reports;
  uint32_t record_bytes = 0;
  std::vector<std::vector<uint64_t>> keys;  // [range]
  std::vector<std::string> images;          // [range]
};
// Partition `from`'s aborted txns of `batch` in voting round `round`, sorted, no repeats.
struct RowVotes {
  uint64_t batch = 0;
  uint32_t from = 0;
  uint32_t round = 0;
  std::vector<executor::RowTxn> ids;
};

// Partition `from`'s report of home slice (batch, slice): the txns it lists (home_index strictly
// increasing), each with its status and its read values; values_begin of each txn is the sum of
// the sizes before it (the values are contiguous, as RowSliceReport::Add lays them out).
struct RowReport {
  uint64_t batch = 0;
  uint32_t slice = 0;
  uint32_t from = 0;
  commit::RowSliceReport report;
};
// A node's news for the row: its input ended (it plans no batch at or past `batch` of its own
// accord: the row ends at the largest such batch), or it finished (every home slice it planned
// is complete: it needs nothing more from its peers, which may close their connections), or
// only that it is alive (a heartbeat; `batch` is the last batch it committed), or (kDurable, a
// leader with followers) that every batch before `batch` is in its group for good (its
// sub-slices and batch-end record replicated): a successor resumes at or after it, so what its
// peers sent it for earlier batches need not be kept for a re-send (docs/partitioned-rows.md 9.5).
enum class RowControlKind : uint8_t { kInputEnded = 1, kFinished = 2, kHeartbeat = 3, kDurable = 4 };
struct RowControl {
  uint32_t from = 0;
  RowControlKind what = RowControlKind::kInputEnded;
  uint64_t batch = 0;
};

// A new leader of partition `from` takes its place in the row (docs/partitioned-rows.md 9.5), or a
// peer answers it (answer = true). The resume: `term` (its group's term: higher than any earlier
// leader's of that partition; a resume with a term not above the last one seen is stale),
// `batch` the first batch it has not executed (each peer re-sends what it sent that partition
// for batches from there on), `address` its row transport's "host:port" (peers dial it there).
// The answer, the peer's position: `batch` the first batch of the resuming home's sub-slices
// it has not taken (the home re-sends its parts from there), `reports` the first batch of the
// peer's home slices still waiting for the resuming partition's report; no address.
struct RowResume {
  uint32_t from = 0;
  bool answer = false;
  uint64_t term = 0;
  uint64_t batch = 0;
  uint64_t reports = 0;
  std::string address;
};

std::string EncodeRowMessage(const RowSubSlice& m);
std::string EncodeRowMessage(const RowReport& m);
std::string EncodeRowMessage(const RowControl& m);
std::string EncodeRowMessage(const RowDepValues& m);
std::string EncodeRowMessage(const RowVotes& m);
std::string EncodeRowMessage(const RowHomeBundle& m);
std::string EncodeRowMessage(const RowBatchEnd& m);
std::string EncodeRowMessage(const RowResume& m);
std::string EncodeRowMessage(const RowHomeInput& m);
std::string EncodeRowMessage(const RowBatchWrites& m);

// The kind of a framed message (magic and version checked).
Result<RowMsgKind> PeekRowMessage(std::string_view bytes);
Status DecodeRowMessage(std::string_view bytes, RowSubSlice* out);
Status DecodeRowMessage(std::string_view bytes, RowDepValues* out);
Status DecodeRowMessage(std::string_view bytes, RowVotes* out);
Status DecodeRowMessage(std::string_view bytes, RowReport* out);
Status DecodeRowMessage(std::string_view bytes, RowControl* out);
// Also checks from < parts (at most planner::kMaxPartitions parts).
Status DecodeRowMessage(std::string_view bytes, RowHomeBundle* out);
// Also checks the orders above and that every fired txn is in `aborted`.
Status DecodeRowMessage(std::string_view bytes, RowBatchEnd* out);
// Also checks: a resume has an address (at most 255 bytes), an answer none.
Status DecodeRowMessage(std::string_view bytes, RowResume* out);
// Also checks from < planner::kMaxPartitions (the input itself is decoded by its reader).
Status DecodeRowMessage(std::string_view bytes, RowHomeInput* out);
// Also checks the record inside (as its own decoder does), the orders above, that every report
// decodes and is the batch's from this partition, and that each range's images are its keys'
// count times record_bytes. Keys against executor ranges are the reader's to check.
Status DecodeRowMessage(std::string_view bytes, RowBatchWrites* out);

// The receiver's checks on a sub-slice message, for partition `place.partition` of the row:
// its slice decodes, is a row sub-slice, carries the message's (batch, slice) and passes
// ValidateSlice against the node's executor ranges. Fills `out`.
Status OpenRowSubSlice(const RowSubSlice& m, const storage::KeyMapper& ranges, const planner::RowPlace& place,
                       planner::PlannedSlice* out);

}  // namespace qrstore::cluster
