// Payload framing and the compression decorator: round trips in both modes, and every kind of
// damaged frame (truncation at every length, a flipped bit at every header byte and across
// the body, oversized lengths) is rejected with kCorruption, never a crash.
#include <catch2/catch.hpp>

#include <cstring>
#include <future>
#include <map>

#include "replication/compression.h"
#include "replication/none/none_replicator.h"
#include "replication/raft/raft_replicator.h"
#include "replication/tools/payload.h"

using namespace qrstore;
using namespace qrstore::replication;

namespace {

std::string Sample(size_t n) { return tools::MakePayload(1, 2, 3, n); }

}  // namespace

TEST_CASE("frame: round trip with and without snappy / sizes 0 to 3 MB") {
  for (size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{32}, size_t{100}, size_t{4096}, size_t{100000},
                   size_t{3u << 20}}) {
    for (Compression c : {Compression::kNone, Compression::kSnappy}) {
      std::string raw = Sample(n);
      Result<std::string> f = EncodeFrame(raw, c, 64 << 20);
      REQUIRE(f.ok());
      Result<SharedBytes> back = DecodeFrame(f.value(), 64 << 20);
      REQUIRE(back.ok());
      CHECK(back.value() == raw);
      if (c == Compression::kNone) CHECK(f->size() == raw.size() + kFrameHeaderBytes);
    }
  }
}

TEST_CASE("frame: FrameInPlace makes EncodeFrame's bytes / in the payload's own buffer when it has the room") {
  for (size_t n : {size_t{0}, size_t{31}, size_t{100000}}) {
    for (Compression c : {Compression::kNone, Compression::kSnappy}) {
      const std::string raw = Sample(n);
      std::string payload;
      payload.reserve(n + kFrameHeaderBytes);
      payload = raw;
      payload.reserve(n + kFrameHeaderBytes);
      const char* const buffer = payload.data();
      const bool roomy = payload.capacity() >= n + kFrameHeaderBytes;
      REQUIRE(FrameInPlace(&payload, c, 64 << 20).ok());
      CHECK(payload == EncodeFrame(raw, c, 64 << 20).value());
      CHECK(DecodeFrame(payload, 64 << 20).value() == raw);
      // Uncompressed bytes stay where they were (a small string's inline buffer aside).
      if (c == Compression::kNone && roomy && n > 15) CHECK(payload.data() == buffer);
    }
  }
  std::string over(1001, 'a');
  CHECK(FrameInPlace(&over, Compression::kNone, 1000).code() == StatusCode::kInvalidArgument);
  CHECK(over == std::string(1001, 'a'));  // unchanged on error
}

TEST_CASE("raft batch entry: the header goes in front of the payload, in its own buffer when it has the room") {
  const std::string raw = Sample(100000);
  std::string payload = raw;
  payload.reserve(raw.size() + 64);
  const char* const buffer = payload.data();
  const ReplicateMeta meta{0, 3, 123456789};
  const std::string entry = raft::EncodeBatchEntry(meta, std::move(payload));
  CHECK(entry.data() == buffer);
  ReplicateMeta back;
  size_t offset = 0;
  REQUIRE(raft::DecodeBatchEntryHeader(entry, &back, &offset).ok());
  CHECK(back.planner == 3);
  CHECK(back.batch_id == 123456789);
  CHECK(entry.substr(offset) == raw);
  // Without room it is still right (copied into a bigger buffer).
  const std::string tight = raft::EncodeBatchEntry(meta, raw);
  CHECK(tight == entry);
}

TEST_CASE("frame: snappy shrinks the generated payloads (they model EQ bytes)") {
  std::string raw = Sample(100000);
  Result<std::string> f = EncodeFrame(raw, Compression::kSnappy, 64 << 20);
  REQUIRE(f.ok());
  CHECK(f->size() < raw.size() * 3 / 4);
  CHECK((f.value()[5] & kFrameFlagSnappy) != 0);
}

TEST_CASE("frame: incompressible bytes are sent raw even with snappy") {
  std::string raw(4096, '\0');
  uint64_t x = 1;
  for (auto& ch : raw) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    ch = static_cast<char>(x >> 56);
  }
  Result<std::string> f = EncodeFrame(raw, Compression::kSnappy, 64 << 20);
  REQUIRE(f.ok());
  CHECK((f.value()[5] & kFrameFlagSnappy) == 0);
  CHECK(DecodeFrame(f.value(), 64 << 20).value() == raw);
}

TEST_CASE("frame: every truncation is rejected") {
  for (Compression c : {Compression::kNone, Compression::kSnappy}) {
    std::string f = EncodeFrame(Sample(3000), c, 1 << 20).value();
    for (size_t len = 0; len < f.size(); ++len) {
      Result<SharedBytes> r = DecodeFrame(f.substr(0, len), 1 << 20);
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == StatusCode::kCorruption);
    }
    // Trailing garbage is rejected too.
    CHECK(DecodeFrame(f + "x", 1 << 20).status().code() == StatusCode::kCorruption);
  }
}

