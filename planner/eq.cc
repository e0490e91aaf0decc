#include "planner/eq.h"

#include <cstring>
#include <memory>
#include <string>

#include "common/codec.h"
#include "planner/slice_records.h"

namespace qrstore::planner {

namespace {
// Smallest encodings, for GetCount's guard against corrupt counts.
constexpr size_t kMinTxnBytes = 8 + 1 + 1 + 1 + 1 + 1 + 1;
constexpr size_t kMinFragBytes = 1 + 1 + 1 + 1 + 1 + 1;

Status Corrupt(const std::string& what) { return Status::Corruption("planned slice: " + what); }
}  // namespace

void PlannedSlice::Reset(uint64_t batch_id, uint32_t planner_id, uint32_t ranges) {
  batch = batch_id;
  planner = planner_id;
  dep_slots = 0;
  read_slots = 0;
  may_abort = false;
  row = false;
  txns.clear();
  eqs.resize(ranges);
  for (auto& eq : eqs) eq.clear();
  if (writes.given) writes.Clear();
}

void SliceWrites::Clear() {
  given = false;
  fates.clear();
  for (auto& k : keys) k.clear();
  for (auto& i : images) i.clear();
}

size_t PlannedSlice::FragmentCount() const {
  size_t n = 0;
  for (const auto& eq : eqs) n += eq.size();
  return n;
}

bool operator==(const Fragment& a, const Fragment& b) {
  return a.key == b.key && a.arg == b.arg && a.txn == b.txn && a.slot == b.slot && a.op == b.op && a.kind == b.kind;
}
bool operator==(const TxnContext& a, const TxnContext& b) {
  return a.txn_id == b.txn_id && a.client == b.client && a.submit_ns == b.submit_ns && a.fragments == b.fragments &&
         a.write_ops == b.write_ops && a.dep_begin == b.dep_begin && a.deps == b.deps && a.read_begin == b.read_begin &&
         a.reads == b.reads && a.may_abort == b.may_abort && a.home_index == b.home_index &&
         a.session == b.session && a.seq == b.seq && a.history == b.history &&
         a.history_batch == b.history_batch && a.history_planner == b.history_planner &&
         a.history_index == b.history_index;
}
bool operator==(const PlannedSlice& a, const PlannedSlice& b) {
  return a.batch == b.batch && a.planner == b.planner && a.dep_slots == b.dep_slots &&
         a.read_slots == b.read_slots && a.may_abort == b.may_abort && a.row == b.row && a.txns == b.txns &&
         a.eqs == b.eqs && a.writes.given == b.writes.given &&
         (!a.writes.given || (a.writes.fates == b.writes.fates && a.writes.keys == b.writes.keys &&
                              a.writes.images == b.writes.images));
}

std::string EncodeSlice(const PlannedSlice& s, SliceEncoding how) {
  namespace rec = slice_records;
  const bool with_reads = how == SliceEncoding::kFull;
  // Written through a raw pointer into a per-thread scratch buffer sized for the worst case (a
  // planner thread encodes a slice per batch, a few bytes per fragment, so a size check per byte
  // would cost more than the writes themselves), then copied out once at its real size.
  const size_t bound = rec::kMaxHeaderBytes + s.txns.size() * rec::kMaxTxnBytes + rec::kV + s.eqs.size() * rec::kV +
                       s.FragmentCount() * rec::kMaxFragBytes;
  thread_local std::unique_ptr<char[]> scratch;
  thread_local size_t capacity = 0;
  if (capacity < bound) {
    scratch.reset(new char[bound]);  // uninitialized: untouched pages cost nothing
    capacity = bound;
  }
  char* const begin = scratch.get();
  char* p = rec::PutHeader(begin, s, with_reads, s.txns.size());
  uint32_t prev_home = 0;
  for (const TxnContext& t : s.txns) {
    p = rec::PutTxn(p, t, with_reads, s.row, prev_home);
    prev_home = t.home_index;
  }
  p = Writer::EncodeVarint(p, s.eqs.size());
  for (const auto& eq : s.eqs) {
    size_t kept = eq.size();
    if (!with_reads) {
      for (const Fragment& f : eq) kept -= f.kind == FragKind::kRead ? 1 : 0;
    }
    p = Writer::EncodeVarint(p, kept);
    uint32_t prev = 0;
    for (const Fragment& f : eq) {
      if (!with_reads && f.kind == FragKind::kRead) continue;
      p = rec::PutFragment(p, f, prev);
      prev = f.txn;
    }
  }
  QR_CHECK_LE(static_cast<size_t>(p - begin), bound);
  return std::string(begin, static_cast<size_t>(p - begin));
}

namespace {

// The header: magic, batch, planner, slot counts, flags and txn count, each bounded by the
// bytes left. On success sets out's header fields and sizes out->txns; on failure writes nothing.
Status DecodeSliceHeader(Reader& r, PlannedSlice* out) {
  std::string_view magic;
  if (!r.GetRaw(sizeof kSliceMagic, &magic) || magic != std::string_view(kSliceMagic, sizeof kSliceMagic)) {
    return Corrupt("bad magic");
  }
  uint64_t batch = 0, planner = 0, dep_slots = 0, read_slots = 0, ntxns = 0;
  uint8_t flags = 0;
  r.GetVarint(&batch);
  r.GetVarint(&planner);
  r.GetVarint(&dep_slots);
  r.GetVarint(&read_slots);
  r.GetU8(&flags);
  if (!r.ok()) return Corrupt("truncated header");
  constexpr uint8_t kKnownFlags = slice_records::kFlagMayAbort | slice_records::kFlagRow;
  if (planner > UINT32_MAX || dep_slots > UINT32_MAX || read_slots > UINT32_MAX || (flags & ~kKnownFlags) != 0) {
    return Corrupt("bad header field");
  }
  const bool may_abort = (flags & slice_records::kFlagMayAbort) != 0;
  const bool row = (flags & slice_records::kFlagRow) != 0;
  // Each slot needs two fragments later on (one for a row sub-slice's kDepRecv): bounds the
  // allocations below on corrupt input.
  if (dep_slots > r.remaining() / ((row ? 1 : 2) * kMinFragBytes)) return Corrupt("dependency slot count exceeds input");
  if (read_slots > r.remaining() / kMinFragBytes) return Corrupt("read slot count exceeds input");
  if (!r.GetCount(&ntxns, kMinTxnBytes)) return Corrupt("bad or truncated txn count");
  if (ntxns > kMaxSliceTxns) return Corrupt("too many txns");
  out->batch = batch;
  out->planner = static_cast<uint32_t>(planner);
  out->dep_slots = static_cast<uint32_t>(dep_slots);
  out->read_slots = static_cast<uint32_t>(read_slots);
  out->may_abort = may_abort;
  out->row = row;
  out->txns.resize(ntxns);
  return Status::Ok();
}

// The txn contexts, after the header. Slot ranges are back to back in txn order, so no two txns
// share a slot; together they must own every slot of the header's counts, and the slice's
// may_abort flag must agree with its txns'.
Status DecodeTxnContexts(Reader& r, PlannedSlice* out) {
  const size_t ntxns = out->txns.size();
  const uint64_t dep_slots = out->dep_slots, read_slots = out->read_slots;
  const bool row = out->row;
  bool any_may_abort = false;
  uint64_t next_dep = 0, next_read = 0;
  for (size_t i = 0; i < ntxns; ++i) {
    TxnContext& t = out->txns[i];
    uint64_t client = 0, frags = 0, writes = 0, deps = 0, reads = 0;
    uint8_t ma = 0;
    r.GetU64(&t.txn_id);
    r.GetVarint(&client);
    r.GetVarint(&frags);
    r.GetVarint(&writes);
    r.GetVarint(&deps);
    r.GetVarint(&reads);
    r.GetU8(&ma);
    uint64_t session = 0, seq = 0;
    if ((ma & slice_records::kTxnSession) != 0) {
      r.GetVarint(&session);
      r.GetVarint(&seq);
      // Canonical: a record with the flag has a session or a seq (else it would not be set).
      if (r.ok() && session == 0 && seq == 0) return Corrupt("txn " + std::to_string(i) + ": empty session fields");
    }
    uint64_t home = i;
    if (row) {
      // Strictly increasing home indices: a delta of at least 1 after the first txn.
      uint64_t delta = 0;
      r.GetVarint(&delta);
      home = (i == 0 ? 0 : uint64_t{out->txns[i - 1].home_index}) + delta;
      if (r.ok() && ((i > 0 && delta == 0) || home > UINT32_MAX)) return Corrupt("bad home index");
    }
    if (!r.ok()) return Corrupt("truncated txn context");
    if (client > UINT32_MAX || frags > UINT32_MAX || writes > frags || ma > 3) return Corrupt("bad txn context");
    const uint64_t dep_begin = next_dep, read_begin = next_read;
    t.submit_ns = 0;
    if (deps > dep_slots - next_dep) {
      return Corrupt("txn " + std::to_string(i) + ": dependency slots beyond the slice's count");
    }
    if (reads > read_slots - next_read) {
      return Corrupt("txn " + std::to_string(i) + ": read slots beyond the slice's count");
    }
    next_dep += deps;
    next_read += reads;
    t.client = static_cast<uint32_t>(client);
    t.fragments = static_cast<uint32_t>(frags);
    t.write_ops = static_cast<uint32_t>(writes);
    t.dep_begin = static_cast<uint32_t>(dep_begin);
    t.deps = static_cast<uint32_t>(deps);
    t.read_begin = static_cast<uint32_t>(read_begin);
    t.reads = static_cast<uint32_t>(reads);
    t.may_abort = (ma & slice_records::kTxnMayAbort) != 0;
    t.session = session;
    t.seq = seq;
    t.home_index = static_cast<uint32_t>(home);
    any_may_abort |= t.may_abort;
  }
  if (next_dep != dep_slots) return Corrupt("dependency slots not all owned by txns");
  if (next_read != read_slots) return Corrupt("read slots not all owned by txns");
  // A row sub-slice carries its home slice's flag: set also when none of its own txns may abort.
  if (row ? (any_may_abort && !out->may_abort) : any_may_abort != out->may_abort) {
    return Corrupt("may_abort flag disagrees with its txns");
  }
  return Status::Ok();
}

// What the fragments of a slice use, counted while decoding them and checked once all are read:
// fragments per txn (to check against the contexts: a dropped or duplicated fragment would
// silently change the result), and the readers, writers and op of each slot.
struct FragmentTally {
  std::vector<uint32_t> seen;
  std::vector<uint8_t> dep_reads, dep_writes, dep_recv, read_used;
  std::vector<uint32_t> dep_op;
};

// One EQ's fragments, each checked against its txn's context and counted in `tally`.
inline Status DecodeEq(Reader& r, const std::vector<TxnContext>& txns, bool row, std::vector<Fragment>* eq,
                       FragmentTally& tally) {
  const uint64_t ntxns = txns.size();
  uint64_t n = 0;
  if (!r.GetCount(&n, kMinFragBytes)) return Corrupt("bad or truncated fragment count");
  eq->resize(n);
  uint64_t txn = 0;
  const Fragment* prev = nullptr;
  for (Fragment& f : *eq) {
    uint8_t kind = 0;
    uint64_t delta = 0, slot = 0, op = 0;
    r.GetU8(&kind);
    r.GetVarint(&delta);
    r.GetVarint(&f.key);
    r.GetVarint(&f.arg);
    r.GetVarint(&slot);
    r.GetVarint(&op);
    if (!r.ok()) return Corrupt("truncated fragment");
    if (kind > kMaxFragKind) return Corrupt("unknown fragment kind " + std::to_string(kind));
    if (op > UINT32_MAX) return Corrupt("bad op index");
    txn += delta;
    if (txn >= ntxns) return Corrupt("fragment txn index out of range");
    f.kind = static_cast<FragKind>(kind);
    if (!row && (f.kind == FragKind::kDepSend || f.kind == FragKind::kDepRecv)) {
      return Corrupt("fragment kind " + std::to_string(kind) + " outside a row sub-slice");
    }
    f.txn = static_cast<uint32_t>(txn);
    f.op = static_cast<uint32_t>(op);
    if (prev != nullptr && prev->txn == f.txn && !FragOpBefore(*prev, f)) {
      return Corrupt("fragments of a txn out of op order");
    }
    prev = &f;
    const TxnContext& tc = txns[txn];
    if (f.kind == FragKind::kDepRead || f.kind == FragKind::kDepWrite || f.kind == FragKind::kDepRecv) {
      if (slot < tc.dep_begin || slot >= uint64_t{tc.dep_begin} + tc.deps) return Corrupt("dependency slot out of range");
      uint8_t& count = f.kind == FragKind::kDepRead ? tally.dep_reads[slot] : tally.dep_writes[slot];
      if (++count > 1) return Corrupt("dependency slot used twice");
      if (f.kind == FragKind::kDepRecv) tally.dep_recv[slot] = 1;
      if (tally.dep_reads[slot] + tally.dep_writes[slot] == 2 && tally.dep_op[slot] != f.op) {
        return Corrupt("dependency halves at different ops");
      }
      tally.dep_op[slot] = f.op;
    } else if (f.kind == FragKind::kRead) {
      if (slot < tc.read_begin || slot >= uint64_t{tc.read_begin} + tc.reads) return Corrupt("read slot out of range");
      if (++tally.read_used[slot] > 1) return Corrupt("read slot used twice");
    } else if (f.kind == FragKind::kDepSend) {
      // Its slot and partition are the receiver's: checked there (and the partition by
      // ValidateSlice against the row).
      if (slot > UINT32_MAX || f.arg >= kMaxPartitions) return Corrupt("bad dependency send");
    } else if (slot != 0) {
      return Corrupt("slot on a fragment that takes none");
    }
    if (MayAbortFrag(f.kind) && !tc.may_abort) return Corrupt("abortable fragment in a txn without may_abort");
    f.slot = static_cast<uint32_t>(slot);
    ++tally.seen[txn];
  }
  return Status::Ok();
}

// The EQs, after the txn contexts: their count, then each one's fragments.
Status DecodeEqs(Reader& r, PlannedSlice* out, FragmentTally& tally) {
  uint64_t nranges = 0;
  if (!r.GetCount(&nranges, 1) || nranges == 0 || nranges > kMaxRanges) return Corrupt("bad range count");
  out->eqs.resize(nranges);
  tally.seen.assign(out->txns.size(), 0);
  // Every dependency slot must have exactly one reader and one writer at the same op (its own
  // txn's: the slot lies in that txn's range), and within one EQ a txn's fragments must be in
  // op order. That is what the planner produces and what makes dependency waits deadlock-free.
  // A kDepRecv's slot has its write half here and its read half (a kDepSend) in another
  // partition's sub-slice.
  tally.dep_reads.assign(out->dep_slots, 0);
  tally.dep_writes.assign(out->dep_slots, 0);
  tally.dep_recv.assign(out->dep_slots, 0);
  tally.dep_op.assign(out->dep_slots, 0);
  tally.read_used.assign(out->read_slots, 0);
  for (auto& eq : out->eqs) QR_RETURN_IF_ERROR(DecodeEq(r, out->txns, out->row, &eq, tally));
  return Status::Ok();
}

// After the last EQ: no bytes left, every slot used in full, every txn's fragments all there.
Status CheckTally(const Reader& r, const PlannedSlice& s, const FragmentTally& tally) {
  if (!r.done()) return Corrupt("trailing bytes");
  for (size_t d = 0; d < s.dep_slots; ++d) {
    if (tally.dep_writes[d] != 1 || tally.dep_reads[d] + tally.dep_recv[d] != 1) {
      return Corrupt(tally.dep_recv[d] != 0 ? "dependency slot fed by the row and by a local read"
                                            : "dependency slot without reader or writer");
    }
  }
  for (size_t d = 0; d < s.read_slots; ++d) {
    if (tally.read_used[d] != 1) return Corrupt("read slot without its read");
  }
  for (size_t i = 0; i < s.txns.size(); ++i) {
    if (tally.seen[i] != s.txns[i].fragments) return Corrupt("fragment count mismatch for txn " + std::to_string(i));
  }
  return Status::Ok();
}

}  // namespace

Status DecodeSlice(std::string_view bytes, PlannedSlice* out) {
  Reader r(bytes);
  QR_RETURN_IF_ERROR(DecodeSliceHeader(r, out));
  QR_RETURN_IF_ERROR(DecodeTxnContexts(r, out));
  // Scratch reused per thread (a follower decodes a slice per batch and planner).
  thread_local FragmentTally tally;
  QR_RETURN_IF_ERROR(DecodeEqs(r, out, tally));
  return CheckTally(r, *out, tally);
}

Status ValidateSlice(const PlannedSlice& slice, const storage::KeyMapper& ranges, uint64_t batch, uint32_t planner,
                     const RowPlace* row) {
  const std::string where = "slice (batch " + std::to_string(batch) + ", planner " + std::to_string(planner) + "): ";
  if (slice.batch != batch || slice.planner != planner) {
    return Status::Corruption(where + "carries batch " + std::to_string(slice.batch) + ", planner " +
                              std::to_string(slice.planner));
  }
  if (slice.row != (row != nullptr)) {
    return Status::Corruption(where + (slice.row ? "a row sub-slice on a node outside a partitioned row"
                                                 : "not a row sub-slice, on a node of a partitioned row"));
  }
  if (slice.eqs.size() != ranges.buckets()) {
    return Status::Corruption(where + std::to_string(slice.eqs.size()) + " EQs for " +
                              std::to_string(ranges.buckets()) + " executor ranges");
  }
  for (uint32_t r = 0; r < slice.eqs.size(); ++r) {
    for (const Fragment& f : slice.eqs[r]) {
      if (ranges.Of(f.key) != r) {
        return Status::Corruption(where + "key " + std::to_string(f.key) + " of txn " + std::to_string(f.txn) +
                                  " is in EQ " + std::to_string(r) + " but belongs to range " +
                                  std::to_string(ranges.Of(f.key)));
      }
      if (row == nullptr) continue;
      if (row->partitions.Of(f.key) != row->partition) {
        return Status::Corruption(where + "key " + std::to_string(f.key) + " of txn " + std::to_string(f.txn) +
                                  " belongs to partition " + std::to_string(row->partitions.Of(f.key)) +
                                  ", not to this node's partition " + std::to_string(row->partition));
      }
      if (f.kind == FragKind::kDepSend && (f.arg >= row->partitions.buckets() || f.arg == row->partition)) {
        return Status::Corruption(where + "txn " + std::to_string(f.txn) + " sends a dependency to partition " +
                                  std::to_string(f.arg) + " (the row has " +
                                  std::to_string(row->partitions.buckets()) + ", this node is " +
                                  std::to_string(row->partition) + ")");
      }
    }
  }
  return Status::Ok();
}

}  // namespace qrstore::planner
