// Raft transport: frame parsing rejects every truncation, corruption and oversized length;
// NngTransport delivers (including a 5 MB append), survives garbage on its socket, and never
// blocks on a dead peer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pipeline0/push.h>

#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "common/bounded_queue.h"
#include "common/rng.h"
#include "replication/raft/message_codec.h"
#include "replication/raft/stream_transport.h"
#include "replication/raft/transport.h"
#include "tests/integration/raft/raft_test_util.h"

namespace qrstore::replication::raft {
namespace {

Message SampleAppend(size_t payload_bytes) {
  Message m;
  m.type = MessageType::kAppendRequest;
  m.group = 3;
  m.from = 0;
  m.to = 1;
  m.term = 7;
  m.log_index = 10;
  m.log_term = 6;
  m.commit = 9;
  m.entries.push_back(Entry{7, 11, testing::Payload(0, 1, payload_bytes)});
  m.entries.push_back(Entry{7, 12, ""});
  return m;
}

TEST_CASE("raft frame: a good frame parses back to its message", "[raft_driver][transport]") {
  for (size_t payload : {size_t{0}, size_t{1000}, size_t{100 << 10}}) {
    INFO("payload " << payload);
    const Message m = SampleAppend(payload);
    const std::string frame = FrameBytes(m);
    REQUIRE(frame.size() == kFrameHeaderBytes + EncodeMessage(m).size());
    Result<Message> parsed = ParseFrame(frame, 1 << 20);
    REQUIRE(parsed.ok());
    REQUIRE(parsed.value() == m);
  }
  Message vote;
  vote.type = MessageType::kVoteRequest;
  vote.to = 1;
  REQUIRE(ParseFrame(FrameBytes(vote), 64).value() == vote);  // a frame without a body
}

TEST_CASE("raft frame: large payloads are sent from the entries' own buffers", "[raft_driver][transport]") {
  const Message big = SampleAppend(100 << 10);
  const OutgoingFrame f = BuildFrame(big);
  // Header + head only in the prefix; the 100 KB entry is one slice of the entry's buffer.
  REQUIRE(f.prefix.size() < 200);
  REQUIRE(f.body.size() == 2);
  REQUIRE(f.body[0].data() == big.entries[0].data.data());
  REQUIRE(f.bytes() == FrameBytes(big).size());
  REQUIRE(f.Iovecs().size() == 2);  // the empty no-op entry needs no iovec
  // A small message travels as one buffer.
  const OutgoingFrame small = BuildFrame(SampleAppend(100));
  REQUIRE(small.body.empty());
  REQUIRE(small.prefix == FrameBytes(SampleAppend(100)));
}

TEST_CASE("raft frame: a received entry is a view into the frame's body buffer", "[raft_driver][transport]") {
  const std::string frame = FrameBytes(SampleAppend(5000));
  size_t at = 0;
  auto read = [&](char* buf, size_t n) {
    if (frame.size() - at < n) return false;
    std::memcpy(buf, frame.data() + at, n);
    at += n;
    return true;
  };
  Result<Message> m = ReadFrame(read, 1 << 20);
  REQUIRE(m.ok());
  REQUIRE(m.value() == SampleAppend(5000));
  REQUIRE(m.value().entries[0].data.checksum() == EntryChecksum(m.value().entries[0].data.view()));
  // The stream is now at its end: an orderly close, not corruption.
  REQUIRE(ReadFrame(read, 1 << 20).status().code() == StatusCode::kAborted);
  // Cut inside a frame: kUnavailable.
  at = frame.size() - 10;
  const std::string cut = frame.substr(0, frame.size() - 10);
  size_t at2 = 0;
  auto read_cut = [&](char* buf, size_t n) {
    if (cut.size() - at2 < n) return false;
    std::memcpy(buf, cut.data() + at2, n);
    at2 += n;
    return true;
  };
  REQUIRE(ReadFrame(read_cut, 1 << 20).status().code() == StatusCode::kUnavailable);
}

TEST_CASE("raft frame: every truncation and every extension is rejected", "[raft_driver][transport]") {
  const std::string frame = FrameBytes(SampleAppend(300));
  for (size_t n = 0; n < frame.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    REQUIRE(ParseFrame(std::string_view(frame.data(), n), 1 << 20).status().code() == StatusCode::kCorruption);
  }
  REQUIRE(!ParseFrame(frame + "x", 1 << 20).ok());
}

TEST_CASE("raft frame: every single-byte corruption is rejected", "[raft_driver][transport]") {
  // Header and head are covered by the head checksum, the body by the entry checksums.
  const std::string frame = FrameBytes(SampleAppend(200));
  for (size_t i = 0; i < frame.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      std::string bad = frame;
      bad[i] = static_cast<char>(bad[i] ^ flip);
      INFO("byte " << i << " xor " << int(flip));
      REQUIRE(ParseFrame(bad, 1 << 20).status().code() == StatusCode::kCorruption);
    }
  }
}

TEST_CASE("raft frame: oversized declared lengths are rejected before reading", "[raft_driver][transport]") {
  const std::string frame = FrameBytes(SampleAppend(1000));
  const size_t content = frame.size() - kFrameHeaderBytes;
  REQUIRE(ParseFrame(frame, content).ok());
  Result<Message> r = ParseFrame(frame, content - 1);
  REQUIRE(r.status().code() == StatusCode::kCorruption);
  REQUIRE(r.status().message().find("exceeds") != std::string::npos);
  // Headers claiming 4 GB heads or bodies, with nothing behind them.
  for (size_t offset : {8, 12}) {
    std::string huge = frame.substr(0, kFrameHeaderBytes);
    const uint32_t len = UINT32_MAX;
    std::memcpy(huge.data() + offset, &len, 4);
    REQUIRE(ParseFrameHeader(huge, 64 << 20).status().code() == StatusCode::kCorruption);
  }
}

TEST_CASE("raft frame: a body that disagrees with its head is rejected", "[raft_driver][transport]") {
  // Well-framed (good head checksum) but the header's body length is not what the entries hold.
  const Message m = SampleAppend(100);
  std::string frame = FrameBytes(m);
  frame += "zz";
  uint32_t body = 0;
  std::memcpy(&body, frame.data() + 12, 4);
  body += 2;
  std::memcpy(frame.data() + 12, &body, 4);
  Result<Message> r = ParseFrame(frame, 1 << 20);
  REQUIRE(r.status().code() == StatusCode::kCorruption);
  REQUIRE(r.status().message().find("body length") != std::string::npos);
}

TEST_CASE("raft frame: random foreign bytes never parse", "[raft_driver][transport]") {
  Rng rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng.Uniform(200), '\0');
    for (auto& c : junk) c = static_cast<char>(rng.Next());
    REQUIRE(!ParseFrame(junk, 1 << 20).ok());
  }
}

