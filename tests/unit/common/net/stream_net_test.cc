// The StreamNet contract (common/net/stream_net.h), checked against both implementations
// (POSIX sockets and nng streams) by GENERATE over the two factories: connect/accept/exchange,
// a 5 MB write with many iovecs through partial reads, end of stream, Shutdown from another
// thread waking blocked reads, writes and accepts, bounded Connect, re-listening on a closed
// port, and a churn of hundreds of connect/exchange/close cycles racing Shutdown (where nng
// 1.5.2's close hang, nanomsg/nng#1543, would show as a ctest TIMEOUT). The Raft
// StreamTransport over both nets: tests/unit/raft_driver/stream_transport_test.cc.
//
// Threads: helper threads (std::async) only call StreamNet methods and return values; every
// assertion runs on the test thread. The few short sleeps only make it likely that a helper is
// already blocked when Shutdown is called; each test passes whichever order actually happens.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "common/bounded_queue.h"
#include "common/rng.h"
#include "common/net/stream_net.h"
#include "tests/unit/common/net/net_test_util.h"

// Under ThreadSanitizer, reports from inside libnng (not instrumented; it ends object lifetimes
// with atomic reference counts TSan cannot see) are suppressed by scripts/tsan.supp, which
// scripts/test.sh passes in TSAN_OPTIONS; every race in our own code is still reported.

namespace qrstore::net {
namespace {

using namespace testing;  // NOLINT: the shared helpers

// A TCP socket bound to 127.0.0.1:<kernel's choice> for the scope of a test, so no other
// process can take its port (other tests run in parallel on this machine). Not listening: a
// connect there is refused at once. Listening with backlog 0 and never accepting: once one
// connection is queued, further SYNs are dropped, so a connect can only end by its timeout.
class BoundSocket {
 public:
  explicit BoundSocket(int listen_backlog = -1) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    if (listen_backlog >= 0) REQUIRE(::listen(fd_, listen_backlog) == 0);
  }
  ~BoundSocket() { ::close(fd_); }
  BoundSocket(const BoundSocket&) = delete;
  BoundSocket& operator=(const BoundSocket&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Busy-waits for about n short steps (tens of microseconds at most here) so Shutdown lands at
// varying points of another thread's operation. No yield: on a loaded machine every yield
// can cost a scheduler slice, which turned a 1 s churn into 15 s.
void Spin(uint64_t n) {
  volatile uint64_t x = 0;
  for (uint64_t i = 0; i < n; ++i) x = x + 1;
}

template <typename T>
bool Ready(std::future<T>& f, std::chrono::milliseconds within) {
  return f.wait_for(within) == std::future_status::ready;
}

bool WriteString(StreamConn* c, const std::string& s) {
  iovec iov{const_cast<char*>(s.data()), s.size()};
  return c->WriteAll(&iov, 1);
}

std::optional<std::string> ReadString(StreamConn* c, size_t n) {
  std::string s(n, '\0');
  if (!c->ReadFull(s.data(), n)) return std::nullopt;
  return s;
}

// A listener with one connected pair.
struct Pair {
  std::unique_ptr<StreamListener> listener;
  std::unique_ptr<StreamConn> client, server;
};

void ConnectPair(StreamNet* net, StreamListener* listener, const std::string& addr, Pair* p) {
  p->client = net->Connect(addr, 5000);
  REQUIRE(p->client != nullptr);
  p->server = listener->Accept(5000);
  REQUIRE(p->server != nullptr);
}

Pair MakePair(StreamNet* net) {
  Pair p;
  const std::string addr = Addr(FreePort());
  auto l = net->Listen(addr);
  REQUIRE(l.ok());
  p.listener = std::move(l).value();
  ConnectPair(net, p.listener.get(), addr, &p);
  return p;
}

TEST_CASE("stream net: connect, accept and exchange in both directions", "[net][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  auto net = kind.make();
  REQUIRE(std::string(net->Name()) == kind.name);
  Pair p = MakePair(net.get());
  REQUIRE(WriteString(p.client.get(), "hello"));
  REQUIRE(ReadString(p.server.get(), 5) == "hello");
  // Several iovecs, some empty, come out as one byte sequence.
  std::string a = "ab", c = "cde";
  iovec iov[4] = {{a.data(), a.size()}, {nullptr, 0}, {c.data(), c.size()}, {nullptr, 0}};
  REQUIRE(p.server->WriteAll(iov, 4));
  REQUIRE(ReadString(p.client.get(), 5) == "abcde");
  // ReadSome returns what has arrived (at least one byte), never more than asked.
  REQUIRE(WriteString(p.client.get(), "0123456789"));
  std::string some;
  for (int i = 0; i < 10 && some.size() < 10; ++i) {
    char buf[64];
    const size_t want = std::min<size_t>(sizeof buf, 10 - some.size());
    const size_t got = p.server->ReadSome(buf, want);
    REQUIRE(got >= 1);
    REQUIRE(got <= want);
    some.append(buf, got);
  }
  REQUIRE(some == "0123456789");
  // Nothing to do is success.
  REQUIRE(p.client->WriteAll(nullptr, 0));
  char dummy;
  REQUIRE(p.client->ReadFull(&dummy, 0));
}

// TCP_NODELAY of every TCP socket of this process with `port` at either end (our connection's
// two ends), read from the kernel through /proc/self/fd: what the implementation really set.
std::vector<int> NoDelayOfConnectionsOnPort(int port) {
  std::vector<int> values;
  DIR* dir = ::opendir("/proc/self/fd");
  REQUIRE(dir != nullptr);
  while (const dirent* e = ::readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == ::dirfd(dir)) continue;
    sockaddr_in self{}, peer{};
    socklen_t len = sizeof self;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) != 0 || self.sin_family != AF_INET) continue;
    len = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;  // a listener
    if (ntohs(self.sin_port) != port && ntohs(peer.sin_port) != port) continue;
    int value = -1;
    len = sizeof value;
    REQUIRE(::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &len) == 0);
    values.push_back(value);
  }
  ::closedir(dir);
  return values;
}

