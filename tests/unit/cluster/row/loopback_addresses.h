// Loopback addresses for tests that listen on real ports (the row transport and row nodes).
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"

namespace qrstore::testing {

// `n` addresses 127.0.0.1:<port>. Listening on port 0 is not offered by the transport: ports are
// picked from a range below the kernel's ephemeral range, unlikely to clash (a taken one makes
// Listen fail loudly), starting from a point that differs between test processes.
inline std::vector<std::string> LoopbackAddresses(size_t n) {
  static int next = 20000 + static_cast<int>((NowNanos() / 7) % 12000);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back("127.0.0.1:" + std::to_string(next++));
  return out;
}

}  // namespace qrstore::testing
