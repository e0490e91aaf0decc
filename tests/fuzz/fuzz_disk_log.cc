// Fuzz target: the Raft disk log's recovery (replication/raft/log_storage.h, DiskLogStorage),
// what a member reads back from disk after a crash. The input is one to three segment files
// separated by kSeparator, after a first byte of flags:
//   bit 0  every checksum (segment header, records) is first set to the true one, so inputs get
//          past them to the index, term and continuity rules;
//   bit 1  a segment's file is named after the first index its header claims (else after its
//          position: 1, 2, 3), so headers can match their names.
// The files go into a fresh directory (on /dev/shm when there is one: fsyncs cost nothing),
// removed afterwards. Contract: Open never crashes; it refuses with a Status saying why, or
// recovers a consistent prefix: indexes contiguous from first_index >= 1, terms never below
// prev_term nor decreasing, first_index/last_index agreeing with the entries, the hard state's
// commit within the log. Then the recovered log must be usable and its truncation durable: one
// entry appended and synced, a reopen recovers exactly the old entries plus that one, with
// nothing left to truncate; and after compacting everything it can, a reopen starts at a later
// segment with the true prev_term.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "common/hash.h"
#include "common/logging.h"
#include "replication/raft/log_storage.h"

using namespace qrstore;
using namespace qrstore::replication::raft;
namespace fs = std::filesystem;

namespace {
constexpr std::string_view kSeparator = "\nSEG\n";
constexpr size_t kMaxSegments = 3;
constexpr size_t kHeaderBytes = 32;        // magic, version, first index, prev term, checksum
constexpr size_t kRecordHeaderBytes = 28;  // length, checksum, term, index

template <typename T>
T Load(const std::string& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// Gives the header and every whole record of `seg` their true checksums.
void FixChecksums(std::string* seg) {
  if (seg->size() < kHeaderBytes) return;
  const uint64_t header_sum = Hash64(seg->data(), kHeaderBytes - 8);
  std::memcpy(seg->data() + kHeaderBytes - 8, &header_sum, 8);
  size_t pos = kHeaderBytes;
  while (seg->size() - pos >= kRecordHeaderBytes) {
    const uint32_t len = Load<uint32_t>(*seg, pos);
    if (len > seg->size() - pos - kRecordHeaderBytes) break;
    const uint64_t sum = SegmentRecordChecksum(Load<uint64_t>(*seg, pos + 12), Load<uint64_t>(*seg, pos + 20),
                                               std::string_view(*seg).substr(pos + kRecordHeaderBytes, len));
    std::memcpy(seg->data() + pos + 4, &sum, 8);
    pos += kRecordHeaderBytes + len;
  }
}

std::string SegmentFile(uint64_t first_index) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "seg-%020llu.log", static_cast<unsigned long long>(first_index));
  return buf;
}

