// Fuzz target: the client protocol (cluster/port/protocol.h), what a server reads from any client.
// The first byte picks the decoder, the rest is the body. Contract: a decoder never crashes,
// never reads out of bounds, rejects with a Status naming what was wrong, and whatever it accepts
// re-encodes to exactly the same bytes (the encoding is canonical). The frame header decoder is
// checked on the first 8 bytes too.
#include <cstdint>
#include <string>
#include <string_view>

#include "cluster/port/protocol.h"
#include "common/check.h"

using namespace qrstore;
using namespace qrstore::cluster::proto;

namespace {
template <typename T, typename Dec, typename Enc>
void RoundTrip(std::string_view body, Dec dec, Enc enc) {
  T value;
  Status st = dec(body, &value);
  if (!st.ok()) {
    QR_CHECK(!st.message().empty(), "a rejection must say why");
    return;
  }
  const std::string again = enc(value);
  QR_CHECK(again == body, "accepted %zu bytes that re-encode to %zu other bytes", body.size(), again.size());
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  if (size >= kHeaderBytes) {
    FrameHeader h;
    if (DecodeHeader(all.data(), &h).ok()) QR_CHECK(h.version == kVersion);
  }
  const std::string_view body = all.substr(1);
  switch (data[0] % 11) {
    case 0: RoundTrip<TxnRequest>(body, DecodeTxnRequest, EncodeTxnRequest); break;
    case 1: RoundTrip<TxnReply>(body, DecodeTxnReply, EncodeTxnReply); break;
    case 2: RoundTrip<ErrorReply>(body, DecodeError, EncodeError); break;
    case 3: RoundTrip<NotLeaderReply>(body, DecodeNotLeader, EncodeNotLeader); break;
    case 4: RoundTrip<StatusRequest>(body, DecodeStatusRequest, EncodeStatusRequest); break;
    case 5: RoundTrip<NodeStatus>(body, DecodeStatusReply, EncodeStatusReply); break;
    case 6: RoundTrip<FollowerReport>(body, DecodeFollowerReport, EncodeFollowerReport); break;
    case 7: RoundTrip<OpenSession>(body, DecodeOpenSession, EncodeOpenSession); break;
    case 8: RoundTrip<SessionOpened>(body, DecodeSessionOpened, EncodeSessionOpened); break;
    case 9: RoundTrip<CheckpointFetch>(body, DecodeCheckpointFetch, EncodeCheckpointFetch); break;
    case 10: RoundTrip<CheckpointChunk>(body, DecodeCheckpointChunk, EncodeCheckpointChunk); break;
  }
  return 0;
}
