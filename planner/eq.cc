#include "planner/eq.h"

#include <string>

#include "common/codec.h"

namespace qrstore::planner {

namespace {
constexpr char kMagic[3] = {'Q', 'S', '1'};
// Smallest encodings, for GetCount's guard against corrupt counts.
constexpr size_t kMinTxnBytes = 8 + 1 + 8 + 1 + 1 + 1 + 1 + 1;
constexpr size_t kMinFragBytes = 1 + 1 + 8 + 1 + 1 + 1;

Status Corrupt(const std::string& what) { return Status::Corruption("planned slice: " + what); }
}  // namespace

void PlannedSlice::Reset(uint64_t batch_id, uint32_t planner_id, uint32_t ranges) {
  batch = batch_id;
  planner = planner_id;
  dep_slots = 0;
  may_abort = false;
  txns.clear();
  eqs.resize(ranges);
  for (auto& eq : eqs) eq.clear();
}

size_t PlannedSlice::FragmentCount() const {
  size_t n = 0;
  for (const auto& eq : eqs) n += eq.size();
  return n;
}

bool operator==(const Fragment& a, const Fragment& b) {
  return a.key == b.key && a.arg == b.arg && a.txn == b.txn && a.dep == b.dep && a.op == b.op && a.kind == b.kind;
}
bool operator==(const TxnContext& a, const TxnContext& b) {
  return a.txn_id == b.txn_id && a.client == b.client && a.submit_ns == b.submit_ns && a.fragments == b.fragments &&
         a.write_ops == b.write_ops && a.dep_begin == b.dep_begin && a.deps == b.deps && a.may_abort == b.may_abort;
}
bool operator==(const PlannedSlice& a, const PlannedSlice& b) {
  return a.batch == b.batch && a.planner == b.planner && a.dep_slots == b.dep_slots && a.may_abort == b.may_abort &&
         a.txns == b.txns && a.eqs == b.eqs;
}

std::string EncodeSlice(const PlannedSlice& s) {
  Writer w(64 + s.txns.size() * 24 + s.FragmentCount() * 14);
  w.PutRaw(kMagic, sizeof kMagic);
  w.PutVarint(s.batch);
  w.PutVarint(s.planner);
  w.PutVarint(s.dep_slots);
  w.PutU8(s.may_abort ? 1 : 0);
  w.PutVarint(s.txns.size());
  for (const TxnContext& t : s.txns) {
    w.PutU64(t.txn_id);
    w.PutVarint(t.client);
    w.PutI64(t.submit_ns);
    w.PutVarint(t.fragments);
    w.PutVarint(t.write_ops);
    w.PutVarint(t.dep_begin);
    w.PutVarint(t.deps);
    w.PutU8(t.may_abort ? 1 : 0);
  }
  w.PutVarint(s.eqs.size());
  for (const auto& eq : s.eqs) {
    w.PutVarint(eq.size());
    // Txn indices are non-decreasing: store the delta, usually one byte.
    uint32_t prev = 0;
    for (const Fragment& f : eq) {
      w.PutU8(static_cast<uint8_t>(f.kind));
      w.PutVarint(f.txn - prev);
      prev = f.txn;
      w.PutU64(f.key);
      w.PutVarint(f.arg);
      w.PutVarint(f.dep);
      w.PutVarint(f.op);
    }
  }
  return w.Release();
}

Status DecodeSlice(std::string_view bytes, PlannedSlice* out) {
  Reader r(bytes);
  std::string_view magic;
  if (!r.GetRaw(sizeof kMagic, &magic) || magic != std::string_view(kMagic, sizeof kMagic)) {
    return Corrupt("bad magic");
  }
  uint64_t batch = 0, planner = 0, dep_slots = 0, ntxns = 0, nranges = 0;
  uint8_t may_abort = 0;
  r.GetVarint(&batch);
  r.GetVarint(&planner);
  r.GetVarint(&dep_slots);
  r.GetU8(&may_abort);
  if (!r.ok()) return Corrupt("truncated header");
  if (planner > UINT32_MAX || dep_slots > UINT32_MAX || may_abort > 1) return Corrupt("bad header field");
  // Each slot needs two fragments later on: bounds the allocation below on corrupt input.
  if (dep_slots > r.remaining() / (2 * kMinFragBytes)) return Corrupt("dependency slot count exceeds input");
  if (!r.GetCount(&ntxns, kMinTxnBytes)) return Corrupt("bad or truncated txn count");
  if (ntxns > kMaxSliceTxns) return Corrupt("too many txns");
  out->batch = batch;
  out->planner = static_cast<uint32_t>(planner);
  out->dep_slots = static_cast<uint32_t>(dep_slots);
  out->may_abort = may_abort != 0;
  out->txns.resize(ntxns);
  bool any_may_abort = false;
  for (TxnContext& t : out->txns) {
    uint64_t client = 0, frags = 0, writes = 0, dep_begin = 0, deps = 0;
    uint8_t ma = 0;
    r.GetU64(&t.txn_id);
    r.GetVarint(&client);
    r.GetI64(&t.submit_ns);
    r.GetVarint(&frags);
    r.GetVarint(&writes);
    r.GetVarint(&dep_begin);
    r.GetVarint(&deps);
    r.GetU8(&ma);
    if (!r.ok()) return Corrupt("truncated txn context");
    if (client > UINT32_MAX || frags > UINT32_MAX || writes > frags || ma > 1) return Corrupt("bad txn context");
    if (dep_begin > dep_slots || deps > dep_slots - dep_begin) return Corrupt("txn dependency slots out of range");
    t.client = static_cast<uint32_t>(client);
    t.fragments = static_cast<uint32_t>(frags);
    t.write_ops = static_cast<uint32_t>(writes);
    t.dep_begin = static_cast<uint32_t>(dep_begin);
    t.deps = static_cast<uint32_t>(deps);
    t.may_abort = ma != 0;
    any_may_abort |= t.may_abort;
  }
  if (any_may_abort != out->may_abort) return Corrupt("may_abort flag disagrees with its txns");
  if (!r.GetCount(&nranges, 1) || nranges == 0 || nranges > kMaxRanges) return Corrupt("bad range count");
  out->eqs.resize(nranges);
  // Fragments per txn, to check against the contexts (a dropped or duplicated fragment
  // would silently change the result).
  std::vector<uint32_t> seen(ntxns, 0);
  // Every dependency slot must have exactly one reader and one writer at the same op, and
  // within one EQ a txn's fragments must be in op order. That is what the planner produces and
  // what makes dependency waits deadlock-free: a decoded slice cannot make executors hang.
  std::vector<uint8_t> dep_reads(dep_slots, 0), dep_writes(dep_slots, 0);
  std::vector<uint32_t> dep_op(dep_slots, 0);
  for (auto& eq : out->eqs) {
    uint64_t n = 0;
    if (!r.GetCount(&n, kMinFragBytes)) return Corrupt("bad or truncated fragment count");
    eq.resize(n);
    uint64_t txn = 0;
    const Fragment* prev = nullptr;
    for (Fragment& f : eq) {
      uint8_t kind = 0;
      uint64_t delta = 0, dep = 0, op = 0;
      r.GetU8(&kind);
      r.GetVarint(&delta);
      r.GetU64(&f.key);
      r.GetVarint(&f.arg);
      r.GetVarint(&dep);
      r.GetVarint(&op);
      if (!r.ok()) return Corrupt("truncated fragment");
      if (kind > kMaxFragKind) return Corrupt("unknown fragment kind " + std::to_string(kind));
      if (op > UINT32_MAX) return Corrupt("bad op index");
      txn += delta;
      if (txn >= ntxns) return Corrupt("fragment txn index out of range");
      f.kind = static_cast<FragKind>(kind);
      f.txn = static_cast<uint32_t>(txn);
      f.op = static_cast<uint32_t>(op);
      if (prev != nullptr && prev->txn == f.txn && !FragOpBefore(*prev, f)) {
        return Corrupt("fragments of a txn out of op order");
      }
      prev = &f;
      const TxnContext& tc = out->txns[txn];
      if (f.kind == FragKind::kDepRead || f.kind == FragKind::kDepWrite) {
        if (dep < tc.dep_begin || dep >= uint64_t{tc.dep_begin} + tc.deps) return Corrupt("dependency slot out of range");
        uint8_t& count = f.kind == FragKind::kDepRead ? dep_reads[dep] : dep_writes[dep];
        if (++count > 1) return Corrupt("dependency slot used twice");
        if (dep_reads[dep] + dep_writes[dep] == 2 && dep_op[dep] != f.op) {
          return Corrupt("dependency halves at different ops");
        }
        dep_op[dep] = f.op;
      } else if (dep != 0) {
        return Corrupt("dependency slot on a fragment without a dependency");
      }
      if (MayAbortFrag(f.kind) && !tc.may_abort) return Corrupt("abortable fragment in a txn without may_abort");
      f.dep = static_cast<uint32_t>(dep);
      ++seen[txn];
    }
  }
  if (!r.done()) return Corrupt("trailing bytes");
  for (size_t d = 0; d < dep_slots; ++d) {
    if (dep_reads[d] != 1 || dep_writes[d] != 1) return Corrupt("dependency slot without reader or writer");
  }
  for (size_t i = 0; i < ntxns; ++i) {
    if (seen[i] != out->txns[i].fragments) return Corrupt("fragment count mismatch for txn " + std::to_string(i));
  }
  return Status::Ok();
}

}  // namespace qrstore::planner