TEST_CASE("raft transport: nng url parsing", "[raft_driver][transport]") {
  REQUIRE(ToNngUrl("127.0.0.1:7000").value() == "tcp://127.0.0.1:7000");
  REQUIRE(!ToNngUrl("127.0.0.1").ok());
  REQUIRE(!ToNngUrl(":7000").ok());
  REQUIRE(!ToNngUrl("127.0.0.1:").ok());
  REQUIRE(!ToNngUrl("127.0.0.1:70a0").ok());
  REQUIRE(!ToNngUrl("127.0.0.1:99999").ok());
}

// Both implementations behind the same interface: tcp (default) and nng.
struct TransportPair {
  std::vector<std::string> addrs;
  // Declared before the transports so they outlive them: receive threads push here until
  // the transports are stopped (destroyed first).
  BoundedQueue<Message> to_a{1024}, to_b{1024};
  std::function<const TransportCounters&(Transport*)> counters;
  std::unique_ptr<Transport> a, b;

  TransportPair(bool tcp, uint64_t send_queue_bytes = 256ull << 20) {
    auto ports = testing::FreePorts(2);
    for (int p : ports) addrs.push_back("127.0.0.1:" + std::to_string(p));
    TransportOptions oa, ob;
    oa.self = 0;
    ob.self = 1;
    oa.addresses = ob.addresses = addrs;
    oa.max_frame_bytes = ob.max_frame_bytes = 16 << 20;
    oa.send_queue_bytes = ob.send_queue_bytes = send_queue_bytes;
    oa.identity = "a";
    ob.identity = "b";
    if (tcp) {
      a = std::make_unique<StreamTransport>(oa, MakePosixStreamNet());
      b = std::make_unique<StreamTransport>(ob, MakePosixStreamNet());
      counters = [](Transport* t) -> const TransportCounters& { return static_cast<StreamTransport*>(t)->counters(); };
    } else {
      a = std::make_unique<NngTransport>(oa);
      b = std::make_unique<NngTransport>(ob);
      counters = [](Transport* t) -> const TransportCounters& { return static_cast<NngTransport*>(t)->counters(); };
    }
  }
  void Start() {
    REQUIRE(a->Start([this](Message&& m) { to_a.TryPush(m); }).ok());
    REQUIRE(b->Start([this](Message&& m) { to_b.TryPush(m); }).ok());
  }
};

