// Deterministic replication payloads for the tools and tests: payload bytes are a pure
// function of (group, planner, batch id, size), so a follower process can check every byte it
// receives without being told what the leader sent, and a test can check a deliveries file
// after the fact.
//
// Layout: a 32-byte header (magic "QRPG", group, planner, 0, batch id, size; truncated when
// size < 32) then a body copied from a 1 MiB pool of structured records shaped like execution
// queue entries (varint txn ids and keys, small op/field codes, short field values), starting
// at an offset derived from the stream and batch id, with the batch id stamped every 4 KiB.
// So the content compresses about as well as real EQ bytes (compression is measured on it), and
// producing or checking it costs about a memcpy/memcmp.
//
// Thread-safe (the pool is built once, on first use, and then only read).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace qrstore::replication::tools {

inline constexpr size_t kPayloadHeaderBytes = 32;

std::string MakePayload(uint32_t group, uint32_t planner, uint64_t batch_id, size_t size);

// OK when `bytes` is exactly MakePayload(group, planner, batch_id, bytes.size()) and, when at
// least a full header arrived, its size field matches (so a truncated payload is caught).
// Otherwise kCorruption saying what differs (header field or first differing offset).
Status VerifyPayload(uint32_t group, uint32_t planner, uint64_t batch_id, std::string_view bytes);

}  // namespace qrstore::replication::tools
