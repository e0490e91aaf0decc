#include <catch2/catch.hpp>

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "storage/checkpoint.h"
#include "storage/record.h"
#include "storage/table.h"

using namespace qrstore;
using storage::CheckpointExpect;
using storage::CheckpointMeta;
using storage::Key;
using storage::RecordLayout;
using storage::Table;

namespace {

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/qr_checkpoint_test_XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    REQUIRE(p != nullptr);
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::unique_ptr<Table> MakeTable(RecordLayout l, uint64_t capacity, const std::vector<Key>& keys, int64_t counter) {
  auto t = std::make_unique<Table>(l, capacity);
  std::string rec(l.size(), '\0');
  for (Key k : keys) {
    storage::InitRecord(rec.data(), l, k, counter);
    REQUIRE(t->Insert(k, rec.data()).ok());
  }
  return t;
}

storage::RecordSource SourceOf(const Table& t) {
  return [&t](const storage::RecordEmit& emit) { t.ForEach(emit); };
}

CheckpointMeta MetaFor(const Table& t, uint64_t batch) {
  CheckpointMeta m;
  m.cluster_id = 0xC0FFEE1234ULL;
  m.partition = 1;
  m.partitions = 3;
  m.batch = batch;
  m.stream_next = {batch + 1, batch + 1};
  m.digest = t.Digest();
  m.record_size = t.layout().size();
  m.capacity = t.capacity();
  m.created_unix_ms = 1700000000000;
  return m;
}

CheckpointExpect ExpectFor(const CheckpointMeta& m) {
  return CheckpointExpect{m.cluster_id, m.partition, m.partitions, m.record_size, m.capacity};
}

std::vector<Key> Range(Key first, Key n) {
  std::vector<Key> keys;
  for (Key k = first; k < first + n; ++k) keys.push_back(k);
  return keys;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// Reads `path` into a fresh table of the expected shape.
Status Load(const std::string& path, const CheckpointExpect& expect, RecordLayout l,
            std::unique_ptr<Table>* out = nullptr, CheckpointMeta* meta = nullptr, std::string* extra = nullptr) {
  auto t = std::make_unique<Table>(l, expect.capacity);
  Status st = storage::ReadCheckpoint(path, expect, t.get(), meta, extra);
  if (out != nullptr) *out = std::move(t);
  return st;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void CheckSameRecords(const Table& a, const Table& b) {
  CHECK(a.size() == b.size());
  CHECK(a.Digest() == b.Digest());
  a.ForEach([&](Key k, const char* rec) {
    const char* other = b.Find(k);
    REQUIRE(other != nullptr);
    CHECK(std::memcmp(rec, other, a.layout().size()) == 0);
  });
}

}  // namespace

TEST_CASE("checkpoint: roundtrip of dense and sparse keys, extra blob and meta") {
  TempDir dir;
  const RecordLayout l{4, 8};
  std::vector<Key> keys = {0, 1, 2, 63, 64, 99, 100, 12345, ~0ull, 1ull << 40};
  auto src = MakeTable(l, 100, keys, 7);
  CheckpointMeta meta = MetaFor(*src, 41);
  const std::string extra("sessions\0with\0nuls", 18);
  Result<std::string> path = storage::WriteCheckpoint(dir.path(), meta, SourceOf(*src), extra, 2);
  REQUIRE(path.ok());
  CHECK(path.value() == dir.File("checkpoint-00000000000000000041.qrc"));

  std::unique_ptr<Table> got;
  CheckpointMeta m;
  std::string x;
  Status st = Load(path.value(), ExpectFor(meta), l, &got, &m, &x);
  REQUIRE(st.ok());
  CheckSameRecords(*src, *got);
  CHECK(x == extra);
  CHECK(m.cluster_id == meta.cluster_id);
  CHECK(m.partition == 1);
  CHECK(m.partitions == 3);
  CHECK(m.batch == 41);
  CHECK(m.stream_next == std::vector<uint64_t>{42, 42});
  CHECK(m.digest == src->Digest());
  CHECK(m.record_size == 32);
  CHECK(m.capacity == 100);
  CHECK(m.records == keys.size());
  CHECK(m.created_unix_ms == 1700000000000);
}

TEST_CASE("checkpoint: written with O_DIRECT, the file is byte for byte the buffered one") {
  // The staged direct writes: whole 1 MB pieces, the last one padded and the file cut, the
  // header patched into the first block kept aside. Sizes below one block, below one piece, of
  // several pieces, and whole pieces exactly (the padding then empty).
  const RecordLayout l{4, 8};  // 32-byte records, 40 bytes an entry
  std::string buffered_bytes, direct_bytes;
  for (uint64_t n : {uint64_t{3}, uint64_t{100}, uint64_t{5000}, uint64_t{80000}}) {
    INFO(n << " records");
    std::vector<Key> keys;
    for (uint64_t k = 0; k < n; ++k) keys.push_back(k);
    keys.push_back(1ull << 40);  // a sparse one too
    auto src = MakeTable(l, n + 1, keys, 11);
    const CheckpointMeta meta = MetaFor(*src, 7);
    const std::string extra(3000 + n, 's');
    TempDir buffered, direct;
    Result<std::string> b = storage::WriteCheckpoint(buffered.path(), meta, SourceOf(*src), extra, 1,
                                                     storage::kCheckpointBlockBytes, /*direct_io=*/false);
    Result<std::string> d = storage::WriteCheckpoint(direct.path(), meta, SourceOf(*src), extra, 1,
                                                     storage::kCheckpointBlockBytes, /*direct_io=*/true);
    REQUIRE(b.ok());
    REQUIRE(d.ok());
    std::ifstream fb(b.value(), std::ios::binary), fd(d.value(), std::ios::binary);
    buffered_bytes.assign(std::istreambuf_iterator<char>(fb), {});
    direct_bytes.assign(std::istreambuf_iterator<char>(fd), {});
    CHECK(direct_bytes.size() == buffered_bytes.size());
    CHECK(direct_bytes == buffered_bytes);
    std::unique_ptr<Table> got;
    CheckpointMeta m;
    std::string x;
    REQUIRE(Load(d.value(), ExpectFor(meta), l, &got, &m, &x).ok());
    CheckSameRecords(*src, *got);
    CHECK(x == extra);
    CHECK(m.records == keys.size());
  }
  // One of them spans several 1 MB pieces (80,000 entries of 40 bytes).
  CHECK(direct_bytes.size() > (size_t{3} << 20));
}

TEST_CASE("checkpoint: records and an extra blob larger than the writer's 2 MB stage") {
  // Blocks are built in place in the file's staging buffer: one larger than it (a single record
  // of 2.5 MB) makes the stage grow, keeping the bytes it held; so does the extra blob (5 MB).
  const RecordLayout l{64, 40000};  // 2,560,000-byte records: one per block
  auto src = MakeTable(l, 3, Range(0, 3), 21);
  const CheckpointMeta meta = MetaFor(*src, 8);
  std::string extra(5'000'000, 'e');
  for (size_t i = 0; i < extra.size(); i += 4093) extra[i] = static_cast<char>('a' + i % 26);
  std::string bytes[2];
  for (bool direct : {false, true}) {
    INFO((direct ? "direct" : "buffered"));
    TempDir dir;
    Result<std::string> path =
        storage::WriteCheckpoint(dir.path(), meta, SourceOf(*src), extra, 1, storage::kCheckpointBlockBytes, direct);
    REQUIRE(path.ok());
    bytes[direct] = ReadBytes(path.value());
    std::unique_ptr<Table> got;
    CheckpointMeta m;
    std::string x;
    REQUIRE(Load(path.value(), ExpectFor(meta), l, &got, &m, &x).ok());
    CheckSameRecords(*src, *got);
    CHECK(x == extra);
    CHECK(m.records == 3);
  }
  CHECK(bytes[0].size() > 12'000'000);
  CHECK(bytes[0] == bytes[1]);
}

TEST_CASE("checkpoint: a paced write takes at least its bytes over the rate, and hurries when told") {
  // 60,000 entries of 40 bytes: about 2.4 MB, direct and buffered. At 8 MB/s the write must
  // take at least 0.25 s (a lower bound only: a slow host makes it longer, never shorter).
  const RecordLayout l{4, 8};
  auto src = MakeTable(l, 60000, Range(0, 60000), 5);
  const CheckpointMeta meta = MetaFor(*src, 3);
  for (bool direct : {false, true}) {
    INFO((direct ? "direct" : "buffered"));
    TempDir dir;
    std::atomic<bool> hurry{false};
    const int64_t t0 = NowNanos();
    Result<std::string> path = storage::WriteCheckpoint(dir.path(), meta, SourceOf(*src), "", 1,
                                                        storage::kCheckpointBlockBytes, direct,
                                                        storage::WritePace{8'000'000, &hurry});
    const double secs = static_cast<double>(NowNanos() - t0) / 1e9;
    REQUIRE(path.ok());
    const uint64_t bytes = ReadBytes(path.value()).size();
    REQUIRE(bytes > 2'000'000);
    // Every piece is paced, the last one at the end too.
    CHECK(secs >= static_cast<double>(bytes) / 8e6 * 0.99);
    std::unique_ptr<Table> got;
    REQUIRE(Load(path.value(), ExpectFor(meta), l, &got).ok());
    CheckSameRecords(*src, *got);
  }
  // Told to hurry (a node stopping): a rate of 1 byte a second does not hold it.
  TempDir dir;
  std::atomic<bool> hurry{true};
  REQUIRE(storage::WriteCheckpoint(dir.path(), meta, SourceOf(*src), "", 1, storage::kCheckpointBlockBytes, true,
                                   storage::WritePace{1, &hurry})
              .ok());
}

TEST_CASE("checkpoint: empty table and no streams") {
  TempDir dir;
  const RecordLayout l{2, 8};
  auto src = MakeTable(l, 10, {}, 0);
  CheckpointMeta meta = MetaFor(*src, 0);
  meta.stream_next.clear();
  Result<std::string> path = storage::WriteCheckpoint(dir.path(), meta, SourceOf(*src), "", 1);
  REQUIRE(path.ok());
  std::unique_ptr<Table> got;
  CheckpointMeta m;
  std::string x = "stale";
  REQUIRE(Load(path.value(), ExpectFor(meta), l, &got, &m, &x).ok());
  CHECK(got->size() == 0);
  CHECK(got->Digest() == src->Digest());
  CHECK(m.records == 0);
  CHECK(m.stream_next.empty());
  CHECK(x.empty());
  // header (86) + end marker (4) + extra length and checksum (16) + footer (40)
  CHECK(ReadBytes(path.value()).size() == 146);
}

TEST_CASE("checkpoint: records spanning several blocks") {
  TempDir dir;
  SECTION("small blocks") {
    const RecordLayout l{2, 8};  // 16-byte records, 24-byte entries: 4 per 108-byte block
    std::vector<Key> keys = Range(0, 30);
    for (Key k : Range(1000, 7)) keys.push_back(k);
    auto src = MakeTable(l, 64, keys, 3);
    CheckpointMeta meta = MetaFor(*src, 5);
    Result<std::string> path = storage::WriteCheckpoint(dir.path(), meta, SourceOf(*src), "x", 1, 108);
    REQUIRE(path.ok());
    const std::string bytes = ReadBytes(path.value());
    uint64_t blocks;
    std::memcpy(&blocks, bytes.data() + bytes.size() - 24, 8);  // footer: magic, records, blocks, ...
    CHECK(blocks == 10);                                         // ceil(37 / 4)
    std::unique_ptr<Table> got;
    REQUIRE(Load(path.value(), ExpectFor(meta), l, &got).ok());
    CheckSameRecords(*src, *got);
  }
  SECTION("default 1 MiB blocks, large records") {
    const RecordLayout l{64, 1024};  // 64 KiB records: 15 per block
    auto src = MakeTable(l, 40, Range(0, 40), 9);
    CheckpointMeta meta = MetaFor(*src, 6);
    Result<std::string> path = storage::WriteCheckpoint(dir.path(), meta, SourceOf(*src), "", 1);
    REQUIRE(path.ok());
    const std::string bytes = ReadBytes(path.value());
    uint64_t blocks;
    std::memcpy(&blocks, bytes.data() + bytes.size() - 24, 8);
    CHECK(blocks == 3);
    std::unique_ptr<Table> got;
    REQUIRE(Load(path.value(), ExpectFor(meta), l, &got).ok());
    CheckSameRecords(*src, *got);
  }
}

TEST_CASE("checkpoint: every damage and mismatch is refused with a message naming it") {
  TempDir dir;
  const RecordLayout l{2, 8};  // entries of 24 bytes; block_bytes 108 => 4 records per block
  auto src = MakeTable(l, 16, Range(0, 10), 1);
  CheckpointMeta meta = MetaFor(*src, 9);
  const CheckpointExpect expect = ExpectFor(meta);
  Result<std::string> written = storage::WriteCheckpoint(dir.path(), meta, SourceOf(*src), "session-table", 1, 108);
  REQUIRE(written.ok());
  const std::string good = ReadBytes(written.value());
  // The layout of this file (see checkpoint.h): header 86 + 2*8 = 102 bytes; blocks of 4, 4, 2
  // records at 102, 210, 318; end marker at 378; extra length 382, bytes 390..403, checksum 403;
  // footer 411..451.
  REQUIRE(good.size() == 451);
  REQUIRE(Load(written.value(), expect, l).ok());

  const std::string bad = dir.File("bad.qrc");
  auto refuse = [&](const std::string& bytes, StatusCode code, const std::string& part) {
    WriteBytes(bad, bytes);
    Status st = Load(bad, expect, l);
    INFO(st.ToString());
    CHECK(st.code() == code);
    CHECK(Contains(st.message(), bad + ": "));
    CHECK(Contains(st.message(), part));
  };
  auto flip = [&](size_t offset) {
    std::string b = good;
    b[offset] = static_cast<char>(b[offset] ^ 0x40);
    return b;
  };
  auto set_u32 = [&](size_t offset, uint32_t v) {
    std::string b = good;
    std::memcpy(b.data() + offset, &v, 4);
    return b;
  };

  SECTION("bad magic") { refuse(flip(0), StatusCode::kCorruption, "not a checkpoint (bad magic)"); }
  SECTION("format version 2") {
    refuse(set_u32(6, 2), StatusCode::kInvalidArgument, "format version 2 (this build reads 1)");
  }
  SECTION("flipped byte in the header") { refuse(flip(30), StatusCode::kCorruption, "header checksum mismatch"); }
  SECTION("flipped byte in the stream table") { refuse(flip(90), StatusCode::kCorruption, "header checksum mismatch"); }
  SECTION("flipped byte in a block") {
    refuse(flip(210 + 4 + 30), StatusCode::kCorruption, "checksum mismatch in block 1 at offset 210");
  }
  SECTION("flipped byte in a block checksum") {
    refuse(flip(318 + 4 + 48 + 3), StatusCode::kCorruption, "checksum mismatch in block 2");
  }
  SECTION("two blocks swapped") {
    std::string b = good;
    b.replace(102, 108, good.substr(210, 108));
    b.replace(210, 108, good.substr(102, 108));
    refuse(b, StatusCode::kCorruption, "checksum mismatch in block 0");
  }
  SECTION("flipped byte in extra") { refuse(flip(395), StatusCode::kCorruption, "checksum mismatch in extra"); }
  SECTION("flipped byte in the footer") {
    refuse(flip(411 + 12), StatusCode::kCorruption, "checksum mismatch in footer");
    refuse(flip(450), StatusCode::kCorruption, "checksum mismatch in footer");
  }
  SECTION("truncated anywhere") {
    const std::vector<std::pair<size_t, std::string>> cuts = {
        {0, "truncated in magic at offset 0"},    {4, "truncated in magic"},
        {8, "truncated in format version"},       {50, "truncated in header at offset 10"},
        {95, "truncated in header stream table"}, {102, "truncated in block 0 at offset 102"},
        {150, "truncated in block 0"},            {210, "truncated in block 1 at offset 210"},
        {300, "truncated in block 1"},            {380, "truncated in block 3"},
        {386, "truncated in extra length"},       {395, "truncated in extra (length 13)"},
        {405, "truncated in extra checksum"},     {411, "truncated in footer"},
        {450, "truncated in footer"}};
    for (const auto& [size, part] : cuts) {
      INFO("cut at " << size);
      refuse(good.substr(0, size), StatusCode::kCorruption, part);
    }
  }
  SECTION("trailing bytes") {
    refuse(good + "z", StatusCode::kCorruption, "1 trailing bytes after the footer at offset 451");
  }
  SECTION("record count differs from the header") {
    // Block 2's count turned into an end marker: the blocks hold 8 records, the header says 10.
    refuse(set_u32(318, 0), StatusCode::kCorruption, "record count differs: the blocks hold 8, the header says 10");
    // A count the header's total cannot hold is refused before its bytes are read.
    refuse(set_u32(318, 3), StatusCode::kCorruption, "block 2 at offset 318 holds 3 records");
    refuse(set_u32(102, 1000000), StatusCode::kCorruption, "block 0 at offset 102 holds 1000000 records");
  }
  SECTION("foreign files") {
    auto foreign = [&](CheckpointExpect e, RecordLayout layout, const std::string& part) {
      auto t = std::make_unique<Table>(layout, e.capacity);
      Status st = storage::ReadCheckpoint(written.value(), e, t.get(), nullptr, nullptr);
      INFO(st.ToString());
      CHECK(st.code() == StatusCode::kInvalidArgument);
      CHECK(Contains(st.message(), written.value() + ": foreign checkpoint: "));
      CHECK(Contains(st.message(), part));
    };
    CheckpointExpect e = expect;
    e.cluster_id = 0xBEEF;
    foreign(e, l, "cluster id 0x000000c0ffee1234 in the file, expected 0x000000000000beef");
    e = expect;
    e.partition = 2;
    foreign(e, l, "partition 1 in the file, expected 2");
    e = expect;
    e.partitions = 4;
    foreign(e, l, "partitions 3 in the file, expected 4");
    e = expect;
    e.record_size = 24;
    foreign(e, RecordLayout{3, 8}, "record size 16 in the file, expected 24");
    e = expect;
    e.capacity = 17;
    foreign(e, l, "capacity 16 in the file, expected 17");
    e.partition = 0;
    foreign(e, l, "partition 1 in the file, expected 0; capacity 16 in the file, expected 17");
  }
}

TEST_CASE("checkpoint: a duplicate key from the source is refused by the reader") {
  TempDir dir;
  const RecordLayout l{2, 8};
  auto src = MakeTable(l, 16, {}, 0);
  CheckpointMeta meta = MetaFor(*src, 3);
  const std::string rec(16, 'r');
  auto crafted = [&](const storage::RecordEmit& emit) {
    emit(4, rec.data());
    emit(5, rec.data());
    emit(4, rec.data());
  };
  Result<std::string> path = storage::WriteCheckpoint(dir.path(), meta, crafted, "", 1);
  REQUIRE(path.ok());
  Status st = Load(path.value(), ExpectFor(meta), l);
  CHECK(st.code() == StatusCode::kCorruption);
  CHECK(Contains(st.message(), path.value() + ": duplicate key 4 in block 0"));

  // More records than the capacity is the caller's bug, refused before anything is renamed.
  auto too_many = [&](const storage::RecordEmit& emit) {
    for (Key k = 0; k < 17; ++k) emit(k, rec.data());
  };
  Result<std::string> over = storage::WriteCheckpoint(dir.path(), MetaFor(*src, 4), too_many, "", 1);
  CHECK(over.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(over.status().message(), "17 records, more than the capacity 16"));
  Result<std::vector<std::string>> list = storage::ListCheckpoints(dir.path());
  REQUIRE(list.ok());
  CHECK(list.value() == std::vector<std::string>{path.value()});
}

TEST_CASE("checkpoint: keep-last-K pruning deletes only older checkpoint files") {
  TempDir dir;
  const RecordLayout l{2, 8};
  auto src = MakeTable(l, 8, Range(0, 5), 0);
  WriteBytes(dir.File("notes.txt"), "keep me");
  WriteBytes(dir.File("checkpoint-1.qrc"), "not our pattern");
  for (uint64_t b = 1; b <= 5; ++b) {
    REQUIRE(storage::WriteCheckpoint(dir.path(), MetaFor(*src, b), SourceOf(*src), "", 3).ok());
  }
  Result<std::vector<std::string>> list = storage::ListCheckpoints(dir.path());
  REQUIRE(list.ok());
  CHECK(list.value() == std::vector<std::string>{dir.File(storage::CheckpointFileName(5)),
                                                 dir.File(storage::CheckpointFileName(4)),
                                                 dir.File(storage::CheckpointFileName(3))});
  CHECK(std::filesystem::exists(dir.File("notes.txt")));
  CHECK(std::filesystem::exists(dir.File("checkpoint-1.qrc")));

  // A checkpoint older than the newest file (after falling back past a corrupt one) is kept.
  REQUIRE(storage::WriteCheckpoint(dir.path(), MetaFor(*src, 2), SourceOf(*src), "", 2).ok());
  list = storage::ListCheckpoints(dir.path());
  REQUIRE(list.ok());
  CHECK(list.value() == std::vector<std::string>{dir.File(storage::CheckpointFileName(5)),
                                                 dir.File(storage::CheckpointFileName(2))});

  CHECK(storage::WriteCheckpoint(dir.path(), MetaFor(*src, 6), SourceOf(*src), "", 0).status().code() ==
        StatusCode::kInvalidArgument);
}

TEST_CASE("checkpoint: temp and foreign-named files are never listed, stale temps are removed") {
  TempDir dir;
  const RecordLayout l{2, 8};
  auto src = MakeTable(l, 8, Range(0, 3), 0);
  const std::string stale_tmp = dir.File(".checkpoint-00000000000000000009.qrc.tmp");
  const std::vector<std::string> ignored = {
      "checkpoint-00000000000000000009.qrc.tmp", "checkpoint-9.qrc", "checkpoint-0000000000000000000x.qrc",
      "checkpoint-99999999999999999999.qrc",  // 20 digits beyond 2^64
      "checkpoint-00000000000000000009.qrc~"};
  WriteBytes(stale_tmp, "half a checkpoint");
  for (const std::string& n : ignored) WriteBytes(dir.File(n), "junk");

  Result<std::vector<std::string>> list = storage::ListCheckpoints(dir.path());
  REQUIRE(list.ok());
  CHECK(list.value().empty());
  std::unique_ptr<Table> got;
  std::vector<std::string> refused;
  CheckpointMeta meta = MetaFor(*src, 1);
  Result<std::string> none = storage::LoadNewestCheckpoint(
      dir.path(), ExpectFor(meta), [&] { return std::make_unique<Table>(l, 8); }, &got, nullptr, nullptr, &refused);
  CHECK(none.status().code() == StatusCode::kNotFound);
  CHECK(Contains(none.status().message(), "(0 refused)"));
  CHECK(refused.empty());

  REQUIRE(storage::WriteCheckpoint(dir.path(), meta, SourceOf(*src), "", 1).ok());
  list = storage::ListCheckpoints(dir.path());
  REQUIRE(list.ok());
  CHECK(list.value() == std::vector<std::string>{dir.File(storage::CheckpointFileName(1))});
  CHECK_FALSE(std::filesystem::exists(stale_tmp));
  for (const std::string& n : ignored) CHECK(std::filesystem::exists(dir.File(n)));
}

TEST_CASE("checkpoint: LoadNewest falls back past refused files and lists why") {
  TempDir dir;
  const RecordLayout l{2, 8};
  std::vector<std::unique_ptr<Table>> tables;
  CheckpointExpect expect{};
  for (uint64_t b : {10, 20, 30}) {
    tables.push_back(MakeTable(l, 32, Range(0, b), static_cast<int64_t>(b)));
    CheckpointMeta meta = MetaFor(*tables.back(), b);
    expect = ExpectFor(meta);
    REQUIRE(storage::WriteCheckpoint(dir.path(), meta, SourceOf(*tables.back()), "extra-" + std::to_string(b), 5, 200)
                .ok());
  }
  auto make = [&] { return std::make_unique<Table>(l, 32); };
  auto path_of = [&](uint64_t b) { return dir.File(storage::CheckpointFileName(b)); };
  auto corrupt = [&](uint64_t b) {
    std::string bytes = ReadBytes(path_of(b));
    bytes[150] = static_cast<char>(bytes[150] ^ 1);  // inside block 0
    WriteBytes(path_of(b), bytes);
  };
  // A copy of batch 10 under a newer name: the header's batch decides, so it is refused.
  std::filesystem::copy_file(path_of(10), path_of(40));

  corrupt(30);
  std::unique_ptr<Table> got;
  CheckpointMeta m;
  std::string x;
  std::vector<std::string> refused;
  Result<std::string> loaded = storage::LoadNewestCheckpoint(dir.path(), expect, make, &got, &m, &x, &refused);
  REQUIRE(loaded.ok());
  CHECK(loaded.value() == path_of(20));
  CHECK(m.batch == 20);
  CHECK(x == "extra-20");
  REQUIRE(got != nullptr);
  CheckSameRecords(*tables[1], *got);
  REQUIRE(refused.size() == 2);
  CHECK(refused[0] == path_of(40) + ": the header says batch 10, the file name 40");
  CHECK(Contains(refused[1], path_of(30) + ": checksum mismatch in block 0"));

  corrupt(20);
  corrupt(10);
  refused.clear();
  got.reset();
  Result<std::string> none = storage::LoadNewestCheckpoint(dir.path(), expect, make, &got, &m, &x, &refused);
  CHECK(none.status().code() == StatusCode::kNotFound);
  CHECK(Contains(none.status().message(), "no valid checkpoint in " + dir.path() + " (4 refused)"));
  CHECK(refused.size() == 4);
  CHECK(got == nullptr);
}

TEST_CASE("checkpoint: missing directories and I/O errors name the path") {
  TempDir dir;
  const RecordLayout l{2, 8};
  auto src = MakeTable(l, 8, Range(0, 3), 0);
  const std::string missing = dir.File("nope");
  Result<std::string> w = storage::WriteCheckpoint(missing, MetaFor(*src, 1), SourceOf(*src), "", 1);
  CHECK(w.status().code() == StatusCode::kIoError);
  CHECK(Contains(w.status().message(),
                 "create " + missing + "/.checkpoint-00000000000000000001.qrc.tmp: No such file or directory"));

  CHECK(storage::ListCheckpoints(missing).status().code() == StatusCode::kNotFound);
  std::unique_ptr<Table> got;
  Result<std::string> none = storage::LoadNewestCheckpoint(
      missing, ExpectFor(MetaFor(*src, 1)), [&] { return std::make_unique<Table>(l, 8); }, &got, nullptr, nullptr,
      nullptr);
  CHECK(none.status().code() == StatusCode::kNotFound);
  CHECK(Contains(none.status().message(), missing + " does not exist"));

  Status st = Load(dir.File("absent.qrc"), ExpectFor(MetaFor(*src, 1)), l);
  CHECK(st.code() == StatusCode::kIoError);
  CHECK(Contains(st.message(), dir.File("absent.qrc") + ": open: No such file or directory"));
}
