// Raft log storage: where the driver persists one Raft group member's log and hard state
// before it sends the messages that promise them (the Ready contract in core.h).
//
// Owner and threads. One LogStorage per (process, group), owned by the driver and used only
// from its "raft" thread. Not thread-safe.
//
// Two implementations:
//  - MemoryLogStorage: nothing survives the process. With retain_entries it keeps a copy of
//    the log (tests reload it as a "restart"); without, it only tracks indexes (the Core
//    already holds the entries, no need to pay twice). CAVEAT: a member that restarts with an
//    empty log forgets its votes and acknowledgements. It is safe only if it rejoins as a new
//    empty member that did not vote or acknowledge in the current term (a lost
//    acknowledgement can un-commit an entry if that member then helps elect a stale
//    candidate). Use the disk storage wherever members restart without the whole group.
//  - DiskLogStorage: a directory with
//      seg-<first index, 20 digits>.log   append-only segments; each starts with a 32-byte
//                                         header {magic, version, first_index, prev_term,
//                                         checksum} and holds records
//                                         {u32 length, u64 checksum, u64 term, u64 index, data}
//      hardstate                          {magic, term, voted_for, commit, checksum}, replaced
//                                         atomically (write tmp, fsync, rename, fsync dir)
//    Open() scans every segment; the first record that is torn (short), fails its checksum,
//    breaks index continuity or has a lower term than the entry before it ends the log (so does
//    a segment whose header is damaged, starts at index 0, or does not continue the previous
//    segment's indexes and last term): the file is truncated there and later segments are
//    deleted (a crash mid-write loses only unsynced data, which nobody was promised).
//    A new segment starts when the current one exceeds segment_bytes; Compact drops whole
//    segments below an index. Truncation on conflict cuts the segment holding the first
//    conflicting entry and deletes later ones.
//
//    Direct I/O (DiskLogOptions::direct_io, on by default): segments are written with O_DIRECT,
//    from an aligned staging buffer, in whole 4 KB blocks at 4 KB offsets: each Append rewrites
//    the segment's last partial block (kept in memory, identical bytes) and pads the new last
//    one with zeros. So the file runs on in zeros past its last record until it is closed (cut
//    to its records when a new segment starts, or at a clean close); Open takes such a zero tail
//    shorter than a block for padding, not damage. No page cache pages are taken for the log
//    (on virtual hosts a fresh page-cache page can cost more CPU than the write:
//    docs/benchmarks-log.md). A file system that refuses O_DIRECT (tmpfs) gets buffered writes,
//    said once in the log.
//
// Durability. Append/SaveHardState write; Sync() makes everything written so far durable
// (fsync of the active segment, and of the directory if files were created or deleted). The
// driver decides when to call Sync per FsyncPolicy: kAlways after each write, kBatch once per
// loop iteration (group commit), kNever not at all (the OS decides).
// The hard state is only rewritten when term or vote change: the commit index in it is an
// optimisation (core.h) and is saved with the next term/vote change.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "replication/raft/core.h"

namespace qrstore::replication::raft {

enum class FsyncPolicy : uint8_t { kAlways, kBatch, kNever };
Result<FsyncPolicy> ParseFsyncPolicy(const std::string& name);  // always|batch|never
const char* FsyncPolicyName(FsyncPolicy policy);

class LogStorage {
 public:
  virtual ~LogStorage() = default;
  // The state found at open (empty for a fresh or in-memory storage).
  virtual PersistentState Recovered() const = 0;
  // Appends entries (consecutive indexes). If entries[0].index <= last_index(), the stored
  // log is first truncated from entries[0].index. entries[0].index must be <= last_index()+1
  // and > the compaction point (else kInternal: a caller bug).
  virtual Status Append(const std::vector<Entry>& entries) = 0;
  virtual Status SaveHardState(const HardState& hard) = 0;
  // Makes everything written so far durable.
  virtual Status Sync() = 0;
  // May drop entries <= upto (disk: whole segments only). Never drops the last entry.
  virtual Status Compact(Index upto) = 0;
  // An installed snapshot (Ready::snapshot): drops every stored entry; the log continues at
  // index + 1 after an entry of `term` (what a restart recovers; made durable by Sync()). A
  // crash midway leaves either the old log or an empty one from index 1 (the member is then
  // offered the snapshot again); the hard state is kept.
  virtual Status ResetTo(Index index, Term term) = 0;
  virtual Index first_index() const = 0;  // first stored entry (or next index if empty)
  virtual Index last_index() const = 0;   // first_index()-1 when empty
  // Number of Sync() calls that reached the device (for stats and tests of the fsync plumbing).
  virtual uint64_t syncs() const = 0;
};

class MemoryLogStorage : public LogStorage {
 public:
  explicit MemoryLogStorage(bool retain_entries) : retain_entries_(retain_entries) {}
  PersistentState Recovered() const override;  // the current contents (a simulated restart)
  Status Append(const std::vector<Entry>& entries) override;
  Status SaveHardState(const HardState& hard) override;
  Status Sync() override;
  Status Compact(Index upto) override;
  Status ResetTo(Index index, Term term) override;
  Index first_index() const override { return first_index_; }
  Index last_index() const override { return last_index_; }
  uint64_t syncs() const override { return syncs_; }
  const std::vector<Entry>& entries() const { return entries_; }
  const HardState& hard_state() const { return hard_; }

