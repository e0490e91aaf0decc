#include "cluster/row/row_transport.h"

#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <thread>

#include "common/clock.h"
#include "common/logging.h"
#include "common/net/stream_net.h"

namespace qrstore::cluster {

namespace {

constexpr char kHello[4] = {'Q', 'R', 'H', '2'};
constexpr size_t kHelloBytes = 16;  // "QRH2" + u32 partition + u64 epoch (little-endian)

void PutLE(char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t GetLE(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
uint32_t GetU32(const char* p) { return static_cast<uint32_t>(GetLE(p, 4)); }

int64_t MillisLeft(int64_t deadline_ns) { return std::max<int64_t>(0, (deadline_ns - NowNanos()) / 1'000'000); }

}  // namespace

RowTransport::RowTransport(RowTransportOptions options, RowFrameHandler on_frame, RowFailureHandler on_failure,
                           RowPeerLostHandler on_peer_lost)
    : opt_(std::move(options)),
      on_frame_(std::move(on_frame)),
      on_failure_(std::move(on_failure)),
      on_peer_lost_(std::move(on_peer_lost)) {
  QR_CHECK(opt_.me < opt_.addresses.size());
  net_ = opt_.net == "posix" ? net::MakePosixStreamNet() : net::MakeNngStreamNet();
  for (size_t p = 0; p < opt_.addresses.size(); ++p) {
    links_.push_back(std::make_unique<Link>());
    links_.back()->address = opt_.addresses[p];
  }
  expect_close_ = std::make_unique<std::atomic<bool>[]>(opt_.addresses.size());
  for (size_t p = 0; p < opt_.addresses.size(); ++p) expect_close_[p].store(false);
}

RowTransport::~RowTransport() { Stop(); }

std::string RowTransport::Describe(uint32_t p, const std::string& address) {
  return "row peer " + std::to_string(p) + " (" + address + ")";
}

std::string RowTransport::Peer(uint32_t p) const {
  if (p >= links_.size()) return Describe(p, "?");
  MutexLock lk(links_[p]->mu);
  return Describe(p, links_[p]->address);
}

Status RowTransport::Listen() {
  auto l = net_->Listen(opt_.addresses[opt_.me]);
  if (!l.ok()) return l.status();
  listener_ = std::move(l).value();
  acceptor_ = NamedThread("row-accept", [this] { AcceptLoop(); });
  return Status::Ok();
}

void RowTransport::AcceptLoop() {
  while (!stop_.load()) {
    std::unique_ptr<net::StreamConn> c = listener_->Accept(200);
    if (c == nullptr) continue;
    std::vector<Reader> finished;
    bool full = false;
    {
      MutexLock lk(mu_);
      if (stop_.load()) return;
      // Reaps readers that ended (their connection closed, was replaced or refused), so that a
      // row living through many failovers keeps a bounded list; joined below, outside mu_.
      std::vector<Reader> alive;
      for (Reader& r : readers_) {
        (r.finished->load(std::memory_order_acquire) ? finished : alive).push_back(std::move(r));
      }
      readers_.swap(alive);
      full = readers_.size() >= kMaxReaders;
      if (!full) {
        std::shared_ptr<net::StreamConn> conn(std::move(c));
        auto done = std::make_shared<std::atomic<bool>>(false);
        Reader r;
        r.conn = conn;
        r.finished = done;
        r.thread = NamedThread("row-in", [this, conn, done] {
          ReadLoop(conn);
          done->store(true, std::memory_order_release);
        });
        readers_.push_back(std::move(r));
      }
    }
    for (auto& r : finished) r.thread.Join();
    if (full) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      Logger("row")->warn("row transport: refused a connection: {} readers alive already", kMaxReaders);
      // c is closed by its destructor.
    }
  }
}

bool RowTransport::TakeInbound(uint32_t from, uint64_t epoch, const std::shared_ptr<net::StreamConn>& conn,
                               uint64_t* gen) {
  Link& l = *links_[from];
  std::string refusal;
  std::shared_ptr<net::StreamConn> replaced;
  std::vector<std::shared_ptr<net::StreamConn>> doomed;
  bool superseded = false;
  uint64_t old_epoch = 0;
  {
    // deliver_mu too: once in_gen moved on, the old connection's reader delivers nothing more.
    MutexLock dl(l.deliver_mu);
    MutexLock lk(l.mu);
    if (stop_.load()) return false;
    old_epoch = l.in_epoch;
    if (l.in != nullptr && !opt_.tolerate_peer_loss) {
      refusal = Describe(from, l.address) + " dialed in twice: dropped the second connection";
    } else if (l.in != nullptr && epoch <= l.in_epoch) {
      // The hello does not say where it came from: the address named is the connected one's.
      refusal = "refused a dial-in from partition " + std::to_string(from) + " with epoch " + std::to_string(epoch) +
                ": " + Describe(from, l.address) + " is connected with epoch " + std::to_string(l.in_epoch) +
                " (a successor's epoch is higher)";
    } else {
      if (l.in != nullptr) {
        replaced = std::move(l.in);
        // A successor dialing in before this node noticed its predecessor's end (and before the
        // caller redialed it): that end is the loss to report, as the outbound connection still
        // goes to the predecessor.
        superseded = MarkLostLocked(l, &doomed);
      }
      l.in = conn;
      l.in_epoch = epoch;
      *gen = ++l.in_gen;
      RenewedLocked(l);
    }
  }
  if (!refusal.empty()) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    Logger("row")->warn("row transport: {}", refusal);
    return false;
  }
  l.cv.notify_all();
  if (replaced != nullptr) {
    replaced->Shutdown();
    Logger("row")->info("row transport: {}: a connection of epoch {} replaced the one of epoch {}", Peer(from), epoch,
                        old_epoch);
  }
  for (auto& c : doomed) c->Shutdown();
  if (superseded) {
    ReportLost(from, Status::Unavailable(Peer(from) + " was superseded by a successor of epoch " +
                                         std::to_string(epoch) + " (its connection's epoch was " +
                                         std::to_string(old_epoch) + ")"));
  }
  return true;
}

void RowTransport::ReadLoop(std::shared_ptr<net::StreamConn> conn) {
  char hello[kHelloBytes];
  if (!conn->ReadFull(hello, sizeof hello)) return;  // a stray connection, or stopping
  const uint32_t from = GetU32(hello + 4);
  const uint64_t epoch = GetLE(hello + 8, 8);
  if (std::memcmp(hello, kHello, sizeof kHello) != 0 || from >= opt_.addresses.size() || from == opt_.me) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    Logger("row")->warn("row transport: dropped a connection whose hello is not a row peer's");
    conn->Shutdown();  // now, not when the acceptor reaps this reader: the dialer sees it closed
    return;
  }
  uint64_t gen = 0;
  if (!TakeInbound(from, epoch, conn, &gen)) {
    conn->Shutdown();  // as above
    return;
  }
  Link& l = *links_[from];
  // Buffered: many small frames per read.
  std::string buf(size_t{256} << 10, '\0');
  size_t begin = 0, end = 0;
  for (;;) {
    Status bad;
    {
      // Delivered under deliver_mu, and only while this is p's connection: a replacement takes
      // deliver_mu to move in_gen on, so no frame of a replaced connection follows it.
      MutexLock dl(l.deliver_mu);
      if (l.in_gen != gen) return;  // replaced: exit quietly
      // Whole frames in buf[begin, end).
      while (end - begin >= 4) {
        const uint32_t len = GetU32(buf.data() + begin);
        if (len > opt_.max_frame_bytes) {
          bad = Status::Corruption(Peer(from) + " sent a frame of " + std::to_string(len) + " bytes (at most " +
                                   std::to_string(opt_.max_frame_bytes) + ")");
          break;
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
    }
    if (!bad.ok()) {
      Failed(bad);  // outside deliver_mu: the failure handler may do anything
      return;
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
      if (stop_.load() || expect_close_[from].load()) return;
      const Status why = Status::Unavailable(Peer(from) + " closed its connection");
      if (opt_.tolerate_peer_loss) {
        Lost(from, Direction::kIn, gen, why);  // quiet if it was replaced meanwhile
      } else {
        Failed(why);
      }
      return;
    }
    end += n;
  }
}

Result<std::shared_ptr<net::StreamConn>> RowTransport::Dial(uint32_t p, const std::string& address,
                                                            int64_t deadline_ns, int64_t timeout_ms) {
  std::unique_ptr<net::StreamConn> c;
  int64_t backoff_ms = 10;
  while (c == nullptr) {
    if (stop_.load()) return Status::Aborted("row transport stopped");
    const int64_t left_ms = MillisLeft(deadline_ns);
    if (left_ms <= 0) {
      return Status::Unavailable(Describe(p, address) + " not reachable within " + std::to_string(timeout_ms) +
                                 " ms: is it up?");
    }
    c = net_->Connect(address, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (c == nullptr) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(backoff_ms, left_ms)));
      backoff_ms = std::min<int64_t>(backoff_ms * 2, 200);
    }
  }
  char hello[kHelloBytes];
  std::memcpy(hello, kHello, sizeof kHello);
  PutLE(hello + 4, opt_.me, 4);
  PutLE(hello + 8, opt_.epoch, 8);
  iovec iov{hello, sizeof hello};
  if (!c->WriteAll(&iov, 1)) return Status::Unavailable(Describe(p, address) + ": the hello could not be sent");
  return std::shared_ptr<net::StreamConn>(std::move(c));
}

