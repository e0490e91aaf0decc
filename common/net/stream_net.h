// StreamNet: the byte-stream layer every network user of qrstore shares: the Raft transport
// (replication/raft/stream_transport.h), the client port and the client library
// (cluster/port/client_service.h, client/client.h), the replica monitor's reports and a partitioned
// row's transport. The same framing, queueing and reconnection logic runs over either of two
// implementations:
//   - "nng"   (the default): nng's stream API (nng_stream_dialer / nng_stream_listener /
//              nng_stream send+recv with scatter/gather aios) over tcp:// on 127.0.0.1 or any
//              host; see nng_stream_net.cc.
//   - "posix": plain sockets (socket/connect/accept/read/sendmsg).
// Nothing here knows about any message format: bytes only.
//
// Contract (both implementations, tested in tests/unit/common/net/stream_net_test.cc):
//  - A StreamConn is used by one thread at a time for ReadFull/WriteAll; Shutdown may be called
//    from any other thread at any time, and makes a blocked or later ReadFull/WriteAll return
//    false promptly. The destructor closes (after Shutdown, or on its own) and never blocks
//    for more than a bounded time.
//  - ReadFull returns true only with all n bytes; false on end of stream, error or Shutdown.
//  - ReadSome waits for at least one byte and returns how many it read (1..n), or 0 on end of
//    stream, error or Shutdown (a buffered reader uses it to take several small frames at once).
//  - WriteAll returns true only when every byte of every iovec was handed to the OS/library.
//  - StreamListener::Accept waits at most timeout_ms and returns nullptr on timeout, error or
//    after Shutdown (from any thread), which also wakes a blocked Accept.
//  - StreamNet::Connect gives up after timeout_ms (nullptr; the caller backs off and retries).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"

namespace qrstore::net {

class StreamConn {
 public:
  virtual ~StreamConn() = default;
  virtual bool ReadFull(char* buf, size_t n) = 0;
  virtual size_t ReadSome(char* buf, size_t n) = 0;
  virtual bool WriteAll(const iovec* iov, size_t count) = 0;
  virtual void Shutdown() = 0;
};

class StreamListener {
 public:
  virtual ~StreamListener() = default;
  virtual std::unique_ptr<StreamConn> Accept(int timeout_ms) = 0;
  virtual void Shutdown() = 0;
};

class StreamNet {
 public:
  virtual ~StreamNet() = default;
  virtual const char* Name() const = 0;
  // Binds and listens on "host:port" (kUnavailable naming the address if it cannot).
  virtual Result<std::unique_ptr<StreamListener>> Listen(const std::string& host_port) = 0;
  virtual std::unique_ptr<StreamConn> Connect(const std::string& host_port, int timeout_ms) = 0;
};

// Progress through an iovec array across partial writes (both implementations' WriteAll).
class IovCursor {
 public:
  IovCursor(const iovec* iov, size_t count) : iov_(iov), count_(count) { SkipDone(); }
  bool finished() const { return done_ == count_; }
  // Fills out[0, max) with the next non-empty pieces still to write (the first one past what
  // was already written); returns how many.
  size_t Next(iovec* out, size_t max) const {
    size_t n = 0;
    for (size_t i = done_; i < count_ && n < max; ++i) {
      const size_t skip = i == done_ ? offset_ : 0;
      if (iov_[i].iov_len == skip) continue;
      out[n++] = iovec{static_cast<char*>(iov_[i].iov_base) + skip, iov_[i].iov_len - skip};
    }
    return n;
  }
  // `bytes` more were written.
  void Advance(size_t bytes) {
    bytes += offset_;
    offset_ = 0;
    while (done_ < count_ && bytes >= iov_[done_].iov_len) {
      bytes -= iov_[done_].iov_len;
      ++done_;
    }
    offset_ = bytes;
    SkipDone();
  }

 private:
  void SkipDone() {  // past written and empty entries
    while (done_ < count_ && offset_ == iov_[done_].iov_len) {
      ++done_;
      offset_ = 0;
    }
  }
  const iovec* const iov_;
  const size_t count_;
  size_t done_ = 0;    // entries fully written
  size_t offset_ = 0;  // bytes of iov_[done_] already written
};

std::unique_ptr<StreamNet> MakePosixStreamNet();
std::unique_ptr<StreamNet> MakeNngStreamNet();

// Splits "host:port" (kInvalidArgument if malformed: no colon, empty host or port, a port that
// is not a number in 1..65535).
Status SplitHostPort(const std::string& host_port, std::string* host, int* port);

}  // namespace qrstore::net
