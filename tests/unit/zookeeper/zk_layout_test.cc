// Unit tests of the ZooKeeper backend's pure parts: znode naming, chunking math, marker and
// progress encodings (no server needed).
#include <catch2/catch.hpp>

#include <string>

#include "common/hash.h"
#include "common/rng.h"
#include "replication/zookeeper/zk_layout.h"

using namespace qrstore;
using namespace qrstore::replication::zookeeper;

TEST_CASE("zk layout: paths and names") {
  CHECK(StreamPath("/qrstore", 3, 7) == "/qrstore/g3/p7");
  CHECK(GroupPath("/a/b", 0) == "/a/b/g0");
  CHECK(MarkerName(0) == "b00000000000000000000");
  CHECK(MarkerName(42) == "b00000000000000000042");
  CHECK(MarkerName(UINT64_MAX) == "b18446744073709551615");
  CHECK(ChunkName(5, 1) == "c00000000000000000005-000001");
  CHECK(ConsumerPath("/r", "f1") == "/r/consumers/f1");
  CHECK(LivePath("/r") == "/r/live");
  CHECK(LiveMemberPath("/r", "f1") == "/r/live/f1");
  CHECK(PathPrefixes("/a/b/c") == std::vector<std::string>{"/a", "/a/b", "/a/b/c"});
  CHECK(PathPrefixes("/a") == std::vector<std::string>{"/a"});
  // Zero padding: lexicographic order of names is numeric order of ids.
  CHECK(MarkerName(9) < MarkerName(10));
  CHECK(MarkerName(99999) < MarkerName(100000));
}

TEST_CASE("zk layout: child names parse back, junk is rejected") {
  for (uint64_t id : {0ull, 1ull, 123456789ull, 18446744073709551615ull}) {
    auto m = ParseChildName(MarkerName(id));
    REQUIRE(m);
    CHECK(m->kind == ChildName::Kind::kMarker);
    CHECK(m->batch_id == id);
    auto c = ParseChildName(ChunkName(id, 17));
    REQUIRE(c);
    CHECK(c->kind == ChildName::Kind::kChunk);
    CHECK(c->batch_id == id);
    CHECK(c->chunk == 17);
  }
  CHECK_FALSE(ParseChildName(""));
  CHECK_FALSE(ParseChildName("b123"));                            // not padded
  CHECK_FALSE(ParseChildName("b1844674407370955161x"));           // not digits
  CHECK_FALSE(ParseChildName("b99999999999999999999"));           // overflows uint64
  CHECK_FALSE(ParseChildName("c00000000000000000005-000000"));    // chunk 0 lives in the marker
  CHECK_FALSE(ParseChildName("c00000000000000000005+000001"));
  CHECK_FALSE(ParseChildName("consumers"));
}

TEST_CASE("zk layout: root and follower id validation") {
  CHECK(ValidateRoot("/qrstore").ok());
  CHECK(ValidateRoot("/tests/run-1/x").ok());
  for (const char* bad : {"", "qrstore", "/", "/a/", "/a//b", "/zookeeper", "/a/./b", "/a/../b", "/a\tb"}) {
    Status s = ValidateRoot(bad);
    INFO(bad);
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK(s.message().find("replication.zookeeper.root") != std::string::npos);
  }
  CHECK(ValidateFollowerId("node-1.r2_x").ok());
  CHECK_FALSE(ValidateFollowerId("").ok());
  CHECK_FALSE(ValidateFollowerId("a/b").ok());
  CHECK_FALSE(ValidateFollowerId("..").ok());
  CHECK_FALSE(ValidateFollowerId(std::string(129, 'a')).ok());
}

TEST_CASE("zk layout: chunking math") {
  CHECK(NumChunks(0, 100) == 1);
  CHECK(NumChunks(1, 100) == 1);
  CHECK(NumChunks(100, 100) == 1);
  CHECK(NumChunks(101, 100) == 2);
  CHECK(NumChunks(3 * 1024 * 1024, 900 * 1024) == 4);
  CHECK(NumChunks(900 * 1024, 900 * 1024) == 1);
  // The ranges tile the payload exactly, every piece but the last is full.
  Rng rng(7);
  for (int i = 0; i < 200; ++i) {
    uint64_t size = rng.Uniform(5000);
    uint64_t cb = 1 + rng.Uniform(700);
    uint32_t n = NumChunks(size, cb);
    uint64_t next = 0;
    for (uint32_t k = 0; k < n; ++k) {
      ByteRange r = ChunkRange(size, cb, k);
      CHECK(r.offset == next);
      if (k + 1 < n) CHECK(r.length == cb);
      if (size > 0) CHECK(r.length > 0);
      next += r.length;
    }
    CHECK(next == size);
  }
}