TEST_CASE("frame: a flipped bit anywhere is rejected") {
  for (Compression c : {Compression::kNone, Compression::kSnappy}) {
    const std::string good = EncodeFrame(Sample(5000), c, 1 << 20).value();
    size_t rejected = 0, tried = 0;
    for (size_t i = 0; i < good.size(); i += (i < kFrameHeaderBytes ? 1 : 37)) {
      for (int bit : {0, 3, 7}) {
        std::string bad = good;
        bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
        Result<SharedBytes> r = DecodeFrame(bad, 1 << 20);
        ++tried;
        if (!r.ok()) {
          CHECK(r.status().code() == StatusCode::kCorruption);
          ++rejected;
        }
      }
    }
    CHECK(rejected == tried);
  }
}

TEST_CASE("frame: clear messages for each header fault") {
  std::string good = EncodeFrame("hello", Compression::kNone, 1 << 20).value();
  auto msg = [](const std::string& f) { return DecodeFrame(f, 1 << 20).status().message(); };
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  CHECK(msg(bad_magic).find("bad magic") != std::string::npos);
  std::string bad_version = good;
  bad_version[4] = 9;
  CHECK(msg(bad_version).find("unsupported version 9") != std::string::npos);
  std::string bad_flags = good;
  bad_flags[5] = 0x40;
  CHECK(msg(bad_flags).find("unknown flags") != std::string::npos);
  CHECK(msg(good.substr(0, 10)).find("truncated") != std::string::npos);
  std::string bad_sum = good;
  bad_sum.back() ^= 1;
  CHECK(msg(bad_sum).find("checksum mismatch") != std::string::npos);
}

TEST_CASE("frame: raw length cap on both sides / checked before allocating") {
  CHECK(EncodeFrame(std::string(1001, 'a'), Compression::kNone, 1000).status().code() == StatusCode::kInvalidArgument);
  std::string big = EncodeFrame(std::string(5000, 'a'), Compression::kSnappy, 1 << 20).value();
  Result<SharedBytes> r = DecodeFrame(big, 4000);
  CHECK(r.status().code() == StatusCode::kCorruption);
  CHECK(r.status().message().find("exceeds the cap") != std::string::npos);
  // A header claiming 1 GB raw with a tiny body is rejected (cap), not allocated.
  std::string huge = big;
  uint32_t claimed = 1u << 30;
  std::memcpy(huge.data() + 8, &claimed, 4);
  CHECK(DecodeFrame(huge, 64 << 20).status().code() == StatusCode::kCorruption);
}

TEST_CASE("frame: a Snappy body cannot claim more than it can expand to / the densest real body passes") {
  // The densest Snappy output there is (one byte repeated) still decodes.
  for (size_t n : {size_t{64}, size_t{100000}, size_t{4u << 20}}) {
    const std::string zeros(n, '\0');
    std::string f = EncodeFrame(zeros, Compression::kSnappy, 64 << 20).value();
    REQUIRE((static_cast<uint8_t>(f[5]) & kFrameFlagSnappy) != 0);
    CHECK(DecodeFrame(f, 64 << 20).value() == zeros);
  }
  // A well-checksummed 4-byte Snappy body whose preamble claims 32 MB: refused before the output
  // buffer is allocated (before, each such frame cost the receiver a zeroed 32 MB buffer).
  const std::string body("\x80\x80\x80\x10", 4);  // varint 32 MiB, no elements
  const uint32_t raw_len = 32u << 20;
  const uint32_t body_len = static_cast<uint32_t>(body.size());
  std::string f = EncodeFrame("", Compression::kNone, 64 << 20).value();
  f[5] = static_cast<char>(kFrameFlagSnappy);
  std::memcpy(f.data() + 8, &raw_len, 4);
  std::memcpy(f.data() + 12, &body_len, 4);
  const uint64_t sum = FrameChecksum(kFrameVersion, kFrameFlagSnappy, raw_len, body_len, body);
  std::memcpy(f.data() + 16, &sum, 8);
  f += body;
  Result<SharedBytes> r = DecodeFrame(f, 64 << 20);
  CHECK(r.status().code() == StatusCode::kCorruption);
  CHECK(r.status().message().find("cannot expand to the raw length") != std::string::npos);
}

