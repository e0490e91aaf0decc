#include "cluster/row/row_messages.h"

#include <algorithm>
#include <tuple>

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

// A sorted list of txn ids: a count, then (slice, home) pairs.
void PutTxns(Writer* w, const std::vector<executor::RowTxn>& ids) {
  w->PutVarint(ids.size());
  for (const executor::RowTxn& id : ids) {
    w->PutVarint(id.slice);
    w->PutVarint(id.home);
  }
}

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

// PutTxns' list into *ids: strictly increasing, at most kMaxRowItems. `what`: the message,
// `item`: what the ids are, for the error.
Status GetTxns(Reader* r, const char* what, const std::string& item, std::vector<executor::RowTxn>* ids) {
  uint64_t n = 0;
  if (!r->GetCount(&n, 2) || n > kMaxRowItems) return Corrupt(what, "bad or truncated " + item + " count");
  ids->resize(n);
  for (size_t i = 0; i < n; ++i) {
    executor::RowTxn& id = (*ids)[i];
    if (!GetU32(r, &id.slice) || !GetU32(r, &id.home)) return Corrupt(what, "truncated or bad " + item + " id");
    if (i > 0 && !((*ids)[i - 1] < id)) {
      return Corrupt(what, item + " ids not strictly increasing at " + std::to_string(i));
    }
  }
  return Status::Ok();
}

}  // namespace

std::string EncodeRowMessage(const RowSubSlice& m) {
  Writer w = Begin(RowMsgKind::kSubSlice, 32 + m.slice_bytes.size() + m.input.size());
  w.PutVarint(m.batch);
  w.PutVarint(m.slice);
  w.PutVarint(m.from);
  w.PutBytes(m.slice_bytes);
  w.PutBytes(m.input);
  return w.Release();
}

std::string EncodeRowMessage(const RowHomeInput& m) {
  Writer w = Begin(RowMsgKind::kHomeInput, 32 + m.input.size());
  w.PutVarint(m.batch);
  w.PutVarint(m.slice);
  w.PutVarint(m.from);
  w.PutBytes(m.input);
  return w.Release();
}

std::string EncodeRowMessage(const RowHomeBundle& m) {
  size_t bytes = 32;
  for (const std::string& part : m.parts) bytes += part.size() + 8;
  Writer w = Begin(RowMsgKind::kHomeBundle, bytes);
  w.PutVarint(m.batch);
  w.PutVarint(m.slice);
  w.PutVarint(m.from);
  w.PutVarint(m.parts.size());
  for (const std::string& part : m.parts) w.PutBytes(part);
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
  PutTxns(&w, m.ids);
  return w.Release();
}

std::string EncodeRowMessage(const RowBatchEnd& m) {
  Writer w = Begin(RowMsgKind::kBatchEnd, 32 + m.values.size() * 8 + (m.fired.size() + m.aborted.size()) * 4);
  w.PutVarint(m.batch);
  w.PutVarint(m.partition);
  w.PutVarint(m.values.size());
  for (const RowBatchEndValue& v : m.values) {
    w.PutVarint(v.slice);
    w.PutVarint(v.slot);
    w.PutVarint(ZigZag(v.value));
  }
  PutTxns(&w, m.fired);
  PutTxns(&w, m.aborted);
  w.PutVarint(m.votes.size());
  for (const auto& round : m.votes) PutTxns(&w, round);
  return w.Release();
}

