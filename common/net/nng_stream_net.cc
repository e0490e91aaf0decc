// StreamNet over nng's low-level byte-stream API (stream_net.h): nng_stream_listener /
// nng_stream_dialer / nng_stream, tcp:// only. No nng socket, protocol, pipe or socket reaper
// is involved, which is why this exists next to the old PUSH/PULL NngTransport (transport.h):
// nng 1.5.2 (Debian 12) can hang forever in nng_close after pipe churn (nanomsg/nng#1543).
//
// How each blocking call is made safe:
//  - Every operation is one aio without a completion callback, submitted under the object's
//    mutex only if Shutdown has not happened yet, then waited for with nng_aio_wait outside
//    it. Shutdown takes the same mutex, sets the flag, cancels the aios and closes the
//    stream/listener. So an operation is either submitted before Shutdown (and then aborted
//    by the cancel and the close, both of which finish queued aios with an error at once) or
//    never submitted: there is no window in which an aio is (re)submitted after Shutdown and
//    then waits forever. (In 1.5.2 the close alone aborts queued aios and fails later ones;
//    the cancel keeps Shutdown prompt should a version not do so.) nng never calls back into
//    this file (no callbacks), so holding the mutex around nng calls cannot deadlock.
//  - Destructors: Shutdown, then nng_aio_stop/nng_aio_free (no operation is outstanding by
//    then: only the owning thread submits, and it is not inside ReadFull/WriteAll/Accept when
//    the object is destroyed), then nng_stream_free / nng_stream_listener_free /
//    nng_stream_dialer_free. Stream and dialer memory (and a stream's fd) are released later
//    by nng's reaper thread, so nothing here waits for it: a wedged reaper (the old
//    NngTransport's nng_close hang, if it ran in the same process) would leak fds, not block;
//    the peer still sees end of stream at once because the close shuts the socket down.
//    nng_stream_listener_free closes the listening socket before returning (it synchronises
//    with nng's poller thread, which only runs nng's own short callbacks), so the port can be
//    listened on again at once (tested).
//  - Connect and Accept are bounded by aio timeouts (nng's expire thread cancels the aio);
//    ReadFull/WriteAll have no timeout (the transport relies on Shutdown and on the peer
//    closing), exactly like the POSIX implementation.
//  - Partial transfers: nng_stream_recv/send may move fewer bytes than asked (one readv /
//    sendmsg per completion); nng_aio_count says how many, and the loops continue from there.
//    A completion that reports success with zero bytes is treated as a failure so the loops
//    always make progress (bounded by the byte count).
//  - nng_aio_set_iov is only documented to accept 4 entries; nng 1.5.2's aio holds 8 and
//    rejects more with NNG_EINVAL (other versions allocate, and may fail with NNG_ENOMEM). So
//    WriteAll sends in chunks of up to 8 and retries a refused chunk with its first 4 (a Raft
//    frame has one iovec per entry, so fewer, larger sends matter).
//
//  - TCP_NODELAY: nng 1.5.2's stream dialer and listener default it to OFF (its SP tcp
//    transport turns it on, the raw stream API does not), so both set it explicitly; the test
//    reads it back from the kernel.
//  - ThreadSanitizer: libnng is not instrumented and ends a dialer's life by an atomic
//    reference count on its reaper thread, which TSan reports as a race inside libnng (a false
//    positive); tests that run this code under TSan suppress reports with a libnng frame
//    (see stream_net_test.cc).
//
// Thread-safety: as stream_net.h. A connection has separate read and write aios, so one reader
// and one writer thread may use it at the same time; Shutdown from any thread.
#include <nng/nng.h>

#include <string>

#include "common/mutex.h"
#include "common/net/stream_net.h"

namespace qrstore::net {
namespace {

constexpr unsigned kMaxIovPerAio = 8;       // what nng 1.5.2's aio holds (9 gets NNG_EINVAL)
constexpr unsigned kIovAlwaysAccepted = 4;  // nng_aio_set_iov's documented guarantee

std::string NngError(int rv) { return std::string(nng_strerror(rv)); }

Result<std::string> TcpUrl(const std::string& host_port) {
  std::string host;
  int port = 0;
  QR_RETURN_IF_ERROR(SplitHostPort(host_port, &host, &port));
  return "tcp://" + host + ":" + std::to_string(port);
}

// Allocates an aio without a callback (completion is waited for with nng_aio_wait).
nng_aio* NewAio() {
  nng_aio* aio = nullptr;
  if (nng_aio_alloc(&aio, nullptr, nullptr) != 0) return nullptr;
  return aio;
}

// Cancels, waits for and frees an aio (no-op for nullptr). Cannot hang: by the time this runs
// no operation is outstanding or the outstanding one has been aborted by Shutdown.
void FreeAio(nng_aio* aio) {
  if (aio == nullptr) return;
  nng_aio_stop(aio);
  nng_aio_free(aio);
}

class NngConn : public StreamConn {
 public:
  // Takes ownership of `stream`; read_aio and write_aio are non-null (checked by Make).
  NngConn(nng_stream* stream, nng_aio* read_aio, nng_aio* write_aio)
      : stream_(stream), read_aio_(read_aio), write_aio_(write_aio) {}

