#include "replication/raft/message_codec.h"

#include "common/codec.h"

namespace qrstore::replication::raft {

namespace {

// The smallest possible encoded entry: three one-byte varints (term, index, data length).
constexpr size_t kMinEntryBytes = 3;

Status Corrupt(const std::string& what) {
  return Status::Corruption("raft message: " + what);
}

}  // namespace

std::string EncodeMessage(const Message& m) {
  size_t data_bytes = 0;
  for (const Entry& e : m.entries) data_bytes += e.data.size() + 24;
  Writer w(64 + data_bytes);
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
    w.PutBytes(e.data);
  }
  return w.Release();
}

Result<Message> DecodeMessage(std::string_view bytes) {
  Reader r(bytes);
  Message m;
  uint8_t version = 0, type = 0, reject = 0;
  if (!r.GetU8(&version)) return Corrupt("truncated before the version");
  if (version != kMessageCodecVersion) {
    return Corrupt("unknown codec version " + std::to_string(version));
  }
  if (!r.GetU8(&type)) return Corrupt("truncated before the type");
  if (type > static_cast<uint8_t>(MessageType::kAppendResponse)) {
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
  if (!r.GetCount(&count, kMinEntryBytes)) return Corrupt("bad or truncated entry count");
  if (count > 0 && m.type != MessageType::kAppendRequest) {
    return Corrupt(std::string("entries on a ") + MessageTypeName(m.type));
  }
  m.entries.reserve(count);  // bounded by GetCount: count * kMinEntryBytes <= input size
  for (uint64_t i = 0; i < count; ++i) {
    Entry e;
    std::string data;
    if (!r.GetVarint(&e.term) || !r.GetVarint(&e.index) || !r.GetBytes(&data)) {
      return Corrupt("truncated entry " + std::to_string(i));
    }
    e.data = std::move(data);
    if (e.index != m.log_index + 1 + i) {
      return Corrupt("entry " + std::to_string(i) + " has index " + std::to_string(e.index) +
                     ", expected " + std::to_string(m.log_index + 1 + i));
    }
    m.entries.push_back(std::move(e));
  }
  if (!r.done()) return Corrupt(std::to_string(r.remaining()) + " trailing bytes");
  return m;
}

}  // namespace qrstore::replication::raft