std::string EncodeRowMessage(const RowBatchWrites& m) {
  const std::string end = EncodeRowMessage(m.end);
  size_t bytes = 48 + end.size() + m.sent.size() * 8;
  for (const std::string& r : m.reports) bytes += r.size() + 4;
  for (size_t i = 0; i < m.keys.size(); ++i) bytes += m.keys[i].size() * 4 + (i < m.images.size() ? m.images[i].size() : 0) + 4;
  Writer w = Begin(RowMsgKind::kBatchWrites, bytes);
  w.PutBytes(end);
  w.PutVarint(m.sent.size());
  for (const RowSentValue& v : m.sent) {
    w.PutVarint(v.to);
    w.PutVarint(v.slice);
    w.PutVarint(v.slot);
    w.PutVarint(ZigZag(v.value));
  }
  w.PutVarint(m.reports.size());
  for (const std::string& r : m.reports) w.PutBytes(r);
  w.PutVarint(m.record_bytes);
  w.PutVarint(m.keys.size());
  for (size_t i = 0; i < m.keys.size(); ++i) {
    // Keys as deltas (the first from 0): they strictly increase.
    w.PutVarint(m.keys[i].size());
    uint64_t prev = 0;
    for (uint64_t k : m.keys[i]) {
      w.PutVarint(k - prev);
      prev = k;
    }
    if (i < m.images.size()) w.PutRaw(m.images[i].data(), m.images[i].size());
  }
  return w.Release();
}

std::string EncodeRowMessage(const RowReport& m) {
  Writer w = Begin(RowMsgKind::kReport, 32 + m.report.txns.size() * 4 + m.report.values.size());
  w.PutVarint(m.batch);
  w.PutVarint(m.slice);
  w.PutVarint(m.from);
  w.PutVarint(m.report.txns.size());
  uint64_t prev = 0;
  for (size_t i = 0; i < m.report.txns.size(); ++i) {
    const commit::RowTxnReport& t = m.report.txns[i];
    // The first index as is, then the gap minus one (indices strictly increase).
    w.PutVarint(i == 0 ? t.home_index : t.home_index - prev - 1);
    prev = t.home_index;
    w.PutU8(static_cast<uint8_t>(t.status));
    w.PutVarint(t.values_size);
  }
  w.PutRaw(m.report.values.data(), m.report.values.size());
  return w.Release();
}

std::string EncodeRowMessage(const RowControl& m) {
  Writer w = Begin(RowMsgKind::kControl, 24);
  w.PutVarint(m.from);
  w.PutU8(static_cast<uint8_t>(m.what));
  w.PutVarint(m.batch);
  return w.Release();
}

std::string EncodeRowMessage(const RowResume& m) {
  Writer w = Begin(RowMsgKind::kResume, 48 + m.address.size());
  w.PutVarint(m.from);
  w.PutU8(m.answer ? 1 : 0);
  w.PutVarint(m.term);
  w.PutVarint(m.batch);
  w.PutVarint(m.reports);
  w.PutBytes(m.address);
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
  if (k < 1 || k > 10) return Corrupt("unknown", "unknown kind " + std::to_string(k));
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
  if (!r.GetBytes(&out->input)) return Corrupt("sub-slice", "truncated input bytes");
  if (!r.done()) return Corrupt("sub-slice", "trailing bytes");
  return Status::Ok();
}

Status DecodeRowMessage(std::string_view bytes, RowHomeInput* out) {
  Reader r(bytes);
  QR_RETURN_IF_ERROR(Open(&r, RowMsgKind::kHomeInput, "home input"));
  if (!r.GetVarint(&out->batch) || !GetU32(&r, &out->slice) || !GetU32(&r, &out->from)) {
    return Corrupt("home input", "truncated or out-of-range header field");
  }
  if (out->from >= planner::kMaxPartitions) return Corrupt("home input", "from partition " + std::to_string(out->from));
  if (!r.GetBytes(&out->input)) return Corrupt("home input", "truncated input bytes");
  if (!r.done()) return Corrupt("home input", "trailing bytes");
  return Status::Ok();
}

