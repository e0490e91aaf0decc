#include "storage/table.h"

#include <string>

#include "common/memory.h"

namespace qrstore::storage {

Table::Table(RecordLayout layout, uint64_t capacity)
    : layout_(layout), capacity_(capacity), stride_(layout.size()) {
  QR_CHECK(capacity_ >= 1, "a Table needs capacity >= 1");
  QR_CHECK(layout_.fields >= 1 && layout_.field_bytes >= 8, "record layout needs field_bytes >= 8");
  // new char[] without () leaves the bytes uninitialized: untouched pages cost no memory.
  dense_.reset(new char[capacity_ * stride_]);
  // Executors probe records at random: huge pages spare them a page walk per probe (tables
  // below 4 MiB gain nothing and are not advised).
  if (capacity_ * stride_ >= (4u << 20)) AdviseHugePages(dense_.get(), capacity_ * stride_);
  present_.assign((capacity_ + 63) / 64, 0);
}

uint64_t Table::MemoryBytes(RecordLayout layout, uint64_t capacity) {
  const uint64_t records = SaturatingMul(capacity, layout.size());
  const uint64_t bitmap = SaturatingMul(capacity / 64 + 1, sizeof(uint64_t));
  return SaturatingAdd(records, bitmap);
}

const char* Table::FindSparse(Key key) const {
  if (sparse_keys_.empty()) return nullptr;
  const uint64_t mask = sparse_keys_.size() - 1;
  for (uint64_t i = Mix64(key) & mask;; i = (i + 1) & mask) {
    // The index is never full (load <= 1/2), so the probe ends at an empty slot.
    if (sparse_keys_[i] == key) return SparseRecord(sparse_slot_[i]);
    if (sparse_keys_[i] == kEmptySparse) return nullptr;
  }
}

void Table::GrowSparseIndex() {
  std::vector<Key> old_keys = std::move(sparse_keys_);
  std::vector<uint64_t> old_slots = std::move(sparse_slot_);
  size_t n = old_keys.empty() ? 64 : old_keys.size() * 2;
  sparse_keys_.assign(n, kEmptySparse);
  sparse_slot_.assign(n, 0);
  const uint64_t mask = n - 1;
  for (size_t j = 0; j < old_keys.size(); ++j) {
    if (old_keys[j] == kEmptySparse) continue;
    uint64_t i = Mix64(old_keys[j]) & mask;
    while (sparse_keys_[i] != kEmptySparse) i = (i + 1) & mask;
    sparse_keys_[i] = old_keys[j];
    sparse_slot_[i] = old_slots[j];
  }
}

Status Table::Insert(Key key, const char* record) {
  if (Find(key) != nullptr) return Status::InvalidArgument("table: duplicate key " + std::to_string(key));
  if (size_ >= capacity_) {
    return Status::ResourceExhausted("table: full (capacity " + std::to_string(capacity_) + " records)");
  }
  if (key < capacity_) {
    std::memcpy(dense_.get() + key * stride_, record, stride_);
    present_[key >> 6] |= uint64_t{1} << (key & 63);
  } else {
    if ((sparse_count_ + 1) * 2 > sparse_keys_.size()) GrowSparseIndex();
    uint64_t slot = sparse_count_;
    if (slot / kChunkRecords >= chunks_.size()) chunks_.emplace_back(new char[kChunkRecords * stride_]);
    std::memcpy(SparseRecord(slot), record, stride_);
    const uint64_t mask = sparse_keys_.size() - 1;
    uint64_t i = Mix64(key) & mask;
    while (sparse_keys_[i] != kEmptySparse) i = (i + 1) & mask;
    sparse_keys_[i] = key;
    sparse_slot_[i] = slot;
    ++sparse_count_;
  }
  ++size_;
  return Status::Ok();
}

uint64_t Table::Digest() const {
  uint64_t sum = 0;
  const uint32_t n = layout_.size();
  ForEach([&](Key key, const char* rec) { sum += RecordDigest(key, rec, n); });
  return sum;
}

}  // namespace qrstore::storage
