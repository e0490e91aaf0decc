#include "replication/zookeeper/zk_layout.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "common/codec.h"
#include "common/hash.h"

namespace qrstore::replication::zookeeper {
namespace {

constexpr uint32_t kMarkerMagic = 0x4d4b5a51;    // "QZKM"
constexpr uint32_t kProgressMagic = 0x504b5a51;  // "QZKP"
constexpr uint8_t kProgressVersion = 2;  // progress (version 1 had no keep_from; still read)
constexpr uint8_t kMarkerVersion = 2;   // markers: version 1 + the epoch
constexpr size_t kIdDigits = 20;                 // enough for any uint64
constexpr size_t kChunkDigits = 6;

bool ParseDigits(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

}  // namespace

std::string GroupPath(const std::string& root, uint32_t group) { return root + "/g" + std::to_string(group); }

std::string StreamPath(const std::string& root, uint32_t group, uint32_t planner) {
  return GroupPath(root, group) + "/p" + std::to_string(planner);
}

std::string MarkerName(uint64_t batch_id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "b%020" PRIu64, batch_id);
  return buf;
}

std::string ChunkName(uint64_t batch_id, uint32_t chunk) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "c%020" PRIu64 "-%06" PRIu32, batch_id, chunk);
  return buf;
}

std::string ConsumersPath(const std::string& root) { return root + "/consumers"; }

std::string LivePath(const std::string& root) { return root + "/live"; }

std::string LiveMemberPath(const std::string& root, const std::string& follower_id) {
  return LivePath(root) + "/" + follower_id;
}

std::string EpochPath(const std::string& root, uint32_t group) { return GroupPath(root, group) + "/epoch"; }

std::string ElectionPath(const std::string& root, uint32_t group) { return GroupPath(root, group) + "/election"; }

std::string ElectionNodePrefix(int64_t session_id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "n-%016" PRIx64 "-", static_cast<uint64_t>(session_id));
  return buf;
}

std::optional<uint64_t> ParseElectionSeq(std::string_view name) {
  if (name.size() < 2 + 10 || name.substr(0, 2) != "n-") return std::nullopt;
  size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || dash < 1 || name.size() - dash - 1 != 10) return std::nullopt;
  uint64_t seq = 0;
  if (!ParseDigits(name.substr(dash + 1), &seq)) return std::nullopt;
  return seq;
}

std::string ConsumerPath(const std::string& root, const std::string& follower_id) {
  return ConsumersPath(root) + "/" + follower_id;
}

std::vector<std::string> PathPrefixes(const std::string& path) {
  std::vector<std::string> out;
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') out.push_back(path.substr(0, i));
  }
  return out;
}

Status ValidateRoot(const std::string& root) {
  if (root.empty() || root[0] != '/') {
    return Status::InvalidArgument("replication.zookeeper.root: must be an absolute znode path like /qrstore (got '" +
                                   root + "')");
  }
  if (root.size() == 1) return Status::InvalidArgument("replication.zookeeper.root: must not be '/' itself");
  if (root.back() == '/') return Status::InvalidArgument("replication.zookeeper.root: must not end with '/'");
  if (root.find("//") != std::string::npos) {
    return Status::InvalidArgument("replication.zookeeper.root: must not contain '//' (got '" + root + "')");
  }
  for (char c : root) {
    if (c <= 0x1f || c >= 0x7f) {
      return Status::InvalidArgument("replication.zookeeper.root: printable ASCII only (got '" + root + "')");
    }
  }
  for (const auto& part : PathPrefixes(root)) {
    auto last = part.substr(part.rfind('/') + 1);
    if (last == "." || last == ".." || last == "zookeeper") {
      return Status::InvalidArgument("replication.zookeeper.root: '" + last + "' is not allowed as a path element");
    }
  }
  return Status::Ok();
}

Status ValidateFollowerId(const std::string& id) {
  if (id.empty() || id.size() > 128) {
    return Status::InvalidArgument("replication.zookeeper.follower_id: must have 1..128 characters");
  }
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-';
    if (!ok) {
      return Status::InvalidArgument("replication.zookeeper.follower_id: only [A-Za-z0-9._-] allowed (got '" + id +
                                     "')");
    }
  }
  if (id == "." || id == "..") return Status::InvalidArgument("replication.zookeeper.follower_id: '.' and '..' are not allowed");
  return Status::Ok();
}

std::optional<ChildName> ParseChildName(std::string_view name) {
  ChildName out;
  if (name.size() == 1 + kIdDigits && name[0] == 'b') {
    if (!ParseDigits(name.substr(1), &out.batch_id)) return std::nullopt;
    out.kind = ChildName::Kind::kMarker;
    return out;
  }
  if (name.size() == 1 + kIdDigits + 1 + kChunkDigits && name[0] == 'c' && name[1 + kIdDigits] == '-') {
    uint64_t chunk = 0;
    if (!ParseDigits(name.substr(1, kIdDigits), &out.batch_id)) return std::nullopt;
    if (!ParseDigits(name.substr(2 + kIdDigits), &chunk) || chunk == 0) return std::nullopt;
    out.kind = ChildName::Kind::kChunk;
    out.chunk = static_cast<uint32_t>(chunk);
    return out;
  }
  return std::nullopt;
}

uint32_t NumChunks(uint64_t size, uint64_t chunk_bytes) {
  QR_CHECK(chunk_bytes > 0);
  if (size == 0) return 1;
  uint64_t n = (size + chunk_bytes - 1) / chunk_bytes;
  QR_CHECK(n <= UINT32_MAX, "payload of %llu bytes needs too many chunks", static_cast<unsigned long long>(size));
  return static_cast<uint32_t>(n);
}

