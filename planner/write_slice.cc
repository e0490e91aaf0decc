#include "planner/write_slice.h"

#include <cstring>

#include "common/codec.h"
#include "planner/replica_encoder.h"

namespace qrstore::planner {

namespace {
constexpr size_t kV = Writer::kMaxVarintBytes;
constexpr size_t kMinTxnBytes = 6;  // five varints and the fate byte
constexpr uint8_t kMaxFate = 1;     // a single partition's fates: committed or aborted by logic
Status Corrupt(const std::string& what) { return Status::Corruption("write slice: " + what); }
}  // namespace

std::string EncodeWriteSlice(const PlannedSlice& slice, const std::vector<uint8_t>& fates,
                             const std::vector<std::vector<storage::Key>>* keys, const std::vector<std::string>* images,
                             uint32_t record_bytes) {
  QR_CHECK_EQ(fates.size(), slice.txns.size());
  QR_CHECK((keys == nullptr) == (images == nullptr));
  size_t bound = sizeof kWriteMagic + 5 * kV + slice.txns.size() * (5 * kV + 1) + ReplicaEncoder::kHeaderRoomBytes;
  if (keys != nullptr) {
    QR_CHECK_EQ(keys->size(), images->size());
    for (size_t r = 0; r < keys->size(); ++r) {
      QR_CHECK_EQ((*images)[r].size(), (*keys)[r].size() * record_bytes);
      bound += kV + (*keys)[r].size() * kV + (*images)[r].size();
    }
  }
  std::string out(bound, '\0');
  char* const begin = out.data();
  char* p = begin;
  std::memcpy(p, kWriteMagic, sizeof kWriteMagic);
  p += sizeof kWriteMagic;
  p = Writer::EncodeVarint(p, slice.batch);
  p = Writer::EncodeVarint(p, slice.planner);
  p = Writer::EncodeVarint(p, record_bytes);
  p = Writer::EncodeVarint(p, slice.txns.size());
  for (size_t i = 0; i < slice.txns.size(); ++i) {
    const TxnContext& t = slice.txns[i];
    p = Writer::EncodeVarint(p, t.txn_id);
    p = Writer::EncodeVarint(p, t.client);
    p = Writer::EncodeVarint(p, t.session);
    p = Writer::EncodeVarint(p, t.seq);
    p = Writer::EncodeVarint(p, t.write_ops);
    *p++ = static_cast<char>(fates[i]);
  }
  p = Writer::EncodeVarint(p, keys == nullptr ? 0 : keys->size());
  for (size_t r = 0; keys != nullptr && r < keys->size(); ++r) {
    const std::vector<storage::Key>& ks = (*keys)[r];
    p = Writer::EncodeVarint(p, ks.size());
    storage::Key prev = 0;
    for (size_t i = 0; i < ks.size(); ++i) {
      QR_CHECK(i == 0 || ks[i] > prev, "keys must strictly increase");
      p = Writer::EncodeVarint(p, ks[i] - prev);
      prev = ks[i];
    }
    std::memcpy(p, (*images)[r].data(), (*images)[r].size());
    p += (*images)[r].size();
  }
  QR_CHECK_LE(static_cast<size_t>(p - begin) + ReplicaEncoder::kHeaderRoomBytes, bound);
  out.resize(static_cast<size_t>(p - begin));
  return out;
}

bool IsWriteSlice(std::string_view bytes) {
  return bytes.size() >= sizeof kWriteMagic && bytes.substr(0, sizeof kWriteMagic) == std::string_view(kWriteMagic, 3);
}

Status DecodeWriteSlice(std::string_view bytes, uint32_t record_bytes, const storage::KeyMapper& ranges,
                        uint64_t batch, uint32_t planner, PlannedSlice* out) {
  if (!IsWriteSlice(bytes)) return Corrupt("bad magic");
  Reader r(bytes.substr(sizeof kWriteMagic));
  uint64_t b = 0, p = 0, rec = 0, n = 0;
  r.GetVarint(&b);
  r.GetVarint(&p);
  r.GetVarint(&rec);
  if (!r.GetCount(&n, kMinTxnBytes)) return Corrupt("truncated header or a txn count beyond the input");
  if (b != batch || p != planner) {
    return Corrupt("it carries batch " + std::to_string(b) + ", planner " + std::to_string(p));
  }
  if (rec != record_bytes) {
    return Corrupt("records of " + std::to_string(rec) + " bytes, this node's are " + std::to_string(record_bytes));
  }
  const uint32_t nranges = ranges.buckets();
  out->Reset(batch, planner, nranges);
  SliceWrites& w = out->writes;
  w.given = true;
  out->txns.resize(n);
  w.fates.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    TxnContext& t = out->txns[i];
    t = TxnContext();
    uint64_t client = 0, write_ops = 0;
    uint8_t fate = 0;
    r.GetVarint(&t.txn_id);
    r.GetVarint(&client);
    r.GetVarint(&t.session);
    r.GetVarint(&t.seq);
    r.GetVarint(&write_ops);
    if (!r.GetU8(&fate)) return Corrupt("txn " + std::to_string(i) + " truncated");
    if (client > UINT32_MAX || write_ops > UINT32_MAX) return Corrupt("txn " + std::to_string(i) + ": a field out of range");
    if (fate > kMaxFate) return Corrupt("txn " + std::to_string(i) + ": unknown fate " + std::to_string(fate));
    t.client = static_cast<uint32_t>(client);
    t.write_ops = static_cast<uint32_t>(write_ops);
    t.home_index = static_cast<uint32_t>(i);
    w.fates[i] = fate;
  }
  uint64_t nr = 0;
  if (!r.GetVarint(&nr)) return Corrupt("truncated range count");
  if (nr != 0 && planner != 0) return Corrupt("images in slice " + std::to_string(planner) + "'s entry (slice 0's carry them)");
  if (nr != 0 && nr != nranges) {
    return Corrupt(std::to_string(nr) + " ranges of images for " + std::to_string(nranges) + " executor ranges");
  }
  w.keys.resize(nranges);
  w.images.resize(nranges);
  for (uint32_t range = 0; range < nr; ++range) {
    uint64_t k = 0;
    // Each key takes at least a byte and its image record_bytes.
    if (!r.GetCount(&k, 1 + static_cast<size_t>(record_bytes))) return Corrupt("range " + std::to_string(range) + ": bad key count");
    std::vector<storage::Key>& keys = w.keys[range];
    keys.resize(k);
    storage::Key prev = 0;
    for (uint64_t i = 0; i < k; ++i) {
      uint64_t delta = 0;
      if (!r.GetVarint(&delta)) return Corrupt("range " + std::to_string(range) + " truncated");
      if ((i > 0 && delta == 0) || delta > UINT64_MAX - prev) {
        return Corrupt("range " + std::to_string(range) + ": keys do not strictly increase");
      }
      prev += delta;
      if (ranges.Of(prev) != range) {
        return Corrupt("key " + std::to_string(prev) + " is not in executor range " + std::to_string(range));
      }
      keys[i] = prev;
    }
    std::string_view images;
    if (!r.GetRaw(k * record_bytes, &images)) return Corrupt("range " + std::to_string(range) + ": images truncated");
    w.images[range].assign(images.data(), images.size());
  }
  if (!r.done()) return Corrupt(std::to_string(r.remaining()) + " trailing bytes");
  return Status::Ok();
}

}  // namespace qrstore::planner
