#include "storage/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "common/codec.h"
#include "common/file.h"
#include "common/hash.h"

namespace qrstore::storage {
namespace {

constexpr char kMagic[6] = {'Q', 'R', 'C', 'K', 'P', 'T'};
constexpr char kFooterMagic[8] = {'Q', 'R', 'C', 'K', 'E', 'N', 'D', '\0'};
constexpr size_t kHeaderFixedBytes = 78;  // magic through the stream count
constexpr size_t kFooterBytes = 40;
constexpr size_t kBlockOverheadBytes = 12;  // u32 count + u64 checksum
constexpr uint64_t kWritebackChunkBytes = uint64_t{8} << 20;  // WriteBody's write-back as it goes
constexpr uint64_t kHeaderSeed = 0x51524b5048445231ULL;
constexpr uint64_t kBlockSeed = 0x51524b50424c4b31ULL;
constexpr uint64_t kExtraSeed = 0x51524b5045585431ULL;
constexpr uint64_t kFooterSeed = 0x51524b50464f5431ULL;
constexpr std::string_view kNamePrefix = "checkpoint-";
constexpr std::string_view kNameSuffix = ".qrc";
constexpr std::string_view kTmpPrefix = ".checkpoint-";
constexpr std::string_view kTmpSuffix = ".qrc.tmp";
constexpr size_t kBatchDigits = 20;

using file::Errno;
using file::ListDir;
using file::SyncDir;
using file::WriteAll;

// The seed of block `index`'s checksum: a block moved to another position fails its checksum.
uint64_t BlockSeed(uint64_t index) { return kBlockSeed ^ Mix64(index); }

// Folds the section checksums into the footer's chain value.
uint64_t Chain(uint64_t header_sum, uint64_t blocks_chain, uint64_t extra_sum) {
  const uint64_t words[3] = {header_sum, blocks_chain, extra_sum};
  return Hash64(words, sizeof words, kFooterSeed);
}

// Records per block for a target block size: at least one, whatever the record size.
uint64_t BlockRecords(uint64_t block_bytes, uint32_t record_size) {
  const uint64_t entry = 8 + uint64_t{record_size};
  const uint64_t avail = block_bytes > kBlockOverheadBytes ? block_bytes - kBlockOverheadBytes : 0;
  return std::max<uint64_t>(1, avail / entry);
}

std::string JoinPath(const std::string& dir, std::string_view name) {
  std::string p = dir;
  if (!p.empty() && p.back() != '/') p += '/';
  p.append(name);
  return p;
}

// Parses "checkpoint-<20 digits>.qrc" into its batch; false for any other name.
bool ParseName(std::string_view name, uint64_t* batch) {
  if (name.size() != kNamePrefix.size() + kBatchDigits + kNameSuffix.size()) return false;
  if (!name.starts_with(kNamePrefix) || !name.ends_with(kNameSuffix)) return false;
  uint64_t v = 0;
  for (char c : name.substr(kNamePrefix.size(), kBatchDigits)) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;  // 20 digits can exceed 2^64
    v = v * 10 + d;
  }
  *batch = v;
  return true;
}

bool IsTempName(std::string_view name) { return name.starts_with(kTmpPrefix) && name.ends_with(kTmpSuffix); }

std::string EncodeHeader(const CheckpointMeta& m, uint64_t block_records) {
  Writer w(kHeaderFixedBytes + 8 * m.stream_next.size() + 8);
  w.PutRaw(kMagic, sizeof kMagic);
  w.PutU32(kCheckpointFormat);
  w.PutU64(m.cluster_id);
  w.PutU32(m.partition);
  w.PutU32(m.partitions);
  w.PutU64(m.batch);
  w.PutU64(m.digest);
  w.PutU32(m.record_size);
  w.PutU64(m.capacity);
  w.PutU64(m.records);
  w.PutI64(m.created_unix_ms);
  w.PutU32(static_cast<uint32_t>(block_records));
  w.PutU32(static_cast<uint32_t>(m.stream_next.size()));
  for (uint64_t s : m.stream_next) w.PutU64(s);
  w.PutU64(BulkHash64(w.data().data(), w.size(), kHeaderSeed));
  return w.Release();
}

// Reads a file front to back. Every read is checked against the file size first, so a length
// taken from the file never sizes a buffer beyond what the file holds, and a short file is
// reported as truncated in the section being read.
class FileReader {
 public:
  explicit FileReader(std::string path) : path_(std::move(path)) {}
  ~FileReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  Status Open() {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return Errno(path_ + ": open");
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Errno(path_ + ": stat");
    size_ = static_cast<uint64_t>(st.st_size);
    return Status::Ok();
  }
  uint64_t offset() const { return offset_; }
  uint64_t remaining() const { return size_ - offset_; }

