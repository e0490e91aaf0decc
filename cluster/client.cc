#include "cluster/client.h"

#include <chrono>
#include <condition_variable>

#include "common/clock.h"

namespace qrstore::cluster {

Result<std::unique_ptr<ClientConnection>> ClientConnection::Connect(const std::string& address, int timeout_ms,
                                                                   std::string name, FrameHandler handler,
                                                                   uint32_t max_frame_bytes) {
  std::string host;
  int port = 0;
  if (Status st = replication::raft::SplitHostPort(address, &host, &port); !st.ok()) return st;
  auto net = replication::raft::MakeNngStreamNet();
  std::unique_ptr<replication::raft::StreamConn> conn = net->Connect(address, timeout_ms);
  if (!conn) {
    return Status::Unavailable("cannot connect to " + address + " within " + std::to_string(timeout_ms) +
                               " ms (is the node up?)");
  }
  std::unique_ptr<ClientConnection> c(
      new ClientConnection(address, std::move(name), std::move(handler), max_frame_bytes, std::move(conn)));
  ClientConnection* raw = c.get();
  c->reader_ = NamedThread("cli-recv-" + c->name_, [raw] { raw->ReadLoop(); });
  return c;
}

ClientConnection::ClientConnection(std::string address, std::string name, FrameHandler handler,
                                   uint32_t max_frame_bytes, std::unique_ptr<replication::raft::StreamConn> conn)
    : address_(std::move(address)),
      name_(std::move(name)),
      handler_(std::move(handler)),
      max_frame_bytes_(max_frame_bytes),
      conn_(std::move(conn)) {}

ClientConnection::~ClientConnection() { Close(); }

void ClientConnection::SetError(Status s) {
  std::lock_guard<std::mutex> lk(mu_);
  if (status_.ok()) status_ = std::move(s);
}

Status ClientConnection::status() const {
  std::lock_guard<std::mutex> lk(mu_);
  return status_;
}

Status ClientConnection::Send(std::string_view frame) {
  if (closed_.load(std::memory_order_acquire)) {
    Status s = status();
    return s.ok() ? Status::Unavailable("connection to " + address_ + " is closed") : s;
  }
  iovec iov{const_cast<char*>(frame.data()), frame.size()};
  std::lock_guard<std::mutex> lk(send_mu_);
  if (!conn_->WriteAll(&iov, 1)) {
    SetError(Status::Unavailable("connection to " + address_ + " broke while sending"));
    return status();
  }
  return Status::Ok();
}

void ClientConnection::ReadLoop() {
  char header[proto::kHeaderBytes];
  std::string body;
  while (!closed_.load(std::memory_order_acquire)) {
    if (!conn_->ReadFull(header, sizeof header)) {
      if (!closed_.load(std::memory_order_acquire)) SetError(Status::Unavailable(address_ + " closed the connection"));
      break;
    }
    proto::FrameHeader h;
    if (Status st = proto::DecodeHeader(header, &h); !st.ok()) {
      SetError(Status::Corruption(address_ + ": " + st.message()));
      break;
    }
    if (h.body_bytes > max_frame_bytes_) {
      SetError(Status::Corruption(address_ + ": a frame of " + std::to_string(h.body_bytes) + " bytes"));
      break;
    }
    body.resize(h.body_bytes);
    if (h.body_bytes > 0 && !conn_->ReadFull(body.data(), body.size())) {
      if (!closed_.load(std::memory_order_acquire)) SetError(Status::Unavailable(address_ + " closed the connection"));
      break;
    }
    handler_(h.type, body);
  }
  closed_.store(true, std::memory_order_release);
}

void ClientConnection::Shutdown(Status why) {
  SetError(std::move(why));
  closed_.store(true, std::memory_order_release);
  if (conn_) conn_->Shutdown();
}

void ClientConnection::Close() {
  closed_.store(true, std::memory_order_release);
  if (conn_) conn_->Shutdown();
  reader_.Join();
}

Result<proto::NodeStatus> QueryStatus(const std::string& address, int timeout_ms) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Result<proto::NodeStatus> out = Status::Unavailable("no status reply from " + address);
  auto conn = ClientConnection::Connect(address, timeout_ms, "status", [&](uint8_t type, std::string_view body) {
    std::lock_guard<std::mutex> lk(mu);
    if (done) return;
    if (type == static_cast<uint8_t>(proto::MsgType::kStatusReply)) {
      proto::NodeStatus s;
      Status st = proto::DecodeStatusReply(body, &s);
      out = st.ok() ? Result<proto::NodeStatus>(std::move(s)) : Result<proto::NodeStatus>(st);
    } else if (type == static_cast<uint8_t>(proto::MsgType::kError)) {
      proto::ErrorReply e;
      out = proto::DecodeError(body, &e).ok() ? Status::Unavailable(address + ": " + e.message)
                                              : Status::Corruption(address + ": a malformed error reply");
    } else {
      out = Status::Corruption(address + ": unexpected reply type " + std::to_string(type));
    }
    done = true;
    cv.notify_all();
  });
  if (!conn.ok()) return conn.status();
  QR_RETURN_IF_ERROR(conn.value()->Send(proto::Frame(proto::MsgType::kStatusRequest,
                                                     proto::EncodeStatusRequest(proto::StatusRequest{1}))));
  {
    std::unique_lock<std::mutex> lk(mu);
    if (!cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return done || !conn.value()->open(); })) {
      lk.unlock();
      conn.value()->Close();
      return Status::Timeout("no status reply from " + address + " within " + std::to_string(timeout_ms) + " ms");
    }
  }
  conn.value()->Close();
  std::lock_guard<std::mutex> lk(mu);
  if (!done) {
    Status s = conn.value()->status();
    return s.ok() ? Status::Unavailable(address + " closed the connection") : s;
  }
  return out;
}

}  // namespace qrstore::cluster
