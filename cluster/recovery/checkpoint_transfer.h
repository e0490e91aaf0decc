// Checkpoint transfer: a node fetches a peer's checkpoint file over the client port
// (cluster/port/protocol.h kCheckpointFetch / kCheckpointChunk) when its group can no longer bring
// it up to date from the replicated log (docs/recovery.md, "A member behind the log").
//
// Serving (ServeCheckpointChunk, on a client-service reader thread): reads one piece of a file
// of the node's checkpoint folder: the newest of batch >= min_batch, or the batch named. Files
// are complete once listed (the checkpointer writes a temp file and renames it), so a reader
// never sees half a file; one the checkpointer prunes meanwhile is answered kNotFound. No lock
// of the pipeline is taken: a transfer costs the source disk reads and a checksum per piece.
//
// Fetching (CheckpointFetcher, thread "ckpt-fetch"): asks the source for the newest checkpoint of
// batch >= min_batch, piece by piece (chunk_bytes each, so memory stays at one piece), checks
// each piece's checksum, writes it into `dir` as ".transfer-<batch>.part" at its offset, and
// when the file is whole: fsync, rename to checkpoint-<batch>.qrc, fsync of the folder. A
// connection that breaks or stalls (no piece for stall_ms: Tick() shuts it) is opened again and
// the transfer resumes at the same offset of the same file; if the source no longer keeps that
// file it starts over with the newest. At most `attempts` connections, then it fails. The file
// is validated in full (every block, the digest) only when the node loads it at its restart,
// which falls back to an older file if it is refused.
//
// Threads: Start/Tick/Stop/Result from one controlling thread (the server's watch thread),
// progress() from any.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <optional>
#include <string>

#include "cluster/port/protocol.h"
#include "common/mutex.h"
#include "common/net/stream_net.h"
#include "common/status.h"
#include "common/thread.h"

namespace qrstore::cluster {

// The reply body (kCheckpointChunk) for `req` from the checkpoint folder `dir`, or an error:
// kNotFound when there is no such checkpoint (none of batch >= min_batch, or the batch named is
// no longer kept), kIoError naming the file when the OS fails.
// *served_batch (if given): the batch of the checkpoint a chunk was served from.
Result<std::string> ServeCheckpointChunk(const std::string& dir, const proto::CheckpointFetch& req,
                                         uint64_t* served_batch = nullptr);

struct CheckpointFetchOptions {
  net::StreamNet* net = nullptr;
  std::string source_node;     // for messages
  std::string source_address;  // host:client_port
  std::string dir;             // this node's checkpoint folder (created if missing)
  uint64_t min_batch = 0;
  uint32_t chunk_bytes = 1u << 20;
  int64_t stall_ms = 10000;
  int attempts = 8;
  std::string identity;        // log prefix
};

struct CheckpointFetchProgress {
  uint64_t batch = 0;       // the file being fetched (0 before the first piece)
  uint64_t done_bytes = 0;
  uint64_t file_bytes = 0;
  int attempt = 0;
};

class CheckpointFetcher {
 public:
  explicit CheckpointFetcher(CheckpointFetchOptions options);
  ~CheckpointFetcher();
  CheckpointFetcher(const CheckpointFetcher&) = delete;
  CheckpointFetcher& operator=(const CheckpointFetcher&) = delete;

  void Start();
  // Watchdog: shuts the connection when no piece arrived for stall_ms.
  void Tick();
  // Once finished: the batch of the checkpoint now in dir, or why the transfer failed.
  std::optional<Result<uint64_t>> result() const;
  CheckpointFetchProgress progress() const;
  // Cancels (a blocked read ends) and joins. Idempotent.
  void Stop();

 private:
  void Run();
  // One connection's worth of the transfer; OK when the file is complete.
  Status FetchOnce(net::StreamConn* conn);

  const CheckpointFetchOptions opt_;
  NamedThread thread_;
  std::atomic<bool> stop_{false};
  mutable Mutex mu_;
  std::condition_variable cv_;
  net::StreamConn* conn_ GUARDED_BY(mu_) = nullptr;  // the open connection (Tick, Stop)
  int64_t last_piece_ns_ GUARDED_BY(mu_) = 0;
  CheckpointFetchProgress progress_ GUARDED_BY(mu_);
  std::optional<Result<uint64_t>> result_ GUARDED_BY(mu_);
  // Fetch thread only: where the transfer stands across connections.
  uint64_t batch_ = proto::kAnyCheckpoint;
  uint64_t offset_ = 0;
  uint64_t file_bytes_ = 0;
  uint64_t request_id_ = 0;
  int fd_ = -1;
  std::string part_path_;
};

}  // namespace qrstore::cluster
