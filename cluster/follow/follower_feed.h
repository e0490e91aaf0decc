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
// batch E of every stream (EncodeEndMarker). By default (a partitioned row) the feed then tells
// the pipeline the input ends at E, so the follower knows it has everything the leader committed.
// With continue_after_end (one replication group per partition, whose members take over) the
// marker is an empty batch E applied like any other and the feed goes on with E + 1: the group
// continues after it under whoever leads next (a cleanly stopped group that is started again,
// every member replaying the marker; or the old leader alone stopped cleanly). ended() then
// says the last thing every stream applied is that marker, and the node's own stop ends there.
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
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/shared_bytes.h"
#include "common/status.h"
#include "common/thread.h"
#include "engine/pipeline.h"
#include "executor/range_executor.h"
#include "planner/eq.h"
#include "planner/planner.h"
#include "replication/replication.h"
#include "storage/key_map.h"
#include "storage/txn.h"

namespace qrstore::cluster {

// The payload of batch `end` of each stream when the leader's input ended there.
std::string EncodeEndMarker(uint64_t end);
// True (and *end set) when `bytes` is an end marker.
bool DecodeEndMarker(std::string_view bytes, uint64_t* end);
// The test hook server.test_corrupt_slice_batch: damages an entry on its way to the followers (a
// byte flipped, the last 5 cut) so that their feed refuses it. False, unchanged, for an entry too
// short to damage.
bool DamageEntryForTest(std::string* bytes);

// What a row follower's batch-end record brings its pipeline: the dependency values its leader
// received (slice, slot, value) and the abort results of the row's votes.
struct FeedBatchEnd {
  struct Value {
    uint32_t slice = 0;
    uint32_t slot = 0;
    int64_t value = 0;
  };
  std::vector<Value> values;
  std::vector<executor::RowTxn> fired;
  std::vector<executor::RowTxn> aborted;
  // replication.point = writes (FollowerFeedOptions::row_writes): the last images of what the
  // batch wrote here, per executor range (none: nothing written), `record_bytes` each. `fired`
  // and `aborted` then give every fate (kLogic, else kCascade); `values` is not used.
  bool writes = false;
  uint32_t record_bytes = 0;
  std::vector<std::vector<storage::Key>> keys;
  std::vector<std::string> images;
};

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
  // A row follower under Rule 2 (docs/partitioned-rows.md 9.4): the last of the `planners`
  // streams carries its leader's batch-end records (row_record decodes them), one per batch, not slices:
  // their values go to the pipeline's dependency slots and their abort results to its resolver
  // (Pipeline::DeliverDepValue, DeliverResolved), batch b's once b may enter the pipeline. The
  // other streams publish batch b's sub-slices only once b's record arrived (the leader wrote it
  // after executing b), so the follower never starts a batch its leader did not finish.
  bool batch_end_stream = false;
  // A row follower: what its streams carry is the row's to read (cluster/row/row_feed.h sets
  // these). row_part (replay thread, stream by stream in batch order): stream p's entry of batch
  // b becomes the sub-slice this node runs: *part is set and *replaced true to run it instead of
  // the entry (its own home's part of a home bundle), *replaced false to run the entry as it is;
  // a non-ok status stops apply, naming it.
  std::function<Status(uint64_t b, uint32_t p, std::string_view entry, std::string* part, bool* replaced)> row_part;
  // With batch_end_stream (replay thread, in batch order): decodes and checks the batch-end
  // record of batch b into *out; a non-ok status stops apply, naming it.
  std::function<Status(uint64_t b, std::string_view entry, FeedBatchEnd* out)> row_record;
  // replication.point = input (docs/replication-points.md): the streams carry each slice's
  // sequenced input (planner/input_slice.h), and this node plans it itself with the leader's
  // Planner::PlanSlice over its own executor ranges. Not in a row.
  bool plan_input = false;
  // replication.point = writes: the streams carry each slice's fates and (stream 0) the batch's
  // last images (planner/write_slice.h), decoded and checked against this node's record size and
  // executor ranges, and installed, never executed. Not in a row.
  bool apply_writes = false;
  // replication.point = writes in a row (with batch_end_stream; row_record gives FeedBatchEnd::
  // writes): the streams carry what they carry under plan, read by row_part, but nothing is
  // executed: each sub-slice is published with its EQs emptied and its txns' fates from batch b's
  // record (SliceWrites::fates), and slice 0 with the record's images, which are checked against
  // this node's executor ranges, partition and record_bytes. A sub-slice waits for its record.
  bool row_writes = false;
  uint32_t record_bytes = 0;
  // See "End of stream" above; `executors` sizes the empty batch a marker stands for.
  bool continue_after_end = false;
  uint32_t executors = 1;
};

class FollowerFeed {
 public:
  // `on_end` (optional) is called on a replay thread when the end marker arrived (once; with
  // continue_after_end, each time every stream has applied a marker); `on_resume` (optional,
  // continue_after_end) when a batch after a marker arrived: the group went on.
  FollowerFeed(FollowerFeedOptions options, engine::Pipeline* pipeline, replication::Replicator* replicator,
               std::function<void(uint64_t end)> on_end = nullptr, std::function<void()> on_resume = nullptr);
  ~FollowerFeed();
  FollowerFeed(const FollowerFeed&) = delete;
  FollowerFeed& operator=(const FollowerFeed&) = delete;

