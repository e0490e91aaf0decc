// TcpTransport: the Raft transport over plain TCP sockets (the default; see below for why not
// nng). Same framing as NngTransport (transport.h): each message is one frame {header with
// magic, version, length, checksum} + message_codec payload, written back to back on a stream.
//
// Why. Debian 12's nng 1.5.2 can hang forever in nng_close after pipe churn (its reaper waits
// for a task that never started: nanomsg/nng#1543, fixed upstream later). A stuck reaper also
// stops reconnection to restarted peers, which is exactly Raft's failover path; the in-process
// integration test hit it in about one run in five. Plain sockets have no such shared state.
//
// Shape. One listening socket; an "raft-accept" thread accepts inbound connections and starts
// one "raft-rd" reader thread per connection (at most max_inbound_connections, older finished
// ones are reaped); a reader reads a header, rejects foreign/oversized/corrupt frames by closing
// the connection (a stream cannot resynchronise) with a rate-limited log line, reads the
// payload, decodes and hands the Message to the handler (which only enqueues).
// Outbound: one "raft-send-<i>" thread per peer owns one connection to it, (re)connecting with
// bounded back-off; its queue is bounded by messages and bytes; Send() never blocks and drops
// when the queue is full; messages queued while the peer is unreachable are dropped (Raft
// retries), so a dead peer costs no memory and never blocks the raft thread.
//
// Stop: flags, wakes (self-pipe for accept, shutdown() for blocked reads/writes, condition
// variables for senders), joins every thread, closes every descriptor. Idempotent.
// Thread-safety: Start/Stop from the owner; Send from any thread; counters from any thread.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/thread.h"
#include "replication/raft/transport.h"

namespace qrstore::replication::raft {

class TcpTransport : public Transport {
 public:
  explicit TcpTransport(TransportOptions options);
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  Status Start(Handler handler) override;
  void Send(Message message) override;
  void Stop() override;
  const TransportCounters& counters() const { return counters_; }

 private:
  struct Peer {
    NodeId id = 0;
    std::string host;
    int port = 0;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<Message, uint64_t>> queue;  // guarded by mu (message, bytes)
    uint64_t queue_bytes = 0;                        // guarded by mu
    int fd = -1;  // guarded by mu; closed only by the peer thread (Stop only shuts it down)
    NamedThread thread;
  };
  struct Inbound {
    int fd = -1;  // closed by whoever joins the thread (accept loop or Stop)
    std::atomic<bool> done{false};
    NamedThread thread;
  };

  void AcceptLoop();
  void ReadLoop(Inbound* conn);
  void PeerLoop(Peer* peer);
  int Connect(const Peer& peer);  // -1 on failure (bounded by a 500 ms timeout)
  bool WriteFrame(int fd, const Message& m);
  void Reject(const std::string& why);
  void ReapInbound(bool all);

  const TransportOptions options_;
  Handler handler_;
  std::atomic<bool> stop_{false};
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::vector<std::unique_ptr<Peer>> peers_;  // by node id; nullptr for self
  std::vector<sockaddr_in> peer_addrs_;       // by node id, resolved at Start
  std::mutex inbound_mu_;
  std::list<std::unique_ptr<Inbound>> inbound_;  // guarded by inbound_mu_
  NamedThread acceptor_;
  bool started_ = false;
  bool stopped_ = false;
  TransportCounters counters_;
  RejectLog reject_log_;
};

// Splits "host:port" (kInvalidArgument if malformed).
Status SplitHostPort(const std::string& host_port, std::string* host, int* port);

}  // namespace qrstore::replication::raft
