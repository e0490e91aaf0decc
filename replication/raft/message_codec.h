// The wire codec for Raft messages (replication/raft/core.h: Message).
//
// Pure functions, thread-safe. A message is a small HEAD (every field, and per entry its term,
// index, length and checksum) followed by a BODY (the entries' bytes, back to back). Keeping
// the bytes out of the head is what lets the transport send an append without copying or
// re-hashing its payloads: it writes the head, then each entry's own shared buffer (scatter/
// gather), and the receiver reads the body into one buffer whose slices become the entries
// (EntryData views), each checked against the checksum the proposer computed once.
//
// Decoding rejects anything that is not a well-formed encoding: truncation at any byte,
// trailing bytes, an unknown version or type, a flag byte other than 0/1, entry counts larger
// than the remaining bytes could hold, entries on a message type that carries none, entry
// indexes that are not consecutive from log_index + 1, entry lengths whose sum overflows, and
// entry bytes that do not match their checksum. Decoding never allocates more than the input
// size justifies (a streaming reader checks body_bytes against its frame limit before reading).
//
// Head layout (little-endian, varint = LEB128):
//   u8 version (=2), u8 type, u32 group, u32 from, u32 to,
//   varint term, varint log_index, varint log_term, varint commit, u8 reject, varint hint,
//   varint entry count, then per entry: varint term, varint index, varint length, u64 checksum.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "replication/raft/core.h"

namespace qrstore::replication::raft {

inline constexpr uint8_t kMessageCodecVersion = 2;

std::string EncodeHead(const Message& m);

// A decoded head: the message with its entries' data still missing, and what the body holds.
struct MessageHead {
  Message message;                       // entries carry term and index; data empty
  std::vector<uint64_t> entry_bytes;     // per entry
  std::vector<uint64_t> entry_checksums; // per entry
  uint64_t body_bytes = 0;               // sum of entry_bytes
  size_t head_bytes = 0;                 // input bytes the head took
};
// Decodes the head at the start of `bytes` (which may continue with the body).
Result<MessageHead> DecodeHead(std::string_view bytes);
// Completes the message from `body` (exactly head.body_bytes), checking every entry against
// its checksum; the entries become views into `body`, which `owner` keeps alive.
Result<Message> AttachBody(MessageHead head, const std::shared_ptr<const void>& owner, std::string_view body);

// Head and body in one buffer (tests, the simulation, contiguous transports).
std::string EncodeMessage(const Message& m);
// kCorruption with a message naming the bad field. Copies the body once.
Result<Message> DecodeMessage(std::string_view bytes);

}  // namespace qrstore::replication::raft
