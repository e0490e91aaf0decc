// RowTransport: the byte channel between the nodes of a partitioned row (docs/partitioned-rows.md,
// step 2). Each node listens on its peer port (cluster.nodes[i].peer_port) and dials every other
// node of its row: one outbound connection per peer for what it sends, one inbound per peer for
// what it receives, over common/net/stream_net.h (nng's stream API by default). Frames are
// a 4-byte little-endian length and the message (cluster/row/row_messages.h); this layer does not
// look inside them. A connection opens with a hello ("QRH1", the dialer's partition), so the
// receiver knows who sent every frame.
//
// Delivery: frames from one peer arrive in the order that peer sent them, each exactly once, or
// the transport fails. Failure: a peer that closes its connection (killed, or exited), a frame
// longer than max_frame_bytes, or a write that does not go through calls the failure handler
// once with an error naming the peer and its address; after ExpectClose(p) (p finished) p's
// closed connection is normal and reported to nobody.
//
// Threads: "row-accept" accepts; "row-in-<p>" reads peer p's frames and calls the frame handler
// on that thread (it must not block: a reader that blocks stops the peer's writers, and so
// possibly the row). Send may be called from any thread; writes to one peer are serialised by a
// mutex and block while the kernel's buffers toward it are full (back-pressure; readers never
// block, so they drain). Stop from the owning thread, once the others stopped sending.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/thread.h"

namespace qrstore::net {
class StreamNet;
class StreamConn;
class StreamListener;
}  // namespace qrstore::net

namespace qrstore::cluster {

struct RowTransportOptions {
  uint32_t me = 0;                     // this node's partition
  std::vector<std::string> addresses;  // [partition] "host:port"; addresses[me] is listened on
  size_t max_frame_bytes = size_t{256} << 20;
  std::string net = "nng";             // "nng" or "posix" (common/net/stream_net.h)
};

using RowFrameHandler = std::function<void(uint32_t from, std::string_view frame)>;
using RowFailureHandler = std::function<void(const Status&)>;

class RowTransport {
 public:
  RowTransport(RowTransportOptions options, RowFrameHandler on_frame, RowFailureHandler on_failure);
  ~RowTransport();
  RowTransport(const RowTransport&) = delete;
  RowTransport& operator=(const RowTransport&) = delete;

  // Binds addresses[me] and starts accepting (kUnavailable naming the address if it cannot).
  Status Listen();
  // Dials every peer (retrying while it is not up yet) and waits until every peer has dialed
  // in too. kUnavailable naming the peers still missing after timeout_ms.
  Status Connect(int64_t timeout_ms);
  // Sends one frame to partition `to`. false (nothing more is sent) once the transport failed
  // or stopped.
  bool Send(uint32_t to, std::string_view frame);
  // From now on partition p closing its connection is expected, not a failure.
  void ExpectClose(uint32_t p);
  void Stop();

  uint64_t frames_sent() const { return frames_sent_.load(std::memory_order_relaxed); }
  uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }

 private:
  struct Out {
    std::mutex mu;
    std::shared_ptr<net::StreamConn> conn;  // guarded by mu (set once in Connect)
  };
  void AcceptLoop();
  void ReadLoop(std::shared_ptr<net::StreamConn> conn);
  void Failed(const Status& s);
  std::string Peer(uint32_t p) const;

  const RowTransportOptions opt_;
  const RowFrameHandler on_frame_;
  const RowFailureHandler on_failure_;
  std::unique_ptr<net::StreamNet> net_;
  std::unique_ptr<net::StreamListener> listener_;
  std::vector<std::unique_ptr<Out>> out_;  // [partition]

  std::mutex mu_;
  std::vector<std::shared_ptr<net::StreamConn>> in_;  // guarded by mu_: [partition]
  std::vector<NamedThread> readers_;                                // guarded by mu_
  // Every connection made or accepted, for Stop to shut down without the writers' locks.
  std::vector<std::shared_ptr<net::StreamConn>> all_;  // guarded by mu_
  std::condition_variable in_cv_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::unique_ptr<std::atomic<bool>[]> expect_close_;  // [partition]
  std::atomic<uint64_t> frames_sent_{0};
  std::atomic<uint64_t> bytes_sent_{0};
  NamedThread acceptor_;
};

}  // namespace qrstore::cluster