void RowTransport::InstallOut(uint32_t p, std::shared_ptr<net::StreamConn> conn, const std::string& address,
                              bool redial) {
  Link& l = *links_[p];
  std::vector<std::shared_ptr<net::StreamConn>> doomed;
  {
    MutexLock lk(l.mu);
    // Redialing a peer not known lost: the caller learned of a successor first. The inbound
    // connection is the predecessor's, so p is lost (not reported: the caller knows) until the
    // successor dials in; the outbound one is renewed just below.
    if (redial && !l.lost && l.in != nullptr) MarkLostLocked(l, &doomed);
    if (l.out != nullptr) doomed.push_back(l.out);  // maybe twice: Shutdown is idempotent
    l.out = conn;
    ++l.out_gen;
    l.address = address;
    RenewedLocked(l);
    if (stop_.load()) conn->Shutdown();  // Stop's pass over the links may have been before this
  }
  l.cv.notify_all();
  // A writer blocked on the old connection returns; it sees out_gen moved on and drops its frame.
  for (auto& c : doomed) c->Shutdown();
}

Status RowTransport::Connect(int64_t timeout_ms) {
  const int64_t deadline = NowNanos() + timeout_ms * 1'000'000;
  QR_RETURN_IF_ERROR(DialAllUntil(deadline, timeout_ms));
  return WaitDialedInUntil(deadline, timeout_ms);
}