TEST_CASE("stream net: both ends of a connection have TCP_NODELAY set", "[net][stream_net]") {
  // Small Raft messages must not wait for a delayed ACK. nng 1.5.2's stream dialer and
  // listener default to Nagle ON (unlike its SP tcp transport), so the nng net must set it.
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  auto net = kind.make();
  const int port = FreePort();
  auto l = net->Listen(Addr(port));
  REQUIRE(l.ok());
  Pair p;
  ConnectPair(net.get(), l.value().get(), Addr(port), &p);
  const std::vector<int> values = NoDelayOfConnectionsOnPort(port);
  REQUIRE(values.size() == 2);
  for (int v : values) REQUIRE(v != 0);
}

TEST_CASE("stream net: a 5 MB write of many iovecs arrives whole through partial reads", "[net][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  auto net = kind.make();
  Pair p = MakePair(net.get());
  const size_t kBytes = 5 << 20;
  const std::string data = RandomBytes(7, kBytes);
  // ~1000 iovecs of random sizes (some empty): more than any per-call iovec limit.
  Rng rng(11);
  std::vector<iovec> iov;
  for (size_t off = 0; off < kBytes;) {
    const size_t len = std::min<size_t>(rng.Uniform(4) == 0 ? 0 : rng.Uniform(10000) + 1, kBytes - off);
    iov.push_back({const_cast<char*>(data.data()) + off, len});
    off += len;
  }
  REQUIRE(iov.size() > 500);
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    auto writer = std::async(std::launch::async, [&] { return p.client->WriteAll(iov.data(), iov.size()); });
    std::string got(kBytes, '\0');
    if (round == 0) {
      // One ReadFull for everything: the kernel delivers it in many pieces.
      REQUIRE(p.server->ReadFull(got.data(), kBytes));
    } else {
      for (size_t off = 0; off < kBytes;) {
        const size_t n = std::min<size_t>(rng.Uniform(70000) + 1, kBytes - off);
        REQUIRE(p.server->ReadFull(got.data() + off, n));
        off += n;
      }
    }
    REQUIRE(Ready(writer, kPrompt));
    REQUIRE(writer.get());
    REQUIRE(got == data);
  }
}

