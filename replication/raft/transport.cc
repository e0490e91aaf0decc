#include "replication/raft/transport.h"

#include <cstring>
#include <memory>


#include "common/clock.h"
#include "common/logging.h"
#include "replication/raft/message_codec.h"

namespace qrstore::replication::raft {
namespace {

// Seed of the head checksum: a frame from another qrstore protocol that happened to share the
// magic would still fail the checksum.
constexpr uint64_t kChecksumSeed = 0x7261667466726d32ULL;  // "raftfrm2"
// Bodies up to this size are copied behind the head (one write); larger ones go as slices.
constexpr size_t kInlineBodyBytes = 16 << 10;

// Header layout (little-endian): u32 magic | u16 version | u16 reserved (0) |
// u32 head length | u32 body length | u64 head checksum.
void WriteFrameHeader(std::string_view head, uint64_t body_bytes, char* out) {
  QR_CHECK(head.size() <= UINT32_MAX && body_bytes <= UINT32_MAX, "raft frame too large");
  const uint32_t magic = kFrameMagic;
  const uint16_t version = kFrameVersion;
  const uint16_t reserved16 = 0;
  const auto head_bytes = static_cast<uint32_t>(head.size());
  const auto body32 = static_cast<uint32_t>(body_bytes);
  const uint64_t checksum = FrameHeadChecksum(head);
  std::memcpy(out + 0, &magic, 4);
  std::memcpy(out + 4, &version, 2);
  std::memcpy(out + 6, &reserved16, 2);
  std::memcpy(out + 8, &head_bytes, 4);
  std::memcpy(out + 12, &body32, 4);
  std::memcpy(out + 16, &checksum, 8);
}

}  // namespace

uint64_t FrameHeadChecksum(std::string_view head) { return BulkHash64(head.data(), head.size(), kChecksumSeed); }

Result<FrameHeader> ParseFrameHeader(std::string_view header, size_t max_frame_bytes) {
  if (header.size() < kFrameHeaderBytes) {
    return Status::Corruption("frame of " + std::to_string(header.size()) + " bytes is shorter than its header");
  }
  uint32_t magic;
  uint16_t version, reserved16;
  FrameHeader h;
  std::memcpy(&magic, header.data() + 0, 4);
  std::memcpy(&version, header.data() + 4, 2);
  std::memcpy(&reserved16, header.data() + 6, 2);
  std::memcpy(&h.head_bytes, header.data() + 8, 4);
  std::memcpy(&h.body_bytes, header.data() + 12, 4);
  std::memcpy(&h.head_checksum, header.data() + 16, 8);
  if (magic != kFrameMagic) return Status::Corruption("bad frame magic (not a qrstore raft peer?)");
  if (version != kFrameVersion) {
    return Status::Corruption("unsupported frame version " + std::to_string(version));
  }
  if (reserved16 != 0) return Status::Corruption("frame reserved bytes not zero");
  const uint64_t total = uint64_t{h.head_bytes} + h.body_bytes;
  if (total > max_frame_bytes) {
    return Status::Corruption("frame of " + std::to_string(total) + " bytes exceeds the limit " +
                              std::to_string(max_frame_bytes));
  }
  return h;
}

size_t OutgoingFrame::bytes() const {
  size_t n = prefix.size();
  for (std::string_view b : body) n += b.size();
  return n;
}

std::vector<iovec> OutgoingFrame::Iovecs() const {
  std::vector<iovec> iov;
  iov.reserve(1 + body.size());
  iov.push_back({const_cast<char*>(prefix.data()), prefix.size()});
  for (std::string_view b : body) {
    if (!b.empty()) iov.push_back({const_cast<char*>(b.data()), b.size()});
  }
  return iov;
}

OutgoingFrame BuildFrame(const Message& m) {
  const std::string head = EncodeHead(m);
  uint64_t body_bytes = 0;
  for (const Entry& e : m.entries) body_bytes += e.data.size();
  OutgoingFrame f;
  const bool inline_body = body_bytes <= kInlineBodyBytes;
  f.prefix.resize(kFrameHeaderBytes);
  WriteFrameHeader(head, body_bytes, f.prefix.data());
  f.prefix.reserve(kFrameHeaderBytes + head.size() + (inline_body ? body_bytes : 0));
  f.prefix.append(head);
  for (const Entry& e : m.entries) {
    if (inline_body) {
      f.prefix.append(e.data.view());
    } else {
      f.body.push_back(e.data.view());
    }
  }
  return f;
}

std::string FrameBytes(const Message& m) {
  OutgoingFrame f = BuildFrame(m);
  std::string out = std::move(f.prefix);
  for (std::string_view b : f.body) out.append(b);
  return out;
}

Result<Message> ReadFrame(const std::function<bool(char*, size_t)>& read, size_t max_frame_bytes) {
  char header[kFrameHeaderBytes];
  // The first byte alone, so a stream that ends inside a header is not taken for an orderly close.
  if (!read(header, 1)) return Status::Aborted("connection closed");
  if (!read(header + 1, sizeof header - 1)) return Status::Unavailable("connection closed inside a frame header");
  Result<FrameHeader> h = ParseFrameHeader(std::string_view(header, sizeof header), max_frame_bytes);
  if (!h.ok()) return h.status();
  std::string head(h.value().head_bytes, '\0');  // small: fields and per-entry metadata
  if (!read(head.data(), head.size())) return Status::Unavailable("connection closed inside a frame");
  if (FrameHeadChecksum(head) != h.value().head_checksum) return Status::Corruption("frame head checksum mismatch");
  Result<MessageHead> decoded = DecodeHead(head);
  if (!decoded.ok()) return decoded.status();
  if (decoded.value().head_bytes != head.size()) return Status::Corruption("frame head has trailing bytes");
  if (decoded.value().body_bytes != h.value().body_bytes) {
    return Status::Corruption("frame body length " + std::to_string(h.value().body_bytes) + " but its entries hold " +
                              std::to_string(decoded.value().body_bytes));
  }
  // Not zero-filled: every byte is read into it before use.
  std::shared_ptr<char[]> body(h.value().body_bytes > 0 ? new char[h.value().body_bytes] : nullptr);
  if (h.value().body_bytes > 0 && !read(body.get(), h.value().body_bytes)) {
    return Status::Unavailable("connection closed inside a frame");
  }
  return AttachBody(std::move(decoded).value(), body, std::string_view(body.get(), h.value().body_bytes));
}

Result<Message> ParseFrame(std::string_view frame, size_t max_frame_bytes) {
  size_t at = 0;
  auto read = [&](char* buf, size_t n) {
    if (frame.size() - at < n) {
      at = frame.size();
      return false;
    }
    std::memcpy(buf, frame.data() + at, n);
    at += n;
    return true;
  };
  Result<Message> m = ReadFrame(read, max_frame_bytes);
  if (!m.ok()) {
    if (m.status().code() == StatusCode::kAborted || m.status().code() == StatusCode::kUnavailable) {
      return Status::Corruption("truncated frame of " + std::to_string(frame.size()) + " bytes");
    }
    return m.status();
  }
  if (at != frame.size()) return Status::Corruption(std::to_string(frame.size() - at) + " bytes after the frame");
  return m;
}

void RejectLog::Reject(const std::string& identity, const std::string& why, TransportCounters* counters) {
  counters->rejected.fetch_add(1, std::memory_order_relaxed);
  since_log_.fetch_add(1, std::memory_order_relaxed);
  // The clock only rate-limits the log line; it decides nothing else.
  const int64_t now = NowMillis();
  int64_t last = last_log_ms_.load(std::memory_order_relaxed);
  if (now - last >= 1000 && last_log_ms_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    const uint64_t n = since_log_.exchange(0, std::memory_order_relaxed);
    Logger("raft")->warn("[{}] raft transport rejected {} input(s) in the last second, latest: {}", identity, n, why);
  }
}

}  // namespace qrstore::replication::raft
