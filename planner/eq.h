// Execution queues (EQs) and transaction contexts (TCs): the plain-data output of planning one
// (batch, planner) slice. A PlannedSlice is everything an executor node needs to run the slice,
// so it is what leaders replicate and later ship to remote nodes (EncodeSlice / DecodeSlice); a
// follower runs the decoded slice and reaches the same state.
//
// Structure. A slice holds the transactions the planner took from the client queue, in queue
// order (txns[i] is position i of the slice), and one EQ per executor range: eqs[r] lists the
// fragments of those txns whose key is in range r, in (txn index, op index) order. A kDepWrite
// x <- y op becomes two fragments sharing a dependency slot: a kDepRead on y's range (reads y's
// counter and publishes it to the slot) and a kDepWrite on x's range (waits for the slot).
// When x and y share a range the read comes first, so one executor never waits on itself.
// A kRead fragment names a read slot: where the executor leaves the record it read, so the
// commit stage can hand the values to the client (slot i = record i of the slice's read values).
//
// Ownership: a PlannedSlice is a value; the engine reuses its vectors across batches.
// Invariants (checked by DecodeSlice, guaranteed by Planner):
//  - fragment txn indices are < txns size and non-decreasing within each EQ; within one EQ the
//    fragments of one txn are in FragOpBefore order; fragments per txn match
//    TxnContext::fragments;
//  - slot ranges are laid out back to back in txn order: txn i's dependency slots are
//    [dep_begin, dep_begin + deps) with dep_begin = the deps of txns before it (likewise
//    read_begin / reads), so no two txns share a slot; dep_slots and read_slots are the totals.
//    The encoding carries only the counts (the beginnings follow), so it cannot express shared
//    slots at all;
//  - every dependency slot has exactly one kDepRead and one kDepWrite, of its own txn and the
//    same op; every read slot exactly one kRead of its own txn; no other fragment names a slot.
// The op order is what makes dependency waits deadlock-free: every executor runs the fragments
// of a txn in op order, and a wait at (txn t, op i) is for the read half of (t, i), which its
// executor reaches without waiting on anything at or after (t, i). Two txns that shared slots
// "crosswise" would break this; disjoint ranges rule it out.
// ValidateSlice adds what a decoder cannot know: the EQ count and the key -> range mapping of the
// executing node, and which (batch, planner) was expected. A slice that passes both never makes
// an executor wait forever.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/key_map.h"
#include "storage/txn.h"