TEST_CASE("stream net: ReadFull returns false at end of stream", "[net][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  auto net = kind.make();
  SECTION("peer destroyed after a whole message") {
    Pair p = MakePair(net.get());
    REQUIRE(WriteString(p.client.get(), "0123456789"));
    p.client.reset();
    REQUIRE(ReadString(p.server.get(), 10) == "0123456789");
    REQUIRE(!ReadString(p.server.get(), 1));
    REQUIRE(!ReadString(p.server.get(), 1));  // and stays so
    char c;
    REQUIRE(p.server->ReadSome(&c, 1) == 0);
  }
  SECTION("peer destroyed inside a message") {
    Pair p = MakePair(net.get());
    REQUIRE(WriteString(p.client.get(), "01234"));
    p.client.reset();
    REQUIRE(!ReadString(p.server.get(), 10));
  }
  SECTION("peer shut down (not destroyed)") {
    Pair p = MakePair(net.get());
    p.server->Shutdown();
    REQUIRE(!ReadString(p.client.get(), 1));
  }
}

TEST_CASE("stream net: Shutdown from another thread wakes a blocked ReadFull", "[net][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  auto net = kind.make();
  Pair p = MakePair(net.get());
  auto reader = std::async(std::launch::async, [&] { return ReadString(p.server.get(), 100).has_value(); });
  REQUIRE(!Ready(reader, milliseconds(50)));  // nothing was sent: it cannot have finished
  p.server->Shutdown();
  REQUIRE(Ready(reader, kPrompt));
  REQUIRE(!reader.get());
  // Later calls fail at once; Shutdown is idempotent; the peer sees the end of the stream.
  REQUIRE(!ReadString(p.server.get(), 1));
  char c;
  REQUIRE(p.server->ReadSome(&c, 1) == 0);
  REQUIRE(!WriteString(p.server.get(), "x"));
  p.server->Shutdown();
  REQUIRE(!ReadString(p.client.get(), 1));
}

TEST_CASE("stream net: Shutdown from another thread wakes a blocked ReadSome", "[net][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  auto net = kind.make();
  Pair p = MakePair(net.get());
  auto reader = std::async(std::launch::async, [&] {
    char buf[100];
    return p.server->ReadSome(buf, sizeof buf);
  });
  REQUIRE(!Ready(reader, milliseconds(50)));  // nothing was sent: it cannot have finished
  p.server->Shutdown();
  REQUIRE(Ready(reader, kPrompt));
  REQUIRE(reader.get() == 0);
}

TEST_CASE("stream net: Shutdown racing a ReadFull being started never loses the wakeup", "[net][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  auto net = kind.make();
  const std::string addr = Addr(FreePort());
  auto l = net->Listen(addr);
  REQUIRE(l.ok());
  for (int i = 0; i < 100; ++i) {
    INFO("iteration " << i);
    Pair p;
    ConnectPair(net.get(), l.value().get(), addr, &p);
    // Repeated reads, so Shutdown lands before, during or between submissions.
    auto reader = std::async(std::launch::async, [&] {
      for (int k = 0; k < 1000; ++k) {
        if (!ReadString(p.server.get(), 1)) return true;
      }
      return false;
    });
    auto writer = std::async(std::launch::async, [&] {
      for (int k = 0; k < 1000; ++k) {
        if (!WriteString(p.client.get(), "y")) return;
      }
    });
    Spin(static_cast<uint64_t>(i) * 200);
    p.server->Shutdown();
    REQUIRE(Ready(reader, kPrompt));
    reader.get();  // true if stopped by Shutdown, false if all 1000 bytes came first: both fine
    p.client->Shutdown();
    REQUIRE(Ready(writer, kPrompt));
  }
}

TEST_CASE("stream net: WriteAll to a peer that stopped reading unblocks on Shutdown", "[net][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  auto net = kind.make();
  Pair p = MakePair(net.get());
  const std::string mb(1 << 20, 'w');
  std::vector<iovec> iov(64, iovec{const_cast<char*>(mb.data()), mb.size()});  // 64 MB
  auto writer = std::async(std::launch::async, [&] { return p.client->WriteAll(iov.data(), iov.size()); });
  // 64 MB cannot fit in the socket buffers of a peer that reads nothing.
  REQUIRE(!Ready(writer, milliseconds(100)));
  p.client->Shutdown();
  REQUIRE(Ready(writer, kPrompt));
  REQUIRE(!writer.get());
}

