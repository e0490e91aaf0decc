// FollowerFeed: the front-end of a follower (the paper's PLANBATCH on a non-leader: RECEIVEDATA
// with DELIVERBATCH as the callback). Followers never plan: for every planner stream p of the
// partition it asks ReceiveData for batches first_batch, first_batch + 1, ... (a few ahead),
// decodes each slice into the pipeline's slot, validates it in full (planner::DecodeSlice, then
// ValidateSlice against this node's executor ranges and the expected (batch, planner)) before
// any executor sees it, and publishes it as replicated. A slice that fails stops this node's
// apply with an error naming batch and planner (health(), the pipeline's Fail); it never hangs
// or crashes the process.
//
// End of stream: a leader that shuts down cleanly after batch E-1 replicates an end marker as
// batch E of every stream (EncodeEndMarker); the feed then tells the pipeline the input ends at
// E, so the follower knows it has everything the leader committed.
//
// Threads: one "replay-<p>" thread per stream. ReceiveData callbacks (library threads) only
// store the bytes in the stream's inbox and notify. Memory: at most `window` received but not
// yet applied payloads per stream. Stop from the controlling thread; stop this before the
// replicator, and destroy it after the replicator stopped (late callbacks write the inbox).
#pragma once

#include <condition_variable>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/pipeline.h"
#include "common/shared_bytes.h"
#include "common/status.h"
#include "common/thread.h"
#include "planner/eq.h"
#include "replication/replication.h"
#include "storage/key_map.h"

namespace qrstore::cluster {

// The payload of batch `end` of each stream when the leader's input ended there.
std::string EncodeEndMarker(uint64_t end);
// True (and *end set) when `bytes` is an end marker.
bool DecodeEndMarker(std::string_view bytes, uint64_t* end);

struct FollowerFeedOptions {
  uint32_t group = 0;        // replication group = partition
  uint32_t planners = 1;     // streams
  storage::KeyMapper ranges; // this node's executor ranges
  uint64_t first_batch = 0;
  uint32_t window = 4;       // ReceiveData requests outstanding per stream
  // A follower in a partitioned row: the streams carry row sub-slices (one per home planner),
  // validated for this node's place in the row (keys of its partition only).
  bool row = false;
  planner::RowPlace place;
};

class FollowerFeed {
 public:
  // `on_end` (optional) is called once, on a replay thread, when the end marker arrived.
  FollowerFeed(FollowerFeedOptions options, Pipeline* pipeline, replication::Replicator* replicator,
               std::function<void(uint64_t end)> on_end = nullptr);
  ~FollowerFeed();
  FollowerFeed(const FollowerFeed&) = delete;
  FollowerFeed& operator=(const FollowerFeed&) = delete;

  Status Start();
  void Stop();

  // OK, or the error that stopped applying (a bad slice, a replication error).
  Status health() const;
  // Whether an end marker arrived, and its batch.
  bool ended(uint64_t* end) const;
  // Batches received (fully, every stream) so far: the least per-stream count.
  uint64_t received_batches() const;
  // Promotion (this node starts leading): stream p applies batches below next[p] and no more,
  // then its thread ends. Blocks until every stream got there (OK), or the feed failed (its
  // error), stopped (kAborted), the leader's end marker came first (kUnavailable: the
  // group was stopping), or timeout_ms passed (kTimeout, naming the streams short of it).
  // Then Stop() joins the threads; receives posted beyond next[p] are the caller's to cancel
  // (Replicator::CancelReceives).
  Status DrainTo(const std::vector<uint64_t>& next, int64_t timeout_ms);

 private:
  struct Stream {
    std::map<uint64_t, std::pair<Status, SharedBytes>> inbox;  // guarded by mu_
    uint64_t applied = 0;                                      // guarded by mu_: next batch to apply
    NamedThread thread;
  };
  void Loop(uint32_t p);
  void Request(uint32_t p, uint64_t batch);
  void StopWith(Status status);

  const FollowerFeedOptions opt_;
  Pipeline* const pipeline_;
  replication::Replicator* const replicator_;
  const std::function<void(uint64_t)> on_end_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;          // guarded by mu_
  Status health_;              // guarded by mu_
  bool ended_ = false;         // guarded by mu_
  uint64_t end_ = 0;           // guarded by mu_
  std::vector<uint64_t> limit_;  // guarded by mu_: per stream, apply below it only (DrainTo)
  std::vector<std::unique_ptr<Stream>> streams_;
};

}  // namespace qrstore::cluster