TEST_CASE("raft transport: messages arrive intact, including a 5 MB append", "[raft_driver][transport]") {
  const bool tcp = GENERATE(true, false);
  INFO((tcp ? "tcp" : "nng"));
  TransportPair t(tcp);
  t.Start();
  const Message small = SampleAppend(100);
  const Message big = SampleAppend(5 << 20);
  t.a->Send(small);
  t.a->Send(big);
  auto got1 = t.to_b.PopFor(std::chrono::seconds(10));
  auto got2 = t.to_b.PopFor(std::chrono::seconds(10));
  REQUIRE(got1.has_value());
  REQUIRE(got2.has_value());
  REQUIRE(*got1 == small);
  REQUIRE(*got2 == big);
  Message back = small;
  back.from = 1;
  back.to = 0;
  t.b->Send(back);
  auto got3 = t.to_a.PopFor(std::chrono::seconds(10));
  REQUIRE(got3.has_value());
  REQUIRE(*got3 == back);
  REQUIRE(t.counters(t.b.get()).received.load() == 2);
}

std::vector<std::string> BadInputs() {
  const std::string good = FrameBytes(SampleAppend(50));
  std::string corrupt = good;
  corrupt[corrupt.size() - 1] ^= 0x40;
  std::string oversized = good;
  const uint32_t len = 1u << 30;  // 1 GB declared, far above the 16 MB limit
  std::memcpy(oversized.data() + 8, &len, 4);
  std::string foreign(64, 'G');
  Message misaddressed = SampleAppend(10);
  misaddressed.to = 0;  // b is node 1
  std::string bad_head = good;  // a head that fails its checksum
  bad_head[kFrameHeaderBytes + 3] ^= 0x11;
  return {foreign, good.substr(0, good.size() - 3), corrupt, oversized, bad_head, FrameBytes(misaddressed)};
}

TEST_CASE("raft transport (nng): garbage on the socket is rejected and the node keeps working", "[raft_driver][transport]") {
  TransportPair t(/*tcp=*/false);
  t.Start();
  nng_socket raw;
  REQUIRE(nng_push0_open(&raw) == 0);
  REQUIRE(nng_dial(raw, ("tcp://" + t.addrs[1]).c_str(), nullptr, 0) == 0);
  const auto bad = BadInputs();
  for (const std::string& bytes : bad) REQUIRE(nng_send(raw, const_cast<char*>(bytes.data()), bytes.size(), 0) == 0);
  const std::string good = FrameBytes(SampleAppend(50));
  REQUIRE(nng_send(raw, const_cast<char*>(good.data()), good.size(), 0) == 0);
  auto got = t.to_b.PopFor(std::chrono::seconds(10));
  REQUIRE(got.has_value());
  REQUIRE(*got == SampleAppend(50));
  REQUIRE(t.counters(t.b.get()).rejected.load() == bad.size());
  REQUIRE(t.counters(t.b.get()).received.load() == 1);
  nng_close(raw);
}

