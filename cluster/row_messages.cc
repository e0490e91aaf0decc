#include "cluster/row_messages.h"

#include "common/codec.h"

namespace qrstore::cluster {

namespace {

constexpr char kMagic[2] = {'Q', 'R'};

Status Corrupt(const char* what, const std::string& defect) {
  return Status::Corruption(std::string("row message (") + what + "): " + defect);
}

Writer Begin(RowMsgKind kind, size_t reserve) {
  Writer w(reserve);
  w.PutRaw(kMagic, sizeof kMagic);
  w.PutU8(kRowMsgVersion);
  w.PutU8(static_cast<uint8_t>(kind));
  return w;
}

uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// Checks the frame header is `kind`'s and leaves `r` at the body.
Status Open(Reader* r, RowMsgKind kind, const char* what) {
  std::string_view magic;
  uint8_t version = 0, k = 0;
  if (!r->GetRaw(sizeof kMagic, &magic) || magic != std::string_view(kMagic, sizeof kMagic)) {
    return Corrupt(what, "bad magic");
  }
  if (!r->GetU8(&version) || !r->GetU8(&k)) return Corrupt(what, "truncated header");
  if (version != kRowMsgVersion) return Corrupt(what, "version " + std::to_string(version) + ", expected 1");
  if (k != static_cast<uint8_t>(kind)) return Corrupt(what, "kind " + std::to_string(k) + ", expected " +
                                                               std::to_string(static_cast<int>(kind)));
  return Status::Ok();
}

bool GetU32(Reader* r, uint32_t* out) {
  uint64_t v = 0;
  if (!r->GetVarint(&v) || v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace

std::string EncodeRowMessage(const RowSubSlice& m) {
  Writer w = Begin(RowMsgKind::kSubSlice, 32 + m.slice_bytes.size());
  w.PutVarint(m.batch);
  w.PutVarint(m.slice);
  w.PutVarint(m.from);
  w.PutBytes(m.slice_bytes);
  return w.Release();
}

std::string EncodeRowMessage(const RowDepValues& m) {
  Writer w = Begin(RowMsgKind::kDepValues, 32 + m.values.size() * 6);
  w.PutVarint(m.batch);
  w.PutVarint(m.slice);
  w.PutVarint(m.values.size());
  for (const RowDepValue& v : m.values) {
    w.PutVarint(v.slot);
    w.PutVarint(ZigZag(v.value));
  }
  return w.Release();
}

std::string EncodeRowMessage(const RowVotes& m) {
  Writer w = Begin(RowMsgKind::kVotes, 32 + m.ids.size() * 4);
  w.PutVarint(m.batch);
  w.PutVarint(m.from);
  w.PutVarint(m.round);
  w.PutVarint(m.ids.size());
  for (const executor::RowTxn& id : m.ids) {
    w.PutVarint(id.slice);
    w.PutVarint(id.home);
  }
  return w.Release();
}

Result<RowMsgKind> PeekRowMessage(std::string_view bytes) {
  if (bytes.size() < 4 || bytes.substr(0, 2) != std::string_view(kMagic, sizeof kMagic)) {
    return Corrupt("unknown", "bad magic or shorter than a header");
  }
  if (static_cast<uint8_t>(bytes[2]) != kRowMsgVersion) {
    return Corrupt("unknown", "version " + std::to_string(static_cast<uint8_t>(bytes[2])) + ", expected 1");
  }
  const auto k = static_cast<uint8_t>(bytes[3]);
  if (k < 1 || k > 3) return Corrupt("unknown", "unknown kind " + std::to_string(k));
  return static_cast<RowMsgKind>(k);
}

Status DecodeRowMessage(std::string_view bytes, RowSubSlice* out) {
  Reader r(bytes);
  QR_RETURN_IF_ERROR(Open(&r, RowMsgKind::kSubSlice, "sub-slice"));
  if (!r.GetVarint(&out->batch) || !GetU32(&r, &out->slice) || !GetU32(&r, &out->from)) {
    return Corrupt("sub-slice", "truncated or out-of-range header field");
  }
  if (out->from >= planner::kMaxPartitions) return Corrupt("sub-slice", "from partition " + std::to_string(out->from));
  if (!r.GetBytes(&out->slice_bytes)) return Corrupt("sub-slice", "truncated slice bytes");
  if (!r.done()) return Corrupt("sub-slice", "trailing bytes");
  return Status::Ok();
}

Status DecodeRowMessage(std::string_view bytes, RowDepValues* out) {
  Reader r(bytes);
  QR_RETURN_IF_ERROR(Open(&r, RowMsgKind::kDepValues, "dependency values"));
  uint64_t n = 0;
  if (!r.GetVarint(&out->batch) || !GetU32(&r, &out->slice)) return Corrupt("dependency values", "truncated header");
  if (!r.GetCount(&n, 2) || n > kMaxRowItems) return Corrupt("dependency values", "bad or truncated value count");
  out->values.resize(n);
  for (RowDepValue& v : out->values) {
    uint64_t z = 0;
    if (!GetU32(&r, &v.slot) || !r.GetVarint(&z)) return Corrupt("dependency values", "truncated or bad value");
    v.value = UnZigZag(z);
  }
  if (!r.done()) return Corrupt("dependency values", "trailing bytes");
  return Status::Ok();
}

Status DecodeRowMessage(std::string_view bytes, RowVotes* out) {
  Reader r(bytes);
  QR_RETURN_IF_ERROR(Open(&r, RowMsgKind::kVotes, "votes"));
  uint64_t n = 0;
  if (!r.GetVarint(&out->batch) || !GetU32(&r, &out->from) || !GetU32(&r, &out->round)) {
    return Corrupt("votes", "truncated or out-of-range header field");
  }
  if (out->from >= planner::kMaxPartitions) return Corrupt("votes", "from partition " + std::to_string(out->from));
  if (!r.GetCount(&n, 2) || n > kMaxRowItems) return Corrupt("votes", "bad or truncated txn count");
  out->ids.resize(n);
  for (size_t i = 0; i < n; ++i) {
    executor::RowTxn& id = out->ids[i];
    if (!GetU32(&r, &id.slice) || !GetU32(&r, &id.home)) return Corrupt("votes", "truncated or bad txn id");
    if (i > 0 && !(out->ids[i - 1] < id)) return Corrupt("votes", "txn ids not strictly increasing at " + std::to_string(i));
  }
  if (!r.done()) return Corrupt("votes", "trailing bytes");
  return Status::Ok();
}

Status OpenRowSubSlice(const RowSubSlice& m, const storage::KeyMapper& ranges, const planner::RowPlace& place,
                       planner::PlannedSlice* out) {
  QR_RETURN_IF_ERROR(planner::DecodeSlice(m.slice_bytes, out));
  if (!out->row) return Corrupt("sub-slice", "its slice is not a row sub-slice");
  return planner::ValidateSlice(*out, ranges, m.batch, m.slice, &place);
}

}  // namespace qrstore::cluster