 private:
  const bool retain_entries_;
  HardState hard_;
  std::vector<Entry> entries_;  // [first_index_, last_index_] when retain_entries_
  Index first_index_ = 1;
  Index last_index_ = 0;
  Term prev_term_ = 0;
  uint64_t syncs_ = 0;
};

struct DiskLogOptions {
  std::string dir;  // created if missing
  uint64_t segment_bytes = 64 << 20;
  // Appends are copied into one reused buffer of this size and written from it (see WriteStaged
  // in log_storage.cc for why); at least 4 KB, rounded up to a multiple of 4 KB.
  uint64_t write_buffer_bytes = 1 << 20;
  // Segments written with O_DIRECT (see the top of this file); buffered writes where the file
  // system refuses it.
  bool direct_io = true;
  // Only used for the syncs the storage does on its own: the tmp hard state file before its
  // rename, and a segment being closed when a new one starts. kNever skips those too.
  FsyncPolicy fsync = FsyncPolicy::kBatch;
  std::string identity;  // log prefix
};

// The checksum of a segment record (term, index and data). Public so tests and the fuzzer
// (tests/fuzz/fuzz_disk_log.cc) can write segments that get past it.
uint64_t SegmentRecordChecksum(Term term, Index index, std::string_view data);

class DiskLogStorage : public LogStorage {
 public:
  // Opens (creating if needed) and recovers, truncating a torn tail. kIoError/kCorruption
  // if the directory cannot be used, the hard state file is damaged, or a segment's header is
  // neither valid nor blank (garbage, not a torn write).
  static Result<std::unique_ptr<DiskLogStorage>> Open(const DiskLogOptions& options);
  ~DiskLogStorage() override;

  PersistentState Recovered() const override { return recovered_; }
  Status Append(const std::vector<Entry>& entries) override;
  Status SaveHardState(const HardState& hard) override;
  Status Sync() override;
  Status Compact(Index upto) override;
  Status ResetTo(Index index, Term term) override;
  Index first_index() const override;
  Index last_index() const override;
  uint64_t syncs() const override { return syncs_; }
  // Bytes cut off a torn/corrupt tail at Open (0 on a clean open; a direct-I/O segment's zero
  // padding does not count).
  uint64_t recovered_truncated_bytes() const { return truncated_bytes_; }
  // Whether segments are written with O_DIRECT (direct_io asked and the file system took it).
  bool direct() const { return direct_; }

 private:
  struct Segment {
    Index first_index = 0;
    Term prev_term = 0;
    std::string path;
    std::vector<uint64_t> offsets;  // file offset of each record (entry first_index + i)
    std::vector<Term> terms;        // term of each record
    uint64_t size = 0;              // bytes in the file
  };
  struct FreeDeleter {
    void operator()(char* p) const;
  };
  explicit DiskLogStorage(DiskLogOptions options);
  Status Recover();
  Status RecoverSegment(Segment* seg, bool* torn);
  Status OpenActive();            // opens the last segment for writing
  // Opens `path` for writing with `flags`, plus O_DIRECT while direct_ (falling back to buffered
  // writes, for good, if the file system refuses it).
  int OpenSegmentFile(const std::string& path, int flags);
  // Writes `iov` at `offset` of the active segment (its current end) through the staging
  // buffer: buffered, or direct (whole blocks from the last block boundary, tail_ first).
  Status WriteAtEnd(const std::vector<iovec>& iov, uint64_t offset, const std::string& path);
  // Direct I/O: reads the active segment's last partial block (below its size) into tail_.
  Status LoadTail();
  // Direct I/O: cuts the active segment's zero padding off (it ends at its last record).
  Status CutPadding();
  Status StartSegment(Index first_index, Term prev_term);
  Status TruncateFrom(Index index);
  Status WriteHardStateFile(const HardState& hard);
  Status SyncDir();
  void CloseActive();
  Term TermOf(Index index) const;  // index within [first-1, last]

  DiskLogOptions options_;
  PersistentState recovered_;
  std::vector<Segment> segments_;  // in index order; the last one is active
  int active_fd_ = -1;
  Index empty_next_index_ = 1;     // next index when there are no segments
  Term empty_prev_term_ = 0;
  HardState hard_;                 // last saved (term/vote) plus latest commit
  bool active_dirty_ = false;      // written since the last fsync
  bool dir_dirty_ = false;         // files created/removed since the last dir fsync
  uint64_t syncs_ = 0;
  uint64_t truncated_bytes_ = 0;
  bool direct_ = false;            // segments written with O_DIRECT
  // Append's staging buffer: write_buffer_bytes rounded up to whole blocks, block-aligned.
  std::unique_ptr<char, FreeDeleter> stage_;
  size_t stage_cap_ = 0;
  std::string tail_;               // direct: the active segment's bytes after its last block boundary
};

}  // namespace qrstore::replication::raft