// Opens a raw TCP connection to host:port, writes bytes, and closes.
void RawTcpSend(const std::string& host_port, const std::string& bytes) {
  const int port = std::stoi(host_port.substr(host_port.rfind(':') + 1));
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n <= 0) break;  // the receiver may already have dropped us (oversized header)
    off += static_cast<size_t>(n);
  }
  ::close(fd);
}

TEST_CASE("raft transport (tcp): garbage connections are rejected and the node keeps working", "[raft_driver][transport]") {
  TransportPair t(/*tcp=*/true);
  t.Start();
  const auto bad = BadInputs();
  for (const std::string& bytes : bad) RawTcpSend(t.addrs[1], bytes);
  RawTcpSend(t.addrs[1], "");  // connect and leave: not an error
  const std::string good = FrameBytes(SampleAppend(50));
  RawTcpSend(t.addrs[1], good + good);  // two frames back to back on one stream
  for (int i = 0; i < 2; ++i) {
    auto got = t.to_b.PopFor(std::chrono::seconds(10));
    REQUIRE(got.has_value());
    REQUIRE(*got == SampleAppend(50));
  }
  // Rejections are counted by reader threads; they finish before or soon after the good frames.
  for (int i = 0; i < 200 && t.counters(t.b.get()).rejected.load() < bad.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(t.counters(t.b.get()).rejected.load() == bad.size());
  REQUIRE(t.counters(t.b.get()).received.load() == 2);
  // And regular traffic still flows.
  t.a->Send(SampleAppend(7));
  auto got = t.to_b.PopFor(std::chrono::seconds(10));
  REQUIRE(got.has_value());
}

TEST_CASE("raft transport: a dead peer never blocks the sender", "[raft_driver][transport]") {
  const bool tcp = GENERATE(true, false);
  INFO((tcp ? "tcp" : "nng"));
  TransportPair t(tcp, /*send_queue_bytes=*/8 << 20);
  // Only a starts; b is down. Sending thousands of 64 KB appends must return at once and drop
  // beyond the bounded buffers instead of blocking or growing.
  REQUIRE(t.a->Start([](Message&&) {}).ok());
  Message m = SampleAppend(64 << 10);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5000; ++i) t.a->Send(m);
  const auto took = std::chrono::steady_clock::now() - start;
  // Generous: the point is "does not block on the peer" (no timeout is involved at all).
  REQUIRE(took < std::chrono::seconds(10));
  REQUIRE(t.counters(t.a.get()).send_dropped.load() > 0);
  t.a->Stop();
}

TEST_CASE("raft transport (tcp): a restarted peer is reconnected", "[raft_driver][transport]") {
  TransportPair t(/*tcp=*/true);
  t.Start();
  t.a->Send(SampleAppend(10));
  REQUIRE(t.to_b.PopFor(std::chrono::seconds(10)).has_value());
  t.b->Stop();
  TransportOptions ob;
  ob.self = 1;
  ob.addresses = t.addrs;
  ob.identity = "b2";
  auto b2 = std::make_unique<StreamTransport>(ob, MakePosixStreamNet());
  BoundedQueue<Message> to_b2(1024);
  REQUIRE(b2->Start([&](Message&& m) { to_b2.TryPush(m); }).ok());
  // The old connection is dead; Raft-style resends until one gets through the new one.
  std::optional<Message> got;
  for (int i = 0; i < 100 && !got; ++i) {
    t.a->Send(SampleAppend(11));
    got = to_b2.PopFor(std::chrono::milliseconds(100));
  }
  REQUIRE(got.has_value());
  REQUIRE(*got == SampleAppend(11));
  b2->Stop();
}

}  // namespace
}  // namespace qrstore::replication::raft
