// Writes the seed corpora of the fuzz targets from real encodings, and the known-bad inputs that
// are regression tests from the start (run by hand after a format change; the output is
// checked in under tests/fuzz/corpus/<target>/ and tests/fuzz/regressions/<target>/):
//   build/bin/fuzz_make_seeds tests/fuzz
// It also writes the dictionary of fuzz_config (tests/fuzz/dict/fuzz_config.dict) from the
// cluster schema, so the fuzzer knows every key.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "cluster/config/cluster_config.h"
#include "cluster/port/protocol.h"
#include "cluster/row/row_messages.h"
#include "common/config.h"
#include "engine/pipeline.h"
#include "common/rng.h"
#include "planner/eq.h"
#include "planner/input_slice.h"
#include "planner/planner.h"
#include "planner/row_planner.h"
#include "planner/write_slice.h"
#include "replication/compression.h"
#include "replication/raft/log_storage.h"
#include "replication/raft/message_codec.h"
#include "replication/raft/transport.h"
#include "replication/zookeeper/zk_layout.h"
#include "storage/key_map.h"
#include "storage/record.h"
#include "storage/table.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
namespace proto = cluster::proto;

namespace {
void Write(const std::filesystem::path& dir, const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<storage::Txn> Txns(uint64_t seed, size_t n, uint64_t keys) {
  Rng rng(seed);
  std::vector<storage::Txn> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].id = seed * 1000 + i;
    const size_t ops = 1 + rng.Uniform(5);
    for (size_t j = 0; j < ops; ++j) {
      storage::Op op;
      op.key = rng.Uniform(keys);
      switch (rng.Uniform(6)) {
        case 0: op.kind = storage::OpKind::kRead; break;
        case 1: op.kind = storage::OpKind::kUpdate; break;
        case 2: op.kind = storage::OpKind::kDepWrite; op.src_key = rng.Uniform(keys); break;
        case 3: op.kind = storage::OpKind::kAbortIf; op.arg = 5000; break;
        case 4: op.kind = storage::OpKind::kDebit; op.arg = rng.Uniform(2000); break;
        default: op.kind = storage::OpKind::kCredit; op.arg = rng.Uniform(2000); break;
      }
      out[i].ops.push_back(op);
    }
  }
  return out;
}

// Input slices (planner/input_slice.h): a byte for the executor count (bits 1-7: count - 1) and
// the range mapping (bit 0: range), then the encoding of the txns a leader's planner took.
void WriteInputSlices(const std::filesystem::path& dir) {
  auto mode = [](uint32_t executors, bool range_map) {
    return std::string(1, static_cast<char>(((executors - 1) << 1) | (range_map ? 1u : 0u)));
  };
  int n = 0;
  for (uint32_t executors : {1u, 2u, 3u}) {
    for (uint64_t seed : {1u, 2u}) {
      std::vector<storage::Txn> txns = Txns(seed * 13 + executors, 4 + seed * 2, 256);
      // Client sessions (docs/sessions.md): an open-session entry and txns with session and seq.
      txns[0].session = storage::kOpenSession;
      txns[0].ops.clear();
      for (size_t i = 1; i < txns.size(); i += 2) {
        txns[i].client = static_cast<uint32_t>(i);
        txns[i].session = executors;
        txns[i].seq = 1000 * seed + i;
      }
      Write(dir, "seed-" + std::to_string(n++),
            mode(executors, seed % 2 == 0) + planner::EncodeInputSlice(seed * 5, executors - 1, txns));
    }
  }
  // Keys beyond the table, values at the edges of their varints, an arg on a kind that ignores it.
  storage::Txn edges;
  edges.id = UINT64_MAX;
  edges.client = UINT32_MAX;
  edges.session = 9;
  edges.seq = UINT64_MAX - 1;
  edges.ops.push_back({storage::OpKind::kDepWrite, 300, 7, 0});
  edges.ops.push_back({storage::OpKind::kDepWrite, 5, UINT64_MAX, 0});
  edges.ops.push_back({storage::OpKind::kCredit, 1ull << 40, 0, UINT64_MAX});
  edges.ops.push_back({storage::OpKind::kUpdate, 3, 0, 17});
  Write(dir, "edges", mode(2, true) + planner::EncodeInputSlice(UINT64_MAX, UINT32_MAX, {edges}));
  // A promoted leader's padding: no txns.
  Write(dir, "empty", mode(3, false) + planner::EncodeInputSlice(7, 1, {}));
}

