// StreamTransport: the Raft transport over a byte stream per peer (StreamNet: nng streams by
// default, or plain POSIX sockets; replication.raft.transport = nng | posix). Each message is
// one frame (transport.h: header with magic, version, lengths, checksums) written back to back
// on the stream.
//
// Shape. One listener; an "raft-accept" thread accepts inbound connections and starts one
// "raft-rd" reader thread per connection (at most 4 per member + 4; finished ones are reaped);
// a reader reads a frame, rejects foreign/oversized/corrupt frames by closing the connection
// (a stream cannot resynchronise) with a rate-limited log line, and hands each decoded Message
// to the handler (which only enqueues).
// Outbound: one "raft-send-<i>" thread per peer owns one connection to it, (re)connecting with
// bounded back-off; its queue is bounded by messages and bytes; Send() never blocks and drops
// when the queue is full; messages queued while the peer is unreachable are dropped (Raft
// retries), so a dead peer costs no memory and never blocks the raft thread.
//
// Stop: flags, wakes (listener Shutdown for accept, connection Shutdown for blocked
// reads/writes, condition variables for senders), joins every thread, closes every
// connection. Idempotent.
// Thread-safety: Start/Stop from the owner; Send from any thread; counters from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/thread.h"
#include "common/net/stream_net.h"
#include "replication/raft/transport.h"

namespace qrstore::replication::raft {

// The byte-stream layer (common/net) under this transport.
using net::IovCursor;
using net::MakeNngStreamNet;
using net::MakePosixStreamNet;
using net::SplitHostPort;
using net::StreamConn;
using net::StreamListener;
using net::StreamNet;

class StreamTransport : public Transport {
 public:
  StreamTransport(TransportOptions options, std::unique_ptr<StreamNet> net);
  ~StreamTransport() override;
  StreamTransport(const StreamTransport&) = delete;
  StreamTransport& operator=(const StreamTransport&) = delete;

  Status Start(Handler handler) override;
  void Send(Message message) override;
  void Stop() override;
  const TransportCounters& counters() const { return counters_; }

 private:
  struct Peer {
    NodeId id = 0;
    Mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<Message, uint64_t>> queue GUARDED_BY(mu);  // (message, bytes)
    uint64_t queue_bytes GUARDED_BY(mu) = 0;
    int64_t queued_since_ms GUARDED_BY(mu) = 0;  // when the oldest queued message was queued
    int64_t last_slow_log_ms = 0;                // peer thread only: rate limit of the slow-send line
    StreamConn* conn GUARDED_BY(mu) = nullptr;   // owned (and closed) by the peer thread
    NamedThread thread;
  };
  struct Inbound {
    std::unique_ptr<StreamConn> conn;  // destroyed by whoever joins the thread
    std::atomic<bool> done{false};
    NamedThread thread;
  };

  void AcceptLoop();
  void ReadLoop(Inbound* conn);
  void PeerLoop(Peer* peer);
  // Writes the frames of batch[from, end) in one gathered write, for the largest bounded end;
  // returns end, or `from` if the connection failed.
  size_t WriteFrames(StreamConn* conn, const std::deque<std::pair<Message, uint64_t>>& batch, size_t from);
  void Reject(const std::string& why);
  void ReapInbound(bool all);

  const TransportOptions options_;
  Handler handler_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<StreamNet> net_;
  std::unique_ptr<StreamListener> listener_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by node id; nullptr for self
  Mutex inbound_mu_;
  std::list<std::unique_ptr<Inbound>> inbound_ GUARDED_BY(inbound_mu_);
  NamedThread acceptor_;
  bool started_ = false;
  bool stopped_ = false;
  TransportCounters counters_;
  RejectLog reject_log_;
};

}  // namespace qrstore::replication::raft
