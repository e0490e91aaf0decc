// RowTransport: the byte channel between the nodes of a partitioned row (docs/partitioned-rows.md,
// step 2). Each node listens on its peer port (cluster.nodes[i].peer_port) and dials every other
// node of its row: one outbound connection per peer for what it sends, one inbound per peer for
// what it receives, over common/net/stream_net.h (nng's stream API by default). Frames are
// a 4-byte little-endian length and the message (cluster/row/row_messages.h); this layer does not
// look inside them. A connection opens with a hello ("QRH2", the dialer's partition as a u32 and
// its epoch as a u64, little-endian), so the receiver knows who sent every frame and which
// incarnation of that partition's leader sent it.
//
// Two modes (RowTransportOptions::tolerate_peer_loss):
//
// Fail-stop row (the default). Delivery: frames from one peer arrive in the order that peer sent
// them, each exactly once, or the transport fails. Failure: a peer that closes its connection
// (killed, or exited), a frame longer than max_frame_bytes, or a write that does not go through
// calls the failure handler once with an error naming the peer and its address; after
// ExpectClose(p) (p finished) p's closed connection is normal and reported to nobody. A second
// dial-in from a partition already connected is dropped with a warning, whatever its epoch.
//
// Per-partition failover (tolerate_peer_loss, docs/partitioned-rows.md 9.5). A peer's inbound
// connection closing, or a write to it failing, does not fail the transport: the peer is "lost"
// and the lost handler is called once for that loss, naming the peer and its address. While p
// is lost, Send(p, ...) drops the frame and returns true: the transport keeps no copy, so the
// caller must keep whatever p's successor will need and re-send it after the resume handshake.
// A lost peer comes back only as a new incarnation with a higher epoch (the successor elected
// by its replication group, at a new address): it dials in, and its hello's epoch being higher
// than the connection's it replaces, the new inbound connection replaces the old one (the old
// one is shut down and its reader exits quietly); a dial-in with an equal or lower epoch while a
// connection from that partition is there is refused with a warning (connections_refused()).
// The caller then Redial()s p at its new address, replacing the outbound connection. p is Up()
// again once both connections were renewed after the loss; a later loss is reported again. If a
// successor dials in before this node noticed its predecessor's loss, the replacement itself is
// reported as the loss (the outbound connection still goes to the predecessor), so each
// incarnation's end is reported exactly once and the caller's answer is always the same: Redial.
// Redial(p) says "p's leader is now the one at this address": a caller that learns of the
// successor before this transport noticed anything may call it first; p is then lost, reported
// to nobody (the caller knew), the predecessor's inbound connection is shut down, and p is Up
// once the successor dialed in. (So Redial only for a new incarnation, never to "refresh" a
// peer that is up: that peer would not dial in again, and p would stay lost.) A loss is
// reported once; until p is Up again, whatever else goes wrong with p is part of that loss (a
// successor that dies before it dialed in shows as WaitDialedIn(p) timing out).
// Delivery: frames from one connection arrive in order, each at most once; once a replacement
// is in place, only the new connection's frames are delivered (the reader of the replaced one is
// retired under the peer's delivery mutex, so none of its frames is delivered after that). What
// the predecessor sent but was not delivered is lost: the resume handshake re-sends it. A frame
// longer than max_frame_bytes still fails the whole transport (a bug, not a peer's death).
//
// Threads: "row-accept" accepts; "row-in" threads, one per accepted connection, read peer p's
// frames and call the frame handler on that thread (it must not block: a reader that blocks
// stops the peer's writers, and so possibly the row; with tolerate_peer_loss it also delays a
// replacement, which waits for the handler call in progress). The lost handler is called from a
// reader thread (a closed or replaced connection) or from the thread whose Send failed, holding
// none of the lost peer's locks (a Send made inside the frame handler calls it inside that
// handler); it may call Send and Up but must not block (Redial from another thread). Send may
// be called from any thread; writes to one peer are serialised by a mutex and block while the
// kernel's buffers toward it are full (back-pressure; readers never block, so they drain).
// Redial may be called from any one thread at a time while others Send. Stop from the owning
// thread, once the others stopped sending; it joins every thread (readers of replaced
// connections included: finished readers are also reaped as new ones start, and at most
// kMaxReaders are alive at once).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread.h"
#include "common/thread_annotations.h"

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
  // Per-partition failover (see the top of this file); false: any peer lost fails the row.
  bool tolerate_peer_loss = false;
  // This node's term as its partition's leader, sent in every hello it dials with: a peer
  // replaces a connection from this partition only with one of a higher epoch.
  uint64_t epoch = 0;
};

