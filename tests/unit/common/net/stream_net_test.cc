// The StreamNet contract (replication/raft/stream_net.h), checked against both implementations
// (POSIX sockets and nng streams) by GENERATE over the two factories: connect/accept/exchange,
// a 5 MB write with many iovecs through partial reads, end of stream, Shutdown from another
// thread waking blocked reads, writes and accepts, bounded Connect, re-listening on a closed
// port, and a churn of hundreds of connect/exchange/close cycles racing Shutdown (where nng
// 1.5.2's close hang, nanomsg/nng#1543, would show as a ctest TIMEOUT). Then the Raft
// StreamTransport scenarios over both nets.
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
#include "replication/raft/stream_net.h"
#include "replication/raft/stream_transport.h"
#include "replication/raft/transport.h"

// Under ThreadSanitizer, reports from inside libnng (not instrumented; it ends object lifetimes
// with atomic reference counts TSan cannot see) are suppressed by scripts/tsan.supp, which
// scripts/test.sh passes in TSAN_OPTIONS; every race in our own code is still reported.

namespace qrstore::replication::raft {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Long enough for a loaded 2-core machine under ThreadSanitizer; a hang takes forever.
constexpr auto kPrompt = seconds(10);

struct NetKind {
  const char* name;
  std::unique_ptr<StreamNet> (*make)();
};

NetKind Kind(int i) { return i == 0 ? NetKind{"posix", &MakePosixStreamNet} : NetKind{"nng", &MakeNngStreamNet}; }

// A port the kernel considers free right now (bound to 127.0.0.1:0 and released).
int FreePort() {
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

std::string Addr(int port) { return "127.0.0.1:" + std::to_string(port); }

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

std::string RandomBytes(uint64_t seed, size_t n) {
  Rng rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng.Next());
  return s;
}

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

TEST_CASE("stream net: connect, accept and exchange in both directions", "[raft_driver][stream_net]") {
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

TEST_CASE("stream net: both ends of a connection have TCP_NODELAY set", "[raft_driver][stream_net]") {
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

TEST_CASE("stream net: a 5 MB write of many iovecs arrives whole through partial reads", "[raft_driver][stream_net]") {
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

TEST_CASE("stream net: ReadFull returns false at end of stream", "[raft_driver][stream_net]") {
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

TEST_CASE("stream net: Shutdown from another thread wakes a blocked ReadFull", "[raft_driver][stream_net]") {
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

TEST_CASE("stream net: Shutdown from another thread wakes a blocked ReadSome", "[raft_driver][stream_net]") {
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

TEST_CASE("stream net: Shutdown racing a ReadFull being started never loses the wakeup", "[raft_driver][stream_net]") {
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

TEST_CASE("stream net: WriteAll to a peer that stopped reading unblocks on Shutdown", "[raft_driver][stream_net]") {
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

TEST_CASE("stream net: Accept waits at most its timeout and Shutdown wakes it", "[raft_driver][stream_net]") {
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

TEST_CASE("stream net: Connect fails within its timeout, bad addresses are refused", "[raft_driver][stream_net]") {
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

TEST_CASE("stream net: a listener can be closed and the same port listened on again", "[raft_driver][stream_net]") {
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

TEST_CASE("stream net: churn of connect/exchange/close cycles racing Shutdown", "[raft_driver][stream_net]") {
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

// ---- The Raft StreamTransport over both nets ----

Message SampleAppend(size_t payload_bytes, NodeId from = 0, NodeId to = 1) {
  Message m;
  m.type = MessageType::kAppendRequest;
  m.group = 3;
  m.from = from;
  m.to = to;
  m.term = 7;
  m.log_index = 10;
  m.log_term = 6;
  m.commit = 9;
  m.entries.push_back(Entry{7, 11, RandomBytes(payload_bytes, payload_bytes)});
  m.entries.push_back(Entry{7, 12, std::string()});
  return m;
}

struct TransportPair {
  NetKind kind;
  std::vector<std::string> addrs;
  // Declared before the transports so they outlive them (receive threads push here).
  BoundedQueue<Message> to_a{1024}, to_b{1024};
  std::unique_ptr<StreamTransport> a, b;

  explicit TransportPair(NetKind k, uint64_t send_queue_bytes = 256ull << 20) : kind(k) {
    addrs = {Addr(FreePort()), Addr(FreePort())};
    a = std::make_unique<StreamTransport>(Options(0, send_queue_bytes), kind.make());
    b = std::make_unique<StreamTransport>(Options(1, send_queue_bytes), kind.make());
  }
  TransportOptions Options(NodeId self, uint64_t send_queue_bytes) const {
    TransportOptions o;
    o.self = self;
    o.addresses = addrs;
    o.max_frame_bytes = 16 << 20;
    o.send_queue_bytes = send_queue_bytes;
    o.identity = self == 0 ? "a" : "b";
    return o;
  }
  void Start() {
    REQUIRE(a->Start([this](Message&& m) { to_a.TryPush(m); }).ok());
    REQUIRE(b->Start([this](Message&& m) { to_b.TryPush(m); }).ok());
  }
};

TEST_CASE("stream transport over both nets: messages arrive intact, including a 5 MB append", "[raft_driver][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  TransportPair t(kind);
  t.Start();
  const Message small = SampleAppend(100);
  const Message big = SampleAppend(5 << 20);
  t.a->Send(small);
  t.a->Send(big);
  auto got1 = t.to_b.PopFor(kPrompt);
  auto got2 = t.to_b.PopFor(kPrompt);
  REQUIRE(got1.has_value());
  REQUIRE(got2.has_value());
  REQUIRE(*got1 == small);
  REQUIRE(*got2 == big);
  // Many entries: one iovec each in the frame, beyond any per-call iovec limit.
  Message many = SampleAppend(0);
  many.entries.clear();
  for (Index i = 0; i < 300; ++i) many.entries.push_back(Entry{7, 11 + i, RandomBytes(i, i * 37 % 5000)});
  t.a->Send(many);
  auto got_many = t.to_b.PopFor(kPrompt);
  REQUIRE(got_many.has_value());
  REQUIRE(*got_many == many);
  const Message back = SampleAppend(10, 1, 0);
  t.b->Send(back);
  auto got3 = t.to_a.PopFor(kPrompt);
  REQUIRE(got3.has_value());
  REQUIRE(*got3 == back);
  REQUIRE(t.b->counters().received.load() == 3);
}

// Opens a raw TCP connection to host:port, writes bytes, and closes.
void RawTcpSend(const std::string& host_port, const std::string& bytes) {
  const int port = std::stoi(host_port.substr(host_port.rfind(':') + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n <= 0) break;  // the receiver may already have dropped us (oversized header)
    off += static_cast<size_t>(n);
  }
  ::close(fd);
}

TEST_CASE("stream transport over both nets: garbage connections are rejected, the node keeps working",
          "[raft_driver][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  TransportPair t(kind);
  t.Start();
  const std::string good = FrameBytes(SampleAppend(50));
  std::string corrupt = good;  // the last entry byte: fails its entry checksum
  corrupt[corrupt.size() - 1] ^= 0x40;
  std::string oversized = good;  // the header claims a 1 GB head, far above the 16 MB limit
  const uint32_t len = 1u << 30;
  std::memcpy(oversized.data() + 8, &len, 4);
  std::string bad_head = good;  // a head that fails its checksum
  bad_head[kFrameHeaderBytes + 3] ^= 0x11;
  Message misaddressed = SampleAppend(10);
  misaddressed.to = 0;  // b is node 1
  const std::vector<std::string> bad = {std::string(64, 'G'), good.substr(0, good.size() - 3), corrupt,
                                        oversized, bad_head, FrameBytes(misaddressed)};
  for (const std::string& bytes : bad) RawTcpSend(t.addrs[1], bytes);
  RawTcpSend(t.addrs[1], "");            // connect and leave: not an error
  RawTcpSend(t.addrs[1], good + good);  // two frames back to back on one stream
  for (int i = 0; i < 2; ++i) {
    auto got = t.to_b.PopFor(kPrompt);
    REQUIRE(got.has_value());
    REQUIRE(*got == SampleAppend(50));
  }
  // Rejections are counted by reader threads, which may finish after the good frames arrive.
  const auto deadline = Clock::now() + kPrompt;
  while (t.b->counters().rejected.load() < bad.size() && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  REQUIRE(t.b->counters().rejected.load() == bad.size());
  REQUIRE(t.b->counters().received.load() == 2);
  t.a->Send(SampleAppend(7));
  auto got = t.to_b.PopFor(kPrompt);
  REQUIRE(got.has_value());
  REQUIRE(*got == SampleAppend(7));
}

TEST_CASE("stream transport over both nets: a dead peer never blocks the sender", "[raft_driver][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  TransportPair t(kind, /*send_queue_bytes=*/8 << 20);
  REQUIRE(t.a->Start([](Message&&) {}).ok());  // b never starts
  const Message m = SampleAppend(64 << 10);
  const auto start = Clock::now();
  for (int i = 0; i < 5000; ++i) t.a->Send(m);
  // Generous: the point is "does not block on the peer" (Send involves no timeout at all).
  REQUIRE(Clock::now() - start < kPrompt);
  REQUIRE(t.a->counters().send_dropped.load() > 0);
  const auto stop_start = Clock::now();
  t.a->Stop();  // its sender is connecting or backing off: Stop must not wait for either long
  REQUIRE(Clock::now() - stop_start < kPrompt);
}

TEST_CASE("stream transport over both nets: a restarted peer is reconnected", "[raft_driver][stream_net]") {
  const NetKind kind = Kind(GENERATE(0, 1));
  INFO(kind.name);
  TransportPair t(kind);
  t.Start();
  t.a->Send(SampleAppend(10));
  REQUIRE(t.to_b.PopFor(kPrompt).has_value());
  t.b->Stop();
  auto b2 = std::make_unique<StreamTransport>(t.Options(1, 256ull << 20), kind.make());
  BoundedQueue<Message> to_b2(1024);
  REQUIRE(b2->Start([&](Message&& m) { to_b2.TryPush(m); }).ok());
  // The old connection is dead; Raft-style resends until one gets through the new one.
  std::optional<Message> got;
  for (int i = 0; i < 100 && !got; ++i) {
    t.a->Send(SampleAppend(11));
    got = to_b2.PopFor(milliseconds(100));
  }
  REQUIRE(got.has_value());
  REQUIRE(*got == SampleAppend(11));
  b2->Stop();
}

}  // namespace
}  // namespace qrstore::replication::raft
