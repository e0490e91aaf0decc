// Memory the host can give this process, and the up-front check that a large allocation (a
// table of ycsb.records records) fits before it is made: an allocation that cannot be served
// otherwise surfaces as std::bad_alloc mid-start, or as the OOM killer once the pages are
// touched. Free functions, callable from any thread; they read /proc and getrlimit only.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace qrstore {

// What a new allocation can use now: the smaller of MemAvailable in /proc/meminfo (or, without
// /proc, sysconf's available pages) and the address-space limit (RLIMIT_AS) when one is set.
// `source` (optional) receives where the figure came from, for messages.
uint64_t AvailableMemoryBytes(std::string* source = nullptr);

// Ok if `needed_bytes` fit in AvailableMemoryBytes(); otherwise kInvalidArgument:
// "not enough memory: <what>: N bytes (X GiB) needed, M bytes (Y GiB) available (<source>)".
Status CheckFitsInMemory(uint64_t needed_bytes, const std::string& what);

// Asks the kernel to back [p, p + bytes) with transparent huge pages where it can (the 2 MiB
// extents wholly inside it; madvise(MADV_HUGEPAGE), which Debian's default THP mode,
// "madvise", requires). For large, randomly probed arrays (the table's records): one TLB entry
// per 2 MiB instead of per 4 KiB removes most page walks. A hint only: returns false (and
// changes nothing) when the kernel refuses or the range holds no whole page.
bool AdviseHugePages(void* p, uint64_t bytes);

// a * b, or UINT64_MAX if it overflows (sizes computed from untrusted config values).
inline uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
inline uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

}  // namespace qrstore
