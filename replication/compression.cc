#include "replication/compression.h"

#include <snappy.h>

#include <algorithm>
#include <cstring>

#include "common/codec.h"
#include "common/hash.h"
#include "common/logging.h"

namespace qrstore::replication {

namespace {

uint64_t HeaderSeed(uint8_t version, uint8_t flags, uint32_t raw_len, uint32_t body_len) {
  uint64_t h = Mix64(kFrameMagic ^ (static_cast<uint64_t>(version) << 32) ^ (static_cast<uint64_t>(flags) << 40));
  return Mix64(h ^ raw_len ^ (static_cast<uint64_t>(body_len) << 32));
}

std::string FrameError(const std::string& what) { return "replication payload frame: " + what; }

}  // namespace

uint64_t FrameChecksum(uint8_t version, uint8_t flags, uint32_t raw_len, uint32_t body_len, std::string_view body) {
  return BulkHash64(body, HeaderSeed(version, flags, raw_len, body_len));
}

namespace {

Status CheckRawSize(size_t raw_size, uint64_t max_raw_bytes) {
  const uint64_t cap = std::min<uint64_t>(max_raw_bytes, kFrameMaxRawBytes);
  if (raw_size <= cap) return Status::Ok();
  return Status::InvalidArgument("replication payload of " + std::to_string(raw_size) +
                                 " bytes exceeds replication.max_payload_bytes (" + std::to_string(cap) + ")");
}

// The frame's header for `body` (what follows it), written to out[0, kFrameHeaderBytes).
void PutHeader(char* out, uint8_t flags, size_t raw_size, std::string_view body) {
  const auto raw_len = static_cast<uint32_t>(raw_size);
  const auto body_len = static_cast<uint32_t>(body.size());
  Writer w(kFrameHeaderBytes);
  w.PutU32(kFrameMagic);
  w.PutU8(kFrameVersion);
  w.PutU8(flags);
  w.PutU16(0);
  w.PutU32(raw_len);
  w.PutU32(body_len);
  w.PutU64(FrameChecksum(kFrameVersion, flags, raw_len, body_len, body));
  const std::string header = w.Release();
  QR_CHECK_EQ(header.size(), kFrameHeaderBytes);
  std::memcpy(out, header.data(), kFrameHeaderBytes);
}

// Snappy(raw) when asked and when that is smaller; otherwise empty (the body is raw itself).
std::string CompressedBody(std::string_view raw, Compression compression) {
  std::string body;
  if (compression == Compression::kSnappy) {
    snappy::Compress(raw.data(), raw.size(), &body);
    // Incompressible payloads are sent raw: the receiver then skips decompression too.
    if (body.size() >= raw.size()) body.clear();
  }
  return body;
}

}  // namespace

Result<std::string> EncodeFrame(std::string_view raw, Compression compression, uint64_t max_raw_bytes) {
  if (Status s = CheckRawSize(raw.size(), max_raw_bytes); !s.ok()) return s;  // before copying it
  std::string frame;
  frame.reserve(raw.size() + kFrameHeaderBytes);
  frame.assign(raw);
  if (Status s = FrameInPlace(&frame, compression, max_raw_bytes); !s.ok()) return s;
  return frame;
}

Status FrameInPlace(std::string* payload, Compression compression, uint64_t max_raw_bytes) {
  if (Status s = CheckRawSize(payload->size(), max_raw_bytes); !s.ok()) return s;
  std::string body = CompressedBody(*payload, compression);
  if (!body.empty()) {
    std::string frame(kFrameHeaderBytes, '\0');
    PutHeader(frame.data(), kFrameFlagSnappy, payload->size(), body);
    frame.append(body);
    *payload = std::move(frame);
    return Status::Ok();
  }
  char header[kFrameHeaderBytes];
  PutHeader(header, 0, payload->size(), *payload);
  payload->insert(0, header, kFrameHeaderBytes);  // in place when the capacity has the room
  return Status::Ok();
}

Result<SharedBytes> DecodeFrame(const SharedBytes& frame, uint64_t max_raw_bytes) {
  if (frame.size() < kFrameHeaderBytes) {
    return Status::Corruption(FrameError("truncated: " + std::to_string(frame.size()) + " bytes, the header alone is " +
                                         std::to_string(kFrameHeaderBytes)));
  }
  Reader r(frame.view());
  uint32_t magic = 0, raw_len = 0, body_len = 0;
  uint8_t version = 0, flags = 0;
  uint16_t reserved = 0;
  uint64_t checksum = 0;
  r.GetU32(&magic);
  r.GetU8(&version);
  r.GetU8(&flags);
  r.GetU16(&reserved);
  r.GetU32(&raw_len);
  r.GetU32(&body_len);
  r.GetU64(&checksum);
  QR_CHECK(r.ok());  // the size was checked above
  if (magic != kFrameMagic) return Status::Corruption(FrameError("bad magic (not a qrstore payload)"));
  if (version != kFrameVersion) {
    return Status::Corruption(FrameError("unsupported version " + std::to_string(version)));
  }
  if ((flags & ~kFrameFlagSnappy) != 0 || reserved != 0) {
    return Status::Corruption(FrameError("unknown flags " + std::to_string(flags) + "/" + std::to_string(reserved)));
  }
  const uint64_t cap = std::min<uint64_t>(max_raw_bytes, kFrameMaxRawBytes);
  if (raw_len > cap) {
    return Status::Corruption(FrameError("raw length " + std::to_string(raw_len) + " exceeds the cap " + std::to_string(cap)));
  }
  if (body_len != r.remaining()) {
    return Status::Corruption(FrameError("body length " + std::to_string(body_len) + " but " +
                                         std::to_string(r.remaining()) + " bytes follow the header (truncated?)"));
  }
  const bool compressed = (flags & kFrameFlagSnappy) != 0;
  if (!compressed && body_len != raw_len) {
    return Status::Corruption(FrameError("uncompressed body of " + std::to_string(body_len) + " bytes, raw length " +
                                         std::to_string(raw_len)));
  }
  std::string_view body = frame.view().substr(kFrameHeaderBytes);
  if (FrameChecksum(version, flags, raw_len, body_len, body) != checksum) {
    return Status::Corruption(FrameError("checksum mismatch"));
  }
  if (!compressed) return frame.Substr(kFrameHeaderBytes);
  if (raw_len > uint64_t{body_len} * kSnappyMaxExpansion) {
    return Status::Corruption(FrameError("Snappy body of " + std::to_string(body_len) +
                                         " bytes cannot expand to the raw length " + std::to_string(raw_len)));
  }
  size_t uncompressed = 0;
  if (!snappy::GetUncompressedLength(body.data(), body.size(), &uncompressed) || uncompressed != raw_len) {
    return Status::Corruption(FrameError("Snappy body does not decode to the raw length " + std::to_string(raw_len)));
  }
  std::string out(raw_len, '\0');
  if (!snappy::RawUncompress(body.data(), body.size(), out.data())) {
    return Status::Corruption(FrameError("Snappy body is malformed"));
  }
  return SharedBytes(std::move(out));
}

CompressingReplicator::CompressingReplicator(std::unique_ptr<Replicator> inner, CompressionOptions options)
    : inner_(std::move(inner)), options_(options), decode_queue_(options.max_pending_receives) {
  QR_CHECK(inner_ != nullptr);
}

CompressingReplicator::~CompressingReplicator() { Stop(); }

Status CompressingReplicator::Start() {
  QR_CHECK(!started_.load(std::memory_order_acquire), "Start called twice");
  decode_thread_ = NamedThread("repl-decode", [this] { DecodeLoop(); });
  started_.store(true, std::memory_order_release);
  Status s = inner_->Start();
  if (!s.ok()) Stop();
  return s;
}

void CompressingReplicator::Stop() {
  if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
  // The backend fails its pending callbacks with kAborted on Stop; they flow through the
  // decode queue, which is drained before the thread exits.
  inner_->Stop();
  decode_queue_.Close();
  decode_thread_.Join();
}

void CompressingReplicator::ReplicateData(const ReplicateMeta& meta, std::string bytes, ReplicateCallback cb) {
  if (Status s = FrameInPlace(&bytes, options_.compression, options_.max_raw_bytes); !s.ok()) {
    cb(meta, s);
    return;
  }
  inner_->ReplicateData(meta, std::move(bytes), std::move(cb));
}

void CompressingReplicator::ReceiveData(const ReplicateMeta& meta, ReceiveCallback cb) {
  if (stopped_.load(std::memory_order_acquire) || !started_.load(std::memory_order_acquire)) {
    cb(meta, Status::Aborted("replicator is not running"), {});
    return;
  }
  if (pending_receives_.fetch_add(1, std::memory_order_acq_rel) >= options_.max_pending_receives) {
    pending_receives_.fetch_sub(1, std::memory_order_acq_rel);
    cb(meta, Status::ResourceExhausted("more than replication.max_pending_receives=" +
                                       std::to_string(options_.max_pending_receives) + " ReceiveData calls outstanding"),
       {});
    return;
  }
  inner_->ReceiveData(meta, [this, cb = std::move(cb)](const ReplicateMeta& m, Status status, SharedBytes frame) mutable {
    Delivery d{m, std::move(status), std::move(frame), std::move(cb)};
    // Never blocks: the queue holds max_pending_receives items and at most that many
    // receives are outstanding. It fails only once closed (a backend calling back after its
    // own Stop returned, which the contract forbids); the user still gets exactly one call.
    if (!decode_queue_.TryPush(d)) {
      pending_receives_.fetch_sub(1, std::memory_order_acq_rel);
      d.cb(d.meta, Status::Aborted("replicator stopped"), {});
    }
  });
}

void CompressingReplicator::DecodeLoop() {
  auto log = Logger("replication");
  while (std::optional<Delivery> d = decode_queue_.Pop()) {
    if (!d->status.ok()) {
      d->cb(d->meta, std::move(d->status), {});
    } else {
      Result<SharedBytes> raw = DecodeFrame(d->frame, options_.max_raw_bytes);
      d->frame = SharedBytes();
      if (raw.ok()) {
        d->cb(d->meta, Status::Ok(), std::move(raw).value());
      } else {
        corrupt_payloads_.fetch_add(1, std::memory_order_relaxed);
        log->error("[g{}/p{}] batch {} rejected: {}", d->meta.group, d->meta.planner, d->meta.batch_id,
                   raw.status().message());
        d->cb(d->meta, raw.status(), {});
      }
    }
    pending_receives_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

Result<uint64_t> CompressingReplicator::NextBatchId(uint32_t group, uint32_t planner) const {
  return inner_->NextBatchId(group, planner);
}

bool CompressingReplicator::IsLeader(uint32_t group) const { return inner_->IsLeader(group); }

std::string CompressingReplicator::Name() const {
  return inner_->Name() + (options_.compression == Compression::kSnappy ? "+snappy" : "");
}

}  // namespace qrstore::replication
