#include "replication/raft/stream_transport.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/clock.h"
#include "common/logging.h"

namespace qrstore::replication::raft {
namespace {

constexpr int kAcceptPollMs = 1000;  // also the period of reaping finished reader threads
constexpr int kConnectTimeoutMs = 500;
// A send slower than this (from queueing its first message to the end of the write) is logged.
constexpr int64_t kSlowSendMs = 100;

// Reads frames' bytes through a buffer: several small frames (append responses, heartbeats)
// come in with one read instead of two or three each; large reads (entry bodies) go straight
// into their destination once the buffered bytes are used up, so payloads are copied by the
// kernel only. One per inbound connection, used by its reader thread only.
class BufferedReader {
 public:
  explicit BufferedReader(StreamConn* conn) : conn_(conn), buf_(new char[kBufferBytes]) {}

  bool Read(char* dst, size_t n) {
    const size_t have = end_ - begin_;
    if (have >= n) {
      std::memcpy(dst, buf_.get() + begin_, n);
      begin_ += n;
      return true;
    }
    std::memcpy(dst, buf_.get() + begin_, have);
    dst += have;
    n -= have;
    begin_ = end_ = 0;
    if (n >= kBufferBytes / 2) return conn_->ReadFull(dst, n);
    while (end_ < n) {
      const size_t got = conn_->ReadSome(buf_.get() + end_, kBufferBytes - end_);
      if (got == 0) return false;
      end_ += got;
    }
    std::memcpy(dst, buf_.get(), n);
    begin_ = n;
    return true;
  }