Status DecodeRowMessage(std::string_view bytes, RowBatchEnd* out) {
  Reader r(bytes);
  QR_RETURN_IF_ERROR(Open(&r, RowMsgKind::kBatchEnd, "batch end"));
  uint64_t n = 0;
  if (!r.GetVarint(&out->batch) || !GetU32(&r, &out->partition)) {
    return Corrupt("batch end", "truncated or out-of-range header field");
  }
  if (out->partition >= planner::kMaxPartitions) {
    return Corrupt("batch end", "partition " + std::to_string(out->partition));
  }
  if (!r.GetCount(&n, 3) || n > kMaxRowItems) return Corrupt("batch end", "bad or truncated value count");
  out->values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    RowBatchEndValue& v = out->values[i];
    uint64_t z = 0;
    if (!GetU32(&r, &v.slice) || !GetU32(&r, &v.slot) || !r.GetVarint(&z)) {
      return Corrupt("batch end", "truncated or bad value");
    }
    v.value = UnZigZag(z);
    const RowBatchEndValue& p = out->values[i == 0 ? 0 : i - 1];
    if (i > 0 && !(p.slice < v.slice || (p.slice == v.slice && p.slot < v.slot))) {
      return Corrupt("batch end", "values not strictly increasing by (slice, slot) at " + std::to_string(i));
    }
  }
  QR_RETURN_IF_ERROR(GetTxns(&r, "batch end", "fired txn", &out->fired));
  QR_RETURN_IF_ERROR(GetTxns(&r, "batch end", "aborted txn", &out->aborted));
  if (!r.GetCount(&n, 1) || n > kMaxRowItems) return Corrupt("batch end", "bad or truncated round count");
  out->votes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    QR_RETURN_IF_ERROR(GetTxns(&r, "batch end", "round " + std::to_string(i) + " vote", &out->votes[i]));
  }
  if (!r.done()) return Corrupt("batch end", "trailing bytes");
  for (const executor::RowTxn& id : out->fired) {
    if (!std::binary_search(out->aborted.begin(), out->aborted.end(), id)) {
      return Corrupt("batch end", "fired txn (" + std::to_string(id.slice) + ", " + std::to_string(id.home) +
                                      ") is not among the aborted");
    }
  }
  return Status::Ok();
}

Status DecodeRowMessage(std::string_view bytes, RowBatchWrites* out) {
  constexpr const char* kWhat = "batch writes";
  Reader r(bytes);
  QR_RETURN_IF_ERROR(Open(&r, RowMsgKind::kBatchWrites, kWhat));
  std::string end;
  if (!r.GetBytes(&end)) return Corrupt(kWhat, "truncated batch-end record");
  QR_RETURN_IF_ERROR(DecodeRowMessage(end, &out->end));
  uint64_t n = 0;
  if (!r.GetCount(&n, 4) || n > kMaxRowItems) return Corrupt(kWhat, "bad or truncated sent value count");
  out->sent.resize(n);
  for (size_t i = 0; i < n; ++i) {
    RowSentValue& v = out->sent[i];
    uint64_t z = 0;
    if (!GetU32(&r, &v.to) || !GetU32(&r, &v.slice) || !GetU32(&r, &v.slot) || !r.GetVarint(&z)) {
      return Corrupt(kWhat, "truncated or bad sent value");
    }
    v.value = UnZigZag(z);
    if (v.to >= planner::kMaxPartitions || v.to == out->end.partition) {
      return Corrupt(kWhat, "a value sent to partition " + std::to_string(v.to));
    }
    if (i > 0) {
      const RowSentValue& p = out->sent[i - 1];
      if (!(std::tie(p.to, p.slice, p.slot) < std::tie(v.to, v.slice, v.slot))) {
        return Corrupt(kWhat, "sent values not strictly increasing by (to, slice, slot) at " + std::to_string(i));
      }
    }
  }
  if (!r.GetCount(&n, 1) || n > kMaxRowItems) return Corrupt(kWhat, "bad or truncated report count");
  out->reports.resize(n);
  uint32_t prev_slice = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!r.GetBytes(&out->reports[i])) return Corrupt(kWhat, "truncated report");
    RowReport rep;
    if (Status st = DecodeRowMessage(out->reports[i], &rep); !st.ok()) {
      return Corrupt(kWhat, "report " + std::to_string(i) + ": " + st.message());
    }
    if (rep.batch != out->end.batch || rep.from != out->end.partition) {
      return Corrupt(kWhat, "a report of batch " + std::to_string(rep.batch) + " from partition " + std::to_string(rep.from));
    }
    if (i > 0 && !(prev_slice < rep.slice)) {
      return Corrupt(kWhat, "reports not strictly increasing by slice at " + std::to_string(i));
    }
    prev_slice = rep.slice;
  }
  if (!GetU32(&r, &out->record_bytes)) return Corrupt(kWhat, "truncated record size");
  if (!r.GetCount(&n, 1) || n > planner::kMaxRanges) return Corrupt(kWhat, "bad or truncated range count");
  out->keys.resize(n);
  out->images.resize(n);
  for (size_t range = 0; range < n; ++range) {
    uint64_t k = 0;
    // Each key takes at least a byte and its image record_bytes.
    if (!r.GetCount(&k, 1 + static_cast<size_t>(out->record_bytes))) {
      return Corrupt(kWhat, "range " + std::to_string(range) + ": bad key count");
    }
    std::vector<uint64_t>& keys = out->keys[range];
    keys.resize(k);
    uint64_t prev = 0;
    for (uint64_t i = 0; i < k; ++i) {
      uint64_t delta = 0;
      if (!r.GetVarint(&delta)) return Corrupt(kWhat, "range " + std::to_string(range) + " truncated");
      if ((i > 0 && delta == 0) || delta > UINT64_MAX - prev) {
        return Corrupt(kWhat, "range " + std::to_string(range) + ": keys do not strictly increase");
      }
      prev += delta;
      keys[i] = prev;
    }
    std::string_view images;
    if (!r.GetRaw(k * out->record_bytes, &images)) return Corrupt(kWhat, "range " + std::to_string(range) + ": images truncated");
    out->images[range].assign(images.data(), images.size());
  }
  if (!r.done()) return Corrupt(kWhat, "trailing bytes");
  return Status::Ok();
}

