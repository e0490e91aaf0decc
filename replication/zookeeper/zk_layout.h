// The ZooKeeper backend's znode layout and on-znode encodings: pure functions, no I/O, no
// threads (unit-tested in tests/unit/zookeeper/zk_layout_test.cc).
//
// Layout under the configured root R (one stream per (group, planner)):
//   R/g<group>/p<planner>                       the stream node (no data)
//   R/g<group>/p<planner>/b<id:20 digits>       batch marker: header + chunk 0, written LAST
//   R/g<group>/p<planner>/c<id:20 digits>-<k:6> chunk k >= 1 of batch id (only when chunked)
//   R/consumers/<follower-id>                   one follower's progress over all its streams
//   R/live/<follower-id>                        EPHEMERAL: the follower's session is alive
//   R/g<group>/epoch                            the group's epoch: its version is the epoch of
//                                               the current leader, its data that leader's id
//   R/g<group>/election/n-<session:16 hex>-<seq:10>  EPHEMERAL_SEQUENTIAL: one candidate (data:
//                                               its member id); the lowest sequence leads
// Zero-padded ids make lexicographic order of child names equal numeric order.
//
// A reader never sees a partial batch: the leader creates every extra chunk of a batch and
// waits for ZooKeeper to acknowledge them before it creates the marker, and the marker names
// the chunk count, total length and a hash of the whole payload. Markers of one stream are
// issued in batch-id order through one session (FIFO), so a valid marker b+1 almost always has a
// larger creation zxid than marker b (not when a connection drops with both in flight: b+1 may
// go out on the new connection before the leader learns that b failed); followers use that to
// detect a stale marker left by a crashed leader beyond a gap, and trust a marker b+1 they read
// after delivering b (see DeliverReady in zk_follower.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace qrstore::replication::zookeeper {

// ZooKeeper rejects (by dropping the connection) znodes around 1 MB (jute.maxbuffer =
// 1,048,575 bytes including request overhead); a chunk plus the marker header must stay below.
inline constexpr uint64_t kMaxChunkBytes = 1000000;
inline constexpr size_t kMarkerHeaderBytes = 4 + 1 + 8 + 4 + 4 + 8 + 8;
// Markers of format version 1 (before epochs) had no epoch field; they still decode (epoch 0).
inline constexpr size_t kMarkerHeaderBytesV1 = 4 + 1 + 8 + 4 + 4 + 8;

// Paths. `root` is absolute, without a trailing slash (validated by ValidateRoot).
std::string StreamPath(const std::string& root, uint32_t group, uint32_t planner);
std::string GroupPath(const std::string& root, uint32_t group);
std::string MarkerName(uint64_t batch_id);
std::string ChunkName(uint64_t batch_id, uint32_t chunk);
std::string ConsumersPath(const std::string& root);
std::string ConsumerPath(const std::string& root, const std::string& follower_id);
std::string LivePath(const std::string& root);
std::string LiveMemberPath(const std::string& root, const std::string& follower_id);
std::string EpochPath(const std::string& root, uint32_t group);
std::string ElectionPath(const std::string& root, uint32_t group);
// The name prefix of a candidate's election znode: "n-<session id, 16 hex digits>-" (ZooKeeper
// appends a 10-digit sequence). The session id in the name lets a candidate whose create was
// lost with the connection find out whether it was applied.
std::string ElectionNodePrefix(int64_t session_id);
// The sequence number of an election znode name ("n-...-0000000012" -> 12); nullopt if the name
// is not one.
std::optional<uint64_t> ParseElectionSeq(std::string_view name);
// Every ancestor of `path` and `path` itself, shortest first: "/a/b" -> {"/a", "/a/b"}.
std::vector<std::string> PathPrefixes(const std::string& path);

Status ValidateRoot(const std::string& root);
// Follower ids become znode names: [A-Za-z0-9._-], 1..128 chars.
Status ValidateFollowerId(const std::string& id);

// A child name of a stream node, parsed. Names that are neither are ignored by the backend.
struct ChildName {
  enum class Kind { kMarker, kChunk } kind = Kind::kMarker;
  uint64_t batch_id = 0;
  uint32_t chunk = 0;  // kChunk only; >= 1
};
std::optional<ChildName> ParseChildName(std::string_view name);

// Chunking: a payload of `size` bytes is cut into NumChunks pieces of chunk_bytes (the last
// may be shorter); an empty payload is one empty chunk (held by the marker).
uint32_t NumChunks(uint64_t size, uint64_t chunk_bytes);
struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};
ByteRange ChunkRange(uint64_t size, uint64_t chunk_bytes, uint32_t chunk);

// The marker: header, then chunk 0's bytes inline (so a batch up to chunk_bytes costs one
// create).
struct MarkerHeader {
  uint64_t total_bytes = 0;
  uint32_t chunk_bytes = 0;
  uint32_t num_chunks = 0;
  uint64_t payload_hash = 0;  // Hash64 of the whole payload
  uint64_t epoch = 0;         // the writer's epoch (R/g<group>/epoch's version); 0 = no election
};
std::string EncodeMarker(const MarkerHeader& header, std::string_view chunk0);
// Validates magic, version and that the header is self-consistent with the inline bytes.
Status DecodeMarker(std::string_view bytes, MarkerHeader* header, std::string_view* chunk0);
MarkerHeader MakeMarkerHeader(std::string_view payload, uint64_t chunk_bytes);

// A follower's progress: for each stream, the next batch id it needs (= batches consumed), and
// the first one a restart of it would need (<= next_batch_id: the batch after its application's
// newest checkpoint, Replicator::RetainFrom; = next_batch_id without checkpoints). Encoded as
// version 2; version 1 (no keep_from) still decodes, with keep_from = next_batch_id.
struct StreamProgress {
  uint32_t group = 0;
  uint32_t planner = 0;
  uint64_t next_batch_id = 0;
  uint64_t keep_from = 0;
  bool operator==(const StreamProgress&) const = default;
};
std::string EncodeProgress(const std::vector<StreamProgress>& progress);
Status DecodeProgress(std::string_view bytes, std::vector<StreamProgress>* progress);

}  // namespace qrstore::replication::zookeeper
