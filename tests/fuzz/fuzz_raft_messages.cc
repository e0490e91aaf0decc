// Fuzz target: what a Raft member reads from a peer: messages (replication/raft/message_codec.h)
// and the transport's stream of frames around them (replication/raft/transport.h: ReadFrame,
// the parser StreamTransport's reader threads run). The first byte picks the mode, the rest is
// the input:
//   0  DecodeMessage on the bytes as they are;
//   1  the same after giving every entry its true checksum (when the head decodes and the body
//      is long enough), so inputs get past the checksums to the entries and trailing bytes;
//   2  a stream of frames back to back, read with ReadFrame until it fails; with bit 2 of the
//      first byte set, each frame's head checksum is first set to the true one.
// Contract: never a crash, an out-of-bounds read or an allocation beyond the frame limit; a
// rejection is kCorruption with a message (a stream: kAborted only when it ends exactly between
// frames, kUnavailable when it ends inside one); an accepted message re-encodes to exactly the
// bytes it came from (the codec is canonical), and an accepted frame to exactly the frame.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/check.h"
#include "replication/raft/message_codec.h"
#include "replication/raft/transport.h"

using namespace qrstore;
using namespace qrstore::replication::raft;

namespace {
// Small, so a length field near the limit costs little; ReadFrame checks lengths against it
// before allocating.
constexpr size_t kMaxFrameBytes = 1 << 20;

void CheckMessage(std::string_view bytes) {
  Result<Message> m = DecodeMessage(bytes);
  if (!m.ok()) {
    QR_CHECK(m.status().code() == StatusCode::kCorruption && !m.status().message().empty(),
             "a rejected message must be kCorruption saying why: %s", m.status().ToString().c_str());
    return;
  }
  const std::string again = EncodeMessage(m.value());
  QR_CHECK(again == bytes, "accepted %zu bytes that re-encode to %zu other bytes", bytes.size(), again.size());
  // The same message framed (as StreamTransport sends it) parses back to itself.
  Result<Message> framed = ParseFrame(FrameBytes(m.value()), kMaxFrameBytes + bytes.size());
  QR_CHECK(framed.ok(), "a decoded message does not survive framing: %s", framed.status().ToString().c_str());
  QR_CHECK(framed.value() == m.value());
}

// Mode 1: the head as given, each entry's data from the body with its true checksum.
void CheckWithTrueChecksums(std::string_view bytes) {
  Result<MessageHead> head = DecodeHead(bytes);
  if (!head.ok() || bytes.size() - head.value().head_bytes < head.value().body_bytes) return CheckMessage(bytes);
  Message m = head.value().message;
  size_t at = head.value().head_bytes;
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const size_t n = head.value().entry_bytes[i];
    m.entries[i].data = EntryData(std::string(bytes.substr(at, n)));
    at += n;
  }
  CheckMessage(EncodeMessage(m).append(bytes.substr(at)));
}

// Mode 2: frames back to back through ReadFrame, as a reader thread sees a connection.
void CheckStream(std::string stream, bool fix_checksums) {
  size_t at = 0;
  auto read = [&](char* buf, size_t n) {
    if (stream.size() - at < n) {
      at = stream.size();
      return false;
    }
    std::memcpy(buf, stream.data() + at, n);
    at += n;
    return true;
  };
  for (;;) {
    const size_t start = at;
    if (fix_checksums && stream.size() - start >= kFrameHeaderBytes) {
      uint32_t head_bytes = 0;
      std::memcpy(&head_bytes, stream.data() + start + 8, 4);
      if (head_bytes <= stream.size() - start - kFrameHeaderBytes) {
        const uint64_t sum = FrameHeadChecksum(std::string_view(stream).substr(start + kFrameHeaderBytes, head_bytes));
        std::memcpy(stream.data() + start + 16, &sum, 8);
      }
    }
    Result<Message> m = ReadFrame(read, kMaxFrameBytes);
    if (!m.ok()) {
      const StatusCode code = m.status().code();
      QR_CHECK(!m.status().message().empty());
      QR_CHECK(code == StatusCode::kCorruption || code == StatusCode::kUnavailable || code == StatusCode::kAborted,
               "unexpected %s", m.status().ToString().c_str());
      QR_CHECK((code == StatusCode::kAborted) == (start == stream.size()),
               "%s at byte %zu of a %zu-byte stream (kAborted means it ended between frames)",
               m.status().ToString().c_str(), start, stream.size());
      return;
    }
    const std::string again = FrameBytes(m.value());
    QR_CHECK(std::string_view(stream).substr(start, at - start) == again,
             "accepted a %zu-byte frame that re-frames to %zu other bytes", at - start, again.size());
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: CheckMessage(input); break;
    case 1: CheckWithTrueChecksums(input); break;
    case 2: CheckStream(std::string(input), (data[0] & 4) != 0); break;
  }
  return 0;
}