  // nullptr (with the stream closed and freed) if the aios cannot be allocated.
  static std::unique_ptr<StreamConn> Make(nng_stream* stream) {
    nng_aio* r = NewAio();
    nng_aio* w = NewAio();
    if (r == nullptr || w == nullptr) {
      FreeAio(r);
      FreeAio(w);
      nng_stream_close(stream);
      nng_stream_free(stream);
      return nullptr;
    }
    return std::make_unique<NngConn>(stream, r, w);
  }

  ~NngConn() override {
    Shutdown();
    FreeAio(read_aio_);
    FreeAio(write_aio_);
    nng_stream_free(stream_);
  }

  NngConn(const NngConn&) = delete;
  NngConn& operator=(const NngConn&) = delete;

  bool ReadFull(char* buf, size_t n) override {
    while (n > 0) {
      const size_t got = ReadSome(buf, n);
      if (got == 0) return false;
      buf += got;
      n -= got;
    }
    return true;
  }

  size_t ReadSome(char* buf, size_t n) override {
    if (n == 0) return 0;
    nng_iov iov{buf, n};
    nng_aio_set_iov(read_aio_, 1, &iov);  // one entry: cannot fail
    return Transfer(read_aio_, /*send=*/false);
  }

  bool WriteAll(const iovec* iov_in, size_t count) override {
    for (IovCursor cursor(iov_in, count); !cursor.finished();) {
      iovec pieces[kMaxIovPerAio];
      nng_iov chunk[kMaxIovPerAio];
      unsigned n = static_cast<unsigned>(cursor.Next(pieces, kMaxIovPerAio));
      for (unsigned i = 0; i < n; ++i) chunk[i] = nng_iov{pieces[i].iov_base, pieces[i].iov_len};
      int rv = nng_aio_set_iov(write_aio_, n, chunk);
      if (rv != 0 && n > kIovAlwaysAccepted) rv = nng_aio_set_iov(write_aio_, n = kIovAlwaysAccepted, chunk);
      if (rv != 0) return false;
      const size_t sent = Transfer(write_aio_, /*send=*/true);
      if (sent == 0) return false;
      cursor.Advance(sent);  // what nng handed to the kernel
    }
    return true;
  }

  void Shutdown() override {
    MutexLock lock(mu_);
    if (shutdown_) return;
    shutdown_ = true;
    // Either aborts an operation in flight (it completes with NNG_ECANCELED) or does nothing;
    // the close also fails every queued and every later operation on the stream.
    nng_aio_cancel(read_aio_);
    nng_aio_cancel(write_aio_);
    nng_stream_close(stream_);
  }

 private:
  // Submits one send or receive on `aio` unless shut down, waits for it, and returns the
  // number of bytes moved (0 on error, end of stream, cancel or shutdown).
  size_t Transfer(nng_aio* aio, bool send) {
    {
      MutexLock lock(mu_);
      if (shutdown_) return 0;
      if (send) {
        nng_stream_send(stream_, aio);
      } else {
        nng_stream_recv(stream_, aio);
      }
    }
    nng_aio_wait(aio);
    if (nng_aio_result(aio) != 0) return 0;
    return nng_aio_count(aio);
  }

  nng_stream* const stream_;
  nng_aio* const read_aio_;   // used only inside ReadSome (and cancelled by Shutdown)
  nng_aio* const write_aio_;  // used only inside WriteAll (and cancelled by Shutdown)
  Mutex mu_;                  // orders submissions against Shutdown (see file comment)
  bool shutdown_ GUARDED_BY(mu_) = false;
};

class NngListener : public StreamListener {
 public:
  NngListener(nng_stream_listener* listener, nng_aio* aio) : listener_(listener), aio_(aio) {}