// Write slices (planner/write_slice.h): the same mode byte as input slices, then the encoding of
// slice (0, 0) with the batch's images, as a leader's on_batch_writes gives them after running
// `txns` through a Pipeline (one executor per range, a table of 256 records of {2, 8}).
std::string LeaderWriteSlice(uint32_t executors, bool range_map, const std::vector<storage::Txn>& txns,
                             bool* any_abort) {
  const storage::RecordLayout layout{2, 8};
  const storage::KeyMapper ranges(range_map ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash,
                                  executors, 256);
  storage::Table table(layout, 256);
  testing::LoadTable(&table, 256, 1000);
  engine::PipelineOptions po;
  po.planners = 1;
  po.executors = executors;
  po.committers = 1;
  po.batches_in_flight = 1;
  po.ranges = ranges;
  po.track_digest = true;
  po.capture_writes = true;
  std::string bytes;
  *any_abort = false;
  engine::Pipeline* leader = nullptr;
  po.on_batch_writes = [&](const executor::ExecutorStageOptions::BatchWrites& w) {
    QR_CHECK(w.batch == 0 && w.slices.size() == 1);
    const planner::PlannedSlice& s = *w.slices[0];
    std::vector<uint8_t> fates(s.txns.size());
    for (uint32_t i = 0; i < fates.size(); ++i) {
      fates[i] = static_cast<uint8_t>(w.fates->Of(0, i));
      QR_CHECK(fates[i] <= 1, "a single node's fate %u", static_cast<unsigned>(fates[i]));
      *any_abort = *any_abort || fates[i] != 0;
    }
    bytes = planner::EncodeWriteSlice(s, fates, w.keys, w.images, layout.size());
    leader->MarkReplicated(0, 0);  // held back until now: what it was given stays valid
  };
  engine::Pipeline pipeline(po, &table, [](const std::vector<commit::TxnOutcome>&) {});
  leader = &pipeline;
  QR_CHECK(pipeline.Start().ok());
  planner::PlannedSlice* slot = pipeline.BeginSlice(0, 0);
  QR_CHECK(slot != nullptr);
  planner::Planner(ranges).PlanSlice(0, 0, txns, slot);
  pipeline.PublishSlice(0, 0, 0, false);
  pipeline.EndInput(1);
  QR_CHECK(pipeline.WaitIdle(10'000).ok());
  pipeline.Stop();
  QR_CHECK(!bytes.empty());
  return std::string(1, static_cast<char>(((executors - 1) << 1) | (range_map ? 1u : 0u))) + bytes;
}

void WriteWriteSlices(const std::filesystem::path& dir) {
  int n = 0;
  bool any_abort = false;
  testing::GenOptions g;
  g.keys = 256;
  g.absent = 8;  // writes to absent keys capture nothing
  g.max_ops = 4;
  for (uint32_t executors : {1u, 2u, 3u}) {
    for (bool range_map : {false, true}) {
      std::vector<storage::Txn> txns = testing::RandomTxns(executors * 2 + (range_map ? 1 : 0), 6, g);
      for (size_t i = 1; i < txns.size(); i += 2) {  // client sessions (docs/sessions.md)
        txns[i].session = executors;
        txns[i].seq = 100 + i;
      }
      Write(dir, "seed-" + std::to_string(n++), LeaderWriteSlice(executors, range_map, txns, &any_abort));
    }
  }
  // Txns that abort by logic: their fates travel, their writes do not.
  g.abort_per_100 = 40;
  g.fire_per_10k = 5000;
  g.debit_per_100 = 20;
  std::vector<storage::Txn> aborting;
  any_abort = false;
  for (uint64_t seed = 1; !any_abort; ++seed) {
    QR_CHECK(seed < 100, "no seed made an aborting txn");
    aborting = testing::RandomTxns(seed, 8, g);
    const std::string bytes = LeaderWriteSlice(2, true, aborting, &any_abort);
    if (any_abort) Write(dir, "aborted", bytes);
  }
  // An empty batch (a promoted leader's padding): no txns, every range empty.
  Write(dir, "empty", LeaderWriteSlice(3, false, {}, &any_abort));
}

namespace raft = replication::raft;

// Raft messages: a mode byte (0 plain, 1 true checksums, 2 a stream of frames; 6 = 2 with the
// frame checksums fixed), then the bytes.
void WriteRaftMessages(const std::filesystem::path& dir) {
  raft::Message vote;
  vote.type = raft::MessageType::kVoteRequest;
  vote.group = 1;
  vote.from = 2;
  vote.to = 0;
  vote.term = 7;
  vote.log_index = 40;
  vote.log_term = 6;
  raft::Message granted = vote;
  granted.type = raft::MessageType::kVoteResponse;
  granted.log_index = granted.log_term = 0;
  raft::Message append;
  append.type = raft::MessageType::kAppendRequest;
  append.from = 0;
  append.to = 1;
  append.term = 7;
  append.log_index = 40;
  append.log_term = 6;
  append.commit = 39;
  append.entries = {raft::Entry{7, 41, std::string("")}, raft::Entry{7, 42, std::string("batch 42 payload")},
                    raft::Entry{7, 43, std::string(300, 'x')}};
  raft::Message response;
  response.type = raft::MessageType::kAppendResponse;
  response.from = 1;
  response.term = 7;
  response.log_index = 43;
  response.reject = true;
  response.hint = 30;
  raft::Message prevote = vote;
  prevote.type = raft::MessageType::kPreVoteRequest;
  prevote.term = 8;  // the term its sender would campaign in
  raft::Message prevote_granted = granted;
  prevote_granted.type = raft::MessageType::kPreVoteResponse;
  prevote_granted.term = 8;
  int n = 0;
  for (const raft::Message* m : {&vote, &granted, &append, &response, &prevote, &prevote_granted}) {
    Write(dir, "message-" + std::to_string(n++), std::string(1, '\0') + raft::EncodeMessage(*m));
  }
  Write(dir, "append-true-checksums", std::string(1, '\1') + raft::EncodeMessage(append));
  const std::string stream = raft::FrameBytes(vote) + raft::FrameBytes(append) + raft::FrameBytes(response);
  Write(dir, "frame-stream", std::string(1, '\2') + stream);
  Write(dir, "frame-stream-fixed", std::string(1, '\6') + stream);
  Write(dir, "frame-append", std::string(1, '\2') + raft::FrameBytes(append));
}

// Payload frames: a flags byte (bit 0 small cap, bit 1 true checksum), then the frame.
void WritePayloadFrames(const std::filesystem::path& dir) {
  using replication::Compression;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "txn " + std::to_string(i) + " update key " + std::to_string(i * 7) + ";";
  const uint64_t cap = 64ull << 20;
  Write(dir, "empty", std::string(1, '\0') + replication::EncodeFrame("", Compression::kNone, cap).value());
  Write(dir, "raw", std::string(1, '\0') + replication::EncodeFrame("hello", Compression::kNone, cap).value());
  Write(dir, "snappy", std::string(1, '\0') + replication::EncodeFrame(text, Compression::kSnappy, cap).value());
  Write(dir, "snappy-fixed", std::string(1, '\2') + replication::EncodeFrame(text, Compression::kSnappy, cap).value());
  Write(dir, "snappy-small-cap",
        std::string(1, '\3') + replication::EncodeFrame(std::string(3000, 'a'), Compression::kSnappy, cap).value());
}

// Disk logs: a flags byte (bit 0 true checksums, bit 1 files named after their headers), then
// segment files separated by "\nSEG\n" (tests/fuzz/fuzz_disk_log.cc).
std::vector<std::string> RealSegments(const std::vector<raft::Entry>& entries, uint64_t segment_bytes, uint64_t compact) {
  std::string dir = (std::filesystem::temp_directory_path() / "qrstore-fuzz-seeds-XXXXXX").string();
  QR_CHECK(::mkdtemp(dir.data()) != nullptr);
  {
    raft::DiskLogOptions o;
    o.dir = dir;
    o.segment_bytes = segment_bytes;
    o.fsync = raft::FsyncPolicy::kNever;
    auto log = raft::DiskLogStorage::Open(o);
    QR_CHECK(log.ok());
    QR_CHECK(log.value()->Append(entries).ok());
    if (compact > 0) QR_CHECK(log.value()->Compact(compact).ok());
    QR_CHECK(log.value()->Sync().ok());
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("seg-", 0) == 0) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(ReadAll(f));
  std::filesystem::remove_all(dir);
  return out;
}

std::string Join(char flags, const std::vector<std::string>& segments) {
  std::string out(1, flags);
  for (size_t i = 0; i < segments.size(); ++i) out += (i > 0 ? "\nSEG\n" : "") + segments[i];
  return out;
}

template <typename T>
void Poke(std::string* b, size_t at, T v) {
  std::memcpy(b->data() + at, &v, sizeof v);
}

void WriteDiskLogs(const std::filesystem::path& dir, const std::filesystem::path& regressions) {
  std::vector<raft::Entry> entries;
  for (raft::Index i = 1; i <= 12; ++i) {
    entries.push_back(raft::Entry{i <= 5 ? 1u : 3u, i, std::string(i % 4 * 9, static_cast<char>('a' + i))});
  }
  const std::vector<std::string> one = RealSegments(entries, 1 << 20, 0);
  const std::vector<std::string> three = RealSegments(entries, 150, 0);
  const std::vector<std::string> compacted = RealSegments(entries, 150, 6);
  QR_CHECK(one.size() == 1 && three.size() >= 3 && compacted.size() < three.size());
  Write(dir, "one-segment", Join('\3', one));
  Write(dir, "three-segments", Join('\3', {three[0], three[1], three[2]}));
  Write(dir, "compacted", Join('\3', {compacted.begin(), compacted.begin() + std::min<size_t>(3, compacted.size())}));
  Write(dir, "unfixed-torn", Join('\2', {one[0].substr(0, one[0].size() - 5)}));
  Write(dir, "empty-segment", Join('\3', {one[0].substr(0, 32)}));
  // Known-bad logs the first recovery accepted (flags 3: the fuzzer's checksums are set true).
  // Offsets: a 32-byte header {magic, version, first_index @8, prev_term @16, checksum}, then
  // records {u32 length, u64 checksum, u64 term @12, u64 index @20, data}.
  const size_t rec2 = 32 + 28 + entries[0].data.size();  // the second record of `one`
  std::string lower = one[0];
  Poke<uint64_t>(&lower, rec2 + 12, 0);  // entry 2 at term 0 after entry 1 at term 1
  Write(regressions, "term-decreases-inside-a-segment", Join('\3', {lower}));
  std::string zero = one[0];
  Poke<uint64_t>(&zero, 8, 0);  // a segment claiming index 0 (the empty log's sentinel)
  for (size_t pos = 32, i = 0; pos + 28 <= zero.size(); ++i) {
    uint32_t len;
    std::memcpy(&len, zero.data() + pos, 4);
    Poke<uint64_t>(&zero, pos + 20, i);
    pos += 28 + len;
  }
  Write(regressions, "segment-at-index-0", Join('\3', {zero}));
  std::string first_prev = one[0];
  Poke<uint64_t>(&first_prev, 16, 9);  // the log's first segment claims entry 0 has term 9
  Write(regressions, "first-segment-prev-term", Join('\3', {first_prev}));
  std::string second = three[1];
  Poke<uint64_t>(&second, 16, 2);  // its predecessor's last entry has term 1 or 3, never 2
  Write(regressions, "segment-prev-term-mismatch", Join('\3', {three[0], second, three[2]}));
}

// ZooKeeper layouts: a selector byte (0 marker, 1 progress, 2 names), then the bytes.
void WriteZkLayouts(const std::filesystem::path& dir) {
  namespace zk = replication::zookeeper;
  const std::string payload(2500, 'p');
  const zk::MarkerHeader chunked = zk::MakeMarkerHeader(payload, 1000);
  Write(dir, "marker-chunked", std::string(1, '\0') + zk::EncodeMarker(chunked, std::string_view(payload).substr(0, 1000)));
  Write(dir, "marker-inline", std::string(1, '\0') + zk::EncodeMarker(zk::MakeMarkerHeader("abc", 1000), "abc"));
  Write(dir, "marker-empty", std::string(1, '\0') + zk::EncodeMarker(zk::MakeMarkerHeader("", 1000), ""));
  Write(dir, "progress", std::string(1, '\1') + zk::EncodeProgress({{0, 0, 17, 17}, {0, 1, 300, 250}, {2, 0, 1ull << 40, 1ull << 40}}));
  Write(dir, "progress-empty", std::string(1, '\1') + zk::EncodeProgress({}));
  Write(dir, "name-marker", std::string(1, '\2') + zk::MarkerName(42));
  Write(dir, "name-chunk", std::string(1, '\2') + zk::ChunkName(42, 3));
  Write(dir, "name-root", std::string(1, '\2') + "/qrstore/test");
  Write(dir, "name-follower", std::string(1, '\2') + "n1.follower_2-a");
}

// Config files: the cluster configs as they are, and the dictionary of every key.
void WriteConfigs(const std::filesystem::path& fuzz_dir, const std::filesystem::path& dir,
                  const std::filesystem::path& regressions) {
  const std::filesystem::path configs = fuzz_dir / ".." / ".." / "configs";
  for (const auto& e : std::filesystem::directory_iterator(configs)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("cluster-", 0) == 0) Write(dir, name, ReadAll(e.path()));
  }
  Write(dir, "anchors", "cluster:\n  name: &n x1\n  nodes:\n    - &row {name: n0, host: h, client_port: 1, "
                        "peer_port: 2, partition: 0, row: 0}\n    - {<<: *row, name: n1, row: 1}\nserver:\n  "
                        "test_wrong_digest_node: *n\n");
  // An alias bomb: 30 lines, each a map holding the level above twice (2^30 values expanded):
  // loading it did not finish within 20 s before Flatten counted what it visits.
  std::string bomb = "a0: &a0 {x: 1, y: 2}\n";
  for (int i = 1; i <= 30; ++i) {
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " {p: *a" + std::to_string(i - 1) + ", q: *a" +
            std::to_string(i - 1) + "}\n";
  }
  Write(regressions, "alias-bomb-30-levels", bomb);
  Write(regressions, "deep-flow-nesting", std::string(5000, '[') + std::string(5000, ']'));
  std::string maps;
  for (int i = 0; i < 3000; ++i) maps += "{k: ";
  Write(regressions, "deep-flow-map-nesting", maps + std::string(3000, '}'));

  ConfigSchema schema;
  cluster::AddClusterConfigKeys(&schema);
  std::set<std::string> words;
  for (const auto& [name, key] : schema.keys()) {
    size_t start = 0;
    for (size_t dot = name.find('.'); ; dot = name.find('.', start)) {
      words.insert(name.substr(start, dot == std::string::npos ? std::string::npos : dot - start) + ":");
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    for (const ConfigKey& c : key.columns) words.insert(c.name + ":");
    for (const std::string& c : key.choices) words.insert(c);
  }
  for (const char* w : {"&a", "*a", "<<: ", "- ", "{", "}", "[", "]", ", ", ": ", "\n  ", "!!str", "---", "true", "1e9"}) {
    words.insert(w);
  }
  std::string dict = "# fuzz_config: every section, key and choice of the cluster schema, and YAML syntax\n"
                     "# (written by build/bin/fuzz_make_seeds tests/fuzz).\n";
  for (const std::string& w : words) {
    std::string q;
    for (char c : w) {
      if (c == '\n') {
        q += "\\x0A";  // libFuzzer dictionaries know only \\, \" and \xAB escapes
      } else {
        if (c == '"' || c == '\\') q += '\\';
        q += c;
      }
    }
    dict += "\"" + q + "\"\n";
  }
  Write(fuzz_dir / "dict", "fuzz_config.dict", dict);
}
}  // namespace

int main(int argc, char** argv) {
  // Writes into <dir>/corpus and <dir>/regressions: refuse anything that looks like a flag, so
  // `fuzz_make_seeds --help` prints usage instead of making a folder named "--help".
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf("usage: fuzz_make_seeds DIR  (DIR = tests/fuzz: rewrites DIR/corpus and DIR/regressions)\n");
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: fuzz_make_seeds DIR  (DIR = tests/fuzz)\n");
    return 2;
  }
  if (!std::filesystem::is_directory(std::filesystem::path(argv[1]) / ".." / ".." / "configs")) {
    std::fprintf(stderr, "fuzz_make_seeds: %s is not a checkout's tests/fuzz (no ../../configs beside it)\n", argv[1]);
    return 2;
  }
  const std::filesystem::path root = std::filesystem::path(argv[1]) / "corpus";
  const std::filesystem::path regressions = std::filesystem::path(argv[1]) / "regressions";
  {
    // Two txns sharing dependency slots crosswise: accepted by the first slice decoder and then
    // deadlocked the executors (executor 0 ran A's write, waiting for slot 1, before B's read of
    // slot 1 in the same EQ). The format now carries slot counts only, so this is what a writer
    // makes of that value; it must be refused.
    planner::Planner p(storage::KeyMapper(storage::KeyMapper::Kind::kRange, 2, 100));
    std::vector<storage::Txn> txns(2);
    txns[0].id = 1;
    txns[0].ops.push_back(storage::Op{storage::OpKind::kDepWrite, 10, 60, 0});
    txns[1].id = 2;
    txns[1].ops.push_back(storage::Op{storage::OpKind::kDepWrite, 70, 20, 0});
    planner::PlannedSlice s;
    p.PlanSlice(0, 0, txns, &s);
    s.txns[0].deps = 2;
    s.txns[1].dep_begin = 0;
    s.txns[1].deps = 2;
    s.eqs[0][0].slot = 1;
    s.eqs[1][1].slot = 0;
    Write(regressions / "fuzz_slice", "crosswise-dependency-slots", std::string(1, '\1') + planner::EncodeSlice(s));
  }
  // Slices: a byte for the range mapping, then the encoding.
  int n = 0;
  for (uint32_t ranges : {1u, 2u, 3u}) {
    for (uint64_t seed : {1u, 2u}) {
      const bool range_map = seed % 2 == 0;
      planner::Planner p(storage::KeyMapper(range_map ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash,
                                            ranges, 256));
      planner::PlannedSlice s;
      std::vector<storage::Txn> txns = Txns(seed * 7 + ranges, 3 + seed * 2, 256);
      // Client sessions (docs/sessions.md): an open-session entry and txns with session and seq.
      txns[0].session = storage::kOpenSession;
      txns[0].ops.clear();
      for (size_t i = 1; i < txns.size(); i += 2) {
        txns[i].session = ranges;
        txns[i].seq = 1000 * seed + i;
      }
      p.PlanSlice(seed, 0, txns, &s);
      Write(root / "fuzz_slice", "seed-" + std::to_string(n++), std::string(1, range_map ? '\1' : '\0') + planner::EncodeSlice(s));
    }
  }
  // Row sub-slices (planner/row_planner.h): 2 partitions of 2 ranges; the decoder and the
  // re-encoding see kDepSend / kDepRecv and home indices (ValidateSlice refuses them on the
  // target's single node).
  for (uint64_t seed : {3u, 4u}) {
    const storage::KeyMapper parts(storage::KeyMapper::Kind::kRange, 2, 256);
    planner::RowPlanner rp(parts, storage::KeyMapper::Within(parts, 2), 0);
    std::vector<planner::PlannedSlice> subs;
    rp.PlanSlices(seed, 0, Txns(seed * 11, 8, 256), &subs);
    for (const auto& sub : subs) Write(root / "fuzz_slice", "seed-" + std::to_string(n++), std::string(1, '\1') + planner::EncodeSlice(sub));
  }
  // Row messages: a selector byte (0 sub-slice, 1 values, 2 votes, 3 peek, 4 report, 5 control,
  // 6 home bundle, 7 batch end, 8 resume, 9 home input), then the message.
  {
    const storage::KeyMapper parts(storage::KeyMapper::Kind::kRange, 2, 256);
    planner::RowPlanner rp(parts, storage::KeyMapper::Within(parts, 2), 0);
    std::vector<planner::PlannedSlice> subs;
    rp.PlanSlices(5, 1, Txns(77, 6, 256), &subs);
    const std::string sub = cluster::EncodeRowMessage(cluster::RowSubSlice{5, 1, 0, planner::EncodeSlice(subs[1]), {}});
    Write(root / "fuzz_row_messages", "sub-slice", std::string(1, '\0') + sub);
    Write(root / "fuzz_row_messages", "sub-slice-peek", std::string(1, '\3') + sub);
    // replication.point = input: a sub-slice with its home slice's input, and the home input a
    // group logs (planned as a follower plans it).
    const std::string input = planner::EncodeInputSlice(5, 1, Txns(77, 6, 256));
    Write(root / "fuzz_row_messages", "sub-slice-input",
          std::string(1, '\0') +
              cluster::EncodeRowMessage(cluster::RowSubSlice{5, 1, 0, planner::EncodeSlice(subs[1]), input}));
    const std::string home_input = cluster::EncodeRowMessage(cluster::RowHomeInput{5, 1, 0, input});
    Write(root / "fuzz_row_messages", "home-input", std::string(1, '\x09') + home_input);
    Write(root / "fuzz_row_messages", "home-input-peek", std::string(1, '\3') + home_input);
    const std::string values = cluster::EncodeRowMessage(cluster::RowDepValues{5, 1, {{0, 17}, {2, -3}, {9, 1ll << 40}}});
    Write(root / "fuzz_row_messages", "values", std::string(1, '\1') + values);
    const std::string votes = cluster::EncodeRowMessage(cluster::RowVotes{5, 1, 2, {{0, 1}, {0, 4}, {1, 0}}});
    Write(root / "fuzz_row_messages", "votes", std::string(1, '\2') + votes);
    cluster::RowReport report{5, 3, 1, {}};
    report.report.Add(0, commit::TxnStatus::kCommitted, "abcd");
    report.report.Add(2, commit::TxnStatus::kAbortedCascade, "");
    report.report.Add(7, commit::TxnStatus::kAbortedLogic, "");
    report.report.Add(8, commit::TxnStatus::kCommitted, "efghijkl");
    Write(root / "fuzz_row_messages", "report", std::string(1, '\4') + cluster::EncodeRowMessage(report));
    Write(root / "fuzz_row_messages", "report-peek", std::string(1, '\3') + cluster::EncodeRowMessage(report));
    Write(root / "fuzz_row_messages", "control",
          std::string(1, '\5') + cluster::EncodeRowMessage(cluster::RowControl{1, cluster::RowControlKind::kFinished, 12}));
    const std::string bundle = cluster::EncodeRowMessage(cluster::RowHomeBundle{
        5, 1, 0, {planner::EncodeSlice(subs[0], planner::SliceEncoding::kWithoutReads), planner::EncodeSlice(subs[1])}});
    Write(root / "fuzz_row_messages", "home-bundle", std::string(1, '\6') + bundle);
    Write(root / "fuzz_row_messages", "home-bundle-peek", std::string(1, '\3') + bundle);
    const std::string end = cluster::EncodeRowMessage(
        cluster::RowBatchEnd{5, 1, {{0, 0, 17}, {0, 3, -4}, {2, 1, 1ll << 40}}, {{0, 2}}, {{0, 2}, {1, 0}, {2, 5}},
                             {{{0, 2}}, {{1, 0}}, {}}});
    Write(root / "fuzz_row_messages", "batch-end", std::string(1, '\7') + end);
    Write(root / "fuzz_row_messages", "batch-end-peek", std::string(1, '\3') + end);
    // replication.point = writes: a partition leader's entry (the record, values sent, reports, images).
    cluster::RowBatchWrites writes;
    writes.end = cluster::RowBatchEnd{5, 1, {{0, 3, -4}}, {{0, 2}}, {{0, 2}, {2, 5}}, {{{0, 2}}}};
    writes.sent = {{0, 0, 1, 17}, {0, 2, 0, -1}};
    writes.reports = {cluster::EncodeRowMessage(report)};
    writes.record_bytes = 4;
    writes.keys = {{3, 9}, {200}};
    writes.images = {"abcdefgh", "wxyz"};
    Write(root / "fuzz_row_messages", "batch-writes-peek", std::string(1, '\3') + cluster::EncodeRowMessage(writes));
    const std::string resume = cluster::EncodeRowMessage(cluster::RowResume{1, false, 7, 40, 0, "127.0.0.1:7101"});
    Write(root / "fuzz_row_messages", "resume", std::string(1, '\10') + resume);
    Write(root / "fuzz_row_messages", "resume-peek", std::string(1, '\3') + resume);
    Write(root / "fuzz_row_messages", "resume-answer",
          std::string(1, '\10') + cluster::EncodeRowMessage(cluster::RowResume{0, true, 7, 38, 36, ""}));
    Write(root / "fuzz_row_messages", "durable",
          std::string(1, '\5') + cluster::EncodeRowMessage(cluster::RowControl{1, cluster::RowControlKind::kDurable, 40}));
  }
  // Client messages: a selector byte, then the body.
  proto::TxnRequest req;
  req.request_id = 7;
  req.txns = Txns(3, 4, 1000);
  Write(root / "fuzz_client_messages", "txn-request", std::string(1, '\0') + proto::EncodeTxnRequest(req));
  req.session = 3;
  for (size_t i = 0; i < req.txns.size(); ++i) req.txns[i].seq = 5 + i * i;
  Write(root / "fuzz_client_messages", "txn-request-session", std::string(1, '\0') + proto::EncodeTxnRequest(req));
  Write(root / "fuzz_client_messages", "open-session", std::string(1, '\7') + proto::EncodeOpenSession({8}));
  Write(root / "fuzz_client_messages", "session-opened", std::string(1, '\10') + proto::EncodeSessionOpened({8, 300}));
  Write(root / "fuzz_client_messages", "checkpoint-fetch",
        std::string(1, '\11') + proto::EncodeCheckpointFetch({9, 120, proto::kAnyCheckpoint, 0, 1 << 20}));
  {
    proto::CheckpointChunk chunk;
    chunk.request_id = 9;
    chunk.batch = 140;
    chunk.file_bytes = 100;
    chunk.offset = 40;
    chunk.data = "a piece of a checkpoint file";
    chunk.checksum = proto::ChunkChecksum(chunk.data);
    Write(root / "fuzz_client_messages", "checkpoint-chunk", std::string(1, '\12') + proto::EncodeCheckpointChunk(chunk));
  }
  proto::TxnReply rep;
  rep.request_id = 7;
  rep.record_bytes = 4;
  proto::TxnResult r;
  r.batch = 3;
  r.index = 2;
  r.reads = 1;
  r.values = "abcd";
  rep.results.push_back(r);
  proto::TxnResult rej;
  rej.code = proto::ResultCode::kRejected;
  rej.detail = "op 0: key 9 out of range [0, 5)";
  rep.results.push_back(rej);
  proto::TxnResult retried;  // a retry answered from the session table
  retried.code = proto::ResultCode::kCommittedNoValues;
  retried.batch = 2;
  rep.results.push_back(retried);
  proto::TxnResult expired;
  expired.code = proto::ResultCode::kExpired;
  expired.detail = "session 3 seq 1: below the floor 7";
  rep.results.push_back(expired);
  Write(root / "fuzz_client_messages", "txn-reply", std::string(1, '\1') + proto::EncodeTxnReply(rep));
  Write(root / "fuzz_client_messages", "error",
        std::string(1, '\2') + proto::EncodeError({4, StatusCode::kUnavailable, "stopping"}));
  Write(root / "fuzz_client_messages", "not-leader",
        std::string(1, '\3') + proto::EncodeNotLeader({5, "n0", "127.0.0.1:7100"}));
  Write(root / "fuzz_client_messages", "status-request", std::string(1, '\4') + proto::EncodeStatusRequest({6}));
  proto::NodeStatus st;
  st.node = "n0";
  st.role = "leader";
  st.state = "serving";
  st.followers.push_back(proto::FollowerView{"n1", true, 4, 0, 4, 0, true, false, ""});
  st.leader = "n0";
  st.term = 3;
  st.sessions = 4;
  st.session_outcomes = 1200;
  Write(root / "fuzz_client_messages", "status-reply", std::string(1, '\5') + proto::EncodeStatusReply(st));
  Write(root / "fuzz_client_messages", "follower-report",
        std::string(1, '\6') + proto::EncodeFollowerReport({"n1", 3, false, {{1, 2}, {2, 3}}}));
  WriteInputSlices(root / "fuzz_input_slice");
  WriteWriteSlices(root / "fuzz_write_slice");
  WriteRaftMessages(root / "fuzz_raft_messages");
  WritePayloadFrames(root / "fuzz_payload_frames");
  WriteDiskLogs(root / "fuzz_disk_log", regressions / "fuzz_disk_log");
  WriteZkLayouts(root / "fuzz_zk_layout");
  WriteConfigs(std::filesystem::path(argv[1]), root / "fuzz_config", regressions / "fuzz_config");
  std::printf("seeds written under %s\n", root.c_str());
  return 0;
}
