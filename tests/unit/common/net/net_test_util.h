// Helpers shared by the StreamNet contract tests (stream_net_test.cc) and the Raft
// StreamTransport tests over both nets (tests/unit/raft_driver/stream_transport_test.cc): the
// two implementations as factories, free ports on 127.0.0.1, deterministic random bytes, and the
// time a blocked call may take to be woken on a loaded machine. Test-thread helpers only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "common/net/stream_net.h"
#include "common/rng.h"

namespace qrstore::net::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Long enough for a loaded 2-core machine under ThreadSanitizer; a hang takes forever.
constexpr auto kPrompt = seconds(10);

struct NetKind {
  const char* name;
  std::unique_ptr<StreamNet> (*make)();
};

inline NetKind Kind(int i) { return i == 0 ? NetKind{"posix", &MakePosixStreamNet} : NetKind{"nng", &MakeNngStreamNet}; }

// A port the kernel considers free right now (bound to 127.0.0.1:0 and released).
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline std::string Addr(int port) { return "127.0.0.1:" + std::to_string(port); }

inline std::string RandomBytes(uint64_t seed, size_t n) {
  Rng rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng.Next());
  return s;
}

}  // namespace qrstore::net::testing
