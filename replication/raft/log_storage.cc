#include "replication/raft/log_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/file.h"
#include "common/hash.h"
#include "common/logging.h"

namespace qrstore::replication::raft {
namespace fs = std::filesystem;

Result<FsyncPolicy> ParseFsyncPolicy(const std::string& name) {
  if (name == "always") return FsyncPolicy::kAlways;
  if (name == "batch") return FsyncPolicy::kBatch;
  if (name == "never") return FsyncPolicy::kNever;
  return Status::InvalidArgument("fsync policy '" + name + "' is not one of always|batch|never");
}

const char* FsyncPolicyName(FsyncPolicy policy) {
  switch (policy) {
    case FsyncPolicy::kAlways: return "always";
    case FsyncPolicy::kBatch: return "batch";
    case FsyncPolicy::kNever: return "never";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// MemoryLogStorage

PersistentState MemoryLogStorage::Recovered() const {
  PersistentState st;
  st.hard = hard_;
  if (retain_entries_) {
    st.entries = entries_;
    st.first_index = first_index_;
    st.prev_term = prev_term_;
  }
  return st;
}

Status MemoryLogStorage::Append(const std::vector<Entry>& entries) {
  if (entries.empty()) return Status::Ok();
  const Index first = entries.front().index;
  if (first > last_index_ + 1 || first < first_index_) {
    return Status::Internal("memory log: append at " + std::to_string(first) + " outside [" +
                            std::to_string(first_index_) + ", " + std::to_string(last_index_ + 1) + "]");
  }
  if (retain_entries_) {
    entries_.resize(first - first_index_);  // truncates a conflicting suffix
    entries_.insert(entries_.end(), entries.begin(), entries.end());
  }
  last_index_ = entries.back().index;
  return Status::Ok();
}

Status MemoryLogStorage::SaveHardState(const HardState& hard) {
  hard_ = hard;
  return Status::Ok();
}

Status MemoryLogStorage::Sync() {
  ++syncs_;
  return Status::Ok();
}

Status MemoryLogStorage::ResetTo(Index index, Term term) {
  entries_.clear();
  first_index_ = index + 1;
  last_index_ = index;
  prev_term_ = term;
  return Status::Ok();
}

Status MemoryLogStorage::Compact(Index upto) {
  // Keep at least the last entry (its term is the log's last term).
  upto = std::min(upto, last_index_ > 0 ? last_index_ - 1 : 0);
  if (upto < first_index_) return Status::Ok();
  if (retain_entries_) {
    prev_term_ = entries_[upto - first_index_].term;
    entries_.erase(entries_.begin(), entries_.begin() + static_cast<ptrdiff_t>(upto - first_index_ + 1));
  }
  first_index_ = upto + 1;
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// DiskLogStorage: file formats

namespace {

constexpr uint32_t kSegmentMagic = 0x47535251;    // "QRSG"
constexpr uint32_t kHardStateMagic = 0x53485251;  // "QRHS"
constexpr uint32_t kFormatVersion = 2;  // 2: record checksums use the 8-lane BulkHash64
constexpr size_t kSegmentHeaderBytes = 32;  // magic, version, first_index, prev_term, checksum
constexpr size_t kRecordHeaderBytes = 28;   // length, checksum, term, index
constexpr size_t kHardStateBytes = 36;      // magic, version, term, voted_for, commit, checksum
constexpr uint64_t kRecordSeed = 0x7265636f72643031ULL;
// Direct I/O's unit: offsets, lengths and buffer addresses are multiples of it (4 KB covers
// every logical block size Linux file systems use here).
constexpr uint64_t kBlock = 4096;
uint64_t RoundUp(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

template <typename T>
void Put(char* out, size_t* pos, T v) {
  std::memcpy(out + *pos, &v, sizeof v);
  *pos += sizeof v;
}
template <typename T>
T Get(const char* in, size_t* pos) {
  T v;
  std::memcpy(&v, in + *pos, sizeof v);
  *pos += sizeof v;
  return v;
}

std::string SegmentName(Index first_index) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "seg-%020llu.log", static_cast<unsigned long long>(first_index));
  return buf;
}

using file::Errno;

// Writes all iovecs at `offset`, continuing after short writes.
Status WriteAll(int fd, std::vector<iovec>& iov, uint64_t offset, const std::string& path) {
  size_t i = 0;
  while (i < iov.size()) {
    const int n = static_cast<int>(std::min<size_t>(iov.size() - i, 512));
    const ssize_t w = ::pwritev(fd, &iov[i], n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno("write " + path);
    }
    offset += static_cast<uint64_t>(w);
    size_t left = static_cast<size_t>(w);
    while (i < iov.size() && left >= iov[i].iov_len) {
      left -= iov[i].iov_len;
      ++i;
    }
    if (left > 0) {  // partial iovec
      iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + left;
      iov[i].iov_len -= left;
    }
  }
  return Status::Ok();
}

// Writes the bytes of `iov` at `offset` through `stage` (a reused buffer of its capacity): the
// payloads are copied there and written a buffer at a time: the kernel's copy from a payload's
// freshly allocated pages costs far more CPU than a user-space copy into a buffer whose pages
// are already mapped plus the write from there, and that copy would otherwise be most of a
// durable raft thread's time (docs/benchmarks-log.md, "The raft log written through a reused
// buffer").
//
// Direct I/O (`direct`): `offset` is a block boundary, `prefix` the bytes already in the file from
// there (the segment's last partial block), written again first; the last block is padded with
// zeros, and `*tail` gets the bytes after the last block boundary written.
Status WriteStaged(int fd, const std::vector<iovec>& iov, uint64_t offset, const std::string& path, char* stage,
                   size_t cap, bool direct, const std::string& prefix, std::string* tail) {
  size_t used = prefix.size();
  std::memcpy(stage, prefix.data(), used);
  auto flush = [&](size_t bytes) -> Status {
    std::vector<iovec> one{{stage, bytes}};
    QR_RETURN_IF_ERROR(WriteAll(fd, one, offset, path));
    offset += bytes;
    used = 0;
    return Status::Ok();
  };
  for (const iovec& v : iov) {
    const char* p = static_cast<const char*>(v.iov_base);
    size_t left = v.iov_len;
    while (left > 0) {
      const size_t n = std::min(left, cap - used);
      std::memcpy(stage + used, p, n);
      used += n;
      p += n;
      left -= n;
      if (used == cap) QR_RETURN_IF_ERROR(flush(used));
    }
  }
  if (!direct) return used > 0 ? flush(used) : Status::Ok();
  const size_t whole = used / kBlock * kBlock;
  const size_t last = used;
  if (used > 0) {
    const size_t padded = static_cast<size_t>(RoundUp(used));
    std::memset(stage + used, 0, padded - used);
    QR_RETURN_IF_ERROR(flush(padded));
  }
  tail->assign(stage + whole, last - whole);
  return Status::Ok();
}

Result<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open " + path);
  std::string out;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = Errno("read " + path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace

uint64_t SegmentRecordChecksum(Term term, Index index, std::string_view data) {
  return BulkHash64(data, kRecordSeed ^ Mix64(term) ^ Mix64(index * 0x9e3779b97f4a7c15ULL));
}

// ---------------------------------------------------------------------------------------------
// DiskLogStorage

void DiskLogStorage::FreeDeleter::operator()(char* p) const { std::free(p); }

DiskLogStorage::DiskLogStorage(DiskLogOptions options) : options_(std::move(options)) {
  stage_cap_ = RoundUp(std::max<uint64_t>(options_.write_buffer_bytes, kBlock));
  stage_.reset(static_cast<char*>(std::aligned_alloc(kBlock, stage_cap_)));
  QR_CHECK(stage_ != nullptr, "raft log: no memory for a %zu-byte staging buffer", stage_cap_);
  direct_ = options_.direct_io;
}

Result<std::unique_ptr<DiskLogStorage>> DiskLogStorage::Open(const DiskLogOptions& options) {
  if (options.dir.empty()) return Status::InvalidArgument("disk raft log: empty directory name");
  std::unique_ptr<DiskLogStorage> s(new DiskLogStorage(options));
  QR_RETURN_IF_ERROR(s->Recover());
  return s;
}

DiskLogStorage::~DiskLogStorage() {
  // A clean close leaves the segment ending at its last record (Open takes padding too).
  (void)CutPadding();
  CloseActive();
}

void DiskLogStorage::CloseActive() {
  // (No CutPadding here: StartSegment and the destructor cut what stays; TruncateFrom and
  // ResetTo close segments they delete or cut themselves.)
  if (active_fd_ >= 0) ::close(active_fd_);
  active_fd_ = -1;
  tail_.clear();
}

int DiskLogStorage::OpenSegmentFile(const std::string& path, int flags) {
  if (direct_) {
    const int fd = ::open(path.c_str(), flags | O_DIRECT, 0644);
    if (fd >= 0 || errno != EINVAL) return fd;
    // The file system refuses O_DIRECT (tmpfs): buffered writes from now on.
    direct_ = false;
    Logger("raft")->info("[{}] raft log: {} does not take O_DIRECT; segments are written through the page cache",
                         options_.identity, options_.dir);
  }
  return ::open(path.c_str(), flags, 0644);
}

Status DiskLogStorage::CutPadding() {
  if (!direct_ || active_fd_ < 0 || segments_.empty()) return Status::Ok();
  const Segment& seg = segments_.back();
  if (::ftruncate(active_fd_, static_cast<off_t>(seg.size)) != 0) return Errno("truncate " + seg.path);
  return Status::Ok();
}

Status DiskLogStorage::LoadTail() {
  tail_.clear();
  if (!direct_ || active_fd_ < 0 || segments_.empty()) return Status::Ok();
  const Segment& seg = segments_.back();
  const uint64_t base = seg.size / kBlock * kBlock;
  const size_t want = static_cast<size_t>(seg.size - base);
  if (want == 0) return Status::Ok();
  // (a direct read: a whole block into the aligned stage; the file may end within it)
  ssize_t n;
  do {
    n = ::pread(active_fd_, stage_.get(), kBlock, static_cast<off_t>(base));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Errno("read " + seg.path);
  if (static_cast<size_t>(n) < want) return Status::IoError("read " + seg.path + ": the file ends before its last record");
  tail_.assign(stage_.get(), want);
  return Status::Ok();
}

Status DiskLogStorage::WriteAtEnd(const std::vector<iovec>& iov, uint64_t offset, const std::string& path) {
  if (!direct_) return WriteStaged(active_fd_, iov, offset, path, stage_.get(), stage_cap_, false, {}, nullptr);
  // Whole blocks from the last block boundary: the bytes already there (tail_) first.
  const uint64_t at = offset / kBlock * kBlock;
  QR_CHECK(offset - at == tail_.size(), "raft log: the kept tail (%zu bytes) is not the segment's end (%llu)",
           tail_.size(), static_cast<unsigned long long>(offset));
  const std::string prefix = std::move(tail_);
  tail_.clear();
  return WriteStaged(active_fd_, iov, at, path, stage_.get(), stage_cap_, true, prefix, &tail_);
}

Status DiskLogStorage::Recover() {
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) return Status::IoError("create " + options_.dir + ": " + ec.message());

  // Hard state (replaced atomically, so it is either whole or absent; a stale tmp is junk).
  const std::string hs_path = options_.dir + "/hardstate";
  fs::remove(hs_path + ".tmp", ec);
  if (fs::exists(hs_path)) {
    Result<std::string> bytes = ReadFile(hs_path);
    if (!bytes.ok()) return bytes.status();
    const std::string& b = bytes.value();
    if (b.size() != kHardStateBytes) {
      return Status::Corruption(hs_path + ": " + std::to_string(b.size()) + " bytes, expected " +
                                std::to_string(kHardStateBytes));
    }
    size_t pos = 0;
    const uint32_t magic = Get<uint32_t>(b.data(), &pos);
    const uint32_t version = Get<uint32_t>(b.data(), &pos);
    HardState hs;
    hs.term = Get<uint64_t>(b.data(), &pos);
    hs.voted_for = Get<uint32_t>(b.data(), &pos);
    hs.commit = Get<uint64_t>(b.data(), &pos);
    const uint64_t checksum = Get<uint64_t>(b.data(), &pos);
    if (magic != kHardStateMagic || version != kFormatVersion || checksum != Hash64(b.data(), pos - 8)) {
      return Status::Corruption(hs_path + ": bad magic, version or checksum");
    }
    hard_ = hs;
  }

  // Segments, in index order.
  std::vector<std::pair<Index, std::string>> found;
  for (const auto& de : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = de.path().filename().string();
    unsigned long long first = 0;
    char tail[8] = {0};
    // Exactly the name the writer gives (sscanf alone also takes "seg-+0000000000000000001.log",
    // a second file for the same index).
    if (name.size() == SegmentName(0).size() && std::sscanf(name.c_str(), "seg-%20llu.%3s", &first, tail) == 2 &&
        name == SegmentName(first)) {
      found.emplace_back(first, de.path().string());
    }
  }
  if (ec) return Status::IoError("list " + options_.dir + ": " + ec.message());
  std::sort(found.begin(), found.end());

  bool torn = false;
  for (auto& [first, path] : found) {
    if (torn) {  // everything after a torn point is unreachable: drop it
      uint64_t size = fs::file_size(path, ec);
      truncated_bytes_ += ec ? 0 : size;
      fs::remove(path, ec);
      dir_dirty_ = true;
      continue;
    }
    Segment seg;
    seg.first_index = first;
    seg.path = path;
    QR_RETURN_IF_ERROR(RecoverSegment(&seg, &torn));
    const Index expected = segments_.empty() ? seg.first_index
                                             : segments_.back().first_index + segments_.back().offsets.size();
    const Term expected_prev_term = segments_.empty()                   ? seg.prev_term
                                    : segments_.back().terms.empty() ? segments_.back().prev_term
                                                                     : segments_.back().terms.back();
    if (seg.size == 0 || seg.first_index != expected || seg.prev_term != expected_prev_term) {
      // A segment torn before its header was written, or one that does not continue the log.
      truncated_bytes_ += seg.size;
      fs::remove(path, ec);
      dir_dirty_ = true;
      torn = true;
      continue;
    }
    segments_.push_back(std::move(seg));
  }

  // Build the recovered state (the Core needs the whole retained log in memory anyway).
  recovered_ = PersistentState{};
  if (!segments_.empty()) {
    recovered_.first_index = segments_.front().first_index;
    recovered_.prev_term = segments_.front().prev_term;
    for (const Segment& seg : segments_) {
      Result<std::string> bytes = ReadFile(seg.path);
      if (!bytes.ok()) return bytes.status();
      for (size_t i = 0; i < seg.offsets.size(); ++i) {
        size_t pos = seg.offsets[i];
        const uint32_t len = Get<uint32_t>(bytes.value().data(), &pos);
        pos += 8;  // checksum (verified by RecoverSegment)
        Entry e;
        e.term = Get<uint64_t>(bytes.value().data(), &pos);
        e.index = Get<uint64_t>(bytes.value().data(), &pos);
        e.data = std::string(bytes.value().data() + pos, len);
        recovered_.entries.push_back(std::move(e));
      }
    }
  }
  if (hard_.commit > last_index()) {
    // Possible only if unsynced entries were lost (fsync never): commit is an optimisation,
    // so clamping it is safe.
    Logger("raft")->warn("[{}] raft log: hard state commit {} beyond recovered log end {}; clamped",
                         options_.identity, hard_.commit, last_index());
    hard_.commit = last_index();
  }
  recovered_.hard = hard_;
  if (truncated_bytes_ > 0) {
    Logger("raft")->warn("[{}] raft log: truncated a torn/corrupt tail of {} bytes; log now ends at {}",
                         options_.identity, truncated_bytes_, last_index());
  }
  QR_RETURN_IF_ERROR(OpenActive());
  return Sync();  // make the truncation itself durable before anything builds on it
}

Status DiskLogStorage::RecoverSegment(Segment* seg, bool* torn) {
  Result<std::string> bytes = ReadFile(seg->path);
  if (!bytes.ok()) return bytes.status();
  const std::string& b = bytes.value();
  uint64_t good = 0;  // bytes of the valid prefix
  if (b.size() >= kSegmentHeaderBytes) {
    size_t pos = 0;
    const uint32_t magic = Get<uint32_t>(b.data(), &pos);
    const uint32_t version = Get<uint32_t>(b.data(), &pos);
    const Index first = Get<uint64_t>(b.data(), &pos);
    const Term prev_term = Get<uint64_t>(b.data(), &pos);
    const uint64_t checksum = Get<uint64_t>(b.data(), &pos);
    if (magic == kSegmentMagic && version != kFormatVersion && checksum == Hash64(b.data(), kSegmentHeaderBytes - 8)) {
      // A well-formed header of another format: refuse, never "repair" it by truncation.
      return Status::Corruption(seg->path + ": written in log format version " + std::to_string(version) +
                                ", this build reads version " + std::to_string(kFormatVersion));
    }
    // Index 0 is the empty log's sentinel, never an entry; the log's first entry has no
    // predecessor, so its prev_term is 0 (the writer never makes either).
    if (magic == kSegmentMagic && version == kFormatVersion && first == seg->first_index && first >= 1 &&
        (first > 1 || prev_term == 0) && checksum == Hash64(b.data(), kSegmentHeaderBytes - 8)) {
      seg->prev_term = prev_term;
      good = kSegmentHeaderBytes;
    } else if (std::any_of(b.data(), b.data() + kSegmentHeaderBytes, [](char c) { return c != 0; })) {
      // A crash can leave a new segment's header short or blank (zeros), never as other bytes
      // (it is written in one write, within one sector): bytes that are not a valid header are
      // garbage or damage. Refuse, never "repair" by dropping the whole log after it.
      return Status::Corruption(seg->path + ": not a raft log segment (its " + std::to_string(kSegmentHeaderBytes) +
                                "-byte header has the wrong magic, version, first index or checksum): the disk "
                                "log is damaged; restore " + options_.dir + ", or move it away to rejoin as an "
                                "empty member");
    }
  }
  if (good > 0) {
    Index next = seg->first_index;
    Term last_term = seg->prev_term;  // terms never decrease along a Raft log
    size_t pos = good;
    while (b.size() - pos >= kRecordHeaderBytes) {
      size_t p = pos;
      const uint32_t len = Get<uint32_t>(b.data(), &p);
      const uint64_t checksum = Get<uint64_t>(b.data(), &p);
      const Term term = Get<uint64_t>(b.data(), &p);
      const Index index = Get<uint64_t>(b.data(), &p);
      if (len > b.size() - p || index != next || term < last_term) break;
      if (SegmentRecordChecksum(term, index, std::string_view(b.data() + p, len)) != checksum) break;
      seg->offsets.push_back(pos);
      seg->terms.push_back(term);
      pos = p + len;
      ++next;
      last_term = term;
    }
    good = pos;
  }
  if (good > 0 && good < b.size() && b.size() - good < kBlock &&
      std::all_of(b.data() + good, b.data() + b.size(), [](char c) { return c == 0; })) {
    // A direct-I/O segment's padding (it was not closed cleanly): no damage, nothing lost.
    if (::truncate(seg->path.c_str(), static_cast<off_t>(good)) != 0) return Errno("truncate " + seg->path);
    active_dirty_ = true;
  } else if (good < b.size()) {
    *torn = true;
    truncated_bytes_ += b.size() - good;
    if (good > 0) {
      if (::truncate(seg->path.c_str(), static_cast<off_t>(good)) != 0) return Errno("truncate " + seg->path);
      active_dirty_ = true;
    }
  }
  seg->size = good;
  return Status::Ok();
}

Status DiskLogStorage::OpenActive() {
  CloseActive();
  if (segments_.empty()) return Status::Ok();
  const Segment& seg = segments_.back();
  active_fd_ = OpenSegmentFile(seg.path, O_RDWR | O_CLOEXEC);
  if (active_fd_ < 0) return Errno("open " + seg.path);
  return LoadTail();
}

Index DiskLogStorage::first_index() const {
  return segments_.empty() ? empty_next_index_ : segments_.front().first_index;
}

Index DiskLogStorage::last_index() const {
  if (segments_.empty()) return empty_next_index_ - 1;
  return segments_.back().first_index + segments_.back().offsets.size() - 1;
}

Term DiskLogStorage::TermOf(Index index) const {
  if (segments_.empty()) return index + 1 == empty_next_index_ ? empty_prev_term_ : 0;
  for (const Segment& seg : segments_) {
    if (index + 1 == seg.first_index) return seg.prev_term;
    if (index >= seg.first_index && index < seg.first_index + seg.offsets.size()) {
      return seg.terms[index - seg.first_index];
    }
  }
  QR_CHECK(false, "TermOf(%llu) outside the stored log", static_cast<unsigned long long>(index));
  return 0;
}

Status DiskLogStorage::StartSegment(Index first_index, Term prev_term) {
  // The segment being closed ends at its last record (no padding) before the next one exists.
  QR_RETURN_IF_ERROR(CutPadding());
  if (active_fd_ >= 0 && active_dirty_ && options_.fsync != FsyncPolicy::kNever) {
    // Sync() only covers the active segment: finish the one being closed now.
    if (::fdatasync(active_fd_) != 0) return Errno("fdatasync " + segments_.back().path);
    ++syncs_;
  }
  CloseActive();
  active_dirty_ = false;
  Segment seg;
  seg.first_index = first_index;
  seg.prev_term = prev_term;
  seg.path = options_.dir + "/" + SegmentName(first_index);
  active_fd_ = OpenSegmentFile(seg.path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC);
  if (active_fd_ < 0) return Errno("create " + seg.path);
  char header[kSegmentHeaderBytes];
  size_t pos = 0;
  Put<uint32_t>(header, &pos, kSegmentMagic);
  Put<uint32_t>(header, &pos, kFormatVersion);
  Put<uint64_t>(header, &pos, first_index);
  Put<uint64_t>(header, &pos, prev_term);
  Put<uint64_t>(header, &pos, Hash64(header, pos));
  std::vector<iovec> iov{{header, sizeof header}};
  QR_RETURN_IF_ERROR(WriteAtEnd(iov, 0, seg.path));
  seg.size = kSegmentHeaderBytes;
  segments_.push_back(std::move(seg));
  active_dirty_ = true;
  dir_dirty_ = true;
  return Status::Ok();
}

Status DiskLogStorage::TruncateFrom(Index index) {
  // Drop whole segments that start at or after `index`.
  bool removed_first = false;
  Term first_prev_term = 0;
  while (!segments_.empty() && segments_.back().first_index >= index) {
    CloseActive();
    std::error_code ec;
    if (segments_.size() == 1) {
      removed_first = true;
      first_prev_term = segments_.back().prev_term;
    }
    fs::remove(segments_.back().path, ec);
    if (ec) return Status::IoError("remove " + segments_.back().path + ": " + ec.message());
    segments_.pop_back();
    dir_dirty_ = true;
  }
  if (segments_.empty()) {
    if (removed_first) {
      empty_next_index_ = index;
      empty_prev_term_ = first_prev_term;
    }
    return Status::Ok();
  }
  QR_RETURN_IF_ERROR(OpenActive());
  Segment& seg = segments_.back();
  if (index < seg.first_index + seg.offsets.size()) {
    const size_t keep = index - seg.first_index;
    const uint64_t new_size = seg.offsets[keep];
    if (::ftruncate(active_fd_, static_cast<off_t>(new_size)) != 0) return Errno("truncate " + seg.path);
    seg.offsets.resize(keep);
    seg.terms.resize(keep);
    seg.size = new_size;
    active_dirty_ = true;
    QR_RETURN_IF_ERROR(LoadTail());
  }
  return Status::Ok();
}

Status DiskLogStorage::Append(const std::vector<Entry>& entries) {
  if (entries.empty()) return Status::Ok();
  const Index first = entries.front().index;
  if (first > last_index() + 1 || first < first_index()) {
    return Status::Internal("disk log: append at " + std::to_string(first) + " outside [" +
                            std::to_string(first_index()) + ", " + std::to_string(last_index() + 1) + "]");
  }
  if (first <= last_index()) QR_RETURN_IF_ERROR(TruncateFrom(first));

  std::vector<std::array<char, kRecordHeaderBytes>> headers(entries.size());
  std::vector<iovec> iov;
  iov.reserve(2 * entries.size());
  size_t i = 0;
  while (i < entries.size()) {
    if (segments_.empty() || segments_.back().size >= options_.segment_bytes) {
      const Index idx = entries[i].index;
      const Term prev = idx == first ? TermOf(idx - 1) : entries[i - 1].term;
      QR_RETURN_IF_ERROR(StartSegment(idx, prev));
    }
    Segment& seg = segments_.back();
    iov.clear();
    const uint64_t start = seg.size;
    // Fill this segment up to its size limit, written through the staging buffer.
    while (i < entries.size() && (seg.size < options_.segment_bytes || iov.empty())) {
      const Entry& e = entries[i];
      QR_CHECK(e.index == first + i, "non-consecutive entries given to the raft log");
      size_t pos = 0;
      char* h = headers[i].data();
      Put<uint32_t>(h, &pos, static_cast<uint32_t>(e.data.size()));
      Put<uint64_t>(h, &pos, SegmentRecordChecksum(e.term, e.index, e.data));
      Put<uint64_t>(h, &pos, e.term);
      Put<uint64_t>(h, &pos, e.index);
      iov.push_back({h, kRecordHeaderBytes});
      if (!e.data.empty()) iov.push_back({const_cast<char*>(e.data.data()), e.data.size()});
      seg.offsets.push_back(seg.size);
      seg.terms.push_back(e.term);
      seg.size += kRecordHeaderBytes + e.data.size();
      ++i;
    }
    QR_RETURN_IF_ERROR(WriteAtEnd(iov, start, seg.path));
    active_dirty_ = true;
  }
  return Status::Ok();
}

Status DiskLogStorage::SaveHardState(const HardState& hard) {
  if (hard.term == hard_.term && hard.voted_for == hard_.voted_for) {
    hard_.commit = hard.commit;  // saved with the next term/vote change (an optimisation only)
    return Status::Ok();
  }
  hard_ = hard;
  return WriteHardStateFile(hard);
}

Status DiskLogStorage::WriteHardStateFile(const HardState& hard) {
  char buf[kHardStateBytes];
  size_t pos = 0;
  Put<uint32_t>(buf, &pos, kHardStateMagic);
  Put<uint32_t>(buf, &pos, kFormatVersion);
  Put<uint64_t>(buf, &pos, hard.term);
  Put<uint32_t>(buf, &pos, hard.voted_for);
  Put<uint64_t>(buf, &pos, hard.commit);
  Put<uint64_t>(buf, &pos, Hash64(buf, pos));
  const std::string path = options_.dir + "/hardstate";
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("create " + tmp);
  std::vector<iovec> iov{{buf, sizeof buf}};
  Status st = WriteAll(fd, iov, 0, tmp);
  // The rename must not become visible before the bytes: sync the tmp file first (unless the
  // policy is never, where the OS decides everything anyway).
  if (st.ok() && options_.fsync != FsyncPolicy::kNever && ::fdatasync(fd) != 0) st = Errno("fdatasync " + tmp);
  ::close(fd);
  QR_RETURN_IF_ERROR(st);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename " + tmp);
  dir_dirty_ = true;  // the rename is durable after the directory fsync in Sync()
  return Status::Ok();
}

Status DiskLogStorage::SyncDir() { return file::SyncDir(options_.dir); }

Status DiskLogStorage::Sync() {
  if (active_dirty_ && active_fd_ >= 0) {
    if (::fdatasync(active_fd_) != 0) return Errno("fdatasync " + segments_.back().path);
    ++syncs_;
  }
  active_dirty_ = false;
  if (dir_dirty_) {
    QR_RETURN_IF_ERROR(SyncDir());
    ++syncs_;
    dir_dirty_ = false;
  }
  return Status::Ok();
}

Status DiskLogStorage::ResetTo(Index index, Term term) {
  // Every old segment goes first, then one empty segment says where the log continues: a crash
  // in between leaves an empty log from index 1 (Open drops a torn header), never a mix.
  CloseActive();
  active_dirty_ = false;
  for (const Segment& seg : segments_) {
    std::error_code ec;
    fs::remove(seg.path, ec);
    if (ec) return Status::IoError("remove " + seg.path + ": " + ec.message());
  }
  segments_.clear();
  dir_dirty_ = true;
  empty_next_index_ = index + 1;
  empty_prev_term_ = term;
  return StartSegment(index + 1, term);
}

Status DiskLogStorage::Compact(Index upto) {
  // Whole segments only, never the active (last) one.
  while (segments_.size() > 1) {
    const Segment& seg = segments_.front();
    const Index seg_last = seg.first_index + seg.offsets.size() - 1;
    if (seg.offsets.empty() || seg_last > upto) break;
    std::error_code ec;
    fs::remove(seg.path, ec);
    if (ec) return Status::IoError("remove " + seg.path + ": " + ec.message());
    segments_.erase(segments_.begin());
    dir_dirty_ = true;
  }
  return Status::Ok();
}

}  // namespace qrstore::replication::raft
