#include "common/memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

namespace qrstore {
namespace {

std::string Gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30));
  return buf;
}

}  // namespace

uint64_t AvailableMemoryBytes(std::string* source) {
  uint64_t avail = 0;
  std::string from;
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  uint64_t kb = 0;
  std::string unit;
  while (meminfo >> name >> kb) {
    std::getline(meminfo, unit);
    if (name == "MemAvailable:") {
      avail = SaturatingMul(kb, 1024);
      from = "MemAvailable in /proc/meminfo";
      break;
    }
  }
  if (from.empty()) {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    avail = pages > 0 && page > 0 ? SaturatingMul(static_cast<uint64_t>(pages), static_cast<uint64_t>(page)) : UINT64_MAX;
    from = "available physical pages (sysconf)";
  }
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && as.rlim_cur < avail) {
    avail = as.rlim_cur;
    from = "the address-space limit RLIMIT_AS (ulimit -v)";
  }
  if (source != nullptr) *source = from;
  return avail;
}

Status CheckFitsInMemory(uint64_t needed_bytes, const std::string& what) {
  std::string source;
  const uint64_t avail = AvailableMemoryBytes(&source);
  if (needed_bytes <= avail) return Status::Ok();
  return Status::InvalidArgument("not enough memory: " + what + ": " + std::to_string(needed_bytes) + " bytes (" +
                                 Gib(needed_bytes) + ") needed, " + std::to_string(avail) + " bytes (" + Gib(avail) +
                                 ") available (" + source + ")");
}

bool AdviseHugePages(void* p, uint64_t bytes) {
  const long page_l = sysconf(_SC_PAGESIZE);
  const uintptr_t page = page_l > 0 ? static_cast<uintptr_t>(page_l) : 4096;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(page - 1);
  if (p == nullptr || end <= begin) return false;
#ifdef MADV_HUGEPAGE
  return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0;
#else
  return false;
#endif
}

}  // namespace qrstore
