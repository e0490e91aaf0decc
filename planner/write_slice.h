// What a leader replicates per (batch, planner) slice under replication.point = writes (the
// paper's RP3: docs/replication-points.md): the slice's transactions as the commit stage needs
// them (id, client, session, seq, write ops) with the fate the leader's execution gave each,
// and, in slice planner 0 only, the last image of every record the whole batch wrote, by
// executor range. A follower installs the images and commits the fates; it never executes.
//
// Bytes: magic "QW1", varint batch, planner, record size, txn count; per txn varint id, client,
// session, seq, write ops and a fate byte (0 committed, 1 aborted by logic); varint range count
// (0 but in slice 0); per range a varint key count, the keys as varint deltas (the first from 0,
// each later one from the one before: keys strictly increase), then the images, record size each.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "planner/eq.h"
#include "storage/key_map.h"

namespace qrstore::planner {

inline constexpr char kWriteMagic[3] = {'Q', 'W', '1'};

// `fates[i]`: slice.txns[i]'s fate. `keys` / `images` (nullptr: none, as in slices other than
// planner 0): per range, as RangeExecutor::Capture gives them. Leaves
// ReplicaEncoder::kHeaderRoomBytes of spare capacity for the replication layers' headers.
std::string EncodeWriteSlice(const PlannedSlice& slice, const std::vector<uint8_t>& fates,
                             const std::vector<std::vector<storage::Key>>* keys, const std::vector<std::string>* images,
                             uint32_t record_bytes);
bool IsWriteSlice(std::string_view bytes);
// Decodes into `out` (Reset to (batch, planner) with `ranges` EQs, all empty; out->writes.given)
// and checks it against the executing node: the expected (batch, planner), its record size,
// its executor ranges (a range count of 0 or, in slice 0 only, ranges.buckets(); every key in its
// range, keys strictly increasing) and known fates. kCorruption naming what is wrong.
Status DecodeWriteSlice(std::string_view bytes, uint32_t record_bytes, const storage::KeyMapper& ranges,
                        uint64_t batch, uint32_t planner, PlannedSlice* out);

}  // namespace qrstore::planner