ByteRange ChunkRange(uint64_t size, uint64_t chunk_bytes, uint32_t chunk) {
  QR_CHECK_LT(chunk, NumChunks(size, chunk_bytes));
  ByteRange r;
  r.offset = static_cast<uint64_t>(chunk) * chunk_bytes;
  r.length = std::min<uint64_t>(chunk_bytes, size - r.offset);
  return r;
}

MarkerHeader MakeMarkerHeader(std::string_view payload, uint64_t chunk_bytes) {
  QR_CHECK(chunk_bytes > 0 && chunk_bytes <= kMaxChunkBytes);
  MarkerHeader h;
  h.total_bytes = payload.size();
  h.chunk_bytes = static_cast<uint32_t>(chunk_bytes);
  h.num_chunks = NumChunks(payload.size(), chunk_bytes);
  h.payload_hash = Hash64(payload);
  return h;
}

std::string EncodeMarker(const MarkerHeader& header, std::string_view chunk0) {
  Writer w(kMarkerHeaderBytes + chunk0.size());
  w.PutU32(kMarkerMagic);
  w.PutU8(kMarkerVersion);
  w.PutU64(header.total_bytes);
  w.PutU32(header.chunk_bytes);
  w.PutU32(header.num_chunks);
  w.PutU64(header.payload_hash);
  w.PutU64(header.epoch);
  w.PutRaw(chunk0.data(), chunk0.size());
  QR_CHECK_EQ(w.size(), kMarkerHeaderBytes + chunk0.size());
  return w.Release();
}

Status DecodeMarker(std::string_view bytes, MarkerHeader* header, std::string_view* chunk0) {
  Reader r(bytes);
  uint32_t magic = 0;
  uint8_t version = 0;
  MarkerHeader h;
  r.GetU32(&magic);
  r.GetU8(&version);
  r.GetU64(&h.total_bytes);
  r.GetU32(&h.chunk_bytes);
  r.GetU32(&h.num_chunks);
  r.GetU64(&h.payload_hash);
  if (r.ok() && version == kMarkerVersion) r.GetU64(&h.epoch);  // version 1: no epoch (0)
  if (!r.ok()) return Status::Corruption("zookeeper batch marker: truncated header (" + std::to_string(bytes.size()) + " bytes)");
  if (magic != kMarkerMagic) return Status::Corruption("zookeeper batch marker: bad magic (not written by qrstore?)");
  if (version != 1 && version != kMarkerVersion) {
    return Status::Corruption("zookeeper batch marker: unknown version " + std::to_string(version));
  }
  if (h.chunk_bytes == 0 || h.chunk_bytes > kMaxChunkBytes) {
    return Status::Corruption("zookeeper batch marker: bad chunk size " + std::to_string(h.chunk_bytes));
  }
  if (h.total_bytes / h.chunk_bytes >= UINT32_MAX) return Status::Corruption("zookeeper batch marker: absurd total length");
  if (h.num_chunks != NumChunks(h.total_bytes, h.chunk_bytes)) {
    return Status::Corruption("zookeeper batch marker: chunk count " + std::to_string(h.num_chunks) +
                              " does not match length " + std::to_string(h.total_bytes));
  }
  std::string_view inline_bytes;
  r.GetRaw(r.remaining(), &inline_bytes);
  if (inline_bytes.size() != ChunkRange(h.total_bytes, h.chunk_bytes, 0).length) {
    return Status::Corruption("zookeeper batch marker: inline chunk has " + std::to_string(inline_bytes.size()) +
                              " bytes, header says " + std::to_string(ChunkRange(h.total_bytes, h.chunk_bytes, 0).length));
  }
  *header = h;
  *chunk0 = inline_bytes;
  return Status::Ok();
}

std::string EncodeProgress(const std::vector<StreamProgress>& progress) {
  Writer w(8 + progress.size() * 24);
  w.PutU32(kProgressMagic);
  w.PutU8(kProgressVersion);
  w.PutVarint(progress.size());
  for (const auto& p : progress) {
    w.PutU32(p.group);
    w.PutU32(p.planner);
    w.PutU64(p.next_batch_id);
    w.PutU64(p.keep_from);
  }
  return w.Release();
}

Status DecodeProgress(std::string_view bytes, std::vector<StreamProgress>* progress) {
  Reader r(bytes);
  uint32_t magic = 0;
  uint8_t version = 0;
  uint64_t count = 0;
  r.GetU32(&magic);
  r.GetU8(&version);
  if (!r.ok() || magic != kProgressMagic) return Status::Corruption("zookeeper follower progress: bad magic or truncated");
  if (version != 1 && version != kProgressVersion) {
    return Status::Corruption("zookeeper follower progress: unknown version " + std::to_string(version));
  }
  const size_t entry_bytes = version == 1 ? 16 : 24;
  if (!r.GetCount(&count, entry_bytes)) return Status::Corruption("zookeeper follower progress: bad entry count");
  std::vector<StreamProgress> out(count);
  for (auto& p : out) {
    r.GetU32(&p.group);
    r.GetU32(&p.planner);
    r.GetU64(&p.next_batch_id);
    p.keep_from = p.next_batch_id;
    if (version >= 2) r.GetU64(&p.keep_from);
  }
  if (!r.ok() || !r.done()) return Status::Corruption("zookeeper follower progress: truncated or trailing bytes");
  for (const auto& p : out) {
    if (p.keep_from > p.next_batch_id) {
      return Status::Corruption("zookeeper follower progress: keep_from " + std::to_string(p.keep_from) +
                                " past next batch " + std::to_string(p.next_batch_id));
    }
  }
  *progress = std::move(out);
  return Status::Ok();
}

}  // namespace qrstore::replication::zookeeper