using RowFrameHandler = std::function<void(uint32_t from, std::string_view frame)>;
using RowFailureHandler = std::function<void(const Status&)>;
// With tolerate_peer_loss: `partition`'s leader was lost (`why` names it and its address).
using RowPeerLostHandler = std::function<void(uint32_t partition, const Status& why)>;

class RowTransport {
 public:
  // on_peer_lost may be null (then a loss is only logged and visible through Up()).
  RowTransport(RowTransportOptions options, RowFrameHandler on_frame, RowFailureHandler on_failure,
               RowPeerLostHandler on_peer_lost = nullptr);
  ~RowTransport();
  RowTransport(const RowTransport&) = delete;
  RowTransport& operator=(const RowTransport&) = delete;

  // Binds addresses[me] and starts accepting (kUnavailable naming the address if it cannot).
  Status Listen();
  // DialAll, then WaitDialedIn, within timeout_ms in all.
  Status Connect(int64_t timeout_ms);
  // The outbound half of Connect: dials every peer (retrying while it is not up yet) and sends
  // the hello. kUnavailable naming the first peer not reachable within timeout_ms. A successor
  // calls it alone first: its peers dial back only once they heard from it.
  Status DialAll(int64_t timeout_ms);
  // The inbound half of Connect: waits until every peer has dialed in (and, with
  // tolerate_peer_loss, its connection was not lost since). kUnavailable naming the peers still
  // missing after timeout_ms.
  Status WaitDialedIn(int64_t timeout_ms);
  // The same for partition p alone (after a loss: until p's successor dialed in).
  Status WaitDialedIn(uint32_t p, int64_t timeout_ms);
  // With tolerate_peer_loss: dials p at `address` (its successor's; retrying with backoff until
  // timeout_ms, kUnavailable naming p and the address), sends the hello and makes it p's
  // outbound connection. The old one is shut down (a writer blocked on it returns, its frame
  // dropped). From now on Peer(p) names `address`.
  Status Redial(uint32_t p, const std::string& address, int64_t timeout_ms);
  // A successor's first dial of p (its own transport is new, so whatever p's connection in is,
  // it comes from p's current leader: another successor may dial in before this dial): as
  // Redial, but p's inbound connection is kept, not taken for a predecessor's.
  Status DialCurrent(uint32_t p, const std::string& address, int64_t timeout_ms);
  // Sends one frame to partition `to`. false (nothing more is sent) once the transport failed
  // or stopped. With tolerate_peer_loss, true also when the frame was dropped because `to` is
  // lost (or the connection it was written to was replaced meanwhile): the caller re-sends.
  bool Send(uint32_t to, std::string_view frame);
  // Both of p's connections are there and p was not lost since they were made.
  bool Up(uint32_t p) const;
  // From now on partition p closing its connection is expected, not a failure.
  void ExpectClose(uint32_t p);
  void Stop();

  uint64_t frames_sent() const { return frames_sent_.load(std::memory_order_relaxed); }
  uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  // Dial-ins refused: a bad hello, or a partition already connected (with an epoch not higher).
  uint64_t connections_refused() const { return refused_.load(std::memory_order_relaxed); }

  // Readers alive at once (of peers, replaced ones and stray connections) before the acceptor
  // refuses more: a row of P nodes needs P - 1; the rest is room for successors and strays.
  static constexpr size_t kMaxReaders = 64;