  Status Truncated(std::string_view what, uint64_t need) const {
    return Status::Corruption(path_ + ": truncated in " + std::string(what) + " at offset " +
                              std::to_string(offset_) + " (needs " + std::to_string(need) + " bytes, " +
                              std::to_string(remaining()) + " left in the file)");
  }
  Status Read(void* dst, uint64_t n, std::string_view what) {
    if (n > remaining()) return Truncated(what, n);
    char* p = static_cast<char*>(dst);
    uint64_t done = 0;
    while (done < n) {
      const ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset_ + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return Errno(path_ + ": read at offset " + std::to_string(offset_ + done));
      }
      if (r == 0) return Truncated(what, n);  // the file shrank under us
      done += static_cast<uint64_t>(r);
    }
    offset_ += n;
    return Status::Ok();
  }
  Status ReadU32(uint32_t* v, std::string_view what) { return Read(v, sizeof *v, what); }
  Status ReadU64(uint64_t* v, std::string_view what) { return Read(v, sizeof *v, what); }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t offset_ = 0;
};

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

// Removes stale temp files and the checkpoint files beyond the keep-1 newest besides `written`.
Status Prune(const std::string& dir, const std::string& written, int keep) {
  Result<std::vector<std::string>> names = ListDir(dir);
  if (!names.ok()) return names.status();
  std::vector<std::pair<uint64_t, std::string>> others;
  std::vector<std::string> doomed;
  for (const std::string& n : names.value()) {
    uint64_t batch;
    if (IsTempName(n)) {
      doomed.push_back(JoinPath(dir, n));
    } else if (ParseName(n, &batch) && JoinPath(dir, n) != written) {
      others.emplace_back(batch, JoinPath(dir, n));
    }
  }
  std::sort(others.begin(), others.end(), std::greater<>());
  for (size_t i = static_cast<size_t>(keep - 1); i < others.size(); ++i) doomed.push_back(others[i].second);
  // No directory fsync after the unlinks: a deleted file that reappears after a crash is an old
  // valid checkpoint, pruned again next time.
  for (const std::string& p : doomed) {
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) return Errno("checkpoint " + written + " written; remove " + p);
  }
  return Status::Ok();
}

// The file's bytes in order (Reserve + Commit, or Append), the header patched last (Finish),
// then fsync. Every byte goes through one staging buffer, which the caller may fill in place
// (Reserve): the writer builds each block of records there, so a record is copied once on its
// way to the file.
//
// Buffered (the page cache): the stage is written out whenever the next reservation does not fit,
// with write-back as it goes, in chunks: without it the whole file would sit dirty in the page cache
// until the final fsync, whose burst (several nodes at one batch on one disk) would stall the raft log's
// per-batch fdatasync behind it. At most two chunks are dirty at a time. Advisory: an error there
// is not the file's (the final fsync reports those).
//
// Direct (O_DIRECT): the stage is block-aligned and written in whole 4 KB blocks at aligned
// offsets (what is left of a block moves to the front of the stage); the last piece is padded to
// a whole block and the file cut to its length at the end. The first block is kept aside so that
// the header can be patched into it. No page cache: on virtual hosts the kernel's copy into
// fresh page cache pages can cost more CPU than the rest of the write
// (docs/benchmarks-log.md), and nothing dirty is left to hold the raft log's fdatasync back. A
// file system that refuses O_DIRECT (at open, or at the first write) gets the same staged writes,
// buffered.
class OutFile {
 public:
  static constexpr size_t kAlign = 4096;
  static constexpr size_t kStageBytes = size_t{2} << 20;

