// Fuzz target: replication payload frames (replication/compression.h), what every follower's
// decode thread checks before the planner sees a byte. The first byte holds flags, the rest is
// the frame:
//   bit 0  the cap is small (4 KiB) instead of the default 64 MiB;
//   bit 1  the frame's checksum is first set to the true one (when it has a header), so inputs
//          reach the length checks and the Snappy decoder behind it.
// Contract: DecodeFrame never crashes, never allocates beyond what the frame's body can expand
// to, and rejects with kCorruption and a message; an accepted uncompressed frame re-encodes to
// exactly the same bytes (that form is canonical); an accepted Snappy frame holds raw_len bytes
// that re-encode (Snappy on or off) to a frame that decodes to them again. The input itself,
// framed either way, decodes back to itself.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/check.h"
#include "replication/compression.h"

using namespace qrstore;
using namespace qrstore::replication;

namespace {
void CheckRoundTrip(std::string_view raw, uint64_t cap) {
  for (Compression c : {Compression::kNone, Compression::kSnappy}) {
    Result<std::string> f = EncodeFrame(raw, c, cap);
    if (!f.ok()) {
      QR_CHECK(raw.size() > cap && f.status().code() == StatusCode::kInvalidArgument);
      continue;
    }
    Result<SharedBytes> back = DecodeFrame(SharedBytes(std::move(f).value()), cap);
    QR_CHECK(back.ok(), "an encoded frame does not decode: %s", back.status().ToString().c_str());
    QR_CHECK(back.value().view() == raw, "a frame of %zu bytes decodes to other bytes", raw.size());
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint64_t cap = (data[0] & 1) != 0 ? 4096 : 64ull << 20;
  std::string frame(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 2) != 0 && frame.size() >= kFrameHeaderBytes) {
    uint32_t raw_len = 0, body_len = 0;
    std::memcpy(&raw_len, frame.data() + 8, 4);
    std::memcpy(&body_len, frame.data() + 12, 4);
    const uint64_t sum = FrameChecksum(static_cast<uint8_t>(frame[4]), static_cast<uint8_t>(frame[5]), raw_len,
                                       body_len, std::string_view(frame).substr(kFrameHeaderBytes));
    std::memcpy(frame.data() + 16, &sum, 8);
  }
  CheckRoundTrip(frame, cap);
  Result<SharedBytes> raw = DecodeFrame(SharedBytes(frame), cap);
  if (!raw.ok()) {
    QR_CHECK(raw.status().code() == StatusCode::kCorruption && !raw.status().message().empty(),
             "a rejected frame must be kCorruption saying why: %s", raw.status().ToString().c_str());
    return 0;
  }
  QR_CHECK(raw.value().size() <= cap);
  uint32_t raw_len = 0;
  std::memcpy(&raw_len, frame.data() + 8, 4);
  QR_CHECK_EQ(raw.value().size(), raw_len);
  if ((static_cast<uint8_t>(frame[5]) & kFrameFlagSnappy) == 0) {
    QR_CHECK(EncodeFrame(raw.value().view(), Compression::kNone, cap).value() == frame,
             "an accepted uncompressed frame of %zu bytes does not re-encode to itself", frame.size());
  }
  CheckRoundTrip(raw.value().view(), cap);
  return 0;
}
