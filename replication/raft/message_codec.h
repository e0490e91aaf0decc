// The wire codec for Raft messages (replication/raft/core.h: Message).
//
// Pure functions, thread-safe. The transport adds its own framing (magic, length, checksum);
// this codec only turns a Message into bytes and back, and rejects anything that is not a
// well-formed encoding: truncation at any byte, trailing bytes, an unknown version or type,
// a flag byte other than 0/1, entry counts larger than the remaining bytes could hold,
// entries on a message type that carries none, and entry indexes that are not consecutive
// from log_index + 1. Decoding never allocates more than the input size justifies.
//
// Layout (little-endian, varint = LEB128):
//   u8 version (=1), u8 type, u32 group, u32 from, u32 to,
//   varint term, varint log_index, varint log_term, varint commit, u8 reject, varint hint,
//   varint entry count, then per entry: varint term, varint index, varint length + data bytes.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "replication/raft/core.h"

namespace qrstore::replication::raft {

inline constexpr uint8_t kMessageCodecVersion = 1;

std::string EncodeMessage(const Message& m);
// kCorruption with a message naming the bad field.
Result<Message> DecodeMessage(std::string_view bytes);

}  // namespace qrstore::replication::raft
