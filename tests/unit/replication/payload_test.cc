// The deterministic payload generator shared by the tools and the conformance suite.
#include <catch2/catch.hpp>

#include "replication/tools/payload.h"

using namespace qrstore;
using namespace qrstore::replication::tools;

TEST_CASE("payload: deterministic / distinct per stream and batch / self-verifying") {
  CHECK(MakePayload(0, 0, 7, 5000) == MakePayload(0, 0, 7, 5000));
  CHECK(MakePayload(0, 0, 7, 5000) != MakePayload(0, 0, 8, 5000));
  CHECK(MakePayload(0, 0, 7, 5000) != MakePayload(0, 1, 7, 5000));
  CHECK(MakePayload(0, 0, 7, 5000) != MakePayload(1, 0, 7, 5000));
  for (size_t n : {size_t{0}, size_t{5}, size_t{32}, size_t{4097}, size_t{(1u << 20) + 12345}}) {
    std::string p = MakePayload(3, 1, 99, n);
    CHECK(p.size() == n);
    CHECK(VerifyPayload(3, 1, 99, p).ok());
  }
}

TEST_CASE("payload: verification catches wrong batch / truncation and flipped bytes") {
  std::string p = MakePayload(1, 0, 5, 10000);
  CHECK(VerifyPayload(1, 0, 6, p).message().find("wrong batch") != std::string::npos);
  CHECK(VerifyPayload(1, 0, 5, p.substr(0, 9999)).message().find("truncated") != std::string::npos);
  for (size_t i : {size_t{40}, size_t{4096}, size_t{9999}}) {
    std::string bad = p;
    bad[i] ^= 1;
    Status s = VerifyPayload(1, 0, 5, bad);
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(s.message().find("differs at byte " + std::to_string(i)) != std::string::npos);
  }
}
