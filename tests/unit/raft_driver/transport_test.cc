// Raft transport: frame parsing rejects every truncation, corruption and oversized length;
// the transport scenarios over both nets (nng, posix) are in stream_transport_test.cc.
#include <cstring>

#include <catch2/catch.hpp>

#include "common/rng.h"
#include "replication/raft/message_codec.h"
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

TEST_CASE("raft frame: a stream that ends inside a frame header is a dead peer, not an orderly close",
          "[raft_driver][transport]") {
  // Found by fuzz_raft_messages: the header was read in one call, so 1..23 bytes of it followed
  // by EOF read as a clean close (kAborted) and hid a truncated stream.
  const std::string frame = FrameBytes(SampleAppend(100));
  for (size_t n = 1; n < kFrameHeaderBytes; ++n) {
    INFO("stream of " << n << " header bytes");
    const std::string cut = frame.substr(0, n);
    size_t at = 0;
    auto read = [&](char* buf, size_t want) {
      if (cut.size() - at < want) return false;
      std::memcpy(buf, cut.data() + at, want);
      at += want;
      return true;
    };
    REQUIRE(ReadFrame(read, 1 << 20).status().code() == StatusCode::kUnavailable);
  }
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

}  // namespace
}  // namespace qrstore::replication::raft
