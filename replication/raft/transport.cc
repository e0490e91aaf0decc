#include "replication/raft/transport.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include <nng/nng.h>
#include <nng/protocol/pipeline0/pull.h>
#include <nng/protocol/pipeline0/push.h>

#include "common/clock.h"
#include "common/logging.h"
#include "replication/raft/message_codec.h"

namespace qrstore::replication::raft {
namespace {

// Seed of the head checksum: a frame from another qrstore protocol that happened to share the
// magic would still fail the checksum.
constexpr uint64_t kChecksumSeed = 0x7261667466726d32ULL;  // "raftfrm2"
constexpr int kReceivePollMs = 50;
// Bodies up to this size are copied behind the head (one write); larger ones go as slices.
constexpr size_t kInlineBodyBytes = 16 << 10;

uint64_t HeadChecksum(std::string_view head) { return BulkHash64(head.data(), head.size(), kChecksumSeed); }

// Header layout (little-endian): u32 magic | u16 version | u16 reserved (0) |
// u32 head length | u32 body length | u64 head checksum.
void WriteFrameHeader(std::string_view head, uint64_t body_bytes, char* out) {
  QR_CHECK(head.size() <= UINT32_MAX && body_bytes <= UINT32_MAX, "raft frame too large");
  const uint32_t magic = kFrameMagic;
  const uint16_t version = kFrameVersion;
  const uint16_t reserved16 = 0;
  const auto head_bytes = static_cast<uint32_t>(head.size());
  const auto body32 = static_cast<uint32_t>(body_bytes);
  const uint64_t checksum = HeadChecksum(head);
  std::memcpy(out + 0, &magic, 4);
  std::memcpy(out + 4, &version, 2);
  std::memcpy(out + 6, &reserved16, 2);
  std::memcpy(out + 8, &head_bytes, 4);
  std::memcpy(out + 12, &body32, 4);
  std::memcpy(out + 16, &checksum, 8);
}

}  // namespace

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
  if (!read(header, sizeof header)) return Status::Aborted("connection closed");
  Result<FrameHeader> h = ParseFrameHeader(std::string_view(header, sizeof header), max_frame_bytes);
  if (!h.ok()) return h.status();
  std::string head(h.value().head_bytes, '\0');  // small: fields and per-entry metadata
  if (!read(head.data(), head.size())) return Status::Unavailable("connection closed inside a frame");
  if (HeadChecksum(head) != h.value().head_checksum) return Status::Corruption("frame head checksum mismatch");
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

Result<std::string> ToNngUrl(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size()) {
    return Status::InvalidArgument("address '" + host_port + "' is not host:port");
  }
  const std::string port = host_port.substr(colon + 1);
  for (char c : port) {
    if (c < '0' || c > '9') return Status::InvalidArgument("address '" + host_port + "' has a bad port");
  }
  if (port.size() > 5 || std::stoul(port) > 65535) {
    return Status::InvalidArgument("address '" + host_port + "' has a port above 65535");
  }
  return "tcp://" + host_port;
}

