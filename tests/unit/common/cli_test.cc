#include <catch2/catch.hpp>

#include "common/cli.h"

using namespace qrstore;

namespace {
Status ParseArgs(CommandLine& cl, std::vector<std::string> args) {
  std::vector<char*> argv;
  static std::string prog = "prog";
  argv.push_back(prog.data());
  for (auto& a : args) argv.push_back(a.data());
  return cl.Parse(static_cast<int>(argv.size()), argv.data());
}
}  // namespace

TEST_CASE("cli: values, switches, overrides, errors") {
  CommandLine cl("prog", "[opts]", "a test");
  cl.AddValue("txns", "N", "count");
  cl.AddSwitch("json", "json output");
  REQUIRE(ParseArgs(cl, {"--txns", "5", "--json", "--ycsb.theta=0.9", "--batch.txns", "7"}).ok());
  CHECK(cl.GetInt("txns", 0).value() == 5);
  CHECK(cl.Has("json"));
  CHECK(cl.overrides() == std::vector<std::string>{"ycsb.theta=0.9", "batch.txns=7"});

  CommandLine c2("prog", "", "");
  c2.AddValue("txns", "N", "count");
  CHECK(ParseArgs(c2, {"--bogus"}).message().find("unknown flag --bogus") != std::string::npos);
  CommandLine c3("prog", "", "");
  c3.AddValue("txns", "N", "count");
  CHECK_FALSE(ParseArgs(c3, {"--txns"}).ok());
  CommandLine c4("prog", "", "");
  c4.AddValue("txns", "N", "count");
  REQUIRE(ParseArgs(c4, {"--txns=abc"}).ok());
  CHECK_FALSE(c4.GetInt("txns", 0).ok());
  CommandLine c5("prog", "", "");
  REQUIRE(ParseArgs(c5, {"--help"}).ok());
  CHECK(c5.help_requested());
  CHECK(c5.Usage().find("usage: prog") != std::string::npos);
}