Status RowTransport::DialAll(int64_t timeout_ms) {
  return DialAllUntil(NowNanos() + timeout_ms * 1'000'000, timeout_ms);
}

Status RowTransport::DialAllUntil(int64_t deadline_ns, int64_t timeout_ms) {
  for (uint32_t p = 0; p < links_.size(); ++p) {
    if (p == opt_.me) continue;
    std::string address;
    {
      MutexLock lk(links_[p]->mu);
      address = links_[p]->address;
    }
    auto c = Dial(p, address, deadline_ns, timeout_ms);
    if (!c.ok()) return c.status();
    InstallOut(p, std::move(c).value(), address, /*redial=*/false);
  }
  return Status::Ok();
}

Status RowTransport::Redial(uint32_t p, const std::string& address, int64_t timeout_ms) {
  return DialOut(p, address, timeout_ms, /*redial=*/true);
}

Status RowTransport::DialCurrent(uint32_t p, const std::string& address, int64_t timeout_ms) {
  return DialOut(p, address, timeout_ms, /*redial=*/false);
}

Status RowTransport::DialOut(uint32_t p, const std::string& address, int64_t timeout_ms, bool redial) {
  QR_CHECK(opt_.tolerate_peer_loss, "row transport: Redial without tolerate_peer_loss");
  QR_CHECK(p < links_.size() && p != opt_.me, "row transport: Redial partition %u", p);
  auto c = Dial(p, address, NowNanos() + timeout_ms * 1'000'000, timeout_ms);
  if (!c.ok()) return c.status();
  InstallOut(p, std::move(c).value(), address, redial);
  Logger("row")->info("row transport: {} {}", redial ? "redialed" : "dialed", Describe(p, address));
  return Status::Ok();
}

