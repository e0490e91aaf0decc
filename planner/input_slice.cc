#include "planner/input_slice.h"

#include <cstring>

#include "common/codec.h"
#include "planner/replica_encoder.h"

namespace qrstore::planner {

namespace {
constexpr size_t kV = Writer::kMaxVarintBytes;
// Smallest encodings: a txn is five varints, an op a kind byte, its key and its arg.
constexpr size_t kMinTxnBytes = 5;
constexpr size_t kMinOpBytes = 3;

bool HasSrcKey(storage::OpKind k) { return k == storage::OpKind::kDepWrite; }
Status Corrupt(const std::string& what) { return Status::Corruption("input slice: " + what); }
}  // namespace

std::string EncodeInputSlice(uint64_t batch, uint32_t planner, const std::vector<storage::Txn>& txns) {
  // Sized for the worst case and written through a raw pointer, then cut to its real size.
  size_t bound = sizeof kInputMagic + 3 * kV + ReplicaEncoder::kHeaderRoomBytes;
  for (const storage::Txn& t : txns) bound += 5 * kV + t.ops.size() * (1 + 3 * kV);
  std::string out(bound, '\0');
  char* const begin = out.data();
  char* p = begin;
  std::memcpy(p, kInputMagic, sizeof kInputMagic);
  p += sizeof kInputMagic;
  p = Writer::EncodeVarint(p, batch);
  p = Writer::EncodeVarint(p, planner);
  p = Writer::EncodeVarint(p, txns.size());
  for (const storage::Txn& t : txns) {
    p = Writer::EncodeVarint(p, t.id);
    p = Writer::EncodeVarint(p, t.client);
    p = Writer::EncodeVarint(p, t.session);
    p = Writer::EncodeVarint(p, t.seq);
    p = Writer::EncodeVarint(p, t.ops.size());
    for (const storage::Op& op : t.ops) {
      *p++ = static_cast<char>(op.kind);
      p = Writer::EncodeVarint(p, op.key);
      if (HasSrcKey(op.kind)) p = Writer::EncodeVarint(p, op.src_key);
      p = Writer::EncodeVarint(p, op.arg);
    }
  }
  QR_CHECK_LE(static_cast<size_t>(p - begin) + ReplicaEncoder::kHeaderRoomBytes, bound);
  out.resize(static_cast<size_t>(p - begin));  // keeps the capacity: room for the layers' headers
  return out;
}

bool IsInputSlice(std::string_view bytes) {
  return bytes.size() >= sizeof kInputMagic && bytes.substr(0, sizeof kInputMagic) == std::string_view(kInputMagic, 3);
}

Status DecodeInputSlice(std::string_view bytes, uint64_t* batch, uint32_t* planner, std::vector<storage::Txn>* txns) {
  if (!IsInputSlice(bytes)) return Corrupt("bad magic");
  Reader r(bytes.substr(sizeof kInputMagic));
  uint64_t b = 0, p = 0, n = 0;
  r.GetVarint(&b);
  r.GetVarint(&p);
  if (!r.GetCount(&n, kMinTxnBytes)) return Corrupt("truncated header or a txn count beyond the input");
  if (p > UINT32_MAX) return Corrupt("planner " + std::to_string(p) + " out of range");
  txns->resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    storage::Txn& t = (*txns)[i];
    uint64_t client = 0, nops = 0;
    r.GetVarint(&t.id);
    r.GetVarint(&client);
    r.GetVarint(&t.session);
    r.GetVarint(&t.seq);
    if (!r.GetCount(&nops, kMinOpBytes)) return Corrupt("txn " + std::to_string(i) + " truncated");
    if (client > UINT32_MAX) return Corrupt("txn " + std::to_string(i) + ": client out of range");
    if (nops > kMaxInputTxnOps) return Corrupt("txn " + std::to_string(i) + ": " + std::to_string(nops) + " ops");
    t.client = static_cast<uint32_t>(client);
    t.submit_ns = 0;
    t.history = false;
    t.history_batch = 0;
    t.history_planner = 0;
    t.history_index = 0;
    t.ops.resize(nops);
    for (storage::Op& op : t.ops) {
      uint8_t kind = 0;
      r.GetU8(&kind);
      if (kind > storage::kMaxOpKind) return Corrupt("txn " + std::to_string(i) + ": unknown op kind " + std::to_string(kind));
      op.kind = static_cast<storage::OpKind>(kind);
      r.GetVarint(&op.key);
      op.src_key = 0;
      if (HasSrcKey(op.kind)) r.GetVarint(&op.src_key);
      r.GetVarint(&op.arg);
    }
    if (!r.ok()) return Corrupt("txn " + std::to_string(i) + " truncated");
  }
  if (!r.ok()) return Corrupt("truncated");
  if (!r.done()) return Corrupt(std::to_string(r.remaining()) + " trailing bytes");
  *batch = b;
  *planner = static_cast<uint32_t>(p);
  return Status::Ok();
}

}  // namespace qrstore::planner
