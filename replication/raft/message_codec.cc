#include "replication/raft/message_codec.h"

#include <cstring>

#include "common/codec.h"

namespace qrstore::replication::raft {

namespace {

// The smallest possible encoded entry head: three one-byte varints (term, index, length) and
// the 8-byte checksum.
constexpr size_t kMinEntryHeadBytes = 3 + 8;

Status Corrupt(const std::string& what) { return Status::Corruption("raft message: " + what); }

}  // namespace

std::string EncodeHead(const Message& m) {
  Writer w(64 + m.entries.size() * 32);
  w.PutU8(kMessageCodecVersion);
  w.PutU8(static_cast<uint8_t>(m.type));
  w.PutU32(m.group);
  w.PutU32(m.from);
  w.PutU32(m.to);
  w.PutVarint(m.term);
  w.PutVarint(m.log_index);
  w.PutVarint(m.log_term);
  w.PutVarint(m.commit);
  w.PutU8(m.reject ? 1 : 0);
  w.PutVarint(m.hint);
  w.PutVarint(m.entries.size());
  for (const Entry& e : m.entries) {
    w.PutVarint(e.term);
    w.PutVarint(e.index);
    w.PutVarint(e.data.size());
    w.PutU64(e.data.checksum());
  }
  return w.Release();
}

Result<MessageHead> DecodeHead(std::string_view bytes) {
  Reader r(bytes);
  MessageHead h;
  Message& m = h.message;
  uint8_t version = 0, type = 0, reject = 0;
  if (!r.GetU8(&version)) return Corrupt("truncated before the version");
  if (version != kMessageCodecVersion) return Corrupt("unknown codec version " + std::to_string(version));
  if (!r.GetU8(&type)) return Corrupt("truncated before the type");
  if (type > static_cast<uint8_t>(MessageType::kSnapshotRequest)) {
    return Corrupt("bad message type " + std::to_string(type));
  }
  m.type = static_cast<MessageType>(type);
  if (!r.GetU32(&m.group) || !r.GetU32(&m.from) || !r.GetU32(&m.to) || !r.GetVarint(&m.term) ||
      !r.GetVarint(&m.log_index) || !r.GetVarint(&m.log_term) || !r.GetVarint(&m.commit) ||
      !r.GetU8(&reject) || !r.GetVarint(&m.hint)) {
    return Corrupt("truncated header");
  }
  if (reject > 1) return Corrupt("bad reject flag " + std::to_string(reject));
  m.reject = reject == 1;
  uint64_t count = 0;
  if (!r.GetCount(&count, kMinEntryHeadBytes)) return Corrupt("bad or truncated entry count");
  if (count > 0 && m.type != MessageType::kAppendRequest) {
    return Corrupt(std::string("entries on a ") + MessageTypeName(m.type));
  }
  // Bounded by GetCount: count * kMinEntryHeadBytes <= input size.
  m.entries.resize(count);
  h.entry_bytes.resize(count);
  h.entry_checksums.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    Entry& e = m.entries[i];
    if (!r.GetVarint(&e.term) || !r.GetVarint(&e.index) || !r.GetVarint(&h.entry_bytes[i]) ||
        !r.GetU64(&h.entry_checksums[i])) {
      return Corrupt("truncated entry " + std::to_string(i));
    }
    if (e.index != m.log_index + 1 + i) {
      return Corrupt("entry " + std::to_string(i) + " has index " + std::to_string(e.index) + ", expected " +
                     std::to_string(m.log_index + 1 + i));
    }
    if (h.entry_bytes[i] > UINT64_MAX - h.body_bytes) return Corrupt("entry lengths overflow");
    h.body_bytes += h.entry_bytes[i];
  }
  h.head_bytes = bytes.size() - r.remaining();
  return h;
}

Result<Message> AttachBody(MessageHead head, const std::shared_ptr<const void>& owner, std::string_view body) {
  if (body.size() != head.body_bytes) {
    return Corrupt("body of " + std::to_string(body.size()) + " bytes, the head says " +
                   std::to_string(head.body_bytes));
  }
  Message m = std::move(head.message);
  size_t offset = 0;
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const std::string_view bytes = body.substr(offset, head.entry_bytes[i]);
    offset += bytes.size();
    if (EntryChecksum(bytes) != head.entry_checksums[i]) {
      return Corrupt("entry " + std::to_string(m.entries[i].index) + " fails its checksum");
    }
    m.entries[i].data = EntryData(SharedBytes(owner, bytes), head.entry_checksums[i]);
  }
  return m;
}

std::string EncodeMessage(const Message& m) {
  std::string out = EncodeHead(m);
  size_t body = 0;
  for (const Entry& e : m.entries) body += e.data.size();
  out.reserve(out.size() + body);
  for (const Entry& e : m.entries) out.append(e.data.view());
  return out;
}

Result<Message> DecodeMessage(std::string_view bytes) {
  Result<MessageHead> head = DecodeHead(bytes);
  if (!head.ok()) return head.status();
  const std::string_view body = bytes.substr(head.value().head_bytes);
  if (body.size() < head.value().body_bytes) return Corrupt("truncated entry data");
  if (body.size() > head.value().body_bytes) {
    return Corrupt(std::to_string(body.size() - head.value().body_bytes) + " trailing bytes");
  }
  auto owner = std::make_shared<const std::string>(body);
  return AttachBody(std::move(head).value(), owner, *owner);
}

}  // namespace qrstore::replication::raft
