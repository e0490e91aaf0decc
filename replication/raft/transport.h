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
// NngTransport. One nng PULL socket listens on this member's address; one nng PUSH socket per
// peer dials that peer's address (non-blocking dial, nng reconnects on its own when the peer
// comes and goes). PUSH keeps a bounded per-peer send buffer; Send() never blocks: when the
// buffer of a dead or slow peer is full the message is dropped and counted (Raft retries).
// One named thread ("raft-net") receives, checks the frame, decodes, and hands the Message to
// the handler, which must only enqueue (it wakes every 50 ms to check its stop flag). Bad
// input is logged at most once per second. Another
// ("raft-send") encodes, frames and hands queued messages to nng, so the raft thread never
// spends its time checksumming multi-MB appends.
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
  int send_buffer_messages = 128;     // per peer, inside nng; full -> drop
  size_t send_queue_messages = 65536; // before encoding, all peers; full -> drop
  uint64_t send_queue_bytes = 256ull << 20;
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

class NngTransport : public Transport {
 public:
  explicit NngTransport(TransportOptions options);
  ~NngTransport() override;
  NngTransport(const NngTransport&) = delete;
  NngTransport& operator=(const NngTransport&) = delete;

  Status Start(Handler handler) override;
  void Send(Message message) override;
  void Stop() override;
  const TransportCounters& counters() const { return counters_; }

 private:
  void ReceiveLoop();
  void SendLoop();
  void SendNow(const Message& message);  // encode, frame, hand to nng (raft-send thread)
  void Reject(const std::string& why);  // counts, logs at most once per second

  const TransportOptions options_;
  Handler handler_;
  struct Sockets;
  std::unique_ptr<Sockets> sockets_;  // nng handles (kept out of this header)
  NamedThread receiver_;
  std::atomic<bool> receive_stop_{false};
  NamedThread sender_;
  // Send queue between the raft thread and "raft-send" (encoding and checksumming large
  // appends off the raft thread keeps its loop, and so heartbeats, responsive).
  std::mutex send_mu_;
  std::condition_variable send_cv_;
  std::deque<std::pair<Message, uint64_t>> send_queue_;  // guarded by send_mu_ (with bytes)
  uint64_t send_queue_bytes_ = 0;                        // guarded by send_mu_
  bool send_closed_ = false;                             // guarded by send_mu_
  bool started_ = false;
  bool stopped_ = false;
  TransportCounters counters_;
  RejectLog reject_log_;
};

// "127.0.0.1:7000" -> "tcp://127.0.0.1:7000"; kInvalidArgument for malformed input.
Result<std::string> ToNngUrl(const std::string& host_port);

}  // namespace qrstore::replication::raft
