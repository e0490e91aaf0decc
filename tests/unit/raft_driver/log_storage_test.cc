// Raft log storage: memory and disk round trips, truncation on conflict, segment rolling and
// compaction, torn/corrupt tail recovery, hard state atomicity rules and sync accounting.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <cstring>
#include <fstream>

#include <catch2/catch.hpp>

#include "common/hash.h"
#include "replication/raft/log_storage.h"

namespace qrstore::replication::raft {
namespace {
namespace fs = std::filesystem;

std::vector<Entry> Entries(Index from, Index to, Term term, size_t size = 100) {
  std::vector<Entry> out;
  for (Index i = from; i <= to; ++i) {
    out.push_back(Entry{term, i, std::string(size, static_cast<char>('a' + i % 26)) + std::to_string(i)});
  }
  return out;
}

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "qrstore-raftlog-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::unique_ptr<DiskLogStorage> OpenDisk(const std::string& dir, uint64_t segment_bytes = 1 << 20,
                                         FsyncPolicy fsync = FsyncPolicy::kBatch, bool direct_io = true) {
  DiskLogOptions o;
  o.dir = dir;
  o.segment_bytes = segment_bytes;
  o.fsync = fsync;
  o.direct_io = direct_io;
  auto r = DiskLogStorage::Open(o);
  REQUIRE(r.ok());
  return std::move(r).value();
}

std::vector<fs::path> Segments(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& de : fs::directory_iterator(dir)) {
    if (de.path().filename().string().rfind("seg-", 0) == 0) out.push_back(de.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("raft memory log: append, conflict truncation, compaction", "[raft_driver][log]") {
  MemoryLogStorage log(/*retain_entries=*/true);
  REQUIRE(log.last_index() == 0);
  REQUIRE(log.Append(Entries(1, 10, 1)).ok());
  REQUIRE(log.last_index() == 10);
  // A new leader overwrites 6..: the stored suffix is replaced.
  REQUIRE(log.Append(Entries(6, 8, 2)).ok());
  REQUIRE(log.last_index() == 8);
  REQUIRE(log.entries()[5] == Entries(6, 6, 2)[0]);
  // Gaps are a caller bug, reported.
  REQUIRE(log.Append(Entries(12, 12, 2)).code() == StatusCode::kInternal);
  REQUIRE(log.SaveHardState({2, 1, 7}).ok());
  REQUIRE(log.Compact(4).ok());
  PersistentState st = log.Recovered();
  REQUIRE(st.first_index == 5);
  REQUIRE(st.prev_term == 1);
  REQUIRE(st.entries.size() == 4);
  REQUIRE(st.hard == HardState{2, 1, 7});
  REQUIRE(log.Append(Entries(3, 3, 2)).code() == StatusCode::kInternal);  // below the compaction point
}

TEST_CASE("raft memory log without retention tracks indexes only", "[raft_driver][log]") {
  MemoryLogStorage log(/*retain_entries=*/false);
  REQUIRE(log.Append(Entries(1, 5, 1)).ok());
  REQUIRE(log.last_index() == 5);
  REQUIRE(log.Recovered().entries.empty());
}

TEST_CASE("raft disk log: entries and hard state survive a reopen", "[raft_driver][log]") {
  TempDir dir;
  {
    auto log = OpenDisk(dir.path);
    REQUIRE(log->Recovered().entries.empty());
    REQUIRE(log->Append(Entries(1, 50, 1)).ok());
    REQUIRE(log->Append(Entries(51, 60, 2)).ok());
    REQUIRE(log->SaveHardState({2, 0, 55}).ok());
    REQUIRE(log->Sync().ok());
  }
  auto log = OpenDisk(dir.path);
  PersistentState st = log->Recovered();
  REQUIRE(st.first_index == 1);
  REQUIRE(st.entries.size() == 60);
  auto expected = Entries(1, 50, 1);
  auto more = Entries(51, 60, 2);
  expected.insert(expected.end(), more.begin(), more.end());
  REQUIRE(st.entries == expected);
  REQUIRE(st.hard == HardState{2, 0, 55});
  REQUIRE(log->recovered_truncated_bytes() == 0);
  // And it keeps appending where it left off.
  REQUIRE(log->Append(Entries(61, 61, 2)).ok());
  REQUIRE(log->last_index() == 61);
}

TEST_CASE("raft disk log: appends written through the staging buffer, larger and smaller than it, read back whole",
          "[raft_driver][log]") {
  const bool direct = GENERATE(true, false);
  INFO("direct_io " << direct);
  TempDir dir;
  std::vector<Entry> all;
  {
    DiskLogOptions o;
    o.dir = dir.path;
    o.segment_bytes = 64 << 10;
    o.write_buffer_bytes = 4096;  // the smallest: entries straddle it, and some are several times it
    o.direct_io = direct;
    auto r = DiskLogStorage::Open(o);
    REQUIRE(r.ok());
    auto log = std::move(r).value();
    Index next = 1;
    for (size_t size : {10, 4000, 4096, 4097, 20000, 1, 0, 9000, 3}) {
      auto batch = Entries(next, next + 2, 1, size);  // three per append: one write covers several
      REQUIRE(log->Append(batch).ok());
      all.insert(all.end(), batch.begin(), batch.end());
      next += 3;
    }
    REQUIRE(log->Sync().ok());
    REQUIRE(Segments(dir.path).size() > 1);  // the segment limit cut appends too
  }
  auto log = OpenDisk(dir.path, 64 << 10, FsyncPolicy::kBatch, direct);
  REQUIRE(log->recovered_truncated_bytes() == 0);
  REQUIRE(log->Recovered().entries == all);
}

// The test's directory is on the host's disk (ext4 here), which takes O_DIRECT; where it does not,
// these cases check the buffered fallback instead, and say so.
TEST_CASE("raft disk log with direct I/O: a segment left padded (no clean close) loses nothing and is not damage",
          "[raft_driver][log]") {
  TempDir dir;
  std::vector<Entry> all;
  {
    auto log = OpenDisk(dir.path, /*segment_bytes=*/3000);  // several segments, each cut to its records
    if (!log->direct()) WARN("the temp directory refuses O_DIRECT: buffered writes checked instead");
    for (Index i = 1; i <= 40; i += 4) {
      auto batch = Entries(i, i + 3, 1, 37 * i);  // sizes that end mid-block, one block and more
      REQUIRE(log->Append(batch).ok());
      all.insert(all.end(), batch.begin(), batch.end());
    }
    REQUIRE(log->Sync().ok());
    const auto segs = Segments(dir.path);
    REQUIRE(segs.size() > 2);
    if (log->direct()) {
      // Open: the active segment runs on in zeros to a block boundary; closed ones end at a record.
      CHECK(fs::file_size(segs.back()) % 4096 == 0);
      CHECK(fs::file_size(segs.front()) % 4096 != 0);
    }
    // A crash now: what a kill -9 leaves is the file as it is (copy it before the clean close).
    fs::copy_file(segs.back(), dir.path + "/crash-copy");
  }
  const auto segs = Segments(dir.path);
  fs::copy_file(dir.path + "/crash-copy", segs.back(), fs::copy_options::overwrite_existing);
  fs::remove(dir.path + "/crash-copy");
  {
    auto log = OpenDisk(dir.path, 3000);
    CHECK(log->recovered_truncated_bytes() == 0);  // padding, not a torn tail
    REQUIRE(log->Recovered().entries == all);
    // It appends after the last record (the kept tail block is rewritten with the new bytes).
    auto more = Entries(41, 43, 2, 5000);
    REQUIRE(log->Append(more).ok());
    all.insert(all.end(), more.begin(), more.end());
    REQUIRE(log->Sync().ok());
  }
  auto log = OpenDisk(dir.path, 3000);
  CHECK(log->recovered_truncated_bytes() == 0);
  REQUIRE(log->Recovered().entries == all);
  // Zeros of a block or more after the last record are not padding: a torn tail (counted).
  {
    const auto last = Segments(dir.path).back();
    log.reset();
    std::ofstream f(last, std::ios::binary | std::ios::app);
    f << std::string(4096, '\0');
  }
  auto again = OpenDisk(dir.path, 3000);
  CHECK(again->recovered_truncated_bytes() == 4096);
  REQUIRE(again->Recovered().entries == all);
}

TEST_CASE("raft disk log with direct I/O: appends after a truncation within a block, and after reopens, read back whole",
          "[raft_driver][log]") {
  TempDir dir;
  std::vector<Entry> expect;
  {
    auto log = OpenDisk(dir.path);
    REQUIRE(log->Append(Entries(1, 30, 1, 150)).ok());  // ~5 KB: the end is mid-block
    REQUIRE(log->Append(Entries(25, 27, 2, 10)).ok());  // truncates at 25 (mid-block), appends short ones
    REQUIRE(log->Sync().ok());
  }
  expect = Entries(1, 24, 1, 150);
  for (const Entry& e : Entries(25, 27, 2, 10)) expect.push_back(e);
  for (int round = 0; round < 3; ++round) {
    auto log = OpenDisk(dir.path);
    INFO("round " << round);
    REQUIRE(log->Recovered().entries == expect);
    CHECK(log->recovered_truncated_bytes() == 0);
    const Index next = log->last_index() + 1;
    auto batch = Entries(next, next + 1, 3, 1000 + 3000 * round);
    REQUIRE(log->Append(batch).ok());
    REQUIRE(log->Sync().ok());
    expect.insert(expect.end(), batch.begin(), batch.end());
  }
  auto log = OpenDisk(dir.path);
  REQUIRE(log->Recovered().entries == expect);
}

TEST_CASE("raft disk log: a file system without O_DIRECT (tmpfs) gets buffered writes", "[raft_driver][log]") {
  REQUIRE(fs::is_directory("/dev/shm"));  // tmpfs on every Linux this runs on
  std::string tmpl = "/dev/shm/qrstore-raftlog-XXXXXX";
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  struct Cleanup {
    std::string p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{tmpl};
  {
    auto log = OpenDisk(tmpl, 2000);
    REQUIRE(log->Append(Entries(1, 40, 1)).ok());
    REQUIRE(log->Sync().ok());
    INFO("direct " << log->direct());  // false on kernels whose tmpfs refuses O_DIRECT (6.1)
  }
  auto log = OpenDisk(tmpl, 2000);
  REQUIRE(log->Recovered().entries == Entries(1, 40, 1));
  CHECK(log->recovered_truncated_bytes() == 0);
}

TEST_CASE("raft disk log: truncation on conflict, across segments, survives a reopen", "[raft_driver][log]") {
  TempDir dir;
  {
    auto log = OpenDisk(dir.path, /*segment_bytes=*/2000);  // ~15 entries per segment
    REQUIRE(log->Append(Entries(1, 100, 1)).ok());
    REQUIRE(Segments(dir.path).size() > 3);
    REQUIRE(log->Append(Entries(30, 35, 3)).ok());  // drops 30..100, later segments deleted
    REQUIRE(log->last_index() == 35);
    REQUIRE(log->Sync().ok());
  }
  auto log = OpenDisk(dir.path, 2000);
  PersistentState st = log->Recovered();
  REQUIRE(st.entries.size() == 35);
  REQUIRE(st.entries[28] == Entries(29, 29, 1)[0]);
  REQUIRE(st.entries[29] == Entries(30, 30, 3)[0]);
  REQUIRE(st.entries.back() == Entries(35, 35, 3)[0]);
}

TEST_CASE("raft disk log: compaction drops whole segments and keeps prev_term", "[raft_driver][log]") {
  TempDir dir;
  {
    auto log = OpenDisk(dir.path, 2000);
    REQUIRE(log->Append(Entries(1, 40, 1)).ok());
    REQUIRE(log->Append(Entries(41, 100, 2)).ok());
    const size_t before = Segments(dir.path).size();
    REQUIRE(log->Compact(60).ok());
    REQUIRE(Segments(dir.path).size() < before);
    REQUIRE(log->first_index() > 1);
    REQUIRE(log->first_index() <= 61);  // never beyond what was asked
    REQUIRE(log->Sync().ok());
  }
  auto log = OpenDisk(dir.path, 2000);
  PersistentState st = log->Recovered();
  REQUIRE(st.first_index > 1);
  REQUIRE(st.first_index + st.entries.size() - 1 == 100);
  REQUIRE(st.prev_term == (st.first_index - 1 <= 40 ? 1u : 2u));
  REQUIRE(st.entries.front().index == st.first_index);
}

TEST_CASE("raft disk log: an installed snapshot drops the log, which continues after it across a restart",
          "[raft_driver][log]") {
  TempDir dir;
  {
    auto log = OpenDisk(dir.path, 2000);
    REQUIRE(log->Append(Entries(1, 60, 1)).ok());
    REQUIRE(log->Sync().ok());
    REQUIRE(log->ResetTo(500, 3).ok());  // far past the stored log
    REQUIRE(log->first_index() == 501);
    REQUIRE(log->last_index() == 500);
    REQUIRE(log->Append(Entries(501, 510, 4)).ok());
    REQUIRE(log->Sync().ok());
  }
  auto log = OpenDisk(dir.path, 2000);
  PersistentState st = log->Recovered();
  REQUIRE(st.first_index == 501);
  REQUIRE(st.prev_term == 3);
  REQUIRE(st.entries == Entries(501, 510, 4));
  REQUIRE(Segments(dir.path).size() == 1);
  // And reset with nothing after it: an empty log that still knows where it continues.
  REQUIRE(log->ResetTo(800, 5).ok());
  REQUIRE(log->Sync().ok());
  log.reset();
  auto again = OpenDisk(dir.path, 2000);
  CHECK(again->Recovered().first_index == 801);
  CHECK(again->Recovered().prev_term == 5);
  CHECK(again->Recovered().entries.empty());
  MemoryLogStorage mem(/*retain_entries=*/true);
  REQUIRE(mem.Append(Entries(1, 5, 1)).ok());
  REQUIRE(mem.ResetTo(9, 2).ok());
  CHECK(mem.Recovered().first_index == 10);
  CHECK(mem.Recovered().prev_term == 2);
  CHECK(mem.Recovered().entries.empty());
}

TEST_CASE("raft disk log: a torn tail is truncated at restart", "[raft_driver][log]") {
  TempDir dir;
  {
    auto log = OpenDisk(dir.path);
    REQUIRE(log->Append(Entries(1, 20, 1)).ok());
    REQUIRE(log->Sync().ok());
  }
  const fs::path seg = Segments(dir.path).back();
  const auto size = fs::file_size(seg);
  for (uint64_t chop : {1u, 50u, 110u}) {
    INFO("chop " << chop);
    fs::resize_file(seg, size - chop);  // a crash in the middle of the last record(s)
    auto log = OpenDisk(dir.path);
    REQUIRE(log->recovered_truncated_bytes() > 0);
    const Index last = log->last_index();
    REQUIRE(last < 20);
    REQUIRE(log->Recovered().entries == Entries(1, last, 1));
    REQUIRE(log->Append(Entries(last + 1, 20, 1)).ok());  // and the log is writable again
    REQUIRE(log->Sync().ok());
    REQUIRE(log->last_index() == 20);
  }
  auto log = OpenDisk(dir.path);
  REQUIRE(log->recovered_truncated_bytes() == 0);
  REQUIRE(log->Recovered().entries == Entries(1, 20, 1));
}

TEST_CASE("raft disk log: a segment of another format version is refused, never truncated", "[raft_driver][log]") {
  TempDir dir;
  {
    auto log = OpenDisk(dir.path);
    REQUIRE(log->Append(Entries(1, 5, 1)).ok());
    REQUIRE(log->Sync().ok());
  }
  const fs::path seg = Segments(dir.path).front();
  const auto size = fs::file_size(seg);
  {
    // Rewrite the header as another version, with a valid header checksum (a well-formed
    // segment of another build, not a torn write).
    std::fstream f(seg, std::ios::in | std::ios::out | std::ios::binary);
    char header[32];
    f.read(header, sizeof header);
    const uint32_t other = 1;
    std::memcpy(header + 4, &other, 4);
    const uint64_t checksum = Hash64(header, 24);
    std::memcpy(header + 24, &checksum, 8);
    f.seekp(0);
    f.write(header, sizeof header);
  }
  DiskLogOptions o;
  o.dir = dir.path;
  Result<std::unique_ptr<DiskLogStorage>> r = DiskLogStorage::Open(o);
  REQUIRE(r.status().code() == StatusCode::kCorruption);
  REQUIRE(r.status().message().find("format version 1") != std::string::npos);
  REQUIRE(fs::file_size(seg) == size);  // untouched
}

// Entries 1..last of term 1 in 2000-byte segments, a hard state, synced.
void WriteLog(const std::string& dir, Index last) {
  auto log = OpenDisk(dir, 2000);
  REQUIRE(log->Append(Entries(1, last, 1)).ok());
  REQUIRE(log->SaveHardState(HardState{3, 1, 10}).ok());
  REQUIRE(log->Sync().ok());
}

TEST_CASE("raft disk log: a segment or hard state filled with garbage is refused at open, naming the file", "[raft_driver][log]") {
  TempDir dir;
  WriteLog(dir.path, 60);
  auto segs = Segments(dir.path);
  REQUIRE(segs.size() >= 3);
  const auto size = fs::file_size(segs[0]);
  {
    // Garbage over the whole first segment (it used to be taken for a torn tail: the whole
    // log was dropped with a warning and the member started empty).
    std::ofstream f(segs[0], std::ios::binary | std::ios::trunc);
    for (uintmax_t i = 0; i < size; ++i) f.put(static_cast<char>((i * 131 + 7) & 0xff));
  }
  DiskLogOptions o;
  o.dir = dir.path;
  Result<std::unique_ptr<DiskLogStorage>> r = DiskLogStorage::Open(o);
  REQUIRE(r.status().code() == StatusCode::kCorruption);
  REQUIRE(r.status().message().find(segs[0].string() + ": not a raft log segment") != std::string::npos);
  REQUIRE(Segments(dir.path).size() == segs.size());  // nothing removed or truncated
  REQUIRE(fs::file_size(segs[0]) == size);
  {
    std::ofstream f(dir.path + "/hardstate", std::ios::binary | std::ios::trunc);
    f << std::string(36, 'x');
  }
  r = DiskLogStorage::Open(o);
  REQUIRE(r.status().code() == StatusCode::kCorruption);
  REQUIRE(r.status().message().find("hardstate: bad magic") != std::string::npos);
}

TEST_CASE("raft disk log: a blank (zeroed) header of the last segment is a torn write, truncated", "[raft_driver][log]") {
  TempDir dir;
  WriteLog(dir.path, 60);
  auto segs = Segments(dir.path);
  {
    std::fstream f(segs.back(), std::ios::in | std::ios::out | std::ios::binary);
    const std::string zeros(32, '\0');
    f.write(zeros.data(), 32);
  }
  auto log = OpenDisk(dir.path, 2000);
  REQUIRE(log->recovered_truncated_bytes() > 0);
  REQUIRE(log->Recovered().entries == Entries(1, log->last_index(), 1));
}

TEST_CASE("raft disk log: a corrupt record ends the log there", "[raft_driver][log]") {
  TempDir dir;
  {
    auto log = OpenDisk(dir.path, 2000);
    REQUIRE(log->Append(Entries(1, 60, 1)).ok());
    REQUIRE(log->Sync().ok());
  }
  auto segs = Segments(dir.path);
  REQUIRE(segs.size() >= 3);
  {
    // Flip one payload byte in the middle of the second segment.
    std::fstream f(segs[1], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(segs[1]) / 2));
    char c;
    f.seekg(f.tellp());
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(fs::file_size(segs[1]) / 2));
    c ^= 0x5a;
    f.write(&c, 1);
  }
  auto log = OpenDisk(dir.path, 2000);
  REQUIRE(log->recovered_truncated_bytes() > 0);
  const Index last = log->last_index();
  REQUIRE(last >= 1);
  REQUIRE(last < 60);
  REQUIRE(log->Recovered().entries == Entries(1, last, 1));
  REQUIRE(Segments(dir.path).size() == 2);  // everything after the corrupt point is gone
}

TEST_CASE("raft disk log: a well-checksummed record with a lower term ends the log there", "[raft_driver][log]") {
  // Terms never decrease along a Raft log; the first recovery accepted a record that broke
  // that as long as its checksum held (found writing fuzz_disk_log's invariant checks).
  TempDir dir;
  {
    auto log = OpenDisk(dir.path);
    REQUIRE(log->Append(Entries(1, 5, 2)).ok());
    REQUIRE(log->Sync().ok());
  }
  const fs::path seg = Segments(dir.path).front();
  {
    // Record 4 (after the 32-byte header and three records of 28 + 101 bytes) gets term 1.
    std::fstream f(seg, std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff at = 32 + 3 * (28 + 101);
    const Entry e = Entries(4, 4, 1)[0];
    const uint64_t checksum = SegmentRecordChecksum(1, 4, e.data);
    const uint64_t term = 1;
    f.seekp(at + 4);
    f.write(reinterpret_cast<const char*>(&checksum), 8);
    f.write(reinterpret_cast<const char*>(&term), 8);
  }
  auto log = OpenDisk(dir.path);
  REQUIRE(log->recovered_truncated_bytes() > 0);
  REQUIRE(log->Recovered().entries == Entries(1, 3, 2));
}

TEST_CASE("raft disk log: segments named or headed outside the format end the log", "[raft_driver][log]") {
  TempDir dir;
  {
    auto log = OpenDisk(dir.path, 2000);
    REQUIRE(log->Append(Entries(1, 40, 1)).ok());
    REQUIRE(log->Sync().ok());
  }
  auto segs = Segments(dir.path);
  REQUIRE(segs.size() >= 2);
  // A copy of the first segment under a name sscanf also reads as index 1 is not a segment.
  fs::copy_file(segs[0], fs::path(dir.path) / "seg-+0000000000000000001.log");
  {
    auto log = OpenDisk(dir.path, 2000);
    REQUIRE(log->recovered_truncated_bytes() == 0);
    REQUIRE(log->Recovered().entries == Entries(1, 40, 1));
  }
  // The second segment's header claims a prev_term its predecessor's last entry does not have.
  {
    std::fstream f(segs[1], std::ios::in | std::ios::out | std::ios::binary);
    char header[32];
    f.read(header, sizeof header);
    const uint64_t prev_term = 7;
    std::memcpy(header + 16, &prev_term, 8);
    const uint64_t checksum = Hash64(header, 24);
    std::memcpy(header + 24, &checksum, 8);
    f.seekp(0);
    f.write(header, sizeof header);
  }
  auto log = OpenDisk(dir.path, 2000);
  REQUIRE(log->recovered_truncated_bytes() > 0);
  REQUIRE(log->Recovered().entries == Entries(1, log->last_index(), 1));
  REQUIRE(log->last_index() < 40);
}

TEST_CASE("raft disk log: hard state is rewritten only on term or vote change and damage is an error", "[raft_driver][log]") {
  TempDir dir;
  {
    auto log = OpenDisk(dir.path);
    REQUIRE(log->SaveHardState({1, 2, 0}).ok());
    REQUIRE(log->Sync().ok());
    const uint64_t syncs = log->syncs();
    REQUIRE(log->SaveHardState({1, 2, 5}).ok());  // commit only: no file write
    REQUIRE(log->Sync().ok());
    REQUIRE(log->syncs() == syncs);  // nothing was dirty
    REQUIRE(log->SaveHardState({3, kNoNode, 5}).ok());
    REQUIRE(log->Sync().ok());
    REQUIRE(log->syncs() > syncs);  // the rename made the directory dirty
  }
  {
    auto log = OpenDisk(dir.path);
    REQUIRE(log->Recovered().hard.term == 3);
    REQUIRE(log->Recovered().hard.voted_for == kNoNode);
    REQUIRE(log->Recovered().hard.commit == 0);  // clamped: the log is empty
  }
  {
    std::ofstream f(dir.path + "/hardstate", std::ios::binary | std::ios::trunc);
    f << "garbage";
  }
  DiskLogOptions o;
  o.dir = dir.path;
  REQUIRE(DiskLogStorage::Open(o).status().code() == StatusCode::kCorruption);
}

TEST_CASE("raft disk log: Sync syncs only what was written", "[raft_driver][log]") {
  TempDir dir;
  auto log = OpenDisk(dir.path);
  const uint64_t s0 = log->syncs();
  REQUIRE(log->Sync().ok());
  REQUIRE(log->syncs() == s0);
  REQUIRE(log->Append(Entries(1, 3, 1)).ok());
  REQUIRE(log->Sync().ok());
  REQUIRE(log->syncs() > s0);  // segment data (+ the new file's directory entry)
  const uint64_t s1 = log->syncs();
  REQUIRE(log->Append(Entries(4, 4, 1)).ok());
  REQUIRE(log->Sync().ok());
  REQUIRE(log->syncs() == s1 + 1);  // data only
}

TEST_CASE("raft fsync policy names", "[raft_driver][log]") {
  REQUIRE(ParseFsyncPolicy("always").value() == FsyncPolicy::kAlways);
  REQUIRE(ParseFsyncPolicy("batch").value() == FsyncPolicy::kBatch);
  REQUIRE(ParseFsyncPolicy("never").value() == FsyncPolicy::kNever);
  REQUIRE(!ParseFsyncPolicy("sometimes").ok());
  REQUIRE(std::string(FsyncPolicyName(FsyncPolicy::kBatch)) == "batch");
}

}  // namespace
}  // namespace qrstore::replication::raft
