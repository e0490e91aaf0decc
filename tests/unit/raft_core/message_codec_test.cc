// The Raft message codec: round trips of every message type, and rejection of every
// truncation, of trailing bytes and of each corrupt field.
#include <catch2/catch.hpp>

#include "common/codec.h"
#include "common/rng.h"
#include "replication/raft/message_codec.h"

using namespace qrstore;
using namespace qrstore::replication::raft;

namespace {

Message Sample(MessageType type) {
  Message m;
  m.type = type;
  m.group = 3;
  m.from = 1;
  m.to = 2;
  m.term = 0x1234567890ULL;
  m.log_index = 300;
  m.log_term = 77;
  m.commit = 299;
  m.reject = type == MessageType::kAppendResponse || type == MessageType::kVoteResponse ||
             type == MessageType::kPreVoteResponse;
  m.hint = 150;
  if (type == MessageType::kAppendRequest) {
    m.entries.push_back(Entry{77, 301, "first"});
    m.entries.push_back(Entry{78, 302, ""});  // a no-op
    m.entries.push_back(Entry{78, 303, std::string(1000, '\xff')});
  }
  return m;
}

const MessageType kAllTypes[] = {MessageType::kVoteRequest,    MessageType::kVoteResponse,
                                 MessageType::kAppendRequest,  MessageType::kAppendResponse,
                                 MessageType::kPreVoteRequest, MessageType::kPreVoteResponse,
                                 MessageType::kSnapshotRequest};

}  // namespace

TEST_CASE("raft codec: every message type round-trips") {
  for (MessageType t : kAllTypes) {
    const Message m = Sample(t);
    Result<Message> d = DecodeMessage(EncodeMessage(m));
    REQUIRE(d.ok());
    CHECK(d.value() == m);
  }
  // Extremes: maximal ids and terms, empty everything.
  Message big;
  big.type = MessageType::kAppendRequest;
  big.group = UINT32_MAX;
  big.from = kNoNode;
  big.to = kNoNode - 1;
  big.term = UINT64_MAX;
  big.log_index = UINT64_MAX - 2;
  big.commit = UINT64_MAX;
  big.hint = UINT64_MAX;
  big.entries.push_back(Entry{UINT64_MAX, UINT64_MAX - 1, "x"});
  big.entries.push_back(Entry{UINT64_MAX, UINT64_MAX, "y"});
  Result<Message> d = DecodeMessage(EncodeMessage(big));
  REQUIRE(d.ok());
  CHECK(d.value() == big);
  Result<Message> e = DecodeMessage(EncodeMessage(Message{}));
  REQUIRE(e.ok());
  CHECK(e.value() == Message{});
}

TEST_CASE("raft codec: a multi-megabyte append round-trips") {
  Message m = Sample(MessageType::kAppendRequest);
  m.entries.push_back(Entry{78, 304, std::string(5 << 20, 'z')});
  Result<Message> d = DecodeMessage(EncodeMessage(m));
  REQUIRE(d.ok());
  CHECK(d.value() == m);
}

TEST_CASE("raft codec: every truncation and any trailing byte is rejected") {
  for (MessageType t : kAllTypes) {
    const std::string bytes = EncodeMessage(Sample(t));
    for (size_t n = 0; n < bytes.size(); ++n) {
      Result<Message> d = DecodeMessage(std::string_view(bytes.data(), n));
      INFO("type " << MessageTypeName(t) << " truncated to " << n << " of " << bytes.size());
      REQUIRE_FALSE(d.ok());
      CHECK(d.status().code() == StatusCode::kCorruption);
    }
    Result<Message> d = DecodeMessage(bytes + '\0');
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().message().find("trailing") != std::string::npos);
  }
}

