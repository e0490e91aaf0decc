// StreamNet: the byte-stream layer under the Raft transport (stream_transport.h), so the same
// framing, queueing and reconnection logic runs over either of two implementations:
//   - "nng"   (the default): nng's stream API (nng_stream_dialer / nng_stream_listener /
//              nng_stream send+recv with scatter/gather aios) over tcp:// on 127.0.0.1 or any
//              host; see nng_stream_net.cc.
//   - "posix": plain sockets (socket/connect/accept/read/sendmsg).
// Only the Raft transport uses it; nothing here knows about Raft messages.
//
// Contract (both implementations, tested in tests/unit/raft_driver/stream_net_test.cc):
//  - A StreamConn is used by one thread at a time for ReadFull/WriteAll; Shutdown may be called
//    from any other thread at any time, and makes a blocked or later ReadFull/WriteAll return
//    false promptly. The destructor closes (after Shutdown, or on its own) and never blocks
//    for more than a bounded time.
//  - ReadFull returns true only with all n bytes; false on end of stream, error or Shutdown.
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

namespace qrstore::replication::raft {

class StreamConn {
 public:
  virtual ~StreamConn() = default;
  virtual bool ReadFull(char* buf, size_t n) = 0;
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

std::unique_ptr<StreamNet> MakePosixStreamNet();
std::unique_ptr<StreamNet> MakeNngStreamNet();

// Splits "host:port" (kInvalidArgument if malformed: no colon, empty host or port, a port that
// is not a number in 1..65535).
Status SplitHostPort(const std::string& host_port, std::string* host, int* port);

}  // namespace qrstore::replication::raft
