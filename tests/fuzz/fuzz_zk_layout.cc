// Fuzz target: the ZooKeeper backend's znode layout (replication/zookeeper/zk_layout.h), what a
// follower reads from znodes any process could have written. The first byte picks the decoder,
// the rest is the input:
//   0  a batch marker (DecodeMarker);
//   1  a follower's progress (DecodeProgress);
//   2  a stream node's child name (ParseChildName), and the same text as a root path and as a
//      follower id (ValidateRoot, ValidateFollowerId).
// Contract: never a crash or an out-of-bounds read; a rejection is kCorruption (names: nullopt,
// validation: kInvalidArgument) with a message; what is accepted re-encodes to exactly the same
// bytes (markers, progress and child names are canonical; a marker of the old format version 1
// re-encodes as version 2 with the same fields), and an accepted marker header is
// self-consistent: its chunk count and every chunk range follow from its lengths.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "replication/zookeeper/zk_layout.h"

using namespace qrstore;
using namespace qrstore::replication::zookeeper;

namespace {
void CheckRejected(const Status& st, StatusCode code) {
  QR_CHECK(st.code() == code && !st.message().empty(), "a rejection must say why: %s", st.ToString().c_str());
}

void CheckMarker(std::string_view bytes) {
  MarkerHeader h;
  std::string_view chunk0;
  Status st = DecodeMarker(bytes, &h, &chunk0);
  if (!st.ok()) return CheckRejected(st, StatusCode::kCorruption);
  // Canonical, but for a marker of format version 1 (before epochs: epoch 0), which re-encodes as
  // version 2 with the same header and chunk.
  const std::string again = EncodeMarker(h, chunk0);
  if (again != bytes) {
    MarkerHeader h2;
    std::string_view chunk2;
    QR_CHECK(h.epoch == 0 && DecodeMarker(again, &h2, &chunk2).ok() && h2.total_bytes == h.total_bytes &&
                 h2.chunk_bytes == h.chunk_bytes && h2.num_chunks == h.num_chunks &&
                 h2.payload_hash == h.payload_hash && h2.epoch == 0 && chunk2 == chunk0,
             "an accepted marker of %zu bytes re-encodes to other bytes", bytes.size());
  }
  QR_CHECK(h.chunk_bytes >= 1 && h.chunk_bytes <= kMaxChunkBytes);
  QR_CHECK_EQ(h.num_chunks, NumChunks(h.total_bytes, h.chunk_bytes));
  QR_CHECK_EQ(chunk0.size(), ChunkRange(h.total_bytes, h.chunk_bytes, 0).length);
  const ByteRange last = ChunkRange(h.total_bytes, h.chunk_bytes, h.num_chunks - 1);
  QR_CHECK_EQ(last.offset + last.length, h.total_bytes);
  QR_CHECK(h.total_bytes == 0 || last.length >= 1, "an empty last chunk");
}

void CheckProgress(std::string_view bytes) {
  std::vector<StreamProgress> progress;
  Status st = DecodeProgress(bytes, &progress);
  if (!st.ok()) return CheckRejected(st, StatusCode::kCorruption);
  // Version 1 (byte 4) still decodes but is written as version 2: compare the decoded values.
  const std::string again = EncodeProgress(progress);
  if (bytes.size() > 4 && bytes[4] == 1) {
    std::vector<StreamProgress> twice;
    QR_CHECK(DecodeProgress(again, &twice).ok() && twice == progress, "version 1 progress does not survive a re-encode");
    return;
  }
  QR_CHECK(again == bytes, "accepted progress of %zu bytes re-encodes to other bytes", bytes.size());
}

void CheckNames(std::string_view text) {
  if (std::optional<ChildName> c = ParseChildName(text)) {
    const std::string again =
        c->kind == ChildName::Kind::kMarker ? MarkerName(c->batch_id) : ChunkName(c->batch_id, c->chunk);
    QR_CHECK(again == text, "child name '%.*s' parses to one named '%s'", static_cast<int>(text.size()), text.data(),
             again.c_str());
    QR_CHECK(c->kind == ChildName::Kind::kMarker || c->chunk >= 1);
  }
  const std::string s(text);
  Status root = ValidateRoot(s);
  if (!root.ok()) {
    CheckRejected(root, StatusCode::kInvalidArgument);
  } else {
    // A valid root yields paths whose every prefix is a valid root too (each is created).
    for (const std::string& p : PathPrefixes(StreamPath(s, 1, 2))) {
      if (p.size() >= s.size()) break;
      QR_CHECK(ValidateRoot(p).ok(), "prefix '%s' of valid root '%s' is not valid", p.c_str(), s.c_str());
    }
  }
  Status id = ValidateFollowerId(s);
  if (!id.ok()) CheckRejected(id, StatusCode::kInvalidArgument);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: CheckMarker(input); break;
    case 1: CheckProgress(input); break;
    case 2: CheckNames(input); break;
  }
  return 0;
}