  OutFile(int fd, std::string path, bool direct, const WritePace& pace)
      : fd_(fd), path_(std::move(path)), direct_(direct), pace_(pace), start_ns_(NowNanos()) {
    Grow(kStageBytes);
    if (direct_) {
      head_.reset(static_cast<char*>(std::aligned_alloc(kAlign, kAlign)));
      QR_CHECK(head_, "checkpoint: cannot allocate the staging buffer");
    }
  }

  // *p: room for n bytes in the stage, valid until the next Reserve or Append; Commit says how
  // many of them were filled.
  Status Reserve(size_t n, char** p) {
    if (fill_ + n > cap_) {
      QR_RETURN_IF_ERROR(Drain());
      if (fill_ + n > cap_) Grow(fill_ + n);  // one block larger than the stage (a huge record)
    }
    *p = stage_.get() + fill_;
    return Status::Ok();
  }
  void Commit(size_t n) {
    QR_CHECK(fill_ + n <= cap_);
    fill_ += n;
  }
  Status Append(const void* data, size_t n) {
    char* p = nullptr;
    QR_RETURN_IF_ERROR(Reserve(n, &p));
    std::memcpy(p, data, n);
    Commit(n);
    return Status::Ok();
  }

  // `header` replaces the file's first header.size() bytes (written by Append as a placeholder).
  Status Finish(const std::string& header) {
    if (!direct_) {
      QR_RETURN_IF_ERROR(Drain());
      QR_RETURN_IF_ERROR(PWriteAt(header.data(), header.size(), 0));
    } else {
      QR_CHECK(header.size() <= kAlign, "checkpoint header of %zu bytes", header.size());
      const uint64_t length = written_ + fill_;
      if (fill_ > 0) {  // the last piece, padded to a whole block
        const size_t padded = (fill_ + kAlign - 1) / kAlign * kAlign;
        std::memset(stage_.get() + fill_, 0, padded - fill_);  // within cap_: a multiple of kAlign
        fill_ = padded;
        QR_RETURN_IF_ERROR(Drain());
      }
      // The first block again, with the header patched in (the file is never shorter than it).
      QR_CHECK(written_ >= kAlign);
      std::memcpy(head_.get(), header.data(), header.size());
      QR_RETURN_IF_ERROR(PWriteAt(head_.get(), kAlign, 0));
      if (::ftruncate(fd_, static_cast<off_t>(length)) != 0) return Errno("truncate " + path_);
    }
    // The rename must not become visible before the bytes are durable.
    if (::fsync(fd_) != 0) return Errno("fsync " + path_);
    return Status::Ok();
  }

 private:
  struct FreeDeleter {
    void operator()(char* p) const { std::free(p); }
  };

  // A stage of at least n bytes (a multiple of kAlign), keeping what it holds.
  void Grow(size_t n) {
    const size_t cap = (n + kAlign - 1) / kAlign * kAlign;
    std::unique_ptr<char, FreeDeleter> s(static_cast<char*>(std::aligned_alloc(kAlign, cap)));
    QR_CHECK(s, "checkpoint: cannot allocate a staging buffer of %zu bytes", cap);
    if (fill_ > 0) std::memcpy(s.get(), stage_.get(), fill_);
    stage_ = std::move(s);
    cap_ = cap;
  }

  // Writes out what the stage holds (direct: its whole blocks; the rest moves to the front).
  Status Drain() {
    if (!direct_) {
      QR_RETURN_IF_ERROR(WriteAll(fd_, stage_.get(), fill_, path_));
      offset_ += fill_;
      fill_ = 0;
      Writeback();
      Pace(offset_);
      return Status::Ok();
    }
    const size_t whole = fill_ / kAlign * kAlign;
    if (whole == 0) return Status::Ok();
    if (written_ == 0) std::memcpy(head_.get(), stage_.get(), kAlign);  // the header is patched into it at Finish
    QR_RETURN_IF_ERROR(PWriteAt(stage_.get(), whole, written_));
    written_ += whole;
    fill_ -= whole;
    if (fill_ > 0) std::memmove(stage_.get(), stage_.get() + whole, fill_);
    Pace(written_);
    return Status::Ok();
  }