  ~NngListener() override {
    Shutdown();
    FreeAio(aio_);
    // Frees the listening socket before returning, so the port can be listened on again
    // (tested by "a listener can be closed and the same port listened on again").
    nng_stream_listener_free(listener_);
  }

  NngListener(const NngListener&) = delete;
  NngListener& operator=(const NngListener&) = delete;

  std::unique_ptr<StreamConn> Accept(int timeout_ms) override {
    {
      MutexLock lock(mu_);
      if (shutdown_) return nullptr;
      nng_aio_set_timeout(aio_, timeout_ms < 0 ? NNG_DURATION_INFINITE : timeout_ms);
      nng_stream_listener_accept(listener_, aio_);
    }
    nng_aio_wait(aio_);
    if (nng_aio_result(aio_) != 0) return nullptr;
    auto* stream = static_cast<nng_stream*>(nng_aio_get_output(aio_, 0));
    if (stream == nullptr) return nullptr;
    bool shut = false;
    {
      MutexLock lock(mu_);
      shut = shutdown_;
    }
    if (shut) {  // accepted just as Shutdown ran: the contract says nullptr after Shutdown
      nng_stream_close(stream);
      nng_stream_free(stream);
      return nullptr;
    }
    return NngConn::Make(stream);
  }

  void Shutdown() override {
    MutexLock lock(mu_);
    if (shutdown_) return;
    shutdown_ = true;
    nng_aio_cancel(aio_);
    nng_stream_listener_close(listener_);
  }

 private:
  nng_stream_listener* const listener_;
  nng_aio* const aio_;     // the accept aio: used only inside Accept (one caller at a time)
  Mutex mu_;               // orders the accept submission against Shutdown
  bool shutdown_ GUARDED_BY(mu_) = false;
};

class NngStreamNet : public StreamNet {
 public:
  const char* Name() const override { return "nng"; }

  Result<std::unique_ptr<StreamListener>> Listen(const std::string& host_port) override {
    Result<std::string> url = TcpUrl(host_port);
    if (!url.ok()) return url.status();
    nng_stream_listener* listener = nullptr;
    int rv = nng_stream_listener_alloc(&listener, url.value().c_str());
    if (rv != 0) return Status::Unavailable("listen on " + host_port + ": " + NngError(rv));
    auto fail = [&](const std::string& what, int err) {
      nng_stream_listener_close(listener);
      nng_stream_listener_free(listener);
      return Status::Unavailable(what + " " + host_port + ": " + NngError(err));
    };
    // Accepted streams inherit it. It is nng's default for tcp already; set it so a change of
    // default cannot slow every small Raft message by a delayed-ACK round.
    rv = nng_stream_listener_set_bool(listener, NNG_OPT_TCP_NODELAY, true);
    if (rv != 0) return fail("set tcp-nodelay for", rv);
    rv = nng_stream_listener_listen(listener);
    if (rv != 0) return fail("listen on", rv);
    nng_aio* aio = NewAio();
    if (aio == nullptr) return fail("allocate accept aio for", NNG_ENOMEM);
    return std::unique_ptr<StreamListener>(std::make_unique<NngListener>(listener, aio));
  }

  std::unique_ptr<StreamConn> Connect(const std::string& host_port, int timeout_ms) override {
    Result<std::string> url = TcpUrl(host_port);
    if (!url.ok()) return nullptr;
    nng_stream_dialer* dialer = nullptr;
    if (nng_stream_dialer_alloc(&dialer, url.value().c_str()) != 0) return nullptr;
    nng_stream* stream = nullptr;
    nng_aio* aio = NewAio();
    if (aio != nullptr && nng_stream_dialer_set_bool(dialer, NNG_OPT_TCP_NODELAY, true) == 0) {
      nng_aio_set_timeout(aio, timeout_ms < 0 ? NNG_DURATION_INFINITE : timeout_ms);
      nng_stream_dialer_dial(dialer, aio);
      nng_aio_wait(aio);  // bounded by the aio timeout
      if (nng_aio_result(aio) == 0) stream = static_cast<nng_stream*>(nng_aio_get_output(aio, 0));
    }
    FreeAio(aio);
    // The dial is over, so closing the dialer has nothing to abort; the stream outlives it.
    nng_stream_dialer_close(dialer);
    nng_stream_dialer_free(dialer);
    if (stream == nullptr) return nullptr;
    return NngConn::Make(stream);
  }
};

}  // namespace

std::unique_ptr<StreamNet> MakeNngStreamNet() { return std::make_unique<NngStreamNet>(); }

}  // namespace qrstore::net
