#include "executor/write_history.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/check.h"
#include "common/memory.h"

namespace qrstore::executor {

WriteHistory::WriteHistory(uint32_t record_bytes, uint64_t budget_bytes, uint64_t first_batch)
    : record_bytes_(record_bytes),
      slot_bytes_((sizeof(Header) + record_bytes + 7) / 8 * 8),
      capacity_(std::max<uint64_t>(1, budget_bytes / slot_bytes_)),
      // Not zeroed: pages are touched only as entries are written.
      slots_(new char[capacity_ * slot_bytes_]),
      dropped_below_(first_batch) {
  static_assert(sizeof(Header) % 8 == 0);
  // Entries are written in sequence over the whole budget: huge pages spare a page fault and a
  // TLB miss every 4 KiB.
  AdviseHugePages(slots_.get(), capacity_ * slot_bytes_);
}

namespace {

// Copies `n` bytes to `dst` (8-byte aligned, with room for n rounded up to 8) with streaming
// stores where the CPU has them: an entry is written once and rarely read again (only by a
// retry's lookup), so it should neither be read into the cache first nor evict the table's
// records from it. The stores are ordered for other threads by Publish() (sfence), which the
// executor calls before it passes on the slice whose writes it recorded.
void StreamCopy(char* dst, const char* src, size_t n) {
#if defined(__x86_64__)
  const size_t words = n / 8;
  for (size_t i = 0; i < words; ++i) {
    long long w;
    std::memcpy(&w, src + i * 8, 8);
    _mm_stream_si64(reinterpret_cast<long long*>(dst + i * 8), w);
  }
  if (const size_t tail = n - words * 8; tail > 0) {
    long long w = 0;
    std::memcpy(&w, src + words * 8, tail);
    _mm_stream_si64(reinterpret_cast<long long*>(dst + words * 8), w);
  }
#else
  std::memcpy(dst, src, n);
#endif
}

}  // namespace

void WriteHistory::Publish() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

void WriteHistory::Record(storage::Key key, uint64_t batch, uint32_t planner, uint32_t txn, const char* image) {
  if (!recording()) return;
  if (marks_.empty() || batch > marks_.back().first) marks_.emplace_back(batch, next_);
  if (next_ >= capacity_) {
    // Overwriting entry next_ - capacity_: its batch is at most its mark's.
    const uint64_t old = next_ - capacity_;
    while (marks_.size() > 1 && marks_[1].second <= old) marks_.pop_front();
    const uint64_t below = marks_.front().first + 1;
    // (compare-exchange: a Stop meanwhile must stay)
    uint64_t cur = dropped_below_.load(std::memory_order_relaxed);
    while (below > cur && !dropped_below_.compare_exchange_weak(cur, below, std::memory_order_release)) {
    }
  }
  char* slot = reinterpret_cast<char*>(At(next_));
  const Header h{key, batch, planner, txn, 0};
  StreamCopy(slot, reinterpret_cast<const char*>(&h), sizeof(Header));
  StreamCopy(slot + sizeof(Header), image, record_bytes_);
  ++next_;
}

void WriteHistory::CatchUp(uint64_t batch) {
  // Entries of `batch` and later begin at its mark (parked fragments of the batch before may
  // follow it; nothing of `batch` precedes it).
  auto m = std::lower_bound(marks_.begin(), marks_.end(), batch,
                            [](const std::pair<uint64_t, uint64_t>& mark, uint64_t b) { return mark.first < b; });
  const uint64_t from = std::max(Oldest(), m == marks_.end() ? next_ : m->second);
  // Index only from there (a promoted leader's first retries name its last batches as a
  // follower, not the whole history): start over when asked about older entries, when entries
  // indexed have been overwritten since, or when the map holds more keys than the history
  // holds entries (stale keys).
  if (from < indexed_from_ || indexed_to_ < Oldest() || newest_.size() > capacity_) {
    newest_.clear();
    indexed_from_ = from;
    indexed_to_ = from;
  }
  for (uint64_t s = indexed_to_; s < next_; ++s) {
    Header* h = At(s);
    uint64_t& newest = newest_[h->key];
    h->prev = newest;
    newest = s + 1;
  }
  indexed_to_ = next_;
}

const char* WriteHistory::FirstAtOrAfter(storage::Key key, uint64_t batch, uint32_t planner, uint32_t txn) {
  CatchUp(batch);
  auto it = newest_.find(key);
  if (it == newest_.end()) return nullptr;
  const uint64_t oldest = Oldest();
  const char* found = nullptr;
  // Newest to oldest; each key's live entries are in planned order (see the header), dropped
  // ones are skipped. Bounded by the entries held.
  for (uint64_t link = it->second; link != 0 && link - 1 >= oldest;) {
    const uint64_t s = link - 1;
    Header* h = At(s);
    QR_CHECK(h->key == key, "write history: entry %llu of key %llu names key %llu",
             static_cast<unsigned long long>(s), static_cast<unsigned long long>(key),
             static_cast<unsigned long long>(h->key));
    if (h->planner != kDropped) {
      if (!AtOrAfter(*h, batch, planner, txn)) break;
      found = Image(s);
    }
    link = h->prev;
  }
  return found;
}

}  // namespace qrstore::executor