 private:
  static constexpr size_t kBufferBytes = 64 << 10;
  StreamConn* const conn_;
  std::unique_ptr<char[]> buf_;
  size_t begin_ = 0, end_ = 0;  // buffered bytes: buf_[begin_, end_)
};

}  // namespace

StreamTransport::StreamTransport(TransportOptions options, std::unique_ptr<StreamNet> net)
    : options_(std::move(options)), net_(std::move(net)) {}

StreamTransport::~StreamTransport() { Stop(); }

Status StreamTransport::Start(Handler handler) {
  QR_CHECK(!started_, "StreamTransport started twice");
  started_ = true;
  handler_ = std::move(handler);
  const auto& addrs = options_.addresses;
  if (options_.self >= addrs.size()) {
    return Status::InvalidArgument("node id " + std::to_string(options_.self) + " has no address (" +
                                   std::to_string(addrs.size()) + " members)");
  }
  for (const std::string& addr : addrs) {
    std::string host;
    int port = 0;
    QR_RETURN_IF_ERROR(SplitHostPort(addr, &host, &port));
  }
  Result<std::unique_ptr<StreamListener>> listener = net_->Listen(addrs[options_.self]);
  if (!listener.ok()) {
    return Status::Unavailable(options_.identity + " raft transport (" + net_->Name() + "): " +
                               listener.status().message());
  }
  listener_ = std::move(listener).value();
  peers_.resize(addrs.size());
  for (NodeId id = 0; id < addrs.size(); ++id) {
    if (id == options_.self) continue;
    auto peer = std::make_unique<Peer>();
    peer->id = id;
    peers_[id] = std::move(peer);
  }
  for (auto& p : peers_) {
    if (!p) continue;
    Peer* raw = p.get();
    raw->thread = NamedThread("raft-send-" + std::to_string(raw->id), [this, raw] { PeerLoop(raw); });
  }
  acceptor_ = NamedThread("raft-accept", [this] { AcceptLoop(); });
  return Status::Ok();
}

void StreamTransport::Send(Message message) {
  Peer* peer = message.to < peers_.size() ? peers_[message.to].get() : nullptr;
  if (peer == nullptr || stop_.load(std::memory_order_relaxed)) {
    counters_.send_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t bytes = 64;
  for (const Entry& e : message.entries) bytes += e.data.size() + 16;
  {
    MutexLock lock(peer->mu);
    // Bounded per peer: beyond it, drop (Raft retries) rather than block the raft thread.
    if (peer->queue.size() >= options_.send_queue_messages ||
        (!peer->queue.empty() && peer->queue_bytes + bytes > options_.send_queue_bytes)) {
      counters_.send_dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (peer->queue.empty()) peer->queued_since_ms = NowMillis();
    peer->queue_bytes += bytes;
    peer->queue.emplace_back(std::move(message), bytes);
  }
  peer->cv.notify_one();
}

size_t StreamTransport::WriteFrames(StreamConn* conn, const std::deque<std::pair<Message, uint64_t>>& batch,
                                   size_t from) {
  // Header and head of each frame, then the entries' own buffers: a payload is never copied
  // to be sent. Bounded gathers: at most kMaxGatherFrames frames or kMaxGatherBytes per write.
  constexpr size_t kMaxGatherFrames = 64;
  constexpr size_t kMaxGatherBytes = 8 << 20;
  std::vector<OutgoingFrame> frames;
  std::vector<iovec> iov;
  size_t bytes = 0;
  size_t end = from;
  while (end < batch.size() && frames.size() < kMaxGatherFrames && (frames.empty() || bytes < kMaxGatherBytes)) {
    frames.push_back(BuildFrame(batch[end].first));
    bytes += frames.back().bytes();
    ++end;
  }
  for (const OutgoingFrame& f : frames) {
    std::vector<iovec> v = f.Iovecs();
    iov.insert(iov.end(), v.begin(), v.end());
  }
  return conn->WriteAll(iov.data(), iov.size()) ? end : from;
}

void StreamTransport::PeerLoop(Peer* peer) {
  int backoff_ms = options_.reconnect_min_ms;
  std::unique_ptr<StreamConn> conn;  // this thread's connection (mirrored in peer->conn for Stop)
  std::deque<std::pair<Message, uint64_t>> batch;
  auto drop_conn = [&] {
    MutexLock lock(peer->mu);
    peer->conn = nullptr;
  };
  for (;;) {
    {
      MutexUniqueLock lock(peer->mu);
      peer->cv.wait(lock.native(), [&]() REQUIRES(peer->mu) {
        return stop_.load(std::memory_order_relaxed) || !peer->queue.empty();
      });
      if (stop_.load(std::memory_order_relaxed)) break;
    }
    if (!conn) {
      std::unique_ptr<StreamConn> fresh = net_->Connect(options_.addresses[peer->id], kConnectTimeoutMs);
      MutexUniqueLock lock(peer->mu);
      if (!fresh) {
        // Unreachable: what is queued is dropped (Raft resends), then back off.
        counters_.send_dropped.fetch_add(peer->queue.size(), std::memory_order_relaxed);
        peer->queue.clear();
        peer->queue_bytes = 0;
        peer->cv.wait_for(lock.native(), std::chrono::milliseconds(backoff_ms),
                          [&] { return stop_.load(std::memory_order_relaxed); });
        backoff_ms = std::min(backoff_ms * 2, options_.reconnect_max_ms);
        continue;
      }
      if (stop_.load(std::memory_order_relaxed)) break;  // fresh is closed on the way out
      conn = std::move(fresh);
      peer->conn = conn.get();
      backoff_ms = options_.reconnect_min_ms;
    }
    int64_t queued_since = 0;
    uint64_t batch_bytes = 0;
    {
      MutexLock lock(peer->mu);
      batch.swap(peer->queue);
      batch_bytes = peer->queue_bytes;
      peer->queue_bytes = 0;
      queued_since = peer->queued_since_ms;
    }
    // Frames go out gathered: many small frames (responses, heartbeats) in one write, so
    // each costs a few iovecs rather than a system call (or an nng aio round trip).
    const int64_t write_start = NowMillis();
    size_t written = 0;
    while (written < batch.size()) {
      const size_t group_end = WriteFrames(conn.get(), batch, written);
      if (group_end == written) break;  // the connection failed
      written = group_end;
    }
    // Messages that waited long to go out delay heartbeats as much: say so (at most once a
    // second), with where the time went (the queue, or a write a slow reader held back).
    const int64_t write_end = NowMillis();
    if (write_end - queued_since >= kSlowSendMs && write_end - peer->last_slow_log_ms >= 1000) {
      peer->last_slow_log_ms = write_end;
      Logger("raft")->warn("[{}] messages to n{} went out {} ms after the first was queued: {} ms waiting to be "
                           "taken, {} ms writing {} message(s) of {} bytes",
                           options_.identity, peer->id, write_end - queued_since, write_start - queued_since,
                           write_end - write_start, batch.size(), batch_bytes);
    }
    counters_.sent.fetch_add(written, std::memory_order_relaxed);
    if (written < batch.size()) {
      counters_.send_dropped.fetch_add(batch.size() - written, std::memory_order_relaxed);
      drop_conn();
      conn.reset();
    }
    batch.clear();
  }
  drop_conn();
}

void StreamTransport::AcceptLoop() {
  const size_t max_inbound = 4 * options_.addresses.size() + 4;
  while (!stop_.load(std::memory_order_relaxed)) {
    std::unique_ptr<StreamConn> conn = listener_->Accept(kAcceptPollMs);
    ReapInbound(/*all=*/false);
    if (stop_.load(std::memory_order_relaxed)) break;
    if (!conn) continue;
    MutexLock lock(inbound_mu_);
    if (inbound_.size() >= max_inbound) {
      Reject("too many inbound connections");
      continue;  // conn closes here
    }
    inbound_.push_back(std::make_unique<Inbound>());
    Inbound* in = inbound_.back().get();
    in->conn = std::move(conn);
    in->thread = NamedThread("raft-rd", [this, in] { ReadLoop(in); });
  }
}

void StreamTransport::ReadLoop(Inbound* in) {
  StreamConn* conn = in->conn.get();
  BufferedReader reader(conn);
  auto read = [&reader](char* buf, size_t n) { return reader.Read(buf, n); };
  while (!stop_.load(std::memory_order_relaxed)) {
    Result<Message> decoded = ReadFrame(read, options_.max_frame_bytes);
    if (!decoded.ok()) {
      // kAborted: the peer (or Stop) closed between frames. Otherwise a byte stream cannot
      // resynchronise: say why and drop the connection (the peer reconnects).
      if (decoded.status().code() != StatusCode::kAborted && !stop_.load(std::memory_order_relaxed)) {
        Reject(decoded.status().ToString());
      }
      break;
    }
    Message& m = decoded.value();
    if (m.to != options_.self || m.from >= options_.addresses.size() || m.from == options_.self) {
      Reject("message from " + std::to_string(m.from) + " to " + std::to_string(m.to) + " is not for us");
      continue;  // framing is intact: keep the connection
    }
    counters_.received.fetch_add(1, std::memory_order_relaxed);
    handler_(std::move(m));
  }
  in->done.store(true, std::memory_order_release);
}

void StreamTransport::ReapInbound(bool all) {
  MutexLock lock(inbound_mu_);
  for (auto it = inbound_.begin(); it != inbound_.end();) {
    Inbound& c = **it;
    if (!all && !c.done.load(std::memory_order_acquire)) {
      ++it;
      continue;
    }
    c.conn->Shutdown();  // wakes a blocked read
    c.thread.Join();
    it = inbound_.erase(it);  // closes the connection
  }
}

void StreamTransport::Reject(const std::string& why) { reject_log_.Reject(options_.identity, why, &counters_); }

void StreamTransport::Stop() {
  if (!started_ || stopped_) {
    stopped_ = true;
    return;
  }
  stopped_ = true;
  stop_.store(true, std::memory_order_relaxed);
  if (listener_) listener_->Shutdown();
  acceptor_.Join();
  for (auto& p : peers_) {
    if (!p) continue;
    {
      MutexLock lock(p->mu);
      if (p->conn != nullptr) p->conn->Shutdown();  // wakes a write blocked on a slow peer
    }
    p->cv.notify_all();
  }
  for (auto& p : peers_) {
    if (p) p->thread.Join();
  }
  ReapInbound(/*all=*/true);
  listener_.reset();
}

}  // namespace qrstore::replication::raft
