// Command-line parsing shared by every qrstore program, so they all behave alike:
// `--help` prints usage (and, when a ConfigSchema is given, every config key), flags take
// `--name VALUE` or `--name=VALUE`, and any `--dotted.key=value` is collected as a config
// override. Unknown flags and missing values are errors naming the flag.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"

namespace qrstore {

class CommandLine {
 public:
  CommandLine(std::string program, std::string synopsis, std::string description);

  // A flag that takes a value (value_name shown in help) or a boolean switch.
  void AddValue(const std::string& name, const std::string& value_name, const std::string& help);
  void AddSwitch(const std::string& name, const std::string& help);

  // Parses argv. If --help was given, help_requested() is true and the caller should print
  // Usage() and exit 0. Errors name the offending argument.
  Status Parse(int argc, char** argv);

  bool help_requested() const { return help_; }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& def = "") const;
  // Typed access with a clear error naming the flag.
  Result<int64_t> GetInt(const std::string& name, int64_t def) const;
  Result<double> GetDouble(const std::string& name, double def) const;
  const std::vector<std::string>& overrides() const { return overrides_; }
  const std::vector<std::string>& positional() const { return positional_; }

  std::string Usage(const ConfigSchema* schema = nullptr) const;

  // The start every program shares: Parse; --help prints Usage(schema) to stdout; a bad flag, a
  // stray positional argument or an unknown --log-level (when the program declared that flag)
  // is reported on stderr as "<program>: ...", and --log-level is applied. Returns the exit code
  // to return at once (kExitOk after --help, kExitBadInput after an error), or nullopt to go on.
  std::optional<int> ParseStandard(int argc, char** argv, const ConfigSchema* schema);

 private:
  struct Flag {
    std::string value_name;  // empty for switches
    std::string help;
  };
  std::string program_, synopsis_, description_;
  std::map<std::string, Flag> flags_;
  std::vector<std::string> order_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> overrides_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

}  // namespace qrstore
