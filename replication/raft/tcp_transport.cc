#include "replication/raft/tcp_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/logging.h"
#include "replication/raft/message_codec.h"

namespace qrstore::replication::raft {
namespace {

constexpr int kAcceptPollMs = 1000;  // also the period of reaping finished reader threads
constexpr int kConnectTimeoutMs = 500;

bool ReadFull(int fd, char* buf, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void SetNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Status Resolve(const std::string& host, int port, sockaddr_in* out) {
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

}  // namespace

Status SplitHostPort(const std::string& host_port, std::string* host, int* port) {
  Result<std::string> url = ToNngUrl(host_port);  // the same validation as the nng transport
  if (!url.ok()) return url.status();
  const size_t colon = host_port.rfind(':');
  *host = host_port.substr(0, colon);
  *port = std::stoi(host_port.substr(colon + 1));
  return Status::Ok();
}

TcpTransport::TcpTransport(TransportOptions options) : options_(std::move(options)) {}

TcpTransport::~TcpTransport() { Stop(); }

Status TcpTransport::Start(Handler handler) {
  QR_CHECK(!started_, "TcpTransport started twice");
  started_ = true;
  handler_ = std::move(handler);
  const auto& addrs = options_.addresses;
  if (options_.self >= addrs.size()) {
    return Status::InvalidArgument("node id " + std::to_string(options_.self) + " has no address (" +
                                   std::to_string(addrs.size()) + " members)");
  }
  std::vector<sockaddr_in> resolved(addrs.size());
  for (size_t i = 0; i < addrs.size(); ++i) {
    std::string host;
    int port = 0;
    QR_RETURN_IF_ERROR(SplitHostPort(addrs[i], &host, &port));
    QR_RETURN_IF_ERROR(Resolve(host, port, &resolved[i]));
  }
  auto fail = [&](const std::string& what) {
    Status st = Status::Unavailable(options_.identity + " raft transport: " + what + ": " + std::strerror(errno));
    Stop();
    return st;
  };
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return fail("socket");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in& self = resolved[options_.self];
  if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&self), sizeof self) != 0) {
    return fail("bind " + addrs[options_.self]);
  }
  if (::listen(listen_fd_, 64) != 0) return fail("listen on " + addrs[options_.self]);
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) return fail("pipe");

  peers_.resize(addrs.size());
  for (NodeId id = 0; id < addrs.size(); ++id) {
    if (id == options_.self) continue;
    auto peer = std::make_unique<Peer>();
    peer->id = id;
    std::string host;
    SplitHostPort(addrs[id], &host, &peer->port).ok();  // validated above
    peer->host = std::move(host);
    peers_[id] = std::move(peer);
  }
  // Threads last: a failure above leaves none to stop.
  peer_addrs_ = std::move(resolved);
  for (auto& p : peers_) {
    if (!p) continue;
    Peer* raw = p.get();
    raw->thread = NamedThread("raft-send-" + std::to_string(raw->id), [this, raw] { PeerLoop(raw); });
  }
  acceptor_ = NamedThread("raft-accept", [this] { AcceptLoop(); });
  return Status::Ok();
}