struct ScratchDir {
  std::string path;
  ScratchDir() {
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string tmpl = (base / "qrstore-fuzz-disk-log-XXXXXX").string();
    QR_CHECK(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp %s", tmpl.c_str());
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

DiskLogOptions Options(const std::string& dir) {
  DiskLogOptions o;
  o.dir = dir;
  o.segment_bytes = 4096;
  o.fsync = FsyncPolicy::kNever;
  o.identity = "fuzz";
  return o;
}

void CheckConsistent(const DiskLogStorage& log) {
  const PersistentState st = log.Recovered();
  QR_CHECK_GE(st.first_index, 1u);
  QR_CHECK_EQ(log.first_index(), st.first_index);
  QR_CHECK_EQ(log.last_index(), st.first_index + st.entries.size() - 1);
  if (st.first_index == 1) QR_CHECK_EQ(st.prev_term, 0u);
  Term term = st.prev_term;
  for (size_t i = 0; i < st.entries.size(); ++i) {
    QR_CHECK_EQ(st.entries[i].index, st.first_index + i);
    QR_CHECK(st.entries[i].term >= term, "entry %zu has term %llu after term %llu", i,
             static_cast<unsigned long long>(st.entries[i].term), static_cast<unsigned long long>(term));
    QR_CHECK_EQ(st.entries[i].data.checksum(), EntryChecksum(st.entries[i].data));
    term = st.entries[i].term;
  }
  QR_CHECK_LE(st.hard.commit, log.last_index());
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = SetLogLevel("off");  // recovery warns about every torn tail
  (void)quiet;
  if (size == 0) return 0;
  const bool fix = (data[0] & 1) != 0;
  const bool name_by_header = (data[0] & 2) != 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> segments;
  while (segments.size() < kMaxSegments) {
    const size_t cut = segments.size() + 1 < kMaxSegments ? rest.find(kSeparator) : std::string_view::npos;
    segments.emplace_back(rest.substr(0, cut));
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + kSeparator.size());
  }
  ScratchDir dir;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (fix) FixChecksums(&segments[i]);
    const uint64_t first = name_by_header && segments[i].size() >= 16 ? Load<uint64_t>(segments[i], 8) : i + 1;
    std::ofstream(fs::path(dir.path) / SegmentFile(first), std::ios::binary) << segments[i];
  }

  Result<std::unique_ptr<DiskLogStorage>> opened = DiskLogStorage::Open(Options(dir.path));
  if (!opened.ok()) {
    QR_CHECK(!opened.status().message().empty());
    QR_CHECK(opened.status().code() == StatusCode::kCorruption, "unexpected %s", opened.status().ToString().c_str());
    return 0;
  }
  std::unique_ptr<DiskLogStorage> log = std::move(opened).value();
  CheckConsistent(*log);
  PersistentState before = log->Recovered();
  // Usable: one more entry (at the term of the last one, or of prev_term) appends and survives.
  if (log->last_index() == UINT64_MAX) return 0;
  const Term term = before.entries.empty() ? before.prev_term : before.entries.back().term;
  const Entry extra{term, log->last_index() + 1, EntryData(std::string("fuzz"))};
  Status st = log->Append({extra});
  QR_CHECK(st.ok(), "append after recovery: %s", st.ToString().c_str());
  st = log->Sync();
  QR_CHECK(st.ok(), "sync after recovery: %s", st.ToString().c_str());
  log.reset();
  Result<std::unique_ptr<DiskLogStorage>> again = DiskLogStorage::Open(Options(dir.path));
  QR_CHECK(again.ok(), "reopen after recovery: %s", again.status().ToString().c_str());
  CheckConsistent(*again.value());
  QR_CHECK_EQ(again.value()->recovered_truncated_bytes(), 0u);
  before.entries.push_back(extra);
  const PersistentState after = again.value()->Recovered();
  QR_CHECK(after.entries == before.entries, "reopen recovered %zu entries, expected %zu", after.entries.size(),
           before.entries.size());
  QR_CHECK_EQ(after.first_index, before.first_index);
  QR_CHECK_EQ(after.prev_term, before.prev_term);
  // Compaction drops whole segments; a reopen then starts at a later segment, whose prev_term
  // must be the term of the entry before it.
  st = again.value()->Compact(again.value()->last_index());
  QR_CHECK(st.ok(), "compact after recovery: %s", st.ToString().c_str());
  QR_CHECK(again.value()->Sync().ok());
  again.value().reset();
  Result<std::unique_ptr<DiskLogStorage>> compacted = DiskLogStorage::Open(Options(dir.path));
  QR_CHECK(compacted.ok(), "reopen after compaction: %s", compacted.status().ToString().c_str());
  CheckConsistent(*compacted.value());
  const PersistentState last = compacted.value()->Recovered();
  QR_CHECK_EQ(last.first_index + last.entries.size(), before.first_index + before.entries.size());
  QR_CHECK_GE(last.first_index, before.first_index);
  if (last.first_index > before.first_index) {
    QR_CHECK_EQ(last.prev_term, before.entries[last.first_index - 1 - before.first_index].term);
  }
  return 0;
}
