#include "client/client.h"

#include <chrono>
#include <condition_variable>
#include <optional>

#include "common/clock.h"

namespace qrstore::client {

Result<std::unique_ptr<ClientConnection>> ClientConnection::Connect(const std::string& address,
                                                                   ClientConnectionOptions options) {
  std::string host;
  int port = 0;
  if (Status st = net::SplitHostPort(address, &host, &port); !st.ok()) {
    return Status::InvalidArgument("node address '" + address + "': " + st.message());
  }
  QR_CHECK(options.on_frame != nullptr, "ClientConnection needs an on_frame handler");
  auto net = net::MakeNngStreamNet();
  std::unique_ptr<net::StreamConn> conn = net->Connect(address, options.connect_timeout_ms);
  if (!conn) {
    return Status::Unavailable("cannot connect to " + address + " within " +
                               std::to_string(options.connect_timeout_ms) + " ms (is the node up?)");
  }
  std::unique_ptr<ClientConnection> c(new ClientConnection(address, std::move(options), std::move(conn)));
  ClientConnection* raw = c.get();
  c->reader_ = NamedThread("cli-recv-" + c->options_.name, [raw] { raw->ReadLoop(); });
  return c;
}

ClientConnection::ClientConnection(std::string address, ClientConnectionOptions options,
                                   std::unique_ptr<net::StreamConn> conn)
    : address_(std::move(address)), options_(std::move(options)), conn_(std::move(conn)) {}

ClientConnection::~ClientConnection() { Close(); }

std::string ClientConnection::Who() const { return "connection " + options_.name + " to " + address_; }

void ClientConnection::SetError(Status s) {
  MutexLock lk(mu_);
  if (status_.ok()) status_ = std::move(s);
}

Status ClientConnection::status() const {
  MutexLock lk(mu_);
  return status_;
}

Status ClientConnection::Send(proto::MsgType type, std::string_view body) {
  auto closed_status = [&] {
    Status s = status();
    return s.ok() ? Status::Unavailable(Who() + " is closed") : s;
  };
  if (closed_.load(std::memory_order_acquire)) return closed_status();
  char header[proto::kHeaderBytes];
  proto::EncodeHeader(type, static_cast<uint32_t>(body.size()), header);
  iovec iov[2] = {{header, sizeof header}, {const_cast<char*>(body.data()), body.size()}};
  MutexLock lk(send_mu_);
  if (!conn_->WriteAll(iov, body.empty() ? 1 : 2)) {
    SetError(Status::Unavailable(Who() + " broke while sending"));
    return closed_status();
  }
  return Status::Ok();
}

void ClientConnection::ReadLoop() {
  reader_id_.store(std::this_thread::get_id(), std::memory_order_release);
  char header[proto::kHeaderBytes];
  std::string body;
  auto lost = [&] {
    // A read that fails after our own Shutdown is not the server's doing.
    if (!closed_.load(std::memory_order_acquire)) SetError(Status::Unavailable(address_ + " closed " + Who()));
  };
  while (!closed_.load(std::memory_order_acquire)) {
    if (!conn_->ReadFull(header, sizeof header)) {
      lost();
      break;
    }
    proto::FrameHeader h;
    if (Status st = proto::DecodeHeader(header, &h); !st.ok()) {
      SetError(Status::Corruption(Who() + ": " + st.message()));
      break;
    }
    if (h.body_bytes > options_.max_frame_bytes) {
      SetError(Status::Corruption(Who() + ": a " +
                                  (h.type >= 1 && h.type <= proto::kMaxMsgType
                                       ? proto::MsgTypeName(static_cast<proto::MsgType>(h.type))
                                       : "unknown-type") +
                                  " frame of " + std::to_string(h.body_bytes) + " bytes (at most " +
                                  std::to_string(options_.max_frame_bytes) + " expected)"));
      break;
    }
    body.resize(h.body_bytes);
    if (h.body_bytes > 0 && !conn_->ReadFull(body.data(), body.size())) {
      lost();
      break;
    }
    if (Status st = options_.on_frame(h.type, body); !st.ok()) {
      SetError(std::move(st));
      break;
    }
  }
  closed_.store(true, std::memory_order_release);
  conn_->Shutdown();  // a server that is still sending must not block on us
  if (options_.on_close) options_.on_close(status());
}

void ClientConnection::Shutdown(Status why) {
  SetError(std::move(why));
  closed_.store(true, std::memory_order_release);
  conn_->Shutdown();
}

void ClientConnection::Close() {
  QR_CHECK(reader_id_.load(std::memory_order_acquire) != std::this_thread::get_id(),
           "ClientConnection::Close from its own reader thread (%s) would join itself", Who().c_str());
  closed_.store(true, std::memory_order_release);
  conn_->Shutdown();
  reader_.Join();
}

Result<proto::NodeStatus> QueryStatus(const std::string& address, int timeout_ms) {
  const int64_t deadline = NowNanos() + int64_t{timeout_ms} * 1'000'000;
  // Shared with the reader thread, which may outlive a timed-out wait only until Close returns.
  struct State {
    Mutex mu;
    std::condition_variable cv;
    std::optional<Result<proto::NodeStatus>> answer GUARDED_BY(mu);
  };
  State st;
  auto answer = [&st](Result<proto::NodeStatus> r) {
    MutexLock lk(st.mu);
    if (!st.answer) st.answer.emplace(std::move(r));
    st.cv.notify_all();
  };
  ClientConnectionOptions o;
  o.name = "status";
  o.connect_timeout_ms = timeout_ms;
  o.max_frame_bytes = 4u << 20;  // a status reply is small even with many followers
  o.on_frame = [&](uint8_t type, std::string_view body) {
    if (type == static_cast<uint8_t>(proto::MsgType::kStatusReply)) {
      proto::NodeStatus s;
      Status d = proto::DecodeStatusReply(body, &s);
      if (!d.ok()) {
        answer(Status::Corruption(address + ": " + d.message()));
      } else {
        answer(std::move(s));
      }
    } else if (type == static_cast<uint8_t>(proto::MsgType::kError)) {
      proto::ErrorReply e;
      if (!proto::DecodeError(body, &e).ok()) {
        answer(Status::Corruption(address + ": a malformed error reply"));
      } else {
        answer(Status::Unavailable(address + " answered the status request with an error: " +
                                   StatusCodeName(e.code) + ": " + e.message));
      }
    } else {
      answer(Status::Corruption(address + ": a reply of type " + std::to_string(type) + " to a status request"));
    }
    return Status::Ok();
  };
  o.on_close = [&](const Status& why) {
    answer(why.ok() ? Status::Unavailable(address + " closed the connection without a status reply") : why);
  };
  auto conn = ClientConnection::Connect(address, std::move(o));
  if (!conn.ok()) return conn.status();
  ClientConnection* c = conn.value().get();
  // The request is sent from a thread of its own: a send into a connection whose packets are
  // dropped may block (nng's send has no deadline), and the deadline below covers it too (Close
  // makes a blocked send return).
  NamedThread sender("cli-status-send", [c, &answer] {
    if (Status s = c->Send(proto::MsgType::kStatusRequest, proto::EncodeStatusRequest(proto::StatusRequest{1}));
        !s.ok()) {
      answer(std::move(s));
    }
  });
  Result<proto::NodeStatus> out = Status::Timeout("no status reply from " + address + " within " +
                                                  std::to_string(timeout_ms) + " ms");
  {
    MutexUniqueLock lk(st.mu);
    const int64_t left = std::max<int64_t>(deadline - NowNanos(), 0);
    if (st.cv.wait_for(lk.native(), std::chrono::nanoseconds(left),
                       [&]() REQUIRES(st.mu) { return st.answer.has_value(); })) {
      out = std::move(*st.answer);
    }
  }
  c->Close();  // joins the reader and ends a blocked send: `st` is not used after these
  sender.Join();
  return out;
}

std::vector<Result<proto::NodeStatus>> QueryStatuses(const std::vector<std::string>& addresses, int timeout_ms) {
  std::vector<std::optional<Result<proto::NodeStatus>>> slots(addresses.size());
  {
    std::vector<NamedThread> threads;
    threads.reserve(addresses.size());
    for (size_t i = 0; i < addresses.size(); ++i) {
      threads.emplace_back("cli-status-" + std::to_string(i),
                           [&, i] { slots[i].emplace(QueryStatus(addresses[i], timeout_ms)); });
    }
  }  // joined
  std::vector<Result<proto::NodeStatus>> out;
  out.reserve(slots.size());
  for (auto& s : slots) out.push_back(std::move(*s));
  return out;
}

}  // namespace qrstore::client
