// Loopback addresses for tests that listen on real ports (the row transport and row nodes).
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

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

// Reserves `port` for this process in the registry scripts/free_ports.py keeps (a file named
// after the port in $QRSTORE_PORTS_DIR, default /tmp/qrstore-ports, holding the owner's pid), so
// that script tests running at once never pick it, and it never picks theirs. False if a live
// process holds it; a reservation whose owner exited is taken over. Done under an exclusive flock
// on the folder's .lock file, as the script does: no one reads a reservation half written.
inline bool ReserveLoopbackPort(int port) {
  const char* env = std::getenv("QRSTORE_PORTS_DIR");
  const std::string dir = env != nullptr && *env != '\0' ? env : "/tmp/qrstore-ports";
  ::mkdir(dir.c_str(), 0755);
  const int lock = ::open((dir + "/.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock >= 0) (void)::flock(lock, LOCK_EX);
  struct Unlock {
    int fd;
    ~Unlock() {
      if (fd >= 0) ::close(fd);
    }
  } unlock{lock};
  const std::string path = dir + "/" + std::to_string(port);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd >= 0) {
      const std::string pid = std::to_string(::getpid());
      const bool ok = ::write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
      ::close(fd);
      return ok;
    }
    if (errno != EEXIST) return true;  // no registry here: the bind check alone decides
    char buf[32] = {};
    const int rfd = ::open(path.c_str(), O_RDONLY);
    if (rfd >= 0) {
      (void)::read(rfd, buf, sizeof buf - 1);
      ::close(rfd);
    }
    const long held = std::strtol(buf, nullptr, 10);
    if (held > 0 && (held == ::getpid() || ::kill(static_cast<pid_t>(held), 0) == 0 || errno == EPERM)) return false;
    ::unlink(path.c_str());  // its owner exited: try once more
  }
  return false;
}

// `n` addresses 127.0.0.1:<port>. Listening on port 0 is not offered by the transport: ports are
// picked from a range below the kernel's ephemeral range, starting from a point that differs
// between test processes (clock and pid), skipping ports something holds now. Two test processes
// running at once (ctest -j) could still pick one port in the same instant; a taken one makes
// Listen fail loudly. (Skipping held ports made a CI flake, a Listen that failed, rarer.) Each
// port is also reserved in the registry of scripts/free_ports.py (ReserveLoopbackPort).
inline std::vector<std::string> LoopbackAddresses(size_t n) {
  static int next = 20000 + static_cast<int>((static_cast<uint64_t>(NowNanos() / 7) ^
                                              (static_cast<uint64_t>(::getpid()) * 2654435761u)) %
                                             12000);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    for (int tries = 0; tries < 1000 && !(LoopbackPortFree(next) && ReserveLoopbackPort(next)); ++tries) {
      if (++next >= 32000) next = 20000;
    }
    out.push_back("127.0.0.1:" + std::to_string(next++));
    if (next >= 32000) next = 20000;
  }
  return out;
}

}  // namespace qrstore::testing