void TcpTransport::Send(Message message) {
  Peer* peer = message.to < peers_.size() ? peers_[message.to].get() : nullptr;
  if (peer == nullptr || stop_.load(std::memory_order_relaxed)) {
    counters_.send_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t bytes = 64;
  for (const Entry& e : message.entries) bytes += e.data.size() + 16;
  {
    std::lock_guard<std::mutex> lock(peer->mu);
    // Bounded per peer: beyond it, drop (Raft retries) rather than block the raft thread.
    if (peer->queue.size() >= options_.send_queue_messages ||
        (!peer->queue.empty() && peer->queue_bytes + bytes > options_.send_queue_bytes)) {
      counters_.send_dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    peer->queue_bytes += bytes;
    peer->queue.emplace_back(std::move(message), bytes);
  }
  peer->cv.notify_one();
}

int TcpTransport::Connect(const Peer& peer) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  const sockaddr_in& addr = peer_addrs_[peer.id];
  int rv = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  if (rv != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    rv = ::poll(&p, 1, kConnectTimeoutMs) == 1 ? 0 : -1;
    int err = 0;
    socklen_t len = sizeof err;
    if (rv == 0 && (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) rv = -1;
  }
  if (rv != 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // writes block the peer thread only
  SetNoDelay(fd);
  return fd;
}

bool TcpTransport::WriteFrame(int fd, const Message& m) {
  const std::string payload = EncodeMessage(m);
  char header[kFrameHeaderBytes];
  WriteFrameHeader(payload, header);
  iovec iov[2] = {{header, sizeof header}, {const_cast<char*>(payload.data()), payload.size()}};
  int first = 0;
  while (first < 2) {
    msghdr msg{};
    msg.msg_iov = &iov[first];
    msg.msg_iovlen = static_cast<size_t>(2 - first);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    auto left = static_cast<size_t>(n);
    while (first < 2 && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (first < 2) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return true;
}

void TcpTransport::PeerLoop(Peer* peer) {
  int backoff_ms = options_.reconnect_min_ms;
  int fd = -1;  // this thread's connection (mirrored in peer->fd for Stop's shutdown)
  std::deque<std::pair<Message, uint64_t>> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(peer->mu);
      peer->cv.wait(lock, [&] { return stop_.load(std::memory_order_relaxed) || !peer->queue.empty(); });
      if (stop_.load(std::memory_order_relaxed)) break;
    }
    if (fd < 0) {
      const int nfd = Connect(*peer);
      std::unique_lock<std::mutex> lock(peer->mu);
      if (nfd < 0) {
        // Unreachable: what is queued is dropped (Raft resends), then back off.
        counters_.send_dropped.fetch_add(peer->queue.size(), std::memory_order_relaxed);
        peer->queue.clear();
        peer->queue_bytes = 0;
        peer->cv.wait_for(lock, std::chrono::milliseconds(backoff_ms),
                          [&] { return stop_.load(std::memory_order_relaxed); });
        backoff_ms = std::min(backoff_ms * 2, options_.reconnect_max_ms);
        continue;
      }
      if (stop_.load(std::memory_order_relaxed)) {
        ::close(nfd);
        break;
      }
      fd = peer->fd = nfd;
      backoff_ms = options_.reconnect_min_ms;
    }
    {
      std::lock_guard<std::mutex> lock(peer->mu);
      batch.swap(peer->queue);
      peer->queue_bytes = 0;
    }
    size_t written = 0;
    for (const auto& item : batch) {
      if (!WriteFrame(fd, item.first)) break;
      ++written;
    }
    counters_.sent.fetch_add(written, std::memory_order_relaxed);
    if (written < batch.size()) {
      counters_.send_dropped.fetch_add(batch.size() - written, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(peer->mu);
      ::close(fd);
      fd = peer->fd = -1;
    }
    batch.clear();
  }
  std::lock_guard<std::mutex> lock(peer->mu);
  if (fd >= 0) ::close(fd);
  peer->fd = -1;
}

void TcpTransport::AcceptLoop() {
  const size_t max_inbound = 4 * options_.addresses.size() + 4;
  while (!stop_.load(std::memory_order_relaxed)) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    const int rv = ::poll(fds, 2, kAcceptPollMs);
    ReapInbound(/*all=*/false);
    if (stop_.load(std::memory_order_relaxed)) break;
    if (rv <= 0 || !(fds[0].revents & POLLIN)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    SetNoDelay(fd);
    std::lock_guard<std::mutex> lock(inbound_mu_);
    if (inbound_.size() >= max_inbound) {
      ::close(fd);
      Reject("too many inbound connections");
      continue;
    }
    inbound_.push_back(std::make_unique<Inbound>());
    Inbound* conn = inbound_.back().get();
    conn->fd = fd;
    conn->thread = NamedThread("raft-rd", [this, conn] { ReadLoop(conn); });
  }
}

void TcpTransport::ReadLoop(Inbound* conn) {
  char header[kFrameHeaderBytes];
  while (!stop_.load(std::memory_order_relaxed)) {
    if (!ReadFull(conn->fd, header, sizeof header)) break;  // peer gone (or Stop)
    Result<FrameHeader> h = ParseFrameHeader(std::string_view(header, sizeof header), options_.max_frame_bytes);
    if (!h.ok()) {
      Reject(h.status().ToString());  // a byte stream cannot resynchronise: drop the connection
      break;
    }
    std::string payload(h.value().length, '\0');  // bounded by max_frame_bytes
    if (!ReadFull(conn->fd, payload.data(), payload.size())) {
      if (!stop_.load(std::memory_order_relaxed)) Reject("connection closed inside a frame");
      break;
    }
    if (Status st = CheckFramePayload(h.value(), payload); !st.ok()) {
      Reject(st.ToString());
      break;
    }
    Result<Message> decoded = DecodeMessage(payload);
    if (!decoded.ok()) {
      Reject("undecodable message: " + decoded.status().ToString());
      break;
    }
    Message& m = decoded.value();
    if (m.to != options_.self || m.from >= options_.addresses.size() || m.from == options_.self) {
      Reject("message from " + std::to_string(m.from) + " to " + std::to_string(m.to) + " is not for us");
      continue;  // framing is intact: keep the connection
    }
    counters_.received.fetch_add(1, std::memory_order_relaxed);
    handler_(std::move(m));
  }
  conn->done.store(true, std::memory_order_release);
}

void TcpTransport::ReapInbound(bool all) {
  std::lock_guard<std::mutex> lock(inbound_mu_);
  for (auto it = inbound_.begin(); it != inbound_.end();) {
    Inbound& c = **it;
    if (!all && !c.done.load(std::memory_order_acquire)) {
      ++it;
      continue;
    }
    ::shutdown(c.fd, SHUT_RDWR);  // wakes a blocked read
    c.thread.Join();
    ::close(c.fd);
    it = inbound_.erase(it);
  }
}

void TcpTransport::Reject(const std::string& why) { reject_log_.Reject(options_.identity, why, &counters_); }

void TcpTransport::Stop() {
  if (!started_ || stopped_) {
    stopped_ = true;
    return;
  }
  stopped_ = true;
  stop_.store(true, std::memory_order_relaxed);
  if (wake_pipe_[1] >= 0) {
    const char c = 'x';
    [[maybe_unused]] ssize_t n = ::write(wake_pipe_[1], &c, 1);
  }
  acceptor_.Join();
  for (auto& p : peers_) {
    if (!p) continue;
    {
      std::lock_guard<std::mutex> lock(p->mu);
      if (p->fd >= 0) ::shutdown(p->fd, SHUT_RDWR);  // wakes a write blocked on a slow peer
    }
    p->cv.notify_all();
  }
  for (auto& p : peers_) {
    if (p) p->thread.Join();
  }
  ReapInbound(/*all=*/true);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  for (int& fd : wake_pipe_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

}  // namespace qrstore::replication::raft