bool RowTransport::InboundLiveLocked(const Link& l) {
  return l.in != nullptr && !(l.lost && l.in_gen == l.lost_in_gen);
}

Status RowTransport::WaitDialedIn(int64_t timeout_ms) {
  return WaitDialedInUntil(NowNanos() + timeout_ms * 1'000'000, timeout_ms);
}

Status RowTransport::WaitDialedInUntil(int64_t deadline_ns, int64_t timeout_ms) {
  std::string missing;
  for (uint32_t p = 0; p < links_.size(); ++p) {
    if (p == opt_.me) continue;
    Link& l = *links_[p];
    MutexUniqueLock lk(l.mu);
    // Once the deadline passed, the rest are only checked (a wait of 0 ms).
    l.cv.wait_for(lk.native(), std::chrono::milliseconds(MillisLeft(deadline_ns)),
                  [&]() REQUIRES(l.mu) { return InboundLiveLocked(l) || stop_.load(); });
    if (!InboundLiveLocked(l)) missing += (missing.empty() ? "" : ", ") + Describe(p, l.address);
  }
  if (!missing.empty()) {
    return Status::Unavailable("did not dial in within " + std::to_string(timeout_ms) + " ms: " + missing);
  }
  return Status::Ok();
}

Status RowTransport::WaitDialedIn(uint32_t p, int64_t timeout_ms) {
  QR_CHECK(p < links_.size() && p != opt_.me, "row transport: WaitDialedIn partition %u", p);
  Link& l = *links_[p];
  MutexUniqueLock lk(l.mu);
  if (!l.cv.wait_for(lk.native(), std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms)),
                     [&]() REQUIRES(l.mu) { return InboundLiveLocked(l) || stop_.load(); }) ||
      !InboundLiveLocked(l)) {
    return Status::Unavailable(Describe(p, l.address) + " did not dial in within " + std::to_string(timeout_ms) +
                               " ms");
  }
  return Status::Ok();
}