TEST_CASE("stream net: Accept waits at most its timeout and Shutdown wakes it", "[net][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  auto net = kind.make();
  const std::string addr = Addr(FreePort());
  auto l = net->Listen(addr);
  REQUIRE(l.ok());
  StreamListener* listener = l.value().get();
  const auto start = Clock::now();
  REQUIRE(listener->Accept(100) == nullptr);
  const auto took = Clock::now() - start;
  REQUIRE(took >= milliseconds(90));
  REQUIRE(took < kPrompt);

  auto acceptor = std::async(std::launch::async, [&] { return listener->Accept(600000) == nullptr; });
  REQUIRE(!Ready(acceptor, milliseconds(50)));  // nobody connects: it cannot have returned
  listener->Shutdown();
  REQUIRE(Ready(acceptor, kPrompt));
  REQUIRE(acceptor.get());
  // After Shutdown: nullptr at once, even with a connection waiting in the backlog.
  auto late = net->Connect(addr, 500);  // may succeed (kernel backlog) or fail: either is fine
  const auto start2 = Clock::now();
  REQUIRE(listener->Accept(600000) == nullptr);
  REQUIRE(Clock::now() - start2 < kPrompt);
  listener->Shutdown();  // idempotent
}

TEST_CASE("stream net: Connect fails within its timeout, bad addresses are refused", "[net][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  auto net = kind.make();
  const BoundSocket refusing;  // bound, not listening
  auto start = Clock::now();
  REQUIRE(net->Connect(Addr(refusing.port()), 500) == nullptr);
  REQUIRE(Clock::now() - start < milliseconds(500) + seconds(2));
  // A full accept queue: the only way for a connect to end is its timeout (a non-routable
  // address is no good: sandboxes may answer any address).
  const BoundSocket full(/*listen_backlog=*/0);
  const int port2 = full.port();
  std::vector<std::unique_ptr<StreamConn>> queued;
  bool timed_out = false;
  std::string attempts;  // for the failure message
  for (int i = 0; i < 8 && !timed_out; ++i) {
    start = Clock::now();
    auto c = net->Connect(Addr(port2), 300);
    const auto took = Clock::now() - start;
    attempts += (c ? " connected in " : " failed in ") +
                std::to_string(std::chrono::duration_cast<milliseconds>(took).count()) + " ms;";
    INFO("attempts:" << attempts);
    REQUIRE(took < milliseconds(300) + seconds(2));
    if (c) {
      queued.push_back(std::move(c));
    } else {
      timed_out = true;
      REQUIRE(took >= milliseconds(250));
    }
  }
  INFO("attempts:" << attempts);
  REQUIRE(timed_out);
  queued.clear();
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", ":80", "127.0.0.1:0", "127.0.0.1:99999", "127.0.0.1:8x"}) {
    INFO(bad);
    REQUIRE(net->Connect(bad, 100) == nullptr);
    auto l = net->Listen(bad);
    REQUIRE(!l.ok());
    REQUIRE(l.status().code() == StatusCode::kInvalidArgument);
  }
  // A port already listened on: kUnavailable naming the address.
  const int port = FreePort();
  auto first = net->Listen(Addr(port));
  REQUIRE(first.ok());
  auto second = net->Listen(Addr(port));
  REQUIRE(!second.ok());
  REQUIRE(second.status().code() == StatusCode::kUnavailable);
  REQUIRE(second.status().message().find(Addr(port)) != std::string::npos);
}

TEST_CASE("stream net: a listener can be closed and the same port listened on again", "[net][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  auto net = kind.make();
  const std::string addr = Addr(FreePort());
  for (int i = 0; i < 20; ++i) {
    INFO("round " << i);
    auto l = net->Listen(addr);
    REQUIRE(l.ok());
    Pair p;
    p.listener = std::move(l).value();
    ConnectPair(net.get(), p.listener.get(), addr, &p);
    REQUIRE(WriteString(p.client.get(), "r"));
    REQUIRE(ReadString(p.server.get(), 1) == "r");
    if (i % 2 == 0) {
      p.listener.reset();  // the listener goes first; its accepted connection lives on
      REQUIRE(WriteString(p.server.get(), "s"));
      REQUIRE(ReadString(p.client.get(), 1) == "s");
    }
    // p's connections and (if still there) listener go at the end of the round.
  }
}

// What each churn cycle does after its exchange.
enum class Close { kClientFirst, kServerFirst, kShutdownBlockedReader, kShutdownBothMidTransfer, kShutdownOwnWriter };

