#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

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
  // The available figure itself moves with other processes (MemAvailable), so only its form is
  // checked: "<n> bytes (<x> GiB) available (<source>)".
  const std::string& m = s.message();
  const size_t needed_end = m.find(") needed, ");
  REQUIRE(needed_end != std::string::npos);
  const size_t avail_end = m.find(" bytes (", needed_end);
  REQUIRE(avail_end != std::string::npos);
  const std::string avail_text = m.substr(needed_end + 10, avail_end - needed_end - 10);
  CHECK_FALSE(avail_text.empty());
  CHECK(avail_text.find_first_not_of("0123456789") == std::string::npos);
  CHECK(m.find(" GiB) available (") != std::string::npos);
  CHECK(s.message().find(source) != std::string::npos);
}

TEST_CASE("memory: AdviseHugePages is a hint that refuses ranges without a whole page") {
  CHECK_FALSE(AdviseHugePages(nullptr, 1 << 20));
  std::vector<char> small(100);
  CHECK_FALSE(AdviseHugePages(small.data(), small.size()));  // no whole 4 KiB page inside
  // A large table's records: advised or not (the kernel decides), the memory stays usable.
  std::unique_ptr<char[]> big(new char[8 << 20]);
  (void)AdviseHugePages(big.get(), 8 << 20);
  std::memset(big.get(), 7, 8 << 20);
  CHECK(big[(8 << 20) - 1] == 7);
}
