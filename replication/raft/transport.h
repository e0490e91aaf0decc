// Raft transport: moves raft::Message values between the members of the Raft groups hosted by
// this process, one transport per process shared by every group (Message.group routes them).
//
// Framing. Every message travels as one frame: a 24-byte header {magic "QRRF", version,
// reserved, head length, body length, head checksum} followed by the message's head and body
// (message_codec.h). The header checksum covers the head; each entry's bytes in the body are
// covered by the entry checksum in the head (computed once by the proposer, so no hop re-hashes
// a payload to send it, and each receiver hashes it once to check it). Readers reject foreign
// bytes (bad magic/version), truncation, oversized lengths and checksum mismatches, checking
// the declared lengths before allocating, so a corrupt or hostile peer can neither crash the
// node nor make it allocate unbounded memory.
//
// Implementations: StreamTransport (stream_transport.h) over nng streams or POSIX sockets, and
// in-process fakes in the tests.
//
// Thread-safety: Start/Stop from the owner's thread; Send from any thread (the raft driver
// thread in practice); counters readable from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <sys/uio.h>

#include "common/status.h"
#include "common/thread.h"
#include "replication/raft/core.h"

namespace qrstore::replication::raft {

constexpr uint32_t kFrameMagic = 0x46525251;  // "QRRF" little-endian
constexpr uint16_t kFrameVersion = 2;
constexpr size_t kFrameHeaderBytes = 24;

// A parsed frame header, its lengths already checked against the frame limit.
struct FrameHeader {
  uint32_t head_bytes = 0;
  uint32_t body_bytes = 0;
  uint64_t head_checksum = 0;
};
// Parses the first kFrameHeaderBytes of `header` (kCorruption if foreign, of another version,
// or if head + body exceed max_frame_bytes), before anything else is read.
Result<FrameHeader> ParseFrameHeader(std::string_view header, size_t max_frame_bytes);
// The header's checksum of a frame's head (seeded, so another protocol's bytes fail it). Public
// so tests and the fuzzer (tests/fuzz/fuzz_raft_messages.cc) can build frames around any head.
uint64_t FrameHeadChecksum(std::string_view head);

// A message ready to write: `prefix` (header + head, and the body too when it is small) then
// `body` slices, which point into the message's entries (the caller keeps the message alive
// until written). Large payloads are never copied.
struct OutgoingFrame {
  std::string prefix;
  std::vector<std::string_view> body;
  size_t bytes() const;
  // prefix, then each body slice.
  std::vector<iovec> Iovecs() const;
};
OutgoingFrame BuildFrame(const Message& m);
// The whole frame in one buffer (tests and message-oriented transports).
std::string FrameBytes(const Message& m);

// Reads one frame through `read` (fills exactly n bytes or returns false) and decodes it.
// Errors: kAborted when the stream ends before the frame's first byte (an orderly close),
// kUnavailable when it ends inside a frame, kCorruption for a bad frame or message (a byte
// stream cannot resynchronise: the caller drops the connection).
Result<Message> ReadFrame(const std::function<bool(char*, size_t)>& read, size_t max_frame_bytes);
// Exactly one frame in `frame` (trailing bytes are corruption).
Result<Message> ParseFrame(std::string_view frame, size_t max_frame_bytes);

// Abstract so the driver can be tested with an in-process fake.
class Transport {
 public:
  // Runs on the transport's receive thread: must only hand the message over (enqueue).
  using Handler = std::function<void(Message&& message)>;
  virtual ~Transport() = default;
  virtual Status Start(Handler handler) = 0;
  // Never blocks; drops (and counts) when the send queue or the peer's buffer is full, or the
  // peer is unknown. Takes the message by value so callers can move it (no payload copy).
  virtual void Send(Message message) = 0;
  // Idempotent. After it returns the handler is never called again.
  virtual void Stop() = 0;
};

struct TransportOptions {
  NodeId self = 0;
  // addresses[i] = "host:port" of member i (node id i). addresses[self] is listened on.
  std::vector<std::string> addresses;
  size_t max_frame_bytes = 64 << 20;  // larger than any AppendRequest (max_append_bytes + slack)
  size_t send_queue_messages = 1024;  // per peer; full -> drop (Raft resends)
  uint64_t send_queue_bytes = 256ull << 20;  // per peer
  int reconnect_min_ms = 10;
  int reconnect_max_ms = 200;
  std::string identity;  // log prefix, e.g. "n1"
};

struct TransportCounters {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> send_dropped{0};
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> rejected{0};  // bad frame, undecodable, or not addressed to us
};

// Counts rejected inputs (bad frames, undecodable or misaddressed messages) into
// counters->rejected and logs at most one line per second naming the latest reason, so a flood
// of garbage cannot flood the log. Thread-safe (receive threads call it concurrently).
class RejectLog {
 public:
  void Reject(const std::string& identity, const std::string& why, TransportCounters* counters);

 private:
  std::atomic<int64_t> last_log_ms_{0};
  std::atomic<uint64_t> since_log_{0};
};

}  // namespace qrstore::replication::raft
