// Configuration: the only place that parses YAML. A program builds a ConfigSchema (each
// module adds its own keys: see e.g. engine::AddConfigKeys), then Config::Load reads a YAML
// file, applies command-line overrides given by dotted path ("ycsb.theta=0.99"), rejects
// unknown keys and invalid values, and reports every violation at once, each naming its key.
// A loaded Config is an immutable map of validated values, safe to read from any thread;
// modules convert it into their own plain option structs at start-up.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace qrstore {

enum class ConfigType { kInt, kDouble, kBool, kString, kStringList };

struct ConfigKey {
  std::string name;  // dotted path, e.g. "batch.txns"
  ConfigType type = ConfigType::kString;
  std::string default_value;
  std::string help;
  double min = -std::numeric_limits<double>::infinity();  // kInt / kDouble
  double max = std::numeric_limits<double>::infinity();
  std::vector<std::string> choices;  // kString: allowed values when non-empty
};

class ConfigSchema {
 public:
  // Adding the same name twice is a bug (checked).
  void Add(ConfigKey key);
  void AddInt(const std::string& name, int64_t def, int64_t min, int64_t max, const std::string& help);
  void AddDouble(const std::string& name, double def, double min, double max, const std::string& help);
  void AddBool(const std::string& name, bool def, const std::string& help);
  void AddString(const std::string& name, const std::string& def, const std::string& help,
                 std::vector<std::string> choices = {});
  void AddList(const std::string& name, const std::string& def_comma_separated, const std::string& help);

  const ConfigKey* Find(const std::string& name) const;
  const std::map<std::string, ConfigKey>& keys() const { return keys_; }
  // One line per key: name, type, default, help (for --help).
  std::string Describe() const;

 private:
  std::map<std::string, ConfigKey> keys_;
};

class Config {
 public:
  // yaml_path may be empty (defaults only). overrides: "dotted.key=value" strings.
  static Result<Config> Load(const ConfigSchema& schema, const std::string& yaml_path,
                             const std::vector<std::string>& overrides);
  static Result<Config> LoadString(const ConfigSchema& schema, const std::string& yaml_text,
                                   const std::vector<std::string>& overrides);

  // Typed getters. Asking for a key the schema lacks, or with the wrong type, is a bug.
  int64_t GetInt(const std::string& name) const;
  double GetDouble(const std::string& name) const;
  bool GetBool(const std::string& name) const;
  const std::string& GetString(const std::string& name) const;
  std::vector<std::string> GetList(const std::string& name) const;

  // The effective config, "key: value" per line, sorted by key (logged at start).
  std::string Dump() const;
  // Same as one JSON object {"key": "value", ...} (for benchmark output).
  std::string DumpJson() const;

 private:
  static Result<Config> FromRaw(const ConfigSchema& schema, const std::map<std::string, std::string>& given,
                                const std::vector<std::string>& overrides, std::vector<std::string> errors);
  const std::string& Raw(const std::string& name, ConfigType type) const;
  const ConfigSchema* schema_ = nullptr;  // not owned; must outlive the Config
  std::map<std::string, std::string> values_;
};

// Splits "a,b , c" into {"a","b","c"} (empty items dropped).
std::vector<std::string> SplitList(const std::string& s);

}  // namespace qrstore