TEST_CASE("raft codec: corrupt fields are rejected with a message naming them") {
  const std::string good = EncodeMessage(Sample(MessageType::kAppendRequest));
  auto with_byte = [&](size_t offset, char value) {
    std::string b = good;
    b[offset] = value;
    return DecodeMessage(b);
  };
  // Layout: [0] version, [1] type, [2..13] group/from/to, then varints.
  Result<Message> r = with_byte(0, 1);  // version 1 (payloads inline) is no longer spoken
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("version") != std::string::npos);
  r = with_byte(1, 7);  // one past kSnapshotRequest
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("type") != std::string::npos);
  r = with_byte(1, static_cast<char>(0xff));
  REQUIRE_FALSE(r.ok());

  // Rebuild messages field by field to corrupt the later (varint) fields precisely.
  auto encode = [](uint8_t reject, uint64_t count, bool entries_ok, uint8_t type) {
    Writer w;
    w.PutU8(kMessageCodecVersion);
    w.PutU8(type);
    w.PutU32(1);
    w.PutU32(0);
    w.PutU32(1);
    w.PutVarint(5);   // term
    w.PutVarint(10);  // log_index
    w.PutVarint(4);   // log_term
    w.PutVarint(9);   // commit
    w.PutU8(reject);
    w.PutVarint(0);  // hint
    w.PutVarint(count);
    for (uint64_t i = 0; i < 2; ++i) {
      w.PutVarint(5);
      w.PutVarint(entries_ok ? 11 + i : 12 + i);
      w.PutVarint(2);
      w.PutU64(EntryChecksum("ab"));
    }
    w.PutRaw("abab", 4);  // the body
    return w.Release();
  };
  const uint8_t kAppend = static_cast<uint8_t>(MessageType::kAppendRequest);
  REQUIRE(DecodeMessage(encode(0, 2, true, kAppend)).ok());  // the baseline is valid
  r = DecodeMessage(encode(2, 2, true, kAppend));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("reject") != std::string::npos);
  // A count larger than the buffer could hold is refused before any allocation.
  r = DecodeMessage(encode(0, 1ULL << 40, true, kAppend));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("count") != std::string::npos);
  r = DecodeMessage(encode(0, 3, true, kAppend));  // count 3, only 2 entries present
  REQUIRE_FALSE(r.ok());
  r = DecodeMessage(encode(0, 2, false, kAppend));  // entry indexes not from log_index + 1
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("index") != std::string::npos);
  r = DecodeMessage(encode(0, 2, true, static_cast<uint8_t>(MessageType::kVoteResponse)));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("entries on a VoteResponse") != std::string::npos);

  // An entry whose data length runs past the end.
  {
    Writer w;
    w.PutU8(kMessageCodecVersion);
    w.PutU8(kAppend);
    w.PutU32(1);
    w.PutU32(0);
    w.PutU32(1);
    for (int i = 0; i < 4; ++i) w.PutVarint(0);
    w.PutU8(0);
    w.PutVarint(0);
    w.PutVarint(1);
    w.PutVarint(1);
    w.PutVarint(1);
    w.PutVarint(1000);  // claims 1000 data bytes
    w.PutU64(0);
    w.PutRaw("abc", 3);
    r = DecodeMessage(w.data());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kCorruption);
  }
  // Entry bytes that do not match their checksum.
  {
    std::string b = encode(0, 2, true, kAppend);
    b[b.size() - 1] = 'x';
    r = DecodeMessage(b);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("checksum") != std::string::npos);
  }
  // An over-long varint (more than 64 bits).
  {
    std::string b = good.substr(0, 14);
    b.append(11, static_cast<char>(0xff));
    REQUIRE_FALSE(DecodeMessage(b).ok());
  }
}

TEST_CASE("raft codec: random byte flips never crash the decoder") {
  const std::string good = EncodeMessage(Sample(MessageType::kAppendRequest));
  Rng rng(123);
  int rejected = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string b = good;
    const int flips = 1 + static_cast<int>(rng.Uniform(4));
    for (int f = 0; f < flips; ++f) {
      b[rng.Uniform(b.size())] = static_cast<char>(rng.Uniform(256));
    }
    Result<Message> d = DecodeMessage(b);
    if (!d.ok()) {
      ++rejected;
    } else {
      // Whatever decodes is a well-formed message: it survives its own round trip.
      Result<Message> again = DecodeMessage(EncodeMessage(d.value()));
      REQUIRE(again.ok());
      CHECK(again.value() == d.value());
    }
  }
  CHECK(rejected > 0);
}