  // Paced: sleeps until `bytes` written since the start fit the rate (each sleep at most a
  // piece's worth: a stage of 2 MB at the rate), unless told to hurry.
  void Pace(uint64_t bytes) const {
    if (pace_.bytes_per_s == 0 || (pace_.hurry != nullptr && pace_.hurry->load(std::memory_order_relaxed))) return;
    const int64_t due_ns =
        static_cast<int64_t>(static_cast<double>(bytes) * 1e9 / static_cast<double>(pace_.bytes_per_s));
    const int64_t ahead_ns = start_ns_ + due_ns - NowNanos();
    if (ahead_ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(ahead_ns));
  }

  // Buffered: start write-back of the last chunk, wait for the one before (see above).
  void Writeback() {
    if (offset_ - synced_ < kWritebackChunkBytes) return;
    (void)::sync_file_range(fd_, static_cast<off_t>(synced_), static_cast<off_t>(offset_ - synced_),
                            SYNC_FILE_RANGE_WRITE);
    if (synced_ > waited_) {
      (void)::sync_file_range(fd_, static_cast<off_t>(waited_), static_cast<off_t>(synced_ - waited_),
                              SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
      waited_ = synced_;
    }
    synced_ = offset_;
  }

  // Writes n bytes at offset (direct: both aligned; a write refused for O_DIRECT switches the
  // file to buffered writes, once).
  Status PWriteAt(const char* p, size_t n, uint64_t offset) {
    size_t done = 0;
    while (done < n) {
      const ssize_t w = ::pwrite(fd_, p + done, n - done, static_cast<off_t>(offset + done));
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EINVAL && !tried_buffered_) {
          // The file system took O_DIRECT at open but not this write: buffered from here on.
          tried_buffered_ = true;
          const int flags = ::fcntl(fd_, F_GETFL);
          if (flags >= 0 && ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) == 0) continue;
        }
        return Errno("write " + path_);
      }
      if (w == 0) return Status::IoError("write " + path_ + ": no progress");
      done += static_cast<size_t>(w);
    }
    return Status::Ok();
  }

  const int fd_;
  const std::string path_;
  const bool direct_;
  const WritePace pace_;
  const int64_t start_ns_;
  std::unique_ptr<char, FreeDeleter> stage_, head_;
  size_t cap_ = 0;
  size_t fill_ = 0;  // bytes in the stage, not yet written
  // buffered: bytes written, started write-back up to, waited for up to
  uint64_t offset_ = 0, synced_ = 0, waited_ = 0;
  // direct: bytes written (whole blocks); the stage holds the next fill_
  uint64_t written_ = 0;
  bool tried_buffered_ = false;
};

// Writes the file body to `out` (header patched last, once the record count is known) and syncs it.
Status WriteBody(OutFile& out, const std::string& tmp, CheckpointMeta* meta, const RecordSource& records,
                 std::string_view extra, uint64_t block_records) {
  const uint64_t entry = 8 + uint64_t{meta->record_size};
  // Placeholder header of the final size; rewritten with the record count at the end.
  std::string header = EncodeHeader(*meta, block_records);
  QR_RETURN_IF_ERROR(out.Append(header.data(), header.size()));

  // Each block is built in place in the file's stage (see OutFile).
  const size_t max_block = static_cast<size_t>(block_records * entry + kBlockOverheadBytes);
  char* block = nullptr;
  size_t fill = 0;  // bytes of `block` so far
  uint64_t count = 0, blocks = 0, total = 0, blocks_chain = 0;
  Status st;
  auto flush = [&]() {
    const uint32_t c = static_cast<uint32_t>(count);
    std::memcpy(block, &c, sizeof c);
    const uint64_t sum = BulkHash64(block, fill, BlockSeed(blocks));
    std::memcpy(block + fill, &sum, sizeof sum);
    out.Commit(fill + sizeof sum);
    blocks_chain = Hash64(&sum, sizeof sum, blocks_chain);
    ++blocks;
    count = 0;
  };
  const uint32_t record_size = meta->record_size;
  const RecordEmit emit = [&](Key key, const char* rec) {
    if (!st.ok()) return;  // a write failed: let the source finish, report afterwards
    if (count == 0) {
      st = out.Reserve(max_block, &block);
      if (!st.ok()) return;
      fill = 4;  // the count, patched by flush
    }
    std::memcpy(block + fill, &key, sizeof key);
    std::memcpy(block + fill + sizeof key, rec, record_size);
    fill += entry;
    ++total;
    if (++count == block_records) flush();
  };
  records(emit);
  if (st.ok() && count > 0) flush();
  QR_RETURN_IF_ERROR(st);
  if (total > meta->capacity) {
    return Status::InvalidArgument(tmp + ": the source emitted " + std::to_string(total) +
                                   " records, more than the capacity " + std::to_string(meta->capacity));
  }

  const uint32_t end_marker = 0;
  const uint64_t extra_len = extra.size();
  const uint64_t extra_sum = BulkHash64(extra.data(), extra.size(), kExtraSeed);
  QR_RETURN_IF_ERROR(out.Append(&end_marker, sizeof end_marker));
  QR_RETURN_IF_ERROR(out.Append(&extra_len, sizeof extra_len));
  QR_RETURN_IF_ERROR(out.Append(extra.data(), extra.size()));
  QR_RETURN_IF_ERROR(out.Append(&extra_sum, sizeof extra_sum));

  meta->records = total;
  header = EncodeHeader(*meta, block_records);
  uint64_t header_sum;
  std::memcpy(&header_sum, header.data() + header.size() - 8, 8);
  Writer footer(kFooterBytes);
  footer.PutRaw(kFooterMagic, sizeof kFooterMagic);
  footer.PutU64(total);
  footer.PutU64(blocks);
  footer.PutU64(Chain(header_sum, blocks_chain, extra_sum));
  footer.PutU64(Hash64(footer.data().data(), footer.size(), kFooterSeed));
  QR_RETURN_IF_ERROR(out.Append(footer.data().data(), footer.size()));
  return out.Finish(header);
}

}  // namespace