TEST_CASE("zk layout: marker round trip and corruption") {
  std::string payload(2500, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 31 + 7);
  MarkerHeader h = MakeMarkerHeader(payload, 1000);
  CHECK(h.total_bytes == 2500);
  CHECK(h.num_chunks == 3);
  CHECK(h.chunk_bytes == 1000);
  CHECK(h.payload_hash == Hash64(payload));
  std::string enc = EncodeMarker(h, std::string_view(payload).substr(0, 1000));
  CHECK(enc.size() == kMarkerHeaderBytes + 1000);
  MarkerHeader d;
  std::string_view chunk0;
  REQUIRE(DecodeMarker(enc, &d, &chunk0).ok());
  CHECK(d.total_bytes == h.total_bytes);
  CHECK(d.num_chunks == h.num_chunks);
  CHECK(d.payload_hash == h.payload_hash);
  CHECK(chunk0 == std::string_view(payload).substr(0, 1000));

  // Empty payload: one empty chunk inline.
  MarkerHeader e = MakeMarkerHeader("", 1000);
  std::string enc_empty = EncodeMarker(e, "");
  REQUIRE(DecodeMarker(enc_empty, &d, &chunk0).ok());
  CHECK(d.total_bytes == 0);
  CHECK(chunk0.empty());

  // Every truncation is rejected as corruption, never a crash.
  for (size_t n = 0; n < enc.size(); n += 7) {
    CHECK(DecodeMarker(std::string_view(enc).substr(0, n), &d, &chunk0).code() == StatusCode::kCorruption);
  }
  std::string bad = enc;
  bad[0] ^= 1;  // magic
  CHECK(DecodeMarker(bad, &d, &chunk0).code() == StatusCode::kCorruption);
  bad = enc;
  bad[4] = 9;  // version
  CHECK(DecodeMarker(bad, &d, &chunk0).code() == StatusCode::kCorruption);
  bad = enc;
  bad[6] ^= 0x10;  // total length (+4096) no longer matches the chunk count
  CHECK(DecodeMarker(bad, &d, &chunk0).code() == StatusCode::kCorruption);
  CHECK(DecodeMarker(enc + "x", &d, &chunk0).code() == StatusCode::kCorruption);  // inline size
}

TEST_CASE("zk layout: markers carry the writer's epoch, version-1 markers (no epoch) still decode") {
  const std::string payload = "hello epochs";
  MarkerHeader h = MakeMarkerHeader(payload, 1000);
  CHECK(h.epoch == 0);
  h.epoch = 0x0102030405060708ull;
  std::string enc = EncodeMarker(h, payload);
  CHECK(enc.size() == kMarkerHeaderBytes + payload.size());
  MarkerHeader d;
  std::string_view chunk0;
  REQUIRE(DecodeMarker(enc, &d, &chunk0).ok());
  CHECK(d.epoch == h.epoch);
  CHECK(d.payload_hash == h.payload_hash);
  CHECK(chunk0 == payload);
  // A version-1 marker is the version-2 one without the epoch field and with version byte 1.
  std::string v1 = enc.substr(0, kMarkerHeaderBytesV1) + payload;
  v1[4] = 1;
  REQUIRE(DecodeMarker(v1, &d, &chunk0).ok());
  CHECK(d.epoch == 0);
  CHECK(d.total_bytes == payload.size());
  CHECK(chunk0 == payload);
  // The epoch is part of the header: cutting it off is corruption, not a shorter payload.
  CHECK(DecodeMarker(std::string_view(enc).substr(0, kMarkerHeaderBytes - 1), &d, &chunk0).code() ==
        StatusCode::kCorruption);
}

TEST_CASE("zk layout: epoch and election paths, election znode names") {
  CHECK(EpochPath("/q", 2) == "/q/g2/epoch");
  CHECK(ElectionPath("/q", 2) == "/q/g2/election");
  CHECK(ElectionNodePrefix(0x1234abcd) == "n-000000001234abcd-");
  CHECK(ElectionNodePrefix(-1) == "n-ffffffffffffffff-");
  auto seq = ParseElectionSeq(ElectionNodePrefix(77) + "0000000012");
  REQUIRE(seq.has_value());
  CHECK(*seq == 12);
  CHECK(ParseElectionSeq("n-00-4294967295").value() == 4294967295ull);
  CHECK_FALSE(ParseElectionSeq("n-00-12").has_value());          // not 10 digits
  CHECK_FALSE(ParseElectionSeq("x-00-0000000012").has_value());  // not an election znode
  CHECK_FALSE(ParseElectionSeq("n-00-00000000a2").has_value());
  CHECK_FALSE(ParseElectionSeq("").has_value());
  // Stream children are never taken for election znodes and vice versa.
  CHECK_FALSE(ParseElectionSeq(MarkerName(12)).has_value());
  CHECK_FALSE(ParseChildName(ElectionNodePrefix(1) + "0000000001").has_value());
}

TEST_CASE("zk layout: progress round trip and corruption") {
  std::vector<StreamProgress> p = {{0, 0, 5, 3}, {0, 1, 0, 0}, {7, 3, UINT64_MAX, 17}};
  std::string enc = EncodeProgress(p);
  std::vector<StreamProgress> d;
  REQUIRE(DecodeProgress(enc, &d).ok());
  CHECK(d == p);
  REQUIRE(DecodeProgress(EncodeProgress({}), &d).ok());
  CHECK(d.empty());
  for (size_t n = 0; n < enc.size(); ++n) {
    CHECK(DecodeProgress(std::string_view(enc).substr(0, n), &d).code() == StatusCode::kCorruption);
  }
  CHECK(DecodeProgress(enc + "z", &d).code() == StatusCode::kCorruption);
  // keep_from past the next batch is refused.
  CHECK(DecodeProgress(EncodeProgress({{0, 0, 5, 6}}), &d).code() == StatusCode::kCorruption);
  {
    // Version 1 (no keep_from), written by an earlier build: keep_from = next.
    std::string v1 = enc.substr(0, 4) + std::string(1, '\1') + std::string(1, '\1') + std::string(4, '\0') +
                     std::string(4, '\0') + std::string("\x09\0\0\0\0\0\0\0", 8);
    REQUIRE(DecodeProgress(v1, &d).ok());
    REQUIRE(d.size() == 1);
    CHECK(d[0].next_batch_id == 9);
    CHECK(d[0].keep_from == 9);
  }
  // A huge count with few bytes is rejected before allocating.
  std::string huge = enc.substr(0, 5) + std::string("\xff\xff\xff\xff\x0f", 5);
  CHECK(DecodeProgress(huge, &d).code() == StatusCode::kCorruption);
}
