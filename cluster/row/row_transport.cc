#include "cluster/row/row_transport.h"

#include <sys/uio.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <thread>

#include "common/clock.h"
#include "common/logging.h"
#include "common/net/stream_net.h"

namespace qrstore::cluster {

namespace {

constexpr char kHello[4] = {'Q', 'R', 'H', '1'};
constexpr size_t kHelloBytes = 8;  // "QRH1" + u32 partition (little-endian)
// Connections accepted in all (stray ones included) before the acceptor refuses more: a row of
// P nodes needs P - 1; the rest is room for peers that redial.
constexpr size_t kMaxAccepted = 64;

void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

RowTransport::RowTransport(RowTransportOptions options, RowFrameHandler on_frame, RowFailureHandler on_failure)
    : opt_(std::move(options)), on_frame_(std::move(on_frame)), on_failure_(std::move(on_failure)) {
  QR_CHECK(opt_.me < opt_.addresses.size());
  net_ = opt_.net == "posix" ? net::MakePosixStreamNet() : net::MakeNngStreamNet();
  for (size_t p = 0; p < opt_.addresses.size(); ++p) out_.push_back(std::make_unique<Out>());
  in_.resize(opt_.addresses.size());
  expect_close_ = std::make_unique<std::atomic<bool>[]>(opt_.addresses.size());
  for (size_t p = 0; p < opt_.addresses.size(); ++p) expect_close_[p].store(false);
}

RowTransport::~RowTransport() { Stop(); }

std::string RowTransport::Peer(uint32_t p) const {
  return "row peer " + std::to_string(p) + " (" + (p < opt_.addresses.size() ? opt_.addresses[p] : "?") + ")";
}

Status RowTransport::Listen() {
  auto l = net_->Listen(opt_.addresses[opt_.me]);
  if (!l.ok()) return l.status();
  listener_ = std::move(l).value();
  acceptor_ = NamedThread("row-accept", [this] { AcceptLoop(); });
  return Status::Ok();
}

void RowTransport::AcceptLoop() {
  size_t accepted = 0;
  while (!stop_.load()) {
    std::unique_ptr<net::StreamConn> c = listener_->Accept(200);
    if (c == nullptr) continue;
    if (++accepted > kMaxAccepted) {
      Logger("row")->warn("row transport: refused a connection: {} accepted already", kMaxAccepted);
      continue;  // closed by its destructor
    }
    std::shared_ptr<net::StreamConn> conn(std::move(c));
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_.load()) return;
    all_.push_back(conn);
    readers_.emplace_back("row-in", [this, conn] { ReadLoop(conn); });
  }
}

void RowTransport::ReadLoop(std::shared_ptr<net::StreamConn> conn) {
  char hello[kHelloBytes];
  if (!conn->ReadFull(hello, sizeof hello)) return;  // a stray connection, or stopping
  const uint32_t from = GetU32(hello + 4);
  if (std::memcmp(hello, kHello, sizeof kHello) != 0 || from >= opt_.addresses.size() || from == opt_.me) {
    Logger("row")->warn("row transport: dropped a connection whose hello is not a row peer's");
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (in_[from] != nullptr) {
      Logger("row")->warn("row transport: {} dialed in twice: dropped the second connection", Peer(from));
      return;
    }
    in_[from] = conn;
  }
  in_cv_.notify_all();
  // Buffered: many small frames per read.
  std::string buf(size_t{256} << 10, '\0');
  size_t begin = 0, end = 0;
  for (;;) {
    // Whole frames in buf[begin, end).
    while (end - begin >= 4) {
      const uint32_t len = GetU32(buf.data() + begin);
      if (len > opt_.max_frame_bytes) {
        Failed(Status::Corruption(Peer(from) + " sent a frame of " + std::to_string(len) + " bytes (at most " +
                                  std::to_string(opt_.max_frame_bytes) + ")"));
        return;
      }
      if (end - begin < 4 + size_t{len}) {
        if (4 + size_t{len} > buf.size()) {
          // A frame larger than the buffer: move what is here to the front of a bigger one.
          std::string bigger(4 + size_t{len}, '\0');
          std::memcpy(bigger.data(), buf.data() + begin, end - begin);
          buf.swap(bigger);
          end -= begin;
          begin = 0;
        }
        break;
      }
      on_frame_(from, std::string_view(buf.data() + begin + 4, len));
      begin += 4 + size_t{len};
    }
    if (begin == end) {
      begin = end = 0;
    } else if (begin > 0 && buf.size() - end < 4096) {
      std::memmove(buf.data(), buf.data() + begin, end - begin);
      end -= begin;
      begin = 0;
    }
    const size_t n = conn->ReadSome(buf.data() + end, buf.size() - end);
    if (n == 0) {
      if (!stop_.load() && !expect_close_[from].load()) Failed(Status::Unavailable(Peer(from) + " closed its connection"));
      return;
    }
    end += n;
  }
}

Status RowTransport::Connect(int64_t timeout_ms) {
  const int64_t deadline = NowNanos() + timeout_ms * 1'000'000;
  const uint32_t n = static_cast<uint32_t>(opt_.addresses.size());
  for (uint32_t p = 0; p < n; ++p) {
    if (p == opt_.me) continue;
    std::unique_ptr<net::StreamConn> c;
    int64_t backoff_ms = 10;
    while (c == nullptr) {
      if (stop_.load()) return Status::Aborted("row transport stopped");
      const int64_t left_ms = (deadline - NowNanos()) / 1'000'000;
      if (left_ms <= 0) {
        return Status::Unavailable(Peer(p) + " not reachable within " + std::to_string(timeout_ms) + " ms: is it up?");
      }
      c = net_->Connect(opt_.addresses[p], static_cast<int>(std::min<int64_t>(left_ms, 1000)));
      if (c == nullptr) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(backoff_ms, left_ms)));
        backoff_ms = std::min<int64_t>(backoff_ms * 2, 200);
      }
    }
    char hello[kHelloBytes];
    std::memcpy(hello, kHello, sizeof kHello);
    PutU32(hello + 4, opt_.me);
    iovec iov{hello, sizeof hello};
    if (!c->WriteAll(&iov, 1)) return Status::Unavailable(Peer(p) + ": the hello could not be sent");
    std::shared_ptr<net::StreamConn> conn(std::move(c));
    {
      std::lock_guard<std::mutex> lk(mu_);
      all_.push_back(conn);
      if (stop_.load()) conn->Shutdown();
    }
    std::lock_guard<std::mutex> lk(out_[p]->mu);
    out_[p]->conn = std::move(conn);
  }
  // Every peer dials in too.
  std::unique_lock<std::mutex> lk(mu_);
  auto all_in = [&] {
    for (uint32_t p = 0; p < n; ++p) {
      if (p != opt_.me && in_[p] == nullptr) return false;
    }
    return true;
  };
  const int64_t left_ms = std::max<int64_t>(0, (deadline - NowNanos()) / 1'000'000);
  if (!in_cv_.wait_for(lk, std::chrono::milliseconds(left_ms), [&] { return all_in() || stop_.load(); }) || !all_in()) {
    std::string missing;
    for (uint32_t p = 0; p < n; ++p) {
      if (p != opt_.me && in_[p] == nullptr) missing += (missing.empty() ? "" : ", ") + Peer(p);
    }
    return Status::Unavailable("did not dial in within " + std::to_string(timeout_ms) + " ms: " + missing);
  }
  return Status::Ok();
}

