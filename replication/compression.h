// Payload framing and the compression decorator.
//
// Every payload a backend replicates is framed (whatever replication.compression says), so a
// corrupt or truncated payload is detected at the receiver instead of being handed to the
// planner as garbage. The frame, little-endian:
//
//   offset size field
//        0    4 magic       "QRPL" (kFrameMagic)
//        4    1 version     kFrameVersion
//        5    1 flags       bit 0: body is Snappy-compressed; other bits must be 0
//        6    2 reserved    must be 0
//        8    4 raw_len     length of the original payload (<= the configured cap)
//       12    4 body_len    length of the body that follows (== the rest of the frame)
//       16    8 checksum    BulkHash64(body, seed = Mix64 of the header words above)
//       24      body        raw bytes, or Snappy(raw bytes)
//
// The checksum covers the body as sent and (through its seed) every header field, so a flipped
// bit anywhere is caught before Snappy looks at the body; after decompression the length is
// checked against raw_len as well.
//
// CompressingReplicator wraps any backend (which only ever sees framed, opaque bytes):
// ReplicateData frames (FrameInPlace; with Snappy it compresses) on the caller's thread;
// ReceiveData hands the backend's callback over to one decode thread ("repl-decode") that
// checks, decompresses and calls the user's callback, so the backend's own thread (e.g. the
// Raft driver) never spends time decompressing. A payload that fails the checks reaches the
// user's callback as kCorruption (and a log line), never as a crash.
//
// Bounds: the decode queue's capacity equals replication.max_pending_receives; ReceiveData
// calls beyond that many outstanding fail at once with kResourceExhausted, so handing a
// backend callback over never blocks the backend's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/bounded_queue.h"
#include "common/status.h"
#include "common/thread.h"
#include "replication/replication.h"

namespace qrstore::replication {

inline constexpr uint32_t kFrameMagic = 0x4c505251;  // "QRPL" little-endian
inline constexpr uint8_t kFrameVersion = 2;  // 2: the 8-lane BulkHash64 checksum
inline constexpr uint8_t kFrameFlagSnappy = 0x01;
inline constexpr size_t kFrameHeaderBytes = 24;
// The frame stores lengths as u32; the configurable cap may not exceed this.
inline constexpr uint64_t kFrameMaxRawBytes = 1ull << 30;

enum class Compression : uint8_t { kNone, kSnappy };

// Frames `raw` (compressing it when asked and when that makes it smaller). Fails with
// kInvalidArgument when raw is longer than max_raw_bytes.
Result<std::string> EncodeFrame(std::string_view raw, Compression compression, uint64_t max_raw_bytes);
// The same frame, made of `payload` itself: uncompressed (or incompressible) bytes get the header
// inserted in front, which moves them within their own buffer when its capacity has
// kFrameHeaderBytes to spare (planner/replica_encoder.h leaves that room) instead of copying them
// into a new one. On error `payload` is unchanged.
Status FrameInPlace(std::string* payload, Compression compression, uint64_t max_raw_bytes);

// Checks and unframes. Every malformed input gives kCorruption with a message saying what is
// wrong (truncated, bad magic, version, flags, lengths, checksum, Snappy body); a raw_len above
// max_raw_bytes, or above what a Snappy body of body_len bytes can expand to (kSnappyMaxExpansion
// times), is rejected before anything is allocated.
// An uncompressed payload comes back as a view into `frame` (no copy).
Result<SharedBytes> DecodeFrame(const SharedBytes& frame, uint64_t max_raw_bytes);
// A Snappy element of n input bytes yields at most 64 bytes for n = 3 (a copy with a 2-byte
// offset), so no valid body expands more than 21.4 times; a frame claiming more is refused
// before its output buffer is allocated (a tiny frame cannot make the receiver allocate the cap).
inline constexpr uint64_t kSnappyMaxExpansion = 32;
// The frame checksum (header fields through the seed, then the body). Public so tests and the
// fuzzer (tests/fuzz/fuzz_payload_frames.cc) can build frames with any header.
uint64_t FrameChecksum(uint8_t version, uint8_t flags, uint32_t raw_len, uint32_t body_len, std::string_view body);

struct CompressionOptions {
  Compression compression = Compression::kNone;
  uint64_t max_raw_bytes = 64ull << 20;
  size_t max_pending_receives = 4096;
};

class CompressingReplicator final : public Replicator {
 public:
  CompressingReplicator(std::unique_ptr<Replicator> inner, CompressionOptions options);
  ~CompressingReplicator() override;

  // Starts the decode thread, then the backend.
  Status Start() override;
  // Stops the backend (which fails its pending callbacks with kAborted: they still pass
  // through the decode thread), then drains and joins the decode thread. Idempotent.
  void Stop() override;
  void ReplicateData(const ReplicateMeta& meta, std::string bytes, ReplicateCallback cb) override;
  void ReceiveData(const ReplicateMeta& meta, ReceiveCallback cb) override;
  Result<uint64_t> NextBatchId(uint32_t group, uint32_t planner) const override;
  bool IsLeader(uint32_t group) const override;
  std::string Name() const override;
  GroupHealth Health(uint32_t group) const override { return inner_->Health(group); }
  LeaderView Leader(uint32_t group) const override { return inner_->Leader(group); }
  void CancelReceives(uint32_t group) override { inner_->CancelReceives(group); }
  void RetainFrom(uint32_t group, uint64_t batch) override { inner_->RetainFrom(group, batch); }
  void HoldFrom(uint32_t group, uint64_t batch, int64_t for_ms) override { inner_->HoldFrom(group, batch, for_ms); }
  bool LogFromStart(uint32_t group) const override { return inner_->LogFromStart(group); }
  LogSyncTotals LogSyncs() const override { return inner_->LogSyncs(); }

  Replicator* inner() { return inner_.get(); }
  // Payloads rejected as corrupt so far (any thread).
  uint64_t corrupt_payloads() const { return corrupt_payloads_.load(std::memory_order_relaxed); }

 private:
  struct Delivery {
    ReplicateMeta meta;
    Status status;
    SharedBytes frame;
    ReceiveCallback cb;
  };
  void DecodeLoop();

  std::unique_ptr<Replicator> inner_;
  const CompressionOptions options_;
  BoundedQueue<Delivery> decode_queue_;
  NamedThread decode_thread_;
  // Outstanding ReceiveData calls (incremented on call, decremented after the user's
  // callback ran); bounds the decode queue so a backend callback never blocks on it.
  std::atomic<size_t> pending_receives_{0};
  std::atomic<uint64_t> corrupt_payloads_{0};
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
};

}  // namespace qrstore::replication