std::string CheckpointFileName(uint64_t batch) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "checkpoint-%020" PRIu64 ".qrc", batch);
  return buf;
}

Result<std::string> WriteCheckpoint(const std::string& dir, CheckpointMeta meta, const RecordSource& records,
                                    std::string_view extra, int keep, uint32_t block_bytes, bool direct_io,
                                    const WritePace& pace) {
  if (keep < 1) return Status::InvalidArgument("checkpoint keep must be >= 1, got " + std::to_string(keep));
  if (meta.record_size == 0) return Status::InvalidArgument("checkpoint record_size must be > 0");
  if (meta.stream_next.size() > UINT32_MAX) return Status::InvalidArgument("checkpoint: too many streams");
  if (block_bytes > kCheckpointMaxBlockBytes) {
    return Status::InvalidArgument("checkpoint block_bytes " + std::to_string(block_bytes) + " exceeds " +
                                   std::to_string(kCheckpointMaxBlockBytes));
  }
  const uint64_t block_records = BlockRecords(block_bytes, meta.record_size);
  const std::string name = CheckpointFileName(meta.batch);
  const std::string path = JoinPath(dir, name);
  const std::string tmp = JoinPath(dir, std::string(kTmpPrefix) + name.substr(kNamePrefix.size()) + ".tmp");

  const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  int fd = direct_io ? ::open(tmp.c_str(), flags | O_DIRECT, 0644) : -1;
  const bool direct = fd >= 0;
  if (fd < 0 && (!direct_io || errno == EINVAL)) fd = ::open(tmp.c_str(), flags, 0644);  // tmpfs: no O_DIRECT
  if (fd < 0) return Errno("create " + tmp);
  Status st;
  {
    OutFile out(fd, tmp, direct, pace);
    st = WriteBody(out, tmp, &meta, records, extra, block_records);
  }
  if (::close(fd) != 0 && st.ok()) st = Errno("close " + tmp);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = Errno("rename " + tmp + " to " + path);
  if (!st.ok()) {
    ::unlink(tmp.c_str());  // best effort; Prune removes it next time otherwise
    return st;
  }
  QR_RETURN_IF_ERROR(SyncDir(dir));
  QR_RETURN_IF_ERROR(Prune(dir, path, keep));
  return path;
}