 private:
  // One peer partition's connections. Lock order: deliver_mu, then write_mu, then mu (the frame
  // handler, called under deliver_mu, may Send); nothing is taken while mu is held.
  struct Link {
    Mutex write_mu;    // serialises writes to the peer (held while a write blocks)
    Mutex deliver_mu;  // held by the inbound reader around frame-handler calls
    mutable Mutex mu;  // the fields below; written by readers, writers, Redial and Stop
    std::condition_variable cv;  // inbound connection changed, lost changed, or stopping
    std::string address GUARDED_BY(mu);
    std::shared_ptr<net::StreamConn> out GUARDED_BY(mu);
    uint64_t out_gen GUARDED_BY(mu) = 0;  // +1 per outbound connection made
    std::shared_ptr<net::StreamConn> in GUARDED_BY(mu);
    // +1 per inbound connection taken. Written with both mu and deliver_mu held, read with
    // either (a reader checks it under deliver_mu alone): not annotated, since GUARDED_BY
    // cannot say "either of two locks for a read".
    uint64_t in_gen = 0;
    uint64_t in_epoch GUARDED_BY(mu) = 0;
    // Lost, until both connections were renewed: out_gen != lost_out_gen and in_gen !=
    // lost_in_gen (the generations that were current when the loss was seen).
    bool lost GUARDED_BY(mu) = false;
    uint64_t lost_out_gen GUARDED_BY(mu) = 0;
    uint64_t lost_in_gen GUARDED_BY(mu) = 0;
  };
  enum class Direction { kOut, kIn };
  struct Reader {
    NamedThread thread;
    std::shared_ptr<net::StreamConn> conn;        // for Stop to shut down
    std::shared_ptr<std::atomic<bool>> finished;  // set by the thread as it ends: join is quick
  };

  Status DialAllUntil(int64_t deadline_ns, int64_t timeout_ms);
  Status WaitDialedInUntil(int64_t deadline_ns, int64_t timeout_ms);
  void AcceptLoop();
  void ReadLoop(std::shared_ptr<net::StreamConn> conn);
  // Takes `conn` (hello read) as `from`'s inbound connection; false if it is refused.
  bool TakeInbound(uint32_t from, uint64_t epoch, const std::shared_ptr<net::StreamConn>& conn, uint64_t* gen);
  // Dials `address` for p until `deadline_ns` and sends the hello.
  Result<std::shared_ptr<net::StreamConn>> Dial(uint32_t p, const std::string& address, int64_t deadline_ns,
                                                int64_t timeout_ms);
  Status DialOut(uint32_t p, const std::string& address, int64_t timeout_ms, bool redial);
  void InstallOut(uint32_t p, std::shared_ptr<net::StreamConn> conn, const std::string& address, bool redial);
  // The connection of generation `gen` in direction `dir` of p closed or failed.
  void Lost(uint32_t p, Direction dir, uint64_t gen, const Status& why);
  // Marks p lost; false if it was already. The current connections, returned in *doomed, are
  // to be shut down once l.mu is released.
  static bool MarkLostLocked(Link& l, std::vector<std::shared_ptr<net::StreamConn>>* doomed) REQUIRES(l.mu);
  void ReportLost(uint32_t p, const Status& why);
  static void RenewedLocked(Link& l) REQUIRES(l.mu);
  static bool InboundLiveLocked(const Link& l) REQUIRES(l.mu);
  void Failed(const Status& s);
  std::string Peer(uint32_t p) const;  // takes links_[p]->mu
  static std::string Describe(uint32_t p, const std::string& address);

  const RowTransportOptions opt_;
  const RowFrameHandler on_frame_;
  const RowFailureHandler on_failure_;
  const RowPeerLostHandler on_peer_lost_;
  std::unique_ptr<net::StreamNet> net_;
  std::unique_ptr<net::StreamListener> listener_;
  std::vector<std::unique_ptr<Link>> links_;  // [partition]; links_[me] unused

  Mutex mu_;
  std::vector<Reader> readers_ GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::unique_ptr<std::atomic<bool>[]> expect_close_;  // [partition]
  std::atomic<uint64_t> frames_sent_{0};
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> refused_{0};
  NamedThread acceptor_;
};

}  // namespace qrstore::cluster