TEST_CASE("stream net: churn of connect/exchange/close cycles racing Shutdown", "[net][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  auto net = kind.make();
  std::string addr;
  const BoundSocket refusing;  // failed dials go here
  const std::string bulk = RandomBytes(3, 256 << 10);
  Rng rng(2024);
  std::unique_ptr<StreamListener> listener;
  constexpr int kCycles = 200;
  const auto start = Clock::now();
  for (int i = 0; i < kCycles; ++i) {
    INFO("cycle " << i);
    if (i % 50 == 0) {  // the listener itself churns too: shut down, destroyed, replaced
      if (listener) listener->Shutdown();
      listener.reset();
      // A fresh port: re-listening on the same one has its own test, and here the closed port
      // could be taken (e.g. as an ephemeral port) by another process on this shared machine.
      addr = Addr(FreePort());
      auto l = net->Listen(addr);
      REQUIRE(l.ok());
      listener = std::move(l).value();
    }
    if (i % 10 == 5) REQUIRE(net->Connect(Addr(refusing.port()), 200) == nullptr);  // a failed dial
    Pair p;
    ConnectPair(net.get(), listener.get(), addr, &p);
    const std::string ping = "ping" + std::to_string(i), pong = "pong" + std::to_string(i);
    REQUIRE(WriteString(p.client.get(), ping));
    REQUIRE(ReadString(p.server.get(), ping.size()) == ping);
    REQUIRE(WriteString(p.server.get(), pong));
    REQUIRE(ReadString(p.client.get(), pong.size()) == pong);
    const auto mode = static_cast<Close>(rng.Uniform(5));
    INFO("mode " << static_cast<int>(mode));
    switch (mode) {
      case Close::kClientFirst:
        p.client.reset();
        REQUIRE(!ReadString(p.server.get(), 1));
        break;
      case Close::kServerFirst:
        p.server.reset();
        REQUIRE(!ReadString(p.client.get(), 1));
        break;
      case Close::kShutdownBlockedReader: {
        auto reader = std::async(std::launch::async, [&] { return ReadString(p.server.get(), 1).has_value(); });
        Spin(rng.Uniform(20000));
        p.server->Shutdown();
        REQUIRE(Ready(reader, kPrompt));
        REQUIRE(!reader.get());
        break;
      }
      case Close::kShutdownBothMidTransfer: {
        // A transfer in each direction, both ends shut down from two other threads at once.
        auto w1 = std::async(std::launch::async, [&] { return WriteString(p.client.get(), bulk); });
        auto r1 = std::async(std::launch::async, [&] { return ReadString(p.server.get(), bulk.size()).has_value(); });
        auto w2 = std::async(std::launch::async, [&] { return WriteString(p.server.get(), bulk); });
        auto r2 = std::async(std::launch::async, [&] { return ReadString(p.client.get(), bulk.size()).has_value(); });
        Spin(rng.Uniform(20000));
        auto s1 = std::async(std::launch::async, [&] { p.client->Shutdown(); });
        auto s2 = std::async(std::launch::async, [&] { p.server->Shutdown(); });
        for (auto* f : {&w1, &r1, &w2, &r2}) REQUIRE(Ready(*f, kPrompt));
        REQUIRE(Ready(s1, kPrompt));
        REQUIRE(Ready(s2, kPrompt));
        break;  // whether each transfer finished first depends on timing: only termination counts
      }
      case Close::kShutdownOwnWriter: {
        auto writer = std::async(std::launch::async, [&] { return WriteString(p.client.get(), bulk); });
        auto reader = std::async(std::launch::async, [&] { return ReadString(p.server.get(), bulk.size()); });
        Spin(rng.Uniform(20000));
        p.client->Shutdown();
        REQUIRE(Ready(writer, kPrompt));
        REQUIRE(Ready(reader, kPrompt));
        const bool wrote = writer.get();
        const std::optional<std::string> read = reader.get();
        if (read) REQUIRE(*read == bulk);  // whatever arrives is intact
        if (!wrote) REQUIRE(!read);        // an interrupted write never looks complete
        break;
      }
    }
    // The connections are destroyed here, in declaration order (server, then client).
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  WARN(kind.name << ": " << kCycles << " churn cycles in " << secs << " s");
}

}  // namespace
}  // namespace qrstore::net