namespace qrstore::planner {

// The op kinds of storage::OpKind (same values, checked below) plus the engine-internal kinds:
// kDepRead (the y half of a kDepWrite) and a row's kDepSend / kDepRecv.
enum class FragKind : uint8_t {
  kRead = 0,
  kUpdate = 1,
  kDepWrite = 2,
  kAbortIf = 3,
  kDebit = 4,
  kCredit = 5,
  kDepRead = 6,
  // Row sub-slices only (PlannedSlice::row; docs/partitioned-rows.md): the halves of an
  // x <- y op whose keys live on different partitions. kDepSend reads y and sends its value to
  // partition `arg`, into dependency slot `slot` of that partition's sub-slice; kDepRecv is the
  // write half, on its own slot, fed by the row instead of a local kDepRead.
  kDepSend = 7,
  kDepRecv = 8,
};
// A fragment of an op keeps the op's kind by value (the planner casts one to the other): each
// shared value is checked here, at compile time, and the first engine-internal kind follows
// the last op kind.
static_assert(static_cast<uint8_t>(FragKind::kRead) == static_cast<uint8_t>(storage::OpKind::kRead));
static_assert(static_cast<uint8_t>(FragKind::kUpdate) == static_cast<uint8_t>(storage::OpKind::kUpdate));
static_assert(static_cast<uint8_t>(FragKind::kDepWrite) == static_cast<uint8_t>(storage::OpKind::kDepWrite));
static_assert(static_cast<uint8_t>(FragKind::kAbortIf) == static_cast<uint8_t>(storage::OpKind::kAbortIf));
static_assert(static_cast<uint8_t>(FragKind::kDebit) == static_cast<uint8_t>(storage::OpKind::kDebit));
static_assert(static_cast<uint8_t>(FragKind::kCredit) == static_cast<uint8_t>(storage::OpKind::kCredit));
static_assert(static_cast<uint8_t>(FragKind::kDepRead) == storage::kMaxOpKind + 1);
constexpr uint8_t kMaxFragKind = 8;

inline bool IsWriteFrag(FragKind k) {
  return k == FragKind::kUpdate || k == FragKind::kDepWrite || k == FragKind::kDebit || k == FragKind::kCredit ||
         k == FragKind::kDepRecv;
}
inline bool MayAbortFrag(FragKind k) { return k == FragKind::kAbortIf || k == FragKind::kDebit; }

// One op of one transaction, on one key of this EQ's range. 32 bytes, contiguous in an EQ.
struct Fragment {
  storage::Key key = 0;
  uint64_t arg = 0;       // kAbortIf threshold, kDebit/kCredit amount; kDepSend: partition
  uint32_t txn = 0;       // index of the transaction in the slice
  uint32_t slot = 0;      // kDepRead / kDepWrite / kDepRecv: dependency slot; kRead: read slot;
                          // kDepSend: the receiving sub-slice's slot; else 0
  uint32_t op = 0;        // index of the op in the transaction (both halves of a kDepWrite)
  FragKind kind = FragKind::kRead;
};

// Execution order of two fragments of the same transaction: by op, the kDepRead half of an
// op before its kDepWrite half.
inline bool FragOpBefore(const Fragment& a, const Fragment& b) {
  return a.op < b.op || (a.op == b.op && a.kind == FragKind::kDepRead && b.kind == FragKind::kDepWrite);
}

// Transaction context: what the commit stage needs, plus counts that let a remote executor
// or a decoder check completeness.
struct TxnContext {
  // Ordered so that the 4-byte and 1-byte fields share 8-byte words: the
  // planner writes one per txn, the executors read one per fragment, the commit one per txn.
  uint64_t txn_id = 0;
  uint32_t client = 0;
  uint32_t fragments = 0;  // fragments over all EQs of the slice
  int64_t submit_ns = 0;
  uint32_t write_ops = 0;
  uint32_t dep_begin = 0;  // its dependency slots: [dep_begin, dep_begin + deps)
  uint32_t deps = 0;
  uint32_t read_begin = 0;  // its read slots: [read_begin, read_begin + reads), in op order
  uint32_t reads = 0;
  // Its index in the planning (home) node's slice: the txn's id across a row, with (batch,
  // planner). The slice's own index except in row sub-slices, which list a subset.
  uint32_t home_index = 0;
  bool may_abort = false;  // has a kAbortIf or kDebit
  // Txn::history and its position: the planning node's only (not encoded, like submit_ns).
  bool history = false;
  uint32_t history_planner = 0;
  // Client sessions (planner/session_table.h): Txn::session and Txn::seq; 0, 0 for none.
  uint64_t session = 0;
  uint64_t seq = 0;
  uint64_t history_batch = 0;
  uint32_t history_index = 0;
};
static_assert(sizeof(TxnContext) == 88, "TxnContext's layout: see the comment on its fields");

// replication.point = writes (docs/replication-points.md): what a follower's slice carries
// instead of EQs to run. Its txns' fates as the leader's execution decided them, and in slice
// planner 0 the last image of every record the batch wrote, by executor range: keys[r] in
// increasing key order, images[r] their records back to back (record size each).
struct SliceWrites {
  bool given = false;                           // the slice is one of these (its EQs are empty)
  std::vector<uint8_t> fates;                   // [txn]: executor::Fate values (0 commit, 1 logic)
  std::vector<std::vector<storage::Key>> keys;  // [range]
  std::vector<std::string> images;              // [range]
  void Clear();                                 // keeps capacity
};

struct PlannedSlice {
  uint64_t batch = 0;
  uint32_t planner = 0;      // priority: lower = earlier in the global order
  uint32_t dep_slots = 0;    // dependency slots used by this slice
  uint32_t read_slots = 0;   // read slots (kRead fragments) of this slice
  bool may_abort = false;    // any txn may abort by logic (a row sub-slice: any txn of its home slice)
  // A row sub-slice S(batch, planner -> partition) (docs/partitioned-rows.md): the fragments a
  // home node planned for one partition of a partitioned row. Its txns are a subset of the
  // home slice (home_index strictly increasing), and it may hold kDepSend / kDepRecv.
  bool row = false;
  std::vector<TxnContext> txns;
  std::vector<std::vector<Fragment>> eqs;  // one per executor range
  SliceWrites writes;                      // replication.point = writes, a follower's: see above