bool RowTransport::Send(uint32_t to, std::string_view frame) {
  QR_CHECK(to < out_.size() && to != opt_.me, "row transport: send to partition %u", to);
  if (failed_.load() || stop_.load()) return false;
  if (frame.size() > opt_.max_frame_bytes) {
    Failed(Status::InvalidArgument("a frame of " + std::to_string(frame.size()) + " bytes for " + Peer(to) +
                                   " (at most " + std::to_string(opt_.max_frame_bytes) + ")"));
    return false;
  }
  char len[4];
  PutU32(len, static_cast<uint32_t>(frame.size()));
  iovec iov[2] = {{len, sizeof len}, {const_cast<char*>(frame.data()), frame.size()}};
  Out& o = *out_[to];
  std::lock_guard<std::mutex> lk(o.mu);
  if (o.conn == nullptr || !o.conn->WriteAll(iov, 2)) {
    if (!stop_.load() && !expect_close_[to].load()) Failed(Status::Unavailable("could not send to " + Peer(to)));
    return false;
  }
  frames_sent_.fetch_add(1, std::memory_order_relaxed);
  bytes_sent_.fetch_add(4 + frame.size(), std::memory_order_relaxed);
  return true;
}

void RowTransport::ExpectClose(uint32_t p) {
  QR_CHECK(p < opt_.addresses.size());
  expect_close_[p].store(true);
}

void RowTransport::Failed(const Status& s) {
  if (failed_.exchange(true)) return;
  on_failure_(s);
}

void RowTransport::Stop() {
  if (stop_.exchange(true)) return;
  if (listener_) listener_->Shutdown();
  acceptor_.Join();
  std::vector<NamedThread> readers;
  {
    // Wakes readers (also of connections that never said hello) and writers blocked in a write.
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& c : all_) c->Shutdown();
    readers.swap(readers_);
  }
  in_cv_.notify_all();
  for (auto& r : readers) r.Join();
  for (auto& o : out_) {
    std::lock_guard<std::mutex> lk(o->mu);
    o->conn.reset();
  }
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& c : in_) c.reset();
  all_.clear();
  listener_.reset();
}

}  // namespace qrstore::cluster