  Status Start();
  void Stop();

  // OK, or the error that stopped applying (a bad slice, a replication error).
  Status health() const;
  // Whether an end marker arrived, and its batch (continue_after_end: whether the last batch
  // every stream applied is the marker of batch *end, nothing after it yet).
  bool ended(uint64_t* end) const;
  // continue_after_end: waits until ended(), the feed failed or stopped, or timeout_ms passed.
  bool WaitEnded(int64_t timeout_ms, uint64_t* end);
  // Batches received (fully, every stream) so far: the least per-stream count.
  uint64_t received_batches() const;
  // Promotion (this node starts leading): stream p applies batches below next[p] and no more,
  // then its thread ends. Blocks until every stream got there (OK), or the feed failed (its
  // error), stopped (kAborted), the leader's end marker came first (kUnavailable: the
  // group was stopping), or timeout_ms passed (kTimeout, naming the streams short of it).
  // Then Stop() joins the threads; receives posted beyond next[p] are the caller's to cancel
  // (Replicator::CancelReceives).
  Status DrainTo(const std::vector<uint64_t>& next, int64_t timeout_ms);
  // A row follower's promotion (batch_end_stream; docs/partitioned-rows.md 9.5): the log holds
  // batches below next[p] on stream p. Applies every batch below D = min(next) (the first batch
  // the log does not hold whole: nothing of it or later was started here) and waits until every
  // entry from D to the log's end arrived. *first = D and (*entries)[p] = stream p's entries of
  // batches [D, next[p]) (the records' stream: those it had not applied yet; it may apply
  // records beyond D, which only reach a pipeline that will not run their batches). Errors as
  // DrainTo's. Then Stop(); the receives beyond are the caller's to cancel.
  Status CollectFrom(const std::vector<uint64_t>& next, int64_t timeout_ms, uint64_t* first,
                     std::vector<std::vector<std::string>>* entries);

 private:
  // Its fields are guarded by the feed's mu_, which a GUARDED_BY in a nested struct cannot name
  // (the analysis would look for a mutex of the Stream): the compiler does not check them.
  struct Stream {
    std::map<uint64_t, std::pair<Status, SharedBytes>> inbox;  // guarded by mu_
    uint64_t applied = 0;                                      // guarded by mu_: next batch to apply
    bool at_marker = false;  // guarded by mu_: continue_after_end, the last batch applied was a marker
    std::vector<storage::Txn> txns;  // plan_input: the stream's thread's decoded input
    NamedThread thread;
  };
  void Loop(uint32_t p);
  void Request(uint32_t p, uint64_t batch);
  void StopWith(Status status);
  // continue_after_end: applies the marker of batch b on stream p as an empty slice.
  bool ApplyMarker(uint32_t p, uint64_t b);
  bool EndedLocked(uint64_t* end) const REQUIRES(mu_);
  // DrainTo, CollectFrom: stream p applies below next[p] only (an error if it is past it).
  Status LimitLocked(const std::vector<uint64_t>& next) REQUIRES(mu_);
  // batch_end_stream: stream p is the records' (the last).
  bool RecordStream(uint32_t p) const { return opt_.batch_end_stream && p + 1 == opt_.planners; }
  // plan_input: decodes stream p's input of batch b and plans it into `slice`.
  Status PlanInput(uint32_t p, uint64_t b, std::string_view bytes, planner::PlannedSlice* slice);
  // Batch b's record into the pipeline. False if it stopped (failed, or past the end).
  bool ApplyBatchEnd(uint64_t b, std::string_view bytes);

  const FollowerFeedOptions opt_;
  engine::Pipeline* const pipeline_;
  replication::Replicator* const replicator_;
  const std::function<void(uint64_t)> on_end_;
  const std::function<void()> on_resume_;
  const planner::Planner planner_;  // plan_input: the leader's planning, over this node's ranges
  mutable Mutex mu_;
  std::condition_variable cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  Status health_ GUARDED_BY(mu_);
  bool ended_ GUARDED_BY(mu_) = false;
  uint64_t end_ GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> limit_ GUARDED_BY(mu_);  // per stream, apply below it only (DrainTo)
  // batch_end_stream: per batch at or after complete_, how many streams' entries arrived;
  // complete_: every batch below it arrived on every stream (the gate of a row follower's slices).
  std::map<uint64_t, uint32_t> arrived_ GUARDED_BY(mu_);
  uint64_t complete_ GUARDED_BY(mu_) = 0;
  // row_writes: batch b's record, decoded, until every sub-slice of b took its fates (and slice 0
  // the images). Bounded by the pipeline's window: the record stream waits there (AwaitBatch).
  struct Given {
    FeedBatchEnd rec;
    uint32_t taken = 0;
  };
  std::map<uint64_t, std::shared_ptr<Given>> given_ GUARDED_BY(mu_);
  // row_writes: empties `slice`'s EQs and gives it its fates (and, if `images`, the batch's images).
  static void MakeGiven(const FeedBatchEnd& rec, bool images, planner::PlannedSlice* slice);
  std::vector<std::unique_ptr<Stream>> streams_;
};

}  // namespace qrstore::cluster