namespace {

// nng 1.5.2 (Debian 12) can hang forever in nng_close after pipe churn: its reaper waits for
// an aio task that was prepared but never started (nanomsg/nng#1543, fixed upstream after
// 1.5.2). The sockets are closed on a helper thread and Stop waits at most 2 s for it; on a
// hang the helper is abandoned (it holds only nng handles, no pointer into this object), the
// listener is already closed (the port is free), and a warning says what happened.
void CloseSocketsBounded(std::vector<nng_socket> sockets, const std::string& identity) {
  if (sockets.empty()) return;
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto state = std::make_shared<State>();
  std::thread closer([sockets = std::move(sockets), state] {
    SetCurrentThreadName("raft-close");
    for (nng_socket s : sockets) nng_close(s);
    std::lock_guard<std::mutex> lock(state->mu);
    state->done = true;
    state->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(state->mu);
  if (state->cv.wait_for(lock, std::chrono::seconds(2), [&] { return state->done; })) {
    lock.unlock();
    closer.join();
    return;
  }
  lock.unlock();
  closer.detach();
  Logger("raft")->warn("[{}] raft transport: nng_close did not return within 2 s (known nng 1.5.2 bug "
                       "nanomsg/nng#1543); abandoning the sockets",
                       identity);
}

}  // namespace

struct NngTransport::Sockets {
  nng_socket pull = NNG_SOCKET_INITIALIZER;
  bool pull_open = false;
  nng_listener listener = NNG_LISTENER_INITIALIZER;
  bool listener_open = false;
  // push[i] for member i (unused for self).
  std::vector<nng_socket> push;
  std::vector<bool> push_open;
};

NngTransport::NngTransport(TransportOptions options)
    : options_(std::move(options)), sockets_(std::make_unique<Sockets>()) {}

NngTransport::~NngTransport() { Stop(); }

Status NngTransport::Start(Handler handler) {
  QR_CHECK(!started_, "NngTransport started twice");
  started_ = true;
  handler_ = std::move(handler);
  const auto& addrs = options_.addresses;
  if (options_.self >= addrs.size()) {
    return Status::InvalidArgument("node id " + std::to_string(options_.self) + " has no address (" +
                                   std::to_string(addrs.size()) + " members)");
  }
  auto fail = [&](const std::string& what, int rv) {
    Status st = Status::Unavailable(options_.identity + " raft transport: " + what + ": " + nng_strerror(rv));
    Stop();
    return st;
  };
  Result<std::string> self_url = ToNngUrl(addrs[options_.self]);
  if (!self_url.ok()) return self_url.status();
  int rv = nng_pull0_open(&sockets_->pull);
  if (rv != 0) return fail("open pull socket", rv);
  sockets_->pull_open = true;
  rv = nng_socket_set_size(sockets_->pull, NNG_OPT_RECVMAXSZ, options_.max_frame_bytes + kFrameHeaderBytes);
  if (rv != 0) return fail("set recv max size", rv);
  // Bounded receive waits: the receive thread checks its stop flag between them, so Stop never
  // has to close a socket under a pending receive (nng 1.5's nng_close can then hang).
  rv = nng_socket_set_ms(sockets_->pull, NNG_OPT_RECVTIMEO, kReceivePollMs);
  if (rv != 0) return fail("set recv timeout", rv);
  rv = nng_listen(sockets_->pull, self_url.value().c_str(), &sockets_->listener, 0);
  if (rv != 0) return fail("listen on " + self_url.value(), rv);
  sockets_->listener_open = true;

  sockets_->push.assign(addrs.size(), NNG_SOCKET_INITIALIZER);
  sockets_->push_open.assign(addrs.size(), false);
  for (NodeId peer = 0; peer < addrs.size(); ++peer) {
    if (peer == options_.self) continue;
    Result<std::string> url = ToNngUrl(addrs[peer]);
    if (!url.ok()) {
      Stop();
      return url.status();
    }
    nng_socket& s = sockets_->push[peer];
    rv = nng_push0_open(&s);
    if (rv != 0) return fail("open push socket", rv);
    sockets_->push_open[peer] = true;
    nng_socket_set_int(s, NNG_OPT_SENDBUF, options_.send_buffer_messages);
    nng_socket_set_ms(s, NNG_OPT_RECONNMINT, options_.reconnect_min_ms);
    nng_socket_set_ms(s, NNG_OPT_RECONNMAXT, options_.reconnect_max_ms);
    // Non-blocking dial: the peer may not be up yet; nng keeps retrying in the background.
    rv = nng_dial(s, url.value().c_str(), nullptr, NNG_FLAG_NONBLOCK);
    if (rv != 0) return fail("dial " + url.value(), rv);
  }
  receiver_ = NamedThread("raft-net", [this] { ReceiveLoop(); });
  sender_ = NamedThread("raft-send", [this] { SendLoop(); });
  return Status::Ok();
}

void NngTransport::Send(Message message) {
  if (message.to >= options_.addresses.size() || message.to == options_.self) {
    counters_.send_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t bytes = 64;
  for (const Entry& e : message.entries) bytes += e.data.size() + 16;
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    // Bounded: a stalled sender thread (or a flood of large appends) drops, never grows.
    if (send_closed_ || send_queue_.size() >= options_.send_queue_messages ||
        (!send_queue_.empty() && send_queue_bytes_ + bytes > options_.send_queue_bytes)) {
      counters_.send_dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    send_queue_bytes_ += bytes;
    send_queue_.emplace_back(std::move(message), bytes);
  }
  send_cv_.notify_one();
}

void NngTransport::SendLoop() {
  std::deque<std::pair<Message, uint64_t>> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(send_mu_);
      send_cv_.wait(lock, [&] { return send_closed_ || !send_queue_.empty(); });
      if (send_closed_) return;  // unsent messages are dropped: Raft retries after restart
      batch.swap(send_queue_);
    }
    for (auto& [message, bytes] : batch) {
      SendNow(message);
      std::lock_guard<std::mutex> lock(send_mu_);
      send_queue_bytes_ -= bytes;
    }
    batch.clear();
  }
}

void NngTransport::SendNow(const Message& message) {
  if (!sockets_->push_open[message.to]) {
    counters_.send_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::string frame = FrameBytes(message);
  nng_msg* msg = nullptr;
  if (nng_msg_alloc(&msg, frame.size()) != 0) {
    counters_.send_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::memcpy(nng_msg_body(msg), frame.data(), frame.size());
  // NONBLOCK: a full per-peer buffer (peer down or slow) drops the message instead of
  // stalling the raft thread; Raft's retries recover it.
  if (nng_sendmsg(sockets_->push[message.to], msg, NNG_FLAG_NONBLOCK) != 0) {
    nng_msg_free(msg);  // on failure ownership stays with us
    counters_.send_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  counters_.sent.fetch_add(1, std::memory_order_relaxed);
}

void NngTransport::ReceiveLoop() {
  while (!receive_stop_.load(std::memory_order_acquire)) {
    nng_msg* msg = nullptr;
    const int rv = nng_recvmsg(sockets_->pull, &msg, 0);
    if (rv == NNG_ECLOSED) return;
    if (rv == NNG_ETIMEDOUT) continue;
    if (rv != 0) {
      Reject(std::string("receive error: ") + nng_strerror(rv));
      continue;
    }
    std::string_view frame(static_cast<const char*>(nng_msg_body(msg)), nng_msg_len(msg));
    Result<Message> decoded = ParseFrame(frame, options_.max_frame_bytes);
    nng_msg_free(msg);
    if (!decoded.ok()) {
      Reject(decoded.status().ToString());
      continue;
    }
    Message& m = decoded.value();
    if (m.to != options_.self || m.from >= options_.addresses.size() || m.from == options_.self) {
      Reject("message from " + std::to_string(m.from) + " to " + std::to_string(m.to) + " is not for us");
      continue;
    }
    counters_.received.fetch_add(1, std::memory_order_relaxed);
    handler_(std::move(m));
  }
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

void NngTransport::Reject(const std::string& why) { reject_log_.Reject(options_.identity, why, &counters_); }

void NngTransport::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    send_closed_ = true;
    send_queue_.clear();
    send_queue_bytes_ = 0;
  }
  send_cv_.notify_all();
  sender_.Join();
  // Shutdown order matters with nng 1.5: closing a pull socket whose inbound pipes still hold
  // messages nobody receives can hang in nng_close. So: close the listener (and with it every
  // inbound pipe) while the receive thread still drains, then stop that thread, then close
  // the (now pipe-less) socket.
  if (sockets_->listener_open) nng_listener_close(sockets_->listener);
  sockets_->listener_open = false;
  receive_stop_.store(true, std::memory_order_release);
  receiver_.Join();  // within one receive timeout
  std::vector<nng_socket> to_close;
  if (sockets_->pull_open) to_close.push_back(sockets_->pull);
  sockets_->pull_open = false;
  for (size_t i = 0; i < sockets_->push.size(); ++i) {
    if (sockets_->push_open[i]) to_close.push_back(sockets_->push[i]);
    sockets_->push_open[i] = false;
  }
  CloseSocketsBounded(std::move(to_close), options_.identity);
}

}  // namespace qrstore::replication::raft