bool RowTransport::Send(uint32_t to, std::string_view frame) {
  QR_CHECK(to < links_.size() && to != opt_.me, "row transport: send to partition %u", to);
  if (failed_.load() || stop_.load()) return false;
  if (frame.size() > opt_.max_frame_bytes) {
    Failed(Status::InvalidArgument("a frame of " + std::to_string(frame.size()) + " bytes for " + Peer(to) +
                                   " (at most " + std::to_string(opt_.max_frame_bytes) + ")"));
    return false;
  }
  char len[4];
  PutLE(len, frame.size(), 4);
  iovec iov[2] = {{len, sizeof len}, {const_cast<char*>(frame.data()), frame.size()}};
  Link& l = *links_[to];
  MutexUniqueLock wl(l.write_mu);
  std::shared_ptr<net::StreamConn> conn;
  uint64_t gen = 0;
  bool lost = false;
  {
    MutexLock lk(l.mu);
    conn = l.out;
    gen = l.out_gen;
    lost = l.lost;
  }
  if (lost) return true;  // dropped: the caller re-sends to the successor (see the header)
  if (conn == nullptr || !conn->WriteAll(iov, 2)) {
    wl.Unlock();  // the lost handler may Send
    if (stop_.load() || expect_close_[to].load()) return false;
    const Status why = Status::Unavailable("could not send to " + Peer(to));
    if (!opt_.tolerate_peer_loss || conn == nullptr) {
      Failed(why);  // without tolerate_peer_loss, or a Send before DialAll (a bug of the caller)
      return false;
    }
    Lost(to, Direction::kOut, gen, why);  // quiet if Redial replaced the connection meanwhile
    return !failed_.load() && !stop_.load();
  }
  frames_sent_.fetch_add(1, std::memory_order_relaxed);
  bytes_sent_.fetch_add(4 + frame.size(), std::memory_order_relaxed);
  return true;
}

bool RowTransport::Up(uint32_t p) const {
  QR_CHECK(p < links_.size() && p != opt_.me, "row transport: Up partition %u", p);
  if (failed_.load() || stop_.load()) return false;
  const Link& l = *links_[p];
  MutexLock lk(l.mu);
  return l.out != nullptr && l.in != nullptr && !l.lost;
}

bool RowTransport::MarkLostLocked(Link& l, std::vector<std::shared_ptr<net::StreamConn>>* doomed) {
  if (l.lost) return false;
  l.lost = true;
  l.lost_out_gen = l.out_gen;
  l.lost_in_gen = l.in_gen;
  // Both connections go to the incarnation that ended: nothing more is written to it or
  // delivered from it (if it is still alive, it sees its connections close).
  if (l.out != nullptr) doomed->push_back(l.out);
  if (l.in != nullptr) doomed->push_back(l.in);
  return true;
}

void RowTransport::RenewedLocked(Link& l) {
  if (l.lost && l.out_gen != l.lost_out_gen && l.in_gen != l.lost_in_gen) l.lost = false;
}

void RowTransport::Lost(uint32_t p, Direction dir, uint64_t gen, const Status& why) {
  Link& l = *links_[p];
  std::vector<std::shared_ptr<net::StreamConn>> doomed;
  bool report = false;
  {
    MutexLock lk(l.mu);
    if (stop_.load() || gen != (dir == Direction::kOut ? l.out_gen : l.in_gen)) return;  // not current
    report = MarkLostLocked(l, &doomed);
    // Already lost, and this connection was a renewal: it must be renewed again.
    (dir == Direction::kOut ? l.lost_out_gen : l.lost_in_gen) = gen;
  }
  l.cv.notify_all();
  for (auto& c : doomed) c->Shutdown();
  if (report) ReportLost(p, why);
}

void RowTransport::ReportLost(uint32_t p, const Status& why) {
  Logger("row")->warn("row transport: lost partition {}: {}", p, why.message());
  if (on_peer_lost_) on_peer_lost_(p, why);
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
  std::vector<Reader> readers;
  {
    // Wakes readers (also of connections that never said hello, or were replaced).
    MutexLock lk(mu_);
    for (auto& r : readers_) r.conn->Shutdown();
    readers.swap(readers_);
  }
  for (auto& lp : links_) {
    // Wakes writers blocked in a write, and WaitDialedIn (notified under mu: no lost wake-up).
    MutexLock lk(lp->mu);
    if (lp->out != nullptr) lp->out->Shutdown();
    if (lp->in != nullptr) lp->in->Shutdown();
    lp->cv.notify_all();
  }
  for (auto& r : readers) r.thread.Join();
  for (auto& lp : links_) {
    MutexLock lk(lp->mu);
    lp->out.reset();
    lp->in.reset();
  }
  listener_.reset();
}

}  // namespace qrstore::cluster