Status DecodeRowMessage(std::string_view bytes, RowHomeBundle* out) {
  Reader r(bytes);
  QR_RETURN_IF_ERROR(Open(&r, RowMsgKind::kHomeBundle, "home bundle"));
  uint64_t n = 0;
  if (!r.GetVarint(&out->batch) || !GetU32(&r, &out->slice) || !GetU32(&r, &out->from)) {
    return Corrupt("home bundle", "truncated or out-of-range header field");
  }
  if (!r.GetCount(&n, 1) || n > planner::kMaxPartitions) return Corrupt("home bundle", "bad or truncated part count");
  if (out->from >= n) {
    return Corrupt("home bundle", "home partition " + std::to_string(out->from) + " of " + std::to_string(n) + " parts");
  }
  out->parts.resize(n);
  for (std::string& part : out->parts) {
    if (!r.GetBytes(&part)) return Corrupt("home bundle", "truncated part");
  }
  if (!r.done()) return Corrupt("home bundle", "trailing bytes");
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
  if (!r.GetVarint(&out->batch) || !GetU32(&r, &out->from) || !GetU32(&r, &out->round)) {
    return Corrupt("votes", "truncated or out-of-range header field");
  }
  if (out->from >= planner::kMaxPartitions) return Corrupt("votes", "from partition " + std::to_string(out->from));
  QR_RETURN_IF_ERROR(GetTxns(&r, "votes", "txn", &out->ids));
  if (!r.done()) return Corrupt("votes", "trailing bytes");
  return Status::Ok();
}

