// Checkpoint files: a Table image at a batch boundary, written atomically and read back only
// after every byte has been validated.
//
// Who calls what. A node writes a checkpoint from one thread (copying the image at a batch
// boundary is the caller's job; this module only writes and reads files) and, on restart, loads
// the newest valid one. Functions here hold no state between calls and may be called from any
// thread, but at most one writer may use a directory at a time (WriteCheckpoint removes stale
// temp files of its own pattern, which would include a concurrent writer's).
//
// File name: `checkpoint-<batch, 20 decimal digits>.qrc`; written as `.checkpoint-<...>.qrc.tmp`
// (never listed), fsynced, renamed, then the directory is fsynced. A crash leaves either the
// complete new file or none.
//
// Format (version 1, every integer little-endian; the byte offsets are fixed so tests and tools
// can find each section):
//   header   "QRCKPT" u32 format | u64 cluster_id | u32 partition | u32 partitions | u64 batch |
//            u64 digest | u32 record_size | u64 capacity | u64 records | i64 created_unix_ms |
//            u32 block_records | u32 streams | streams x u64 stream_next |
//            u64 BulkHash64(all header bytes before it)                   (86 + 8*streams bytes)
//   blocks   u32 count (1..block_records) | count x (u64 key, record_size bytes) |
//            u64 BulkHash64(count and entries, seed depends on the block index)
//   end      u32 0
//   extra    u64 length | length bytes | u64 BulkHash64(bytes)
//   footer   "QRCKEND\0" | u64 records | u64 blocks | u64 chain | u64 Hash64(the 32 bytes before)
// `chain` folds the header checksum, every block checksum in order and the extra checksum, so
// a footer from another file or a reordered block is refused. The footer must end exactly at the
// end of the file: a file cut anywhere is refused as truncated, a longer one for trailing bytes.
//
// Bounded memory. The writer streams records in blocks of about kCheckpointBlockBytes; the
// reader holds one block at a time, and every length read from a file is checked against the
// bytes the file still has before anything is allocated.
//
// Contract of the reader: ReadCheckpoint may have inserted some records when it refuses a file.
// The caller loads into a fresh Table and only swaps it in on OK, so a node never runs on half a
// table (LoadNewestCheckpoint does exactly that).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/table.h"
#include "storage/txn.h"

namespace qrstore::storage {

inline constexpr uint32_t kCheckpointFormat = 1;
// Target size of one block of records (the writer's buffer). A record larger than this gets a
// block of its own.
inline constexpr uint32_t kCheckpointBlockBytes = 1u << 20;
// The largest block a reader accepts (block_records x entry bytes), so a file cannot make the
// reader allocate more than this for one block; blocks of a single record are exempt (their size
// is bounded by the file size).
inline constexpr uint64_t kCheckpointMaxBlockBytes = uint64_t{16} << 20;

struct CheckpointMeta {
  uint64_t cluster_id = 0;  // identifies the cluster (caller derives it); another cluster's file is foreign
  uint32_t partition = 0;   // the partition whose records these are
  uint32_t partitions = 1;
  uint64_t batch = 0;  // the state after every batch <= batch (0-based: batch 0 applied => batch = 0)
  std::vector<uint64_t> stream_next;  // per planner stream: the next batch id it will deliver
  uint64_t digest = 0;       // the state digest at `batch` (stored and returned; the caller checks it)
  uint32_t record_size = 0;  // RecordLayout size in bytes
  uint64_t capacity = 0;     // the Table's capacity
  uint64_t records = 0;      // number of records (set by the writer)
  int64_t created_unix_ms = 0;  // set by the caller; informational only (shown as an age), never decides
};

// What the reader expects; a file that differs in any of these is foreign and refused.
struct CheckpointExpect {
  uint64_t cluster_id = 0;
  uint32_t partition = 0;
  uint32_t partitions = 1;
  uint32_t record_size = 0;
  uint64_t capacity = 0;
};

// Source of records: calls emit(key, record) once per record (record_size bytes each), any order.
// Each key must be emitted once (the writer keeps no index; the reader refuses duplicates).
using RecordEmit = std::function<void(Key, const char*)>;
using RecordSource = std::function<void(const RecordEmit& emit)>;

// How fast WriteCheckpoint may write. bytes_per_s > 0: at most that many bytes a second since
// the write began (it sleeps between pieces of the file, each sleep at most one 2 MB piece's
// worth), so that a checkpoint written beside execution takes its CPU and disk share spread
// out, not in one burst; 0: as fast as it goes. Once *hurry is true (if set: e.g. the node is
// stopping) it stops sleeping.
struct WritePace {
  uint64_t bytes_per_s = 0;
  const std::atomic<bool>* hurry = nullptr;
};

// Writes `dir`/checkpoint-<meta.batch>.qrc atomically (temp file in dir, fsync, rename, fsync
// dir; `dir` must exist) with `extra`, an opaque blob (the session table) under its own
// checksum. meta.records is counted by the writer. Then deletes checkpoint files of dir other
// than the one just written and the keep-1 newest others (by batch; keep >= 1), and stale temp
// files; nothing else in dir is touched. The file just written is never deleted, even if dir
// holds files of higher batches. Returns the path. Errors name the path and the errno text; a
// failure to prune is an error too (the new file is then complete and valid). block_bytes is the
// block size target (tests use small blocks). direct_io: written with O_DIRECT (no page cache;
// buffered where the file system refuses it; see OutFile in checkpoint.cc). pace: see WritePace.
Result<std::string> WriteCheckpoint(const std::string& dir, CheckpointMeta meta, const RecordSource& records,
                                    std::string_view extra, int keep,
                                    uint32_t block_bytes = kCheckpointBlockBytes, bool direct_io = true,
                                    const WritePace& pace = WritePace{});

// Reads and validates `path` in full into `table` (empty, of layout size expect.record_size and
// capacity expect.capacity: anything else is a bug, checked) and fills *meta and *extra (either
// may be null; unspecified on error). Every error message starts with "<path>: " and says what is
// wrong: not a checkpoint (bad magic), format version N (this build reads 1), foreign (which
// fields differ, both values), truncated (section and offset), checksum mismatch (which section
// or block), duplicate key, record count differs from the header, trailing bytes. Codes:
// kCorruption for damaged files, kInvalidArgument for intact files this node must not load
// (foreign, other format), kIoError when the OS fails. On error `table` holds a partial image:
// discard it.
Status ReadCheckpoint(const std::string& path, const CheckpointExpect& expect, Table* table, CheckpointMeta* meta,
                      std::string* extra);

// The checkpoint files in dir, newest (highest batch) first, judged by file name only (nothing is
// opened). NotFound if dir does not exist.
Result<std::vector<std::string>> ListCheckpoints(const std::string& dir);

// Tries the files of ListCheckpoints newest first: for each, a fresh Table from make_table() and
// ReadCheckpoint; a file whose header batch differs from its name is refused too. Returns the
// path of the first valid one, with its table moved into *table and *meta / *extra filled.
// Appends one line "<path>: <why>" per refused file to *refused (may be null). NotFound if none
// is valid (the message says how many were refused) or dir does not exist.
Result<std::string> LoadNewestCheckpoint(const std::string& dir, const CheckpointExpect& expect,
                                         const std::function<std::unique_ptr<Table>()>& make_table,
                                         std::unique_ptr<Table>* table, CheckpointMeta* meta, std::string* extra,
                                         std::vector<std::string>* refused);

// "checkpoint-<batch, 20 digits>.qrc" (the file name, without a directory).
std::string CheckpointFileName(uint64_t batch);

}  // namespace qrstore::storage
