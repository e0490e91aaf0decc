// The client library: connections to qrstore servers (cluster/protocol.h over nng streams on
// TCP) for qrstore-client and tests.
//
// ClientConnection: one connection. The owner sends frames from one thread at a time (Send
// blocks while the socket's buffer is full: back-pressure from the server); a reader thread
// ("cli-recv-<name>") reads every frame the server sends and hands it to the handler, in the
// order received. Replies to transaction requests come back in request order, except error
// replies, which may overtake (match them by request id). Close (any thread) shuts the
// connection down and joins the reader; after an error, status() says what happened.
//
// QueryStatus: a short connection asking one node for its NodeStatus.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "cluster/protocol.h"
#include "common/status.h"
#include "common/thread.h"
#include "replication/raft/stream_net.h"

namespace qrstore::cluster {

class ClientConnection {
 public:
  // Called on the reader thread for every frame (type as sent; the body is valid during the
  // call only). Must not call Close.
  using FrameHandler = std::function<void(uint8_t type, std::string_view body)>;

  // Connects to "host:port" within timeout_ms (kUnavailable naming the address otherwise).
  static Result<std::unique_ptr<ClientConnection>> Connect(const std::string& address, int timeout_ms,
                                                          std::string name, FrameHandler handler,
                                                          uint32_t max_frame_bytes = 1u << 30);
  ~ClientConnection();

  // Writes one whole frame. kUnavailable once the connection is broken or closed.
  Status Send(std::string_view frame);
  // Stops the connection because of `why` (any thread, the handler included: it does not wait).
  void Shutdown(Status why);
  // Shutdown, then waits for the reader thread (not from the handler).
  void Close();
  // OK while the connection works; then why it stopped (closed by the server, a bad frame).
  Status status() const;
  bool open() const { return !closed_.load(std::memory_order_acquire); }
  const std::string& address() const { return address_; }

 private:
  ClientConnection(std::string address, std::string name, FrameHandler handler, uint32_t max_frame_bytes,
                   std::unique_ptr<replication::raft::StreamConn> conn);
  void ReadLoop();
  void SetError(Status s);

  const std::string address_;
  const std::string name_;
  const FrameHandler handler_;
  const uint32_t max_frame_bytes_;
  std::unique_ptr<replication::raft::StreamConn> conn_;
  std::atomic<bool> closed_{false};
  mutable std::mutex mu_;
  Status status_;  // guarded by mu_
  std::mutex send_mu_;  // one frame at a time on the stream
  NamedThread reader_;
};

// Asks the node at `address` for its status.
Result<proto::NodeStatus> QueryStatus(const std::string& address, int timeout_ms);

}  // namespace qrstore::cluster
