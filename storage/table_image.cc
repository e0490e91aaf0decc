#include "storage/table_image.h"

#include <sched.h>

namespace qrstore::storage {

void Table::PreserveForImage(Key key, uint8_t epoch) { cow_image_->Preserve(*this, key, epoch); }

uint8_t TableImage::Begin(Table& t, bool stopped) {
  QR_CHECK(dense_ && capacity_ == t.capacity_ && stride_ == t.stride_, "TableImage::Begin before Prepare");
  QR_CHECK(!armed_ && !t.cow_armed_.load(std::memory_order_relaxed), "TableImage::Begin while armed");
  QR_CHECK(stopped || t.sparse_count_ == 0, "TableImage::Begin: a table with sparse records needs its writers stopped");
  std::memcpy(present_.data(), t.present_.data(), present_.size() * sizeof(uint64_t));
  CopySparse(t);
  const uint8_t e = static_cast<uint8_t>(epoch() % 127 + 1);
  epoch_.store(e, std::memory_order_relaxed);
  preserved_.store(0, std::memory_order_relaxed);
  armed_ = true;
  began_stopped_ = stopped;
  t.cow_image_ = this;
  t.cow_armed_.store(true, std::memory_order_release);
  return e;
}

uint64_t TableImage::CompleteCopy(Table& t) {
  if (!armed_) return 0;
  const uint8_t e = epoch();
  uint64_t copied = 0;
  for (uint64_t w = 0; w < present_.size(); ++w) {
    uint64_t bits = present_[w];
    while (bits != 0) {
      const uint64_t k = w * 64 + static_cast<uint64_t>(__builtin_ctzll(bits));
      bits &= bits - 1;
      if (CopyOnce(t, k, e)) ++copied;  // else a writer copied it (or is copying it: waited for)
    }
  }
  // Every record is in the image: the writers may skip the check again.
  t.cow_armed_.store(false, std::memory_order_release);
  armed_ = false;
  return copied;
}

void TableImage::WaitTag(std::atomic<uint8_t>& s, uint8_t epoch) {
  // The other side copies one record (no error can stop it); if it was descheduled meanwhile,
  // give it the core.
  for (uint32_t spins = 0; s.load(std::memory_order_acquire) != epoch; ++spins) {
    if (spins < 64) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else {
      ::sched_yield();
    }
  }
}

}  // namespace qrstore::storage
