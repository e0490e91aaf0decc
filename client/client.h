// The client library: connections to qrstore servers (cluster/port/protocol.h framing over nng streams
// on TCP, common/net/stream_net.h) for qrstore-client (client/qrstore_client.cc) and tests.
//
// ClientConnection: one connection to one node.
//   Owner: whoever called Connect (qrstore-client: one per load connection). Threads: Send may be
//   called from any thread (one frame at a time goes out whole; a sender blocks while the
//   socket's buffer is full: the server's back-pressure), usually one sending thread. A reader
//   thread "cli-recv-<name>" reads every frame the server sends and hands it to on_frame in
//   arrival order (the body is a view valid during the call only: decode it in place; an error
//   returned ends the connection), then, exactly once, calls on_close with why the stream ended. Requests may be pipelined: send many
//   without waiting; a server answers txn requests of one connection in request order (error
//   replies may overtake: match them by request id).
//   Shutdown(why) (any thread, on_frame included) stops the connection without waiting: a blocked
//   Send or read returns promptly. Close() = Shutdown + join the reader; never from the reader
//   thread (checked), so never from on_frame/on_close. The destructor closes.
//   Errors are Statuses naming the node's address (and the connection's name).
//   Memory: one frame buffer, grown to the largest frame received (<= max_frame_bytes; a larger
//   frame header is a protocol error that ends the connection).
//
// QueryStatus / QueryStatuses: a short connection per node asking for its NodeStatus, with one
//   deadline covering connect + reply; QueryStatuses asks several nodes in parallel (threads
//   "cli-status-<i>"), so one node that is down costs one timeout, not one per node.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cluster/port/protocol.h"
#include "common/mutex.h"
#include "common/net/stream_net.h"
#include "common/status.h"
#include "common/thread.h"

namespace qrstore::client {

namespace proto = cluster::proto;

struct ClientConnectionOptions {
  // Called on the reader thread for every frame (raw type as sent; the body is valid during the
  // call only). A non-OK return ends the connection with that reason (a frame the owner cannot
  // accept); the handler thus never needs the connection object, which its owner may not hold
  // yet when the first frame arrives. Must not call Close.
  std::function<Status(uint8_t type, std::string_view body)> on_frame;
  // Called on the reader thread once, after the last on_frame: OK when this side shut the
  // connection down without a reason (Close), else why it ended (the server closed it, a bad
  // frame, the reason given to Shutdown). May call Shutdown, not Close.
  std::function<void(const Status& why)> on_close;
  std::string name = "0";             // reader thread "cli-recv-<name>"; in messages
  int connect_timeout_ms = 5000;
  uint32_t max_frame_bytes = 64u << 20;  // largest frame body accepted from the server
};

class ClientConnection {
 public:
  // Connects to "host:port" within options.connect_timeout_ms (kUnavailable naming the address
  // otherwise; kInvalidArgument for a malformed address) and starts the reader.
  static Result<std::unique_ptr<ClientConnection>> Connect(const std::string& address, ClientConnectionOptions options);
  ~ClientConnection();
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  // Writes one frame: the header and `body` (gathered, not copied). kUnavailable once the
  // connection is broken or shut down (with the reason, when one is known).
  Status Send(proto::MsgType type, std::string_view body);
  // Stops the connection because of `why` (the first reason given is kept). Any thread; does not
  // wait.
  void Shutdown(Status why);
  // Shuts down (if not yet) and joins the reader thread. Not from the reader thread.
  void Close();
  // OK while the connection works; then why it stopped.
  Status status() const;
  bool open() const { return !closed_.load(std::memory_order_acquire); }
  const std::string& address() const { return address_; }
  const std::string& name() const { return options_.name; }

 private:
  ClientConnection(std::string address, ClientConnectionOptions options,
                   std::unique_ptr<net::StreamConn> conn);
  void ReadLoop();
  void SetError(Status s);
  std::string Who() const;  // "connection <name> to <address>"

  const std::string address_;
  const ClientConnectionOptions options_;
  std::unique_ptr<net::StreamConn> conn_;
  std::atomic<bool> closed_{false};          // release/acquire: set once, read by every thread
  std::atomic<std::thread::id> reader_id_{};  // for the Close-from-reader check
  mutable Mutex mu_;
  Status status_ GUARDED_BY(mu_);  // the first reason the connection stopped
  Mutex send_mu_;                  // one frame at a time on the stream
  NamedThread reader_;
};

// Asks the node at `address` for its status: connect and reply within timeout_ms in total.
// Errors name the address: kUnavailable (cannot connect, closed, an error reply), kTimeout,
// kCorruption (a reply that does not decode or is not a status reply).
Result<proto::NodeStatus> QueryStatus(const std::string& address, int timeout_ms);
// QueryStatus of every address at once; results in the order of `addresses`.
std::vector<Result<proto::NodeStatus>> QueryStatuses(const std::vector<std::string>& addresses, int timeout_ms);

}  // namespace qrstore::client