namespace {

// The header: magic and format version, the fixed fields, the stream table and its checksum.
// Sets *m, *block_records32 and *header_sum.
Status ReadHeader(FileReader& f, const std::string& path, CheckpointMeta* out, uint32_t* block_records32,
                  uint64_t* header_sum_out) {
  // Magic and version first: a later format may lay out the rest differently.
  std::string head(kHeaderFixedBytes, '\0');
  QR_RETURN_IF_ERROR(f.Read(head.data(), sizeof kMagic, "magic"));
  if (std::memcmp(head.data(), kMagic, sizeof kMagic) != 0) {
    return Status::Corruption(path + ": not a checkpoint (bad magic)");
  }
  uint32_t format;
  QR_RETURN_IF_ERROR(f.ReadU32(&format, "format version"));
  if (format != kCheckpointFormat) {
    return Status::InvalidArgument(path + ": format version " + std::to_string(format) + " (this build reads " +
                                   std::to_string(kCheckpointFormat) + ")");
  }
  std::memcpy(head.data() + sizeof kMagic, &format, sizeof format);
  QR_RETURN_IF_ERROR(f.Read(head.data() + 10, kHeaderFixedBytes - 10, "header"));
  CheckpointMeta& m = *out;
  uint32_t streams = 0;
  Reader r(std::string_view(head).substr(10));
  r.GetU64(&m.cluster_id);
  r.GetU32(&m.partition);
  r.GetU32(&m.partitions);
  r.GetU64(&m.batch);
  r.GetU64(&m.digest);
  r.GetU32(&m.record_size);
  r.GetU64(&m.capacity);
  r.GetU64(&m.records);
  r.GetI64(&m.created_unix_ms);
  r.GetU32(block_records32);
  r.GetU32(&streams);
  QR_CHECK(r.ok() && r.done(), "header layout and kHeaderFixedBytes disagree");
  // The stream table's length comes from the file: check it fits before allocating.
  const uint64_t rest = uint64_t{streams} * 8 + 8;
  if (rest > f.remaining()) return f.Truncated("header stream table", rest);
  head.resize(kHeaderFixedBytes + rest);
  QR_RETURN_IF_ERROR(f.Read(head.data() + kHeaderFixedBytes, rest, "header stream table"));
  m.stream_next.resize(streams);
  if (streams > 0) std::memcpy(m.stream_next.data(), head.data() + kHeaderFixedBytes, uint64_t{streams} * 8);
  uint64_t& header_sum = *header_sum_out;
  std::memcpy(&header_sum, head.data() + head.size() - 8, 8);
  if (header_sum != BulkHash64(head.data(), head.size() - 8, kHeaderSeed)) {
    return Status::Corruption(path + ": header checksum mismatch");
  }

  return Status::Ok();
}

// The header's identity against what the caller expects (a foreign checkpoint names every field
// that differs), then its block size and record count against its own limits.
Status CheckHeader(const std::string& path, const CheckpointMeta& m, const CheckpointExpect& expect,
                   uint64_t block_records) {
  std::string foreign;
  auto differs = [&](const char* field, uint64_t file, uint64_t want, bool hex) {
    if (file == want) return;
    foreign += std::string(foreign.empty() ? "" : "; ") + field + " " + (hex ? Hex(file) : std::to_string(file)) +
               " in the file, expected " + (hex ? Hex(want) : std::to_string(want));
  };
  differs("cluster id", m.cluster_id, expect.cluster_id, true);
  differs("partition", m.partition, expect.partition, false);
  differs("partitions", m.partitions, expect.partitions, false);
  differs("record size", m.record_size, expect.record_size, false);
  differs("capacity", m.capacity, expect.capacity, false);
  if (!foreign.empty()) return Status::InvalidArgument(path + ": foreign checkpoint: " + foreign);

  const uint64_t entry = 8 + uint64_t{m.record_size};
  if (block_records == 0 || (block_records > 1 && block_records * entry > kCheckpointMaxBlockBytes)) {
    return Status::Corruption(path + ": header block size of " + std::to_string(block_records) +
                              " records is not accepted");
  }
  if (m.records > m.capacity) {
    return Status::Corruption(path + ": header says " + std::to_string(m.records) + " records, capacity is " +
                              std::to_string(m.capacity));
  }

  return Status::Ok();
}

// The record blocks up to the end marker, each checked against its checksum and inserted into
// `table`. Sets *total (records), *blocks and *blocks_chain (the chain of block checksums).
Status ReadBlocks(FileReader& f, const std::string& path, const CheckpointMeta& m, uint64_t block_records,
                  Table* table, uint64_t* total_out, uint64_t* blocks_out, uint64_t* blocks_chain_out) {
  const uint64_t entry = 8 + uint64_t{m.record_size};
  // Blocks: each holds >= 1 record and the total is capped by the header, so this loop ends.
  std::string block;
  uint64_t& total = *total_out;
  uint64_t& blocks = *blocks_out;
  uint64_t& blocks_chain = *blocks_chain_out;
  total = blocks = blocks_chain = 0;
  for (;; ++blocks) {
    const std::string what = "block " + std::to_string(blocks);
    const uint64_t block_offset = f.offset();
    uint32_t count;
    QR_RETURN_IF_ERROR(f.ReadU32(&count, what));
    if (count == 0) break;  // the end marker
    if (count > block_records || count > m.records - total) {
      return Status::Corruption(path + ": " + what + " at offset " + std::to_string(block_offset) + " holds " +
                                std::to_string(count) + " records: more than the block size " +
                                std::to_string(block_records) + " or the header's count " +
                                std::to_string(m.records) + " allows");
    }
    const uint64_t bytes = count * entry + 8;
    if (bytes > f.remaining()) return f.Truncated(what, bytes);
    block.resize(4 + bytes);
    std::memcpy(block.data(), &count, sizeof count);
    QR_RETURN_IF_ERROR(f.Read(block.data() + 4, bytes, what));
    uint64_t sum;
    std::memcpy(&sum, block.data() + block.size() - 8, 8);
    if (sum != BulkHash64(block.data(), block.size() - 8, BlockSeed(blocks))) {
      return Status::Corruption(path + ": checksum mismatch in " + what + " at offset " +
                                std::to_string(block_offset));
    }
    blocks_chain = Hash64(&sum, sizeof sum, blocks_chain);
    for (uint64_t i = 0; i < count; ++i) {
      const char* e = block.data() + 4 + i * entry;
      Key key;
      std::memcpy(&key, e, sizeof key);
      if (table->Find(key) != nullptr) {
        return Status::Corruption(path + ": duplicate key " + std::to_string(key) + " in " + what);
      }
      Status ins = table->Insert(key, e + 8);
      if (!ins.ok()) {
        return Status::Corruption(path + ": " + what + ": key " + std::to_string(key) + ": " + ins.message());
      }
    }
    total += count;
  }
  if (total != m.records) {
    return Status::Corruption(path + ": record count differs: the blocks hold " + std::to_string(total) +
                              ", the header says " + std::to_string(m.records));
  }

  return Status::Ok();
}

// The extra blob and its checksum, then the footer: its counts and chain must match what was
// read, and nothing may follow it.
Status ReadExtraAndFooter(FileReader& f, const std::string& path, uint64_t header_sum, uint64_t total,
                          uint64_t blocks, uint64_t blocks_chain, std::string* blob_out) {
  uint64_t extra_len;
  QR_RETURN_IF_ERROR(f.ReadU64(&extra_len, "extra length"));
  const std::string extra_what = "extra (length " + std::to_string(extra_len) + ")";
  if (extra_len > f.remaining()) return f.Truncated(extra_what, extra_len);  // before allocating
  std::string& blob = *blob_out;
  blob.assign(extra_len, '\0');
  QR_RETURN_IF_ERROR(f.Read(blob.data(), extra_len, extra_what));
  uint64_t extra_sum;
  QR_RETURN_IF_ERROR(f.ReadU64(&extra_sum, "extra checksum"));
  if (extra_sum != BulkHash64(blob.data(), blob.size(), kExtraSeed)) {
    return Status::Corruption(path + ": checksum mismatch in extra");
  }

  char footer[kFooterBytes];
  QR_RETURN_IF_ERROR(f.Read(footer, kFooterBytes, "footer"));
  uint64_t f_records, f_blocks, f_chain, f_sum;
  std::memcpy(&f_records, footer + 8, 8);
  std::memcpy(&f_blocks, footer + 16, 8);
  std::memcpy(&f_chain, footer + 24, 8);
  std::memcpy(&f_sum, footer + 32, 8);
  if (std::memcmp(footer, kFooterMagic, sizeof kFooterMagic) != 0 || f_sum != Hash64(footer, 32, kFooterSeed)) {
    return Status::Corruption(path + ": checksum mismatch in footer");
  }
  if (f_records != total || f_blocks != blocks) {
    return Status::Corruption(path + ": footer says " + std::to_string(f_records) + " records in " +
                              std::to_string(f_blocks) + " blocks, the file holds " + std::to_string(total) +
                              " in " + std::to_string(blocks));
  }
  if (f_chain != Chain(header_sum, blocks_chain, extra_sum)) {
    return Status::Corruption(path + ": checksum mismatch in footer chain (sections from different files)");
  }
  if (f.remaining() != 0) {
    return Status::Corruption(path + ": " + std::to_string(f.remaining()) +
                              " trailing bytes after the footer at offset " + std::to_string(f.offset()));
  }
  return Status::Ok();
}

}  // namespace

