// Checkpointer: writes a node's checkpoints in the background while execution goes on (docs/recovery.md;
// storage/checkpoint.h is the file, storage/table_image.h the copy).
//
// When. Candidate batches are every `every_batches`-th, at this node's phase: b is one when
// (b + 1) % every_batches == phase. The server gives each member of a group its own phase
// (CheckpointPhase, server.checkpoint_stagger), so the members of a group do not all copy and
// write at the same batch: a majority is never all paused or all writing at once. A phase of 0
// on every node gives the same batches everywhere. At a candidate's end the executors take the
// table's image if the writer is idle (Want); otherwise that candidate is skipped (a write
// slower than every_batches batches makes checkpoints rarer, never queues them). Copy-on-write
// (copy_on_write, the default; storage/table_image.h): they only arm the image there and go on,
// and the writer thread copies what the table's writers have not preserved before it writes;
// otherwise they copy the whole table there (paused). The
// commit stage's hook for the same batch gives the rest of the state at that boundary: the state
// digest (table and session table) and the session table's encoding, captured only while a
// checkpoint of that batch may still be taken.
// Once both halves of a batch are in (the image complete), the "checkpoint" thread writes the
// file (temp, fsync, rename; the newest `keep` kept) and the image is free for the next candidate.
//
// Threads. Want / Taken: an executor thread with the ring's lock held (quick, never blocking:
// they only take this object's lock). OnCommitted: the commit thread that finished the batch
// (outside the ring's lock), after the sink applied its session entries. Stats: any thread.
// The writer thread: Start / Stop from the controlling thread. Lock order: ring lock, then mu_.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cluster/config/topology.h"
#include "common/config.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread.h"
#include "executor/executor_stage.h"
#include "planner/session_table.h"
#include "storage/checkpoint.h"
#include "storage/table_image.h"
#include "workloads/workload.h"

namespace qrstore::cluster {

struct CheckpointerOptions {
  std::string dir;              // this node's checkpoint directory (created by Start if missing)
  uint64_t every_batches = 0;   // >= 1
  uint64_t phase = 0;           // < every_batches: this node's candidates are b with (b + 1) % every_batches == phase
  int keep = 2;                 // >= 1
  bool copy_on_write = true;    // images taken copy-on-write (storage/table_image.h), not paused
  bool direct_io = true;        // files written with O_DIRECT (storage::WriteCheckpoint)
  uint64_t write_bytes_per_s = 0;  // the background writes paced to this (storage::WritePace); 0: unpaced
  storage::CheckpointMeta base; // cluster id, partition(s), record size, capacity, streams (stream_next's size)
  std::function<std::string()> identity;  // for log lines ("[n1 follower]": the role changes)
  // Called (writer thread) after checkpoint of batch b was written, with b: the raft disk log
  // may then drop what a restart no longer needs. May be empty.
  std::function<void(uint64_t b)> on_written;
};

// What the status line shows (any thread).
struct CheckpointStats {
  uint64_t written = 0;          // checkpoints written since start
  bool any = false;              // last_batch and the rest are valid
  uint64_t last_batch = 0;
  int64_t last_unix_ms = 0;      // when it was written (shown as an age)
  uint64_t last_bytes = 0;
  double last_write_s = 0;       // writing the file (after the copy)
  double last_copy_ms = 0;       // from the boundary until the image held the whole table
  double last_pause_ms = 0;      // from the first executor at the batch to the last (copy-on-write: none waits)
  uint64_t last_preserved = 0;   // copy-on-write: records the table's writers copied first
  uint64_t skipped = 0;          // candidates skipped (the writer was busy)
  std::string last_error;        // the last failed write ("": none)
};

// The phase (CheckpointerOptions::phase) of row `row` of `rows` (a group's members): with
// `stagger`, row * every_batches / rows, so a group's members' checkpoints are spread evenly over
// the interval; without, 0 (the same batches on every node).
uint64_t CheckpointPhase(uint64_t every_batches, uint32_t row, uint32_t rows, bool stagger);

// A node's checkpoint folder: <server.checkpoint_dir>/<node> ("" when checkpoint_dir is empty).
std::string NodeCheckpointDir(const Config& config, const std::string& node);
// What a node's checkpoints carry and are checked against: the cluster (Topology::ClusterId),
// the node's partition, the record size and the table capacity its server uses.
storage::CheckpointExpect NodeCheckpointIdentity(const Topology& topo, uint32_t partition,
                                                 const workloads::WorkloadOptions& workload);

// One of a node's checkpoint files, checked in full: the file itself (storage/checkpoint.h
// ReadCheckpoint against `expect`), its header batch against its name, its session table
// decoded under `limits`, and the state digest recomputed from the records and the session
// table (the server's: table digest ^ Mix64(sessions digest)) against the header's. On OK
// *table and *sessions hold it; on error (the message starts with "<path>: ") they are unspecified
// and *meta_known says whether *meta was read. Used by the server's restart and by
// qrstore-checkpoint.
Status ValidateNodeCheckpoint(const std::string& path, const storage::CheckpointExpect& expect,
                              storage::RecordLayout layout, const planner::SessionLimits& limits,
                              std::unique_ptr<storage::Table>* table, planner::SessionTable* sessions,
                              storage::CheckpointMeta* meta, bool* meta_known);

class Checkpointer : public executor::ImageSink {
 public:
  // `encode_sessions` returns the session table's bytes (called by OnCommitted's thread).
  // `table` outlives this object (copy-on-write: the writer thread completes images from it).
  Checkpointer(CheckpointerOptions options, storage::Table& table, std::function<std::string()> encode_sessions);
  ~Checkpointer() override;
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Creates the directory (and parents) if missing, checks it is writable, starts the thread.
  Status Start();
  // Stops the thread (a write in progress finishes first). Idempotent.
  void Stop();

