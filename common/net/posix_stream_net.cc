// StreamNet over plain POSIX sockets (stream_net.h).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/net/stream_net.h"

namespace qrstore::net {
namespace {

Status Resolve(const std::string& host_port, sockaddr_in* out) {
  std::string host;
  int port = 0;
  QR_RETURN_IF_ERROR(SplitHostPort(host_port, &host, &port));
  std::memset(out, 0, sizeof *out);
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1) return Status::Ok();
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rv = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rv != 0 || res == nullptr) {
    return Status::InvalidArgument("cannot resolve host '" + host + "': " + ::gai_strerror(rv));
  }
  out->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  ::freeaddrinfo(res);
  return Status::Ok();
}

void SetNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

class PosixConn : public StreamConn {
 public:
  explicit PosixConn(int fd) : fd_(fd) {}
  ~PosixConn() override { ::close(fd_); }

  bool ReadFull(char* buf, size_t n) override {
    while (n > 0) {
      const ssize_t r = ::read(fd_, buf, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      buf += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }

  size_t ReadSome(char* buf, size_t n) override {
    for (;;) {
      const ssize_t r = ::read(fd_, buf, n);
      if (r < 0 && errno == EINTR) continue;
      return r <= 0 ? 0 : static_cast<size_t>(r);
    }
  }

  bool WriteAll(const iovec* iov_in, size_t count) override {
    constexpr size_t kMaxIov = 64;
    iovec iov[kMaxIov];
    for (IovCursor cursor(iov_in, count); !cursor.finished();) {
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = cursor.Next(iov, kMaxIov);
      const ssize_t w = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      cursor.Advance(static_cast<size_t>(w));
    }
    return true;
  }

  void Shutdown() override { ::shutdown(fd_, SHUT_RDWR); }

 private:
  const int fd_;
};

class PosixListener : public StreamListener {
 public:
  PosixListener(int fd, int wake_read, int wake_write) : fd_(fd), wake_read_(wake_read), wake_write_(wake_write) {}
  ~PosixListener() override {
    ::close(fd_);
    ::close(wake_read_);
    ::close(wake_write_);
  }

  std::unique_ptr<StreamConn> Accept(int timeout_ms) override {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    const int rv = ::poll(fds, 2, timeout_ms);
    if (rv <= 0 || (fds[1].revents & POLLIN) || !(fds[0].revents & POLLIN)) return nullptr;
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return nullptr;
    SetNoDelay(fd);
    return std::make_unique<PosixConn>(fd);
  }

  void Shutdown() override {
    const char c = 'x';  // stays unread: every later Accept returns at once
    [[maybe_unused]] ssize_t n = ::write(wake_write_, &c, 1);
  }

 private:
  const int fd_, wake_read_, wake_write_;
};

class PosixStreamNet : public StreamNet {
 public:
  const char* Name() const override { return "posix"; }

  Result<std::unique_ptr<StreamListener>> Listen(const std::string& host_port) override {
    sockaddr_in addr;
    QR_RETURN_IF_ERROR(Resolve(host_port, &addr));
    auto fail = [&](const char* what, int fd) {
      Status st = Status::Unavailable(std::string(what) + " " + host_port + ": " + std::strerror(errno));
      if (fd >= 0) ::close(fd);
      return st;
    };
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail("socket for", -1);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return fail("bind", fd);
    if (::listen(fd, 64) != 0) return fail("listen on", fd);
    int wake[2];
    if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) return fail("pipe for", fd);
    return std::unique_ptr<StreamListener>(std::make_unique<PosixListener>(fd, wake[0], wake[1]));
  }

  std::unique_ptr<StreamConn> Connect(const std::string& host_port, int timeout_ms) override {
    sockaddr_in addr;
    if (!Resolve(host_port, &addr).ok()) return nullptr;
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return nullptr;
    int rv = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    if (rv != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rv = ::poll(&p, 1, timeout_ms) == 1 ? 0 : -1;
      int err = 0;
      socklen_t len = sizeof err;
      if (rv == 0 && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) rv = -1;
    }
    if (rv != 0) {
      ::close(fd);
      return nullptr;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // writes block the peer thread only
    SetNoDelay(fd);
    return std::make_unique<PosixConn>(fd);
  }
};

}  // namespace

std::unique_ptr<StreamNet> MakePosixStreamNet() { return std::make_unique<PosixStreamNet>(); }

Status SplitHostPort(const std::string& host_port, std::string* host, int* port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size()) {
    return Status::InvalidArgument("address '" + host_port + "' is not host:port");
  }
  const std::string digits = host_port.substr(colon + 1);
  if (digits.size() > 5) return Status::InvalidArgument("address '" + host_port + "' has a port above 65535");
  for (char c : digits) {
    if (c < '0' || c > '9') return Status::InvalidArgument("address '" + host_port + "' has a bad port");
  }
  const int p = std::stoi(digits);
  if (p < 1 || p > 65535) return Status::InvalidArgument("address '" + host_port + "' has a port outside 1..65535");
  *host = host_port.substr(0, colon);
  *port = p;
  return Status::Ok();
}

}  // namespace qrstore::net