Status ReadCheckpoint(const std::string& path, const CheckpointExpect& expect, Table* table, CheckpointMeta* meta,
                      std::string* extra) {
  QR_CHECK(table->size() == 0, "ReadCheckpoint needs an empty table (has %llu records)",
           static_cast<unsigned long long>(table->size()));
  QR_CHECK_EQ(table->layout().size(), expect.record_size);
  QR_CHECK_EQ(table->capacity(), expect.capacity);
  FileReader f(path);
  QR_RETURN_IF_ERROR(f.Open());

  CheckpointMeta m;
  uint32_t block_records32 = 0;
  uint64_t header_sum = 0;
  QR_RETURN_IF_ERROR(ReadHeader(f, path, &m, &block_records32, &header_sum));
  const uint64_t block_records = block_records32;
  QR_RETURN_IF_ERROR(CheckHeader(path, m, expect, block_records));
  uint64_t total = 0, blocks = 0, blocks_chain = 0;
  QR_RETURN_IF_ERROR(ReadBlocks(f, path, m, block_records, table, &total, &blocks, &blocks_chain));
  std::string blob;
  QR_RETURN_IF_ERROR(ReadExtraAndFooter(f, path, header_sum, total, blocks, blocks_chain, &blob));
  if (meta != nullptr) *meta = std::move(m);
  if (extra != nullptr) *extra = std::move(blob);
  return Status::Ok();
}

