// Loopback addresses for tests that listen on real ports (the row transport and row nodes).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <string>
#include <vector>

#include "common/clock.h"

namespace qrstore::testing {

// Whether nothing holds 127.0.0.1:port now (a bind succeeds; closed at once).
inline bool LoopbackPortFree(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return true;  // cannot tell: let Listen say
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// `n` addresses 127.0.0.1:<port>. Listening on port 0 is not offered by the transport: ports are
// picked from a range below the kernel's ephemeral range, starting from a point that differs
// between test processes (clock and pid), skipping ports something holds now. Two test processes
// running at once (ctest -j) could still pick one port in the same instant; a taken one makes
// Listen fail loudly. (Skipping held ports made a CI flake, a Listen that failed, rarer.)
inline std::vector<std::string> LoopbackAddresses(size_t n) {
  static int next = 20000 + static_cast<int>((static_cast<uint64_t>(NowNanos() / 7) ^
                                              (static_cast<uint64_t>(::getpid()) * 2654435761u)) %
                                             12000);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    for (int tries = 0; tries < 100 && !LoopbackPortFree(next); ++tries) ++next;
    out.push_back("127.0.0.1:" + std::to_string(next++));
    if (next >= 32000) next = 20000;
  }
  return out;
}

}  // namespace qrstore::testing
