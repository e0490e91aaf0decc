#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "common/memory.h"

using namespace qrstore;

TEST_CASE("memory: saturating arithmetic for sizes from config values") {
  CHECK(SaturatingMul(uint64_t{1} << 32, 100) == (uint64_t{100} << 32));
  CHECK(SaturatingMul(uint64_t{1} << 40, uint64_t{1} << 30) == UINT64_MAX);
  CHECK(SaturatingAdd(UINT64_MAX - 1, 5) == UINT64_MAX);
  CHECK(SaturatingAdd(2, 3) == 5);
}

TEST_CASE("memory: what does not fit is refused naming the bytes needed and available") {
  std::string source;
  const uint64_t avail = AvailableMemoryBytes(&source);
  CHECK(avail > 0);
  CHECK_FALSE(source.empty());
  CHECK(CheckFitsInMemory(4096, "a page").ok());
  Status s = CheckFitsInMemory(UINT64_MAX, "the moon");
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("not enough memory: the moon: " + std::to_string(UINT64_MAX) + " bytes") != std::string::npos);
  CHECK(s.message().find(std::to_string(avail) + " bytes") != std::string::npos);
  CHECK(s.message().find(source) != std::string::npos);
}