Result<std::vector<std::string>> ListCheckpoints(const std::string& dir) {
  Result<std::vector<std::string>> names = ListDir(dir);
  if (!names.ok()) return names.status();
  std::vector<std::pair<uint64_t, std::string>> found;
  for (const std::string& n : names.value()) {
    uint64_t batch;
    if (ParseName(n, &batch)) found.emplace_back(batch, JoinPath(dir, n));
  }
  std::sort(found.begin(), found.end(), std::greater<>());
  std::vector<std::string> paths;
  paths.reserve(found.size());
  for (auto& [batch, p] : found) paths.push_back(std::move(p));
  return paths;
}

Result<std::string> LoadNewestCheckpoint(const std::string& dir, const CheckpointExpect& expect,
                                         const std::function<std::unique_ptr<Table>()>& make_table,
                                         std::unique_ptr<Table>* table, CheckpointMeta* meta, std::string* extra,
                                         std::vector<std::string>* refused) {
  Result<std::vector<std::string>> paths = ListCheckpoints(dir);
  if (!paths.ok()) return paths.status();
  size_t refusals = 0;
  for (const std::string& p : paths.value()) {
    std::unique_ptr<Table> t = make_table();
    CheckpointMeta m;
    std::string x;
    Status st = ReadCheckpoint(p, expect, t.get(), &m, &x);
    uint64_t name_batch = 0;
    const size_t slash = p.rfind('/');
    if (st.ok() && ParseName(std::string_view(p).substr(slash == std::string::npos ? 0 : slash + 1), &name_batch) &&
        name_batch != m.batch) {
      st = Status::Corruption(p + ": the header says batch " + std::to_string(m.batch) + ", the file name " +
                              std::to_string(name_batch));
    }
    if (st.ok()) {
      *table = std::move(t);
      if (meta != nullptr) *meta = std::move(m);
      if (extra != nullptr) *extra = std::move(x);
      return p;
    }
    ++refusals;
    if (refused != nullptr) refused->push_back(st.message());
  }
  return Status::NotFound("no valid checkpoint in " + dir + " (" + std::to_string(refusals) + " refused)");
}

}  // namespace qrstore::storage