namespace {

// A backend that stores frames and hands them back through `tamper` (test-only; callbacks
// inline on the caller's thread).
class TamperBackend final : public Replicator {
 public:
  std::function<void(std::string*)> tamper = [](std::string*) {};
  Status Start() override { return Status::Ok(); }
  void Stop() override {}
  void ReplicateData(const ReplicateMeta& meta, std::string bytes, ReplicateCallback cb) override {
    frames[meta.batch_id] = std::move(bytes);
    cb(meta, Status::Ok());
  }
  void ReceiveData(const ReplicateMeta& meta, ReceiveCallback cb) override {
    auto it = frames.find(meta.batch_id);
    if (it == frames.end()) return cb(meta, Status::NotFound("no such batch"), {});
    std::string f = it->second;
    tamper(&f);
    cb(meta, Status::Ok(), std::move(f));
  }
  Result<uint64_t> NextBatchId(uint32_t, uint32_t) const override { return frames.size(); }
  bool IsLeader(uint32_t) const override { return true; }
  std::string Name() const override { return "tamper"; }
  GroupHealth Health(uint32_t) const override { return {}; }
  LeaderView Leader(uint32_t) const override { return {}; }
  void CancelReceives(uint32_t) override {}
  void RetainFrom(uint32_t, uint64_t) override {}
  void HoldFrom(uint32_t, uint64_t, int64_t) override {}
  bool LogFromStart(uint32_t) const override { return true; }
  LogSyncTotals LogSyncs() const override { return {}; }
  std::map<uint64_t, std::string> frames;
};

struct Received {
  Status status;
  SharedBytes bytes;
};

Received ReceiveSync(Replicator* r, uint64_t batch) {
  std::promise<Received> p;
  r->ReceiveData(ReplicateMeta{0, 0, batch},
                 [&](const ReplicateMeta&, Status s, SharedBytes b) { p.set_value(Received{std::move(s), std::move(b)}); });
  return p.get_future().get();
}

}  // namespace

TEST_CASE("decorator: backend sees framed (compressed) bytes / receiver gets the raw bytes") {
  auto backend = std::make_unique<TamperBackend>();
  TamperBackend* inner = backend.get();
  CompressingReplicator r(std::move(backend), CompressionOptions{Compression::kSnappy, 1 << 20, 4});
  REQUIRE(r.Start().ok());
  const std::string raw = Sample(50000);
  Status got = Status::Internal("no callback");
  r.ReplicateData(ReplicateMeta{0, 0, 0}, raw, [&](const ReplicateMeta&, Status s) { got = s; });
  CHECK(got.ok());
  REQUIRE(inner->frames.count(0) == 1);
  CHECK(inner->frames[0].size() < raw.size());
  Received rec = ReceiveSync(&r, 0);
  CHECK(rec.status.ok());
  CHECK(rec.bytes == raw);
  CHECK(r.Name() == "tamper+snappy");
  r.Stop();
}

TEST_CASE("decorator: corrupt or truncated payloads reach the callback as kCorruption") {
  auto backend = std::make_unique<TamperBackend>();
  TamperBackend* inner = backend.get();
  CompressingReplicator r(std::move(backend), CompressionOptions{Compression::kSnappy, 1 << 20, 4});
  REQUIRE(r.Start().ok());
  r.ReplicateData(ReplicateMeta{0, 0, 0}, Sample(20000), [](const ReplicateMeta&, Status) {});
  inner->tamper = [](std::string* f) { (*f)[f->size() / 2] ^= 0x10; };
  Received flipped = ReceiveSync(&r, 0);
  CHECK(flipped.status.code() == StatusCode::kCorruption);
  CHECK(flipped.bytes.empty());
  inner->tamper = [](std::string* f) { f->resize(f->size() - 1); };
  CHECK(ReceiveSync(&r, 0).status.code() == StatusCode::kCorruption);
  inner->tamper = [](std::string* f) { f->clear(); };
  CHECK(ReceiveSync(&r, 0).status.code() == StatusCode::kCorruption);
  CHECK(r.corrupt_payloads() == 3);
  // Backend errors pass through unchanged.
  CHECK(ReceiveSync(&r, 99).status.code() == StatusCode::kNotFound);
  r.Stop();
}

TEST_CASE("decorator: oversized payload fails ReplicateData with kInvalidArgument") {
  CompressingReplicator r(std::make_unique<TamperBackend>(), CompressionOptions{Compression::kNone, 1000, 4});
  REQUIRE(r.Start().ok());
  Status got;
  r.ReplicateData(ReplicateMeta{0, 0, 0}, std::string(1001, 'x'), [&](const ReplicateMeta&, Status s) { got = s; });
  CHECK(got.code() == StatusCode::kInvalidArgument);
  r.Stop();
}

TEST_CASE("decorator: receives beyond max_pending_receives fail fast / Stop aborts parked ones") {
  none::NoneOptions o;
  o.hub = "framing-test-pending";
  CompressingReplicator r(std::make_unique<none::NoneReplicator>(o), CompressionOptions{Compression::kNone, 1 << 20, 2});
  REQUIRE(r.Start().ok());
  std::promise<Status> a, b, c;
  r.ReceiveData(ReplicateMeta{0, 0, 0}, [&](const ReplicateMeta&, Status s, SharedBytes) { a.set_value(s); });
  r.ReceiveData(ReplicateMeta{0, 0, 1}, [&](const ReplicateMeta&, Status s, SharedBytes) { b.set_value(s); });
  r.ReceiveData(ReplicateMeta{0, 0, 2}, [&](const ReplicateMeta&, Status s, SharedBytes) { c.set_value(s); });
  CHECK(c.get_future().get().code() == StatusCode::kResourceExhausted);
  r.Stop();
  CHECK(a.get_future().get().code() == StatusCode::kAborted);
  CHECK(b.get_future().get().code() == StatusCode::kAborted);
}
