#include "storage/table_image.h"

#include <sched.h>

namespace qrstore::storage {

void Table::PreserveForImage(Key key) { cow_image_->Preserve(*this, key); }

void TableImage::Arm(Table& t) {
  QR_CHECK(dense_ && capacity_ == t.capacity_ && stride_ == t.stride_, "TableImage::Arm before Prepare");
  QR_CHECK(!armed_ && !t.cow_armed_.load(std::memory_order_relaxed), "TableImage::Arm while armed");
  std::memcpy(present_.data(), t.present_.data(), present_.size() * sizeof(uint64_t));
  CopySparse(t);
  // Only present records are ever written (the index does not change while an engine runs), so
  // only they are marked; the others stay clean.
  for (uint64_t w = 0; w < present_.size(); ++w) {
    uint64_t bits = present_[w];
    while (bits != 0) {
      const uint64_t k = w * 64 + static_cast<uint64_t>(__builtin_ctzll(bits));
      bits &= bits - 1;
      state_[k].store(kPending, std::memory_order_relaxed);
    }
  }
  preserved_.store(0, std::memory_order_relaxed);
  armed_ = true;
  t.cow_image_ = this;
  t.cow_armed_.store(true, std::memory_order_release);
}

uint64_t TableImage::CompleteCopy(Table& t) {
  if (!armed_) return 0;
  uint64_t copied = 0;
  for (uint64_t w = 0; w < present_.size(); ++w) {
    uint64_t bits = present_[w];
    while (bits != 0) {
      const uint64_t k = w * 64 + static_cast<uint64_t>(__builtin_ctzll(bits));
      bits &= bits - 1;
      std::atomic<uint8_t>& s = state_[k];
      uint8_t v = kPending;
      if (s.load(std::memory_order_acquire) == kPending &&
          s.compare_exchange_strong(v, kCopying, std::memory_order_acq_rel)) {
        std::memcpy(dense_.get() + k * stride_, t.dense_.get() + k * stride_, stride_);
        s.store(kClean, std::memory_order_release);
        ++copied;
      } else {
        WaitClean(s);  // a writer is copying it now
      }
    }
  }
  // Every record is clean: the writers may skip the check again.
  t.cow_armed_.store(false, std::memory_order_release);
  armed_ = false;
  return copied;
}

void TableImage::WaitClean(std::atomic<uint8_t>& s) {
  // The other side copies one record; if it was descheduled meanwhile, give it the core.
  for (uint32_t spins = 0; s.load(std::memory_order_acquire) != kClean; ++spins) {
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
