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

// Seed of the payload checksum: a frame from another qrstore protocol that happened to share
// the magic would still fail the checksum.
constexpr uint64_t kChecksumSeed = 0x7261667466726d31ULL;  // "raftfrm1"
constexpr int kReceivePollMs = 50;

uint64_t PayloadChecksum(std::string_view payload) {
  return BulkHash64(payload, kChecksumSeed);
}

}  // namespace

// Header layout (little-endian): u32 magic | u16 version | u16 reserved (0) |
// u32 payload length | u32 reserved (0) | u64 checksum.
void WriteFrameHeader(std::string_view payload, char* out) {
  const uint32_t magic = kFrameMagic;
  const uint16_t version = kFrameVersion;
  const uint16_t reserved16 = 0;
  const uint32_t length = static_cast<uint32_t>(payload.size());
  const uint32_t reserved32 = 0;
  const uint64_t checksum = PayloadChecksum(payload);
  std::memcpy(out + 0, &magic, 4);
  std::memcpy(out + 4, &version, 2);
  std::memcpy(out + 6, &reserved16, 2);
  std::memcpy(out + 8, &length, 4);
  std::memcpy(out + 12, &reserved32, 4);
  std::memcpy(out + 16, &checksum, 8);
}

std::string FrameBytes(std::string_view payload) {
  QR_CHECK(payload.size() <= UINT32_MAX, "frame payload too large");
  std::string out(kFrameHeaderBytes + payload.size(), '\0');
  WriteFrameHeader(payload, out.data());
  std::memcpy(out.data() + kFrameHeaderBytes, payload.data(), payload.size());
  return out;
}

Result<FrameHeader> ParseFrameHeader(std::string_view header, size_t max_payload_bytes) {
  if (header.size() < kFrameHeaderBytes) {
    return Status::Corruption("frame of " + std::to_string(header.size()) + " bytes is shorter than its header");
  }
  uint32_t magic, length, reserved32;
  uint16_t version, reserved16;
  FrameHeader h;
  std::memcpy(&magic, header.data() + 0, 4);
  std::memcpy(&version, header.data() + 4, 2);
  std::memcpy(&reserved16, header.data() + 6, 2);
  std::memcpy(&length, header.data() + 8, 4);
  std::memcpy(&reserved32, header.data() + 12, 4);
  std::memcpy(&h.checksum, header.data() + 16, 8);
  if (magic != kFrameMagic) return Status::Corruption("bad frame magic (not a qrstore raft peer?)");
  if (version != kFrameVersion) {
    return Status::Corruption("unsupported frame version " + std::to_string(version));
  }
  if (reserved16 != 0 || reserved32 != 0) return Status::Corruption("frame reserved bytes not zero");
  if (length > max_payload_bytes) {
    return Status::Corruption("frame payload length " + std::to_string(length) + " exceeds the limit " +
                              std::to_string(max_payload_bytes));
  }
  h.length = length;
  return h;
}

Status CheckFramePayload(const FrameHeader& header, std::string_view payload) {
  if (payload.size() != header.length) {
    return Status::Corruption("frame length mismatch: header says " + std::to_string(header.length) + ", got " +
                              std::to_string(payload.size()));
  }
  if (PayloadChecksum(payload) != header.checksum) return Status::Corruption("frame checksum mismatch");
  return Status::Ok();
}

Result<std::string_view> ParseFrame(std::string_view frame, size_t max_payload_bytes) {
  Result<FrameHeader> h = ParseFrameHeader(frame, max_payload_bytes);
  if (!h.ok()) return h.status();
  std::string_view payload = frame.substr(kFrameHeaderBytes);
  QR_RETURN_IF_ERROR(CheckFramePayload(h.value(), payload));
  return payload;
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
  const std::string payload = EncodeMessage(message);
  nng_msg* msg = nullptr;
  if (nng_msg_alloc(&msg, kFrameHeaderBytes + payload.size()) != 0) {
    counters_.send_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  char* body = static_cast<char*>(nng_msg_body(msg));
  WriteFrameHeader(payload, body);
  std::memcpy(body + kFrameHeaderBytes, payload.data(), payload.size());
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
    Result<std::string_view> payload = ParseFrame(frame, options_.max_frame_bytes);
    if (!payload.ok()) {
      nng_msg_free(msg);
      Reject(payload.status().ToString());
      continue;
    }
    Result<Message> decoded = DecodeMessage(payload.value());
    nng_msg_free(msg);
    if (!decoded.ok()) {
      Reject("undecodable message: " + decoded.status().ToString());
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