  // executor::ImageSink
  storage::TableImage* Want(uint64_t b) override;
  void Taken(uint64_t b) override;
  bool CopyOnWrite() const override { return opt_.copy_on_write; }
  // Batch b committed with state digest `digest` (sessions applied).
  void OnCommitted(uint64_t b, uint64_t digest);
  // Clean stop, the pipeline stopped (nothing runs): a checkpoint of `table` as it is, at the
  // last batch OnCommitted saw, unless the table's state digest (table digest mixed with
  // `sessions_digest`, as the server's) differs from that batch's: then it holds executed
  // batches that never committed, and the checkpoint is skipped (said in the log). A restart
  // after a clean stop then needs no log at all.
  void WriteFinal(const storage::Table& table, uint64_t sessions_digest);

  CheckpointStats Stats() const;
  bool Candidate(uint64_t b) const { return (b + 1) % opt_.every_batches == opt_.phase; }

 private:
  void Loop();
  // `at_stop`: the final one, written from the stopped table (no copy).
  void Write(uint64_t b, uint64_t digest, const std::string& sessions, const storage::RecordSource& records,
             bool at_stop);

  const CheckpointerOptions opt_;
  const std::function<std::string()> encode_sessions_;
  storage::Table& table_;
  storage::TableImage image_;  // the executors' during a copy, the writer's while writing
  int64_t copy_cpu_ns_ = 0;    // the writer thread's CPU in CompleteCopy for the image being written (mu_)
  std::atomic<bool> hurry_{false};  // set by Stop: a paced write in progress finishes unpaced

  mutable Mutex mu_;
  std::condition_variable cv_;
  enum class State { kIdle, kTaking, kWriting } state_ GUARDED_BY(mu_) = State::kIdle;
  uint64_t batch_ GUARDED_BY(mu_) = 0;           // the batch being taken or written
  bool have_image_ GUARDED_BY(mu_) = false;      // Taken(batch_) came
  bool image_complete_ GUARDED_BY(mu_) = false;  // and the image holds the whole table (CompleteCopy done)
  int64_t copy_start_ns_ GUARDED_BY(mu_) = 0;
  bool have_state_ GUARDED_BY(mu_) = false;      // OnCommitted(state_batch_) came while idle or taking
  uint64_t state_batch_ GUARDED_BY(mu_) = 0;
  uint64_t state_digest_ GUARDED_BY(mu_) = 0;
  std::string state_sessions_ GUARDED_BY(mu_);
  bool committed_any_ GUARDED_BY(mu_) = false;   // OnCommitted came (last_*: its latest)
  uint64_t last_batch_ GUARDED_BY(mu_) = 0;
  uint64_t last_digest_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  CheckpointStats stats_ GUARDED_BY(mu_);
  NamedThread thread_;
};

}  // namespace qrstore::cluster
