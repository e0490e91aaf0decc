// Configuration: the only place that parses YAML. A program builds a ConfigSchema (each
// module adds its own keys: see e.g. engine::AddConfigKeys), then Config::Load reads a YAML
// file, applies command-line overrides given by dotted path ("ycsb.theta=0.99"), rejects
// unknown keys and invalid values, and reports every violation at once, each naming its key.
// A loaded Config is an immutable map of validated values, safe to read from any thread;
// modules convert it into their own plain option structs at start-up.
//
// Besides scalars and comma lists, a key may be a table: a YAML list of maps whose columns the
// schema declares (e.g. cluster.nodes, one map per node). Every row is validated like a key;
// errors name the row and column ("cluster.nodes[2].client_port: must be in [1, 65535]").
// Tables are set in the YAML file only (a --key=value override cannot set one).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace qrstore {

// Bounds on what a config may cost to read (checked with a clear error, never by running out of
// memory): the file's size, and what its YAML expands to once anchors and aliases are repeated.
// Cluster configs are a few KB.
constexpr uint64_t kConfigMaxFileBytes = uint64_t{1} << 20;
constexpr uint64_t kConfigMaxNodes = 200'000;
constexpr uint64_t kConfigMaxExpandedBytes = uint64_t{4} << 20;
// How deep maps may nest (ours nest two levels). Also what stops an alias that refers to the map
// holding it (`a: &x {b: *x}`), which YAML parses into a cycle that would recurse forever.
constexpr int kConfigMaxDepth = 32;

enum class ConfigType { kInt, kDouble, kBool, kString, kStringList, kTable };

struct ConfigKey {
  std::string name;  // dotted path, e.g. "batch.txns"
  ConfigType type = ConfigType::kString;
  std::string default_value;
  std::string help;
  double min = -std::numeric_limits<double>::infinity();  // kInt / kDouble
  double max = std::numeric_limits<double>::infinity();
  std::vector<std::string> choices;  // kString: allowed values when non-empty
  std::vector<ConfigKey> columns;    // kTable: the columns of a row (names without a prefix)
  bool required = false;             // a table column that every row must give
};

// Table columns (ConfigSchema::AddTable). A required column has no default (`def` unused).
ConfigKey IntColumn(const std::string& name, int64_t def, int64_t min, int64_t max, const std::string& help,
                    bool required = false);
ConfigKey StringColumn(const std::string& name, const std::string& def, const std::string& help,
                       bool required = false, std::vector<std::string> choices = {});

// One validated row of a table key: column values by column name (defaults filled in).
class ConfigRow {
 public:
  int64_t GetInt(const std::string& column) const;
  double GetDouble(const std::string& column) const;
  bool GetBool(const std::string& column) const;
  const std::string& GetString(const std::string& column) const;
  // Whether the row gave the column (rather than taking its default).
  bool IsSet(const std::string& column) const { return given_.count(column) != 0; }

 private:
  friend class Config;
  const std::string& Raw(const std::string& column, ConfigType type) const;
  const ConfigKey* table_ = nullptr;  // the schema's table key; must outlive the row
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> given_;
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
  // A table (YAML list of maps); its default is the empty list. Columns are ConfigKeys whose
  // names have no prefix; a column with required = true has no default.
  void AddTable(const std::string& name, const std::string& help, std::vector<ConfigKey> columns);

  const ConfigKey* Find(const std::string& name) const;
  const std::map<std::string, ConfigKey>& keys() const { return keys_; }
  // One line per key: name, type, default, help (for --help).
  std::string Describe() const;

 private:
  std::map<std::string, ConfigKey> keys_;
};

class Config {
 public:
  // yaml_path may be empty (defaults only). overrides: "dotted.key=value" strings. Every error
  // says where its value came from: "<file>:<line>: key: ..." for the file (a key given twice
  // names both lines), "command line: key: ..." for an override. A directory, a file over
  // kConfigMaxFileBytes and a document expanding past kConfigMaxNodes / kConfigMaxExpandedBytes
  // are refused (kInvalidArgument); a missing file is kNotFound.
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
  const std::vector<ConfigRow>& GetTable(const std::string& name) const;
  // Whether the key was given (in the file or by an override) rather than defaulted.
  bool IsSet(const std::string& name) const { return given_.count(name) != 0 || given_tables_.count(name) != 0; }
  // This config with more overrides applied (validated the same way; errors name the keys).
  Result<Config> WithOverrides(const std::vector<std::string>& overrides) const;

  // The effective config, "key: value" per line, sorted by key (logged at start).
  std::string Dump() const;
  // Same as one JSON object {"key": "value", ...} (for benchmark output).
  std::string DumpJson() const;

 private:
  using RawRows = std::vector<std::map<std::string, std::string>>;
  // Where the given keys came from, for messages.
  struct Source {
    std::string file;                  // empty: text given as a string
    std::map<std::string, int> lines;  // key -> 1-based line of the document
    std::string overrides_label;       // prefix of errors in overrides ("command line: ")
  };
  static Result<Config> Parse(const ConfigSchema& schema, const std::string& yaml_text,
                              const std::vector<std::string>& overrides, const std::string& file);
  static Result<Config> FromRaw(const ConfigSchema& schema, const std::map<std::string, std::string>& given,
                                const std::map<std::string, RawRows>& given_tables,
                                const std::vector<std::string>& overrides, std::vector<std::string> errors,
                                const Source& source);
  const std::string& Raw(const std::string& name, ConfigType type) const;
  const ConfigSchema* schema_ = nullptr;  // not owned; must outlive the Config
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<ConfigRow>> tables_;
  // What was given (file + overrides), unnormalized, so WithOverrides can re-validate.
  std::map<std::string, std::string> given_;
  std::map<std::string, RawRows> given_tables_;
};

// The text of a config file, refusing a missing file (kNotFound), a directory and a file over
// kConfigMaxFileBytes (kInvalidArgument), each naming the path.
Result<std::string> ReadConfigFile(const std::string& path);

// Splits "a,b , c" into {"a","b","c"} (empty items dropped).
std::vector<std::string> SplitList(const std::string& s);

}  // namespace qrstore