Status DecodeRowMessage(std::string_view bytes, RowReport* out) {
  Reader r(bytes);
  QR_RETURN_IF_ERROR(Open(&r, RowMsgKind::kReport, "report"));
  uint64_t n = 0;
  if (!r.GetVarint(&out->batch) || !GetU32(&r, &out->slice) || !GetU32(&r, &out->from)) {
    return Corrupt("report", "truncated or out-of-range header field");
  }
  if (out->from >= planner::kMaxPartitions) return Corrupt("report", "from partition " + std::to_string(out->from));
  if (!r.GetCount(&n, 3) || n > kMaxRowItems) return Corrupt("report", "bad or truncated txn count");
  out->report.txns.resize(n);
  uint64_t index = 0, values = 0;
  for (size_t i = 0; i < n; ++i) {
    commit::RowTxnReport& t = out->report.txns[i];
    uint64_t gap = 0;
    uint8_t status = 0;
    if (!r.GetVarint(&gap) || !r.GetU8(&status) || !GetU32(&r, &t.values_size)) {
      return Corrupt("report", "truncated txn " + std::to_string(i));
    }
    index = i == 0 ? gap : index + gap + 1;
    if (gap > UINT32_MAX || index > UINT32_MAX) return Corrupt("report", "home index out of range at txn " + std::to_string(i));
    if (status > static_cast<uint8_t>(commit::TxnStatus::kAbortedCascade)) {
      return Corrupt("report", "unknown status " + std::to_string(status) + " at txn " + std::to_string(i));
    }
    t.home_index = static_cast<uint32_t>(index);
    t.status = static_cast<commit::TxnStatus>(status);
    t.values_begin = static_cast<uint32_t>(values);
    values += t.values_size;
    if (values > r.remaining()) return Corrupt("report", "values longer than the message at txn " + std::to_string(i));
  }
  if (values != r.remaining()) return Corrupt("report", "trailing bytes or values shorter than listed");
  std::string_view v;
  if (!r.GetRaw(values, &v)) return Corrupt("report", "truncated values");
  out->report.values.assign(v.data(), v.size());
  return Status::Ok();
}

Status DecodeRowMessage(std::string_view bytes, RowControl* out) {
  Reader r(bytes);
  QR_RETURN_IF_ERROR(Open(&r, RowMsgKind::kControl, "control"));
  uint8_t what = 0;
  if (!GetU32(&r, &out->from) || !r.GetU8(&what) || !r.GetVarint(&out->batch)) return Corrupt("control", "truncated");
  if (out->from >= planner::kMaxPartitions) return Corrupt("control", "from partition " + std::to_string(out->from));
  if (what < 1 || what > 4) return Corrupt("control", "unknown control kind " + std::to_string(what));
  out->what = static_cast<RowControlKind>(what);
  if (!r.done()) return Corrupt("control", "trailing bytes");
  return Status::Ok();
}

Status DecodeRowMessage(std::string_view bytes, RowResume* out) {
  Reader r(bytes);
  QR_RETURN_IF_ERROR(Open(&r, RowMsgKind::kResume, "resume"));
  uint8_t answer = 0;
  if (!GetU32(&r, &out->from) || !r.GetU8(&answer) || !r.GetVarint(&out->term) || !r.GetVarint(&out->batch) ||
      !r.GetVarint(&out->reports) || !r.GetBytes(&out->address)) {
    return Corrupt("resume", "truncated or out-of-range field");
  }
  if (out->from >= planner::kMaxPartitions) return Corrupt("resume", "from partition " + std::to_string(out->from));
  if (answer > 1) return Corrupt("resume", "answer flag " + std::to_string(answer));
  out->answer = answer == 1;
  if (!r.done()) return Corrupt("resume", "trailing bytes");
  if (out->answer && !out->address.empty()) return Corrupt("resume", "an answer with an address");
  if (!out->answer && (out->address.empty() || out->address.size() > 255)) {
    return Corrupt("resume", "a resume whose address has " + std::to_string(out->address.size()) + " bytes (1 to 255)");
  }
  return Status::Ok();
}

Status OpenRowSubSlice(const RowSubSlice& m, const storage::KeyMapper& ranges, const planner::RowPlace& place,
                       planner::PlannedSlice* out) {
  QR_RETURN_IF_ERROR(planner::DecodeSlice(m.slice_bytes, out));
  if (!out->row) return Corrupt("sub-slice", "its slice is not a row sub-slice");
  return planner::ValidateSlice(*out, ranges, m.batch, m.slice, &place);
}

}  // namespace qrstore::cluster
