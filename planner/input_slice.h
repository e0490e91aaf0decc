// The sequenced input of one (batch, planner) slice: what a leader replicates under
// replication.point = input (the paper's RP1, Calvin's design: docs/replication-points.md).
// It is the transactions a planner took from the client queue for that slice, in slice order,
// after the session check; a follower runs the same Planner::PlanSlice on them and gets the
// leader's slice, fragment for fragment (planning is a pure function of batch, planner, the
// txns and the executor ranges).
//
// Bytes: magic "QI1", varint batch, varint planner, varint txn count; per txn: varint id,
// client, session, seq and op count; per op a kind byte, the key, src_key (kDepWrite only) and
// arg (every kind: the planner copies it into the fragment whatever the kind), each a varint. Not encoded: Txn::submit_ns
// and the history-read fields (the planning node's own, as in a planned slice's encoding: a
// follower plans a history read as the plain read it is on every node but the leader).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/txn.h"

namespace qrstore::planner {

inline constexpr char kInputMagic[3] = {'Q', 'I', '1'};
// Most ops one encoded txn may carry (a decoder refuses more: corrupt, not just big).
constexpr uint32_t kMaxInputTxnOps = 1u << 16;

// Leaves ReplicaEncoder::kHeaderRoomBytes of spare capacity for the replication layers' headers.
std::string EncodeInputSlice(uint64_t batch, uint32_t planner, const std::vector<storage::Txn>& txns);
// True when `bytes` starts like an input slice (it may still be corrupt).
bool IsInputSlice(std::string_view bytes);
// Decodes into *batch, *planner and *txns (resized; each txn's op vector keeps its capacity).
// Truncated input, trailing bytes, unknown op kinds and counts beyond what the bytes can hold
// are kCorruption, saying what.
Status DecodeInputSlice(std::string_view bytes, uint64_t* batch, uint32_t* planner, std::vector<storage::Txn>* txns);

}  // namespace qrstore::planner
