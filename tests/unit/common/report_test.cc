#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "common/report.h"

using namespace qrstore;

TEST_CASE("report: hex and numbers") {
  CHECK(Hex(0) == "0000000000000000");
  CHECK(Hex(0xdeadbeefULL) == "00000000deadbeef");
  CHECK(Hex(UINT64_MAX) == "ffffffffffffffff");
  CHECK(Num(2.5) == "2.5");
  CHECK(Num(1234567.0) == "1.23457e+06");
  CHECK(Num(0) == "0");
  CHECK(JsonNumber(0.125) == "0.125");
  CHECK(JsonNumber(-3) == "-3");
}

TEST_CASE("report: numbers that are not finite become null in JSON, never nan or inf") {
  CHECK(JsonNumber(std::nan("")) == "null");
  CHECK(JsonNumber(std::numeric_limits<double>::infinity()) == "null");
  CHECK(JsonNumber(-std::numeric_limits<double>::infinity()) == "null");
  JsonObject o;
  o.Dbl("mean", 0.0 / std::numeric_limits<double>::quiet_NaN());
  CHECK(o.Done() == "{\"mean\":null}");
}

TEST_CASE("report: strings are escaped") {
  CHECK(JsonString("plain") == "\"plain\"");
  CHECK(JsonString("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(JsonString(std::string("\n\t\x01\x1f", 4)) == "\"\\u000a\\u0009\\u0001\\u001f\"");
  CHECK(JsonString("h\xc3\xa9") == "\"h\xc3\xa9\"");  // UTF-8 passes through
  CHECK(JsonString("\x7f") == "\"\x7f\"");
  CHECK(JsonStringArray({}) == "[]");
  CHECK(JsonStringArray({"--a=1", "q\""}) == "[\"--a=1\",\"q\\\"\"]");
}

TEST_CASE("report: a JSON object keeps insertion order and nests") {
  JsonObject inner;
  CHECK(inner.empty());
  inner.Int("n", 7);
  CHECK_FALSE(inner.empty());
  JsonObject o;
  o.Str("s", "x");
  o.Int("big", UINT64_MAX);
  o.Dbl("d", 1.5);
  o.Bool("t", true);
  o.Bool("f", false);
  o.Raw("inner", inner.Done());
  o.Raw("empty", JsonObject().Done());
  CHECK(o.Done() ==
        "{\"s\":\"x\",\"big\":18446744073709551615,\"d\":1.5,\"t\":true,\"f\":false,\"inner\":{\"n\":7},\"empty\":{}}");
}