  // Empties the slice for reuse, keeping vector capacity; `ranges` EQs.
  void Reset(uint64_t batch_id, uint32_t planner_id, uint32_t ranges);
  size_t FragmentCount() const;
};

bool operator==(const Fragment& a, const Fragment& b);
bool operator==(const TxnContext& a, const TxnContext& b);
bool operator==(const PlannedSlice& a, const PlannedSlice& b);

// Upper bounds that a decoder enforces (a slice beyond them is corrupt, not just big).
constexpr uint32_t kMaxRanges = 4096;
constexpr uint32_t kMaxPartitions = 4096;
constexpr uint32_t kMaxSliceTxns = 1u << 24;

// Bytes: magic "QS2", then varints and fixed-width fields (common/codec.h). Row sub-slices set
// a flag bit in the header and add each txn's home_index (as a delta); other slices encode
// exactly as before row sub-slices existed. Keys are varints
// (a few bytes for real key spaces). TxnContext::submit_ns is not encoded (the planning node's
// latency bookkeeping): a decoded slice has 0 there.
//
// kWithoutReads encodes the slice a replica needs: the same slice minus its kRead fragments
// (read_slots and every txn's reads 0, fragments counted without them). A plain read changes
// no record and feeds no other fragment (values flow only through kDepRead, and kAbortIf and
// kDebit read their own records), so running it gives the same state, digest and fates; only
// the read values, which only the planning node returns to clients, are missing. For STAR's
// YCSB (80% reads) that drops a large share of the bytes. Not for a row sub-slice that may abort:
// there a read is an access that the cascade rule counts (executor/row_resolver.h: a txn that
// read what an aborted one wrote aborts too), so the fates need it.
enum class SliceEncoding { kFull, kWithoutReads };
inline constexpr char kSliceMagic[3] = {'Q', 'S', '2'};  // the first bytes of every encoding
std::string EncodeSlice(const PlannedSlice& slice, SliceEncoding how = SliceEncoding::kFull);
// Rejects truncated input, trailing bytes, bad counts, unknown kinds and every broken invariant
// listed above with kCorruption. `out` is reused (its capacity kept).
Status DecodeSlice(std::string_view bytes, PlannedSlice* out);

// Where a node sits in a partitioned row: the row's key -> partition mapping and its own
// partition. Nodes outside partitioned rows pass none.
struct RowPlace {
  storage::KeyMapper partitions;
  uint32_t partition = 0;
};

// The executing node's checks on a decoded slice, before any executor sees it: it is slice
// (batch, planner), it has one EQ per executor range, and every fragment's key belongs to its
// EQ's range. In a row (`row` given) the slice must be a row sub-slice, every key must be in
// this node's partition and every kDepSend must name another partition of the row; outside a
// row, row sub-slices are refused (nothing would feed a kDepRecv: it would wait forever).
// kCorruption naming the batch, planner and what is wrong.
Status ValidateSlice(const PlannedSlice& slice, const storage::KeyMapper& ranges, uint64_t batch, uint32_t planner,
                     const RowPlace* row = nullptr);

}  // namespace qrstore::planner
