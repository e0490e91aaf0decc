#include "common/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <set>
#include <cstring>
#include <sys/stat.h>

namespace qrstore {
namespace {

const char* TypeName(ConfigType t) {
  switch (t) {
    case ConfigType::kInt: return "int";
    case ConfigType::kDouble: return "number";
    case ConfigType::kBool: return "bool";
    case ConfigType::kString: return "string";
    case ConfigType::kStringList: return "list";
    case ConfigType::kTable: return "list of maps";
  }
  return "?";
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool ParseInt(const std::string& s, int64_t* out) {
  std::string t = Trim(s);
  if (t.empty()) return false;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
  return ec == std::errc() && ptr == t.data() + t.size();
}

bool ParseDouble(const std::string& s, double* out) {
  std::string t = Trim(s);
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *out = std::strtod(t.c_str(), &end);
  return errno == 0 && end == t.c_str() + t.size() && std::isfinite(*out);
}

bool ParseBool(const std::string& s, bool* out) {
  std::string t = Trim(s);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "true" || t == "yes" || t == "on" || t == "1") { *out = true; return true; }
  if (t == "false" || t == "no" || t == "off" || t == "0") { *out = false; return true; }
  return false;
}

std::string FormatNumber(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

// Checks `raw` against `key`; returns the normalized value or appends an error.
bool Normalize(const ConfigKey& key, const std::string& raw, std::string* out, std::vector<std::string>* errors) {
  auto fail = [&](const std::string& why) {
    errors->push_back(key.name + ": " + why + " (got '" + raw + "')");
    return false;
  };
  switch (key.type) {
    case ConfigType::kInt: {
      int64_t v;
      if (!ParseInt(raw, &v)) return fail("expected an integer");
      if (static_cast<double>(v) < key.min || static_cast<double>(v) > key.max) {
        return fail("must be in [" + FormatNumber(key.min) + ", " + FormatNumber(key.max) + "]");
      }
      *out = std::to_string(v);
      return true;
    }
    case ConfigType::kDouble: {
      double v;
      if (!ParseDouble(raw, &v)) return fail("expected a number");
      if (v < key.min || v > key.max) {
        return fail("must be in [" + FormatNumber(key.min) + ", " + FormatNumber(key.max) + "]");
      }
      *out = FormatNumber(v);
      return true;
    }
    case ConfigType::kBool: {
      bool v;
      if (!ParseBool(raw, &v)) return fail("expected true or false");
      *out = v ? "true" : "false";
      return true;
    }
    case ConfigType::kString: {
      std::string t = Trim(raw);
      if (!key.choices.empty() && std::find(key.choices.begin(), key.choices.end(), t) == key.choices.end()) {
        std::string all;
        for (const auto& c : key.choices) all += (all.empty() ? "" : "|") + c;
        return fail("must be one of " + all);
      }
      *out = t;
      return true;
    }
    case ConfigType::kStringList: {
      std::string joined;
      for (const auto& item : SplitList(raw)) joined += (joined.empty() ? "" : ",") + item;
      *out = joined;
      return true;
    }
    case ConfigType::kTable:
      return fail("a list of maps is set in the YAML file only, not by a --key=value override");
  }
  return fail("unsupported type");
}

using RawRows = std::vector<std::map<std::string, std::string>>;

// What Flatten produces besides the values: the 1-based line of each key (for messages) and a
// budget on how much the document expands to. YAML aliases (*name) repeat an anchored node
// without copying it, so a few hundred bytes of nested aliases ("billion laughs") expand to
// billions of values; Flatten stops, with one error, once the budget is spent.
struct FlattenState {
  std::map<std::string, int> lines;
  uint64_t nodes = 0;
  uint64_t bytes = 0;
  int depth = 0;  // maps entered on the way to the node being flattened
  bool over_budget = false;
  std::vector<std::string>* errors = nullptr;

  // Counts one node of `n` bytes; false (and one error) once over the budget.
  bool Spend(uint64_t n) {
    if (over_budget) return false;
    ++nodes;
    bytes += n;
    if (nodes <= kConfigMaxNodes && bytes <= kConfigMaxExpandedBytes) return true;
    over_budget = true;
    errors->push_back("the document expands to more than " + std::to_string(kConfigMaxNodes) + " values or " +
                      std::to_string(kConfigMaxExpandedBytes) +
                      " bytes (YAML anchors and aliases repeating content?): refused");
    return false;
  }
};

int LineOf(const YAML::Node& n) { return n.Mark().line + 1; }

// Flattens a YAML document into dotted keys. Sequences of scalars become comma lists;
// sequences of maps become table rows (each a map of column -> scalar). A key given twice in
// one map is an error naming both lines (YAML parsers keep one of them silently).
void Flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>* out,
             std::map<std::string, RawRows>* tables, FlattenState* st) {
  std::vector<std::string>* errors = st->errors;
  if (!st->Spend(0)) return;
  if (node.IsMap()) {
    if (st->depth >= kConfigMaxDepth) {
      st->over_budget = true;  // one error, and no more work on this document
      errors->push_back(prefix + ": maps nest deeper than " + std::to_string(kConfigMaxDepth) +
                        " levels (a YAML alias inside the map it names?): refused");
      return;
    }
    ++st->depth;
    struct Leave {
      int* d;
      ~Leave() { --*d; }
    } leave{&st->depth};
    std::map<std::string, int> seen;
    for (const auto& kv : node) {
      std::string k = kv.first.as<std::string>();
      const std::string path = prefix.empty() ? k : prefix + "." + k;
      const int line = LineOf(kv.first);
      auto [it, fresh] = seen.emplace(k, line);
      if (!fresh) {
        errors->push_back(path + ": given twice (lines " + std::to_string(it->second) + " and " +
                          std::to_string(line) + ")");
        continue;
      }
      st->lines.emplace(path, line);
      Flatten(kv.second, path, out, tables, st);
    }
  } else if (node.IsSequence()) {
    bool any_map = false;
    for (const auto& item : node) any_map |= item.IsMap();
    if (any_map) {
      RawRows rows;
      size_t i = 0;
      for (const auto& item : node) {
        const std::string where = prefix + "[" + std::to_string(i++) + "]";
        std::map<std::string, std::string> row;
        if (!st->Spend(0)) return;
        if (!item.IsMap()) {
          errors->push_back(where + ": every item of a list of maps must be a map of column: value");
          rows.push_back(row);
          continue;
        }
        for (const auto& kv : item) {
          const std::string col = kv.first.as<std::string>();
          if (!kv.second.IsScalar()) {
            errors->push_back(where + "." + col + ": must be a plain value");
            continue;
          }
          if (row.count(col) != 0) {
            errors->push_back(where + "." + col + ": given twice (line " + std::to_string(LineOf(kv.first)) + ")");
            continue;
          }
          std::string v = kv.second.as<std::string>();
          if (!st->Spend(v.size())) return;
          row[col] = std::move(v);
        }
        rows.push_back(std::move(row));
      }
      (*tables)[prefix] = std::move(rows);
      return;
    }
    std::string joined;
    for (const auto& item : node) {
      if (!item.IsScalar()) {
        errors->push_back(prefix + ": list items must be plain values");
        return;
      }
      std::string v = item.as<std::string>();
      if (!st->Spend(v.size())) return;
      joined += (joined.empty() ? "" : ",") + v;
    }
    (*out)[prefix] = joined;
  } else if (node.IsScalar()) {
    std::string v = node.as<std::string>();
    if (!st->Spend(v.size())) return;
    (*out)[prefix] = std::move(v);
  } else if (node.IsNull()) {
    if (!prefix.empty()) errors->push_back(prefix + ": has no value");
  }
}

// Validates the rows of table `key`; fills `rows` or appends errors naming row and column.
struct NormalRow {
  std::map<std::string, std::string> values;
  std::map<std::string, bool> given;
};
void NormalizeTable(const ConfigKey& key, const RawRows& raw, std::vector<NormalRow>* rows,
                    std::vector<std::string>* errors) {
  for (size_t i = 0; i < raw.size(); ++i) {
    const std::string where = key.name + "[" + std::to_string(i) + "]";
    std::map<std::string, std::string> values;
    std::map<std::string, bool> given;
    for (const auto& cell : raw[i]) {
      const std::string& col = cell.first;
      const std::string& value = cell.second;
      auto it = std::find_if(key.columns.begin(), key.columns.end(), [&](const ConfigKey& c) { return c.name == col; });
      if (it == key.columns.end()) {
        std::string known;
        for (const auto& c : key.columns) known += (known.empty() ? "" : ", ") + c.name;
        errors->push_back(where + "." + col + ": unknown column (columns: " + known + ")");
        continue;
      }
      ConfigKey named = *it;
      named.name = where + "." + col;
      std::string norm;
      if (Normalize(named, value, &norm, errors)) {
        values[col] = norm;
        given[col] = true;
      }
    }
    for (const ConfigKey& c : key.columns) {
      if (values.count(c.name)) continue;
      if (given.count(c.name)) continue;
      bool had_error = raw[i].count(c.name) != 0;
      if (c.required) {
        if (!had_error) errors->push_back(where + "." + c.name + ": required (" + c.help + ")");
        continue;
      }
      std::string norm;
      std::vector<std::string> default_errors;
      QR_CHECK(Normalize(c, c.default_value, &norm, &default_errors), "bad default for %s.%s", key.name.c_str(),
               c.name.c_str());
      values[c.name] = norm;
    }
    rows->push_back(NormalRow{std::move(values), std::move(given)});
  }
}

}  // namespace

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream is(s);
  while (std::getline(is, item, ',')) {
    std::string t = Trim(item);
    if (!t.empty()) out.push_back(t);
  }
  return out;
}

void ConfigSchema::Add(ConfigKey key) {
  QR_CHECK(keys_.count(key.name) == 0, "config key %s added twice", key.name.c_str());
  std::string name = key.name;
  keys_.emplace(name, std::move(key));
}

namespace {
ConfigKey MakeKey(const std::string& name, ConfigType type, std::string def, const std::string& help, double min = 0,
                  double max = 0, std::vector<std::string> choices = {}) {
  ConfigKey k;
  k.name = name;
  k.type = type;
  k.default_value = std::move(def);
  k.help = help;
  k.min = min;
  k.max = max;
  k.choices = std::move(choices);
  return k;
}
}  // namespace

void ConfigSchema::AddInt(const std::string& name, int64_t def, int64_t min, int64_t max, const std::string& help) {
  Add(MakeKey(name, ConfigType::kInt, std::to_string(def), help, static_cast<double>(min), static_cast<double>(max)));
}
void ConfigSchema::AddDouble(const std::string& name, double def, double min, double max, const std::string& help) {
  Add(MakeKey(name, ConfigType::kDouble, FormatNumber(def), help, min, max));
}
void ConfigSchema::AddBool(const std::string& name, bool def, const std::string& help) {
  Add(MakeKey(name, ConfigType::kBool, def ? "true" : "false", help));
}
void ConfigSchema::AddString(const std::string& name, const std::string& def, const std::string& help,
                             std::vector<std::string> choices) {
  Add(MakeKey(name, ConfigType::kString, def, help, 0, 0, std::move(choices)));
}
void ConfigSchema::AddList(const std::string& name, const std::string& def, const std::string& help) {
  Add(MakeKey(name, ConfigType::kStringList, def, help));
}

ConfigKey IntColumn(const std::string& name, int64_t def, int64_t min, int64_t max, const std::string& help,
                    bool required) {
  ConfigKey k = MakeKey(name, ConfigType::kInt, std::to_string(def), help, static_cast<double>(min), static_cast<double>(max));
  k.required = required;
  return k;
}
ConfigKey StringColumn(const std::string& name, const std::string& def, const std::string& help, bool required,
                       std::vector<std::string> choices) {
  ConfigKey k = MakeKey(name, ConfigType::kString, def, help, 0, 0, std::move(choices));
  k.required = required;
  return k;
}

void ConfigSchema::AddTable(const std::string& name, const std::string& help, std::vector<ConfigKey> columns) {
  for (const ConfigKey& c : columns) {
    QR_CHECK(c.type != ConfigType::kTable && c.type != ConfigType::kStringList, "table %s: column %s must be a scalar",
             name.c_str(), c.name.c_str());
  }
  ConfigKey key = MakeKey(name, ConfigType::kTable, "", help);
  key.columns = std::move(columns);
  Add(std::move(key));
}

const ConfigKey* ConfigSchema::Find(const std::string& name) const {
  auto it = keys_.find(name);
  return it == keys_.end() ? nullptr : &it->second;
}

std::string ConfigSchema::Describe() const {
  std::ostringstream os;
  for (const auto& [name, key] : keys_) {
    os << "  --" << name << "=<" << TypeName(key.type) << ">";
    if (!key.choices.empty()) {
      os << " {";
      for (size_t i = 0; i < key.choices.size(); ++i) os << (i ? "|" : "") << key.choices[i];
      os << "}";
    }
    if (key.type == ConfigType::kTable) {
      os << " (YAML only; default empty)\n      " << key.help << "\n";
      for (const ConfigKey& c : key.columns) {
        os << "      - " << c.name << " <" << TypeName(c.type) << ">";
        if (!c.choices.empty()) {
          os << " {";
          for (size_t i = 0; i < c.choices.size(); ++i) os << (i ? "|" : "") << c.choices[i];
          os << "}";
        }
        os << (c.required ? " (required)" : " (default " + (c.default_value.empty() ? std::string("''") : c.default_value) + ")")
           << ": " << c.help << "\n";
      }
      continue;
    }
    os << " (default " << (key.default_value.empty() ? "''" : key.default_value) << ")\n      " << key.help << "\n";
  }
  return os.str();
}

Result<Config> Config::FromRaw(const ConfigSchema& schema, const std::map<std::string, std::string>& given,
                               const std::map<std::string, RawRows>& given_tables,
                               const std::vector<std::string>& overrides, std::vector<std::string> errors,
                               const Source& source) {
  std::map<std::string, std::string> raw = given;
  std::set<std::string> overridden;
  for (const auto& o : overrides) {
    size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0) {
      errors.push_back(source.overrides_label + "override '" + o + "': expected key=value");
      continue;
    }
    const std::string name = Trim(o.substr(0, eq));
    raw[name] = o.substr(eq + 1);
    overridden.insert(name);
  }
  // Each message says where the value came from: "file:line: ", "command line: ", or nothing.
  auto where = [&](const std::string& name) -> std::string {
    if (overridden.count(name)) return source.overrides_label;
    auto it = source.lines.find(name);
    if (it == source.lines.end()) return source.file.empty() ? "" : source.file + ": ";
    return (source.file.empty() ? "line " : source.file + ":") + std::to_string(it->second) + ": ";
  };
  auto add = [&](const std::string& name, std::vector<std::string>* found) {
    for (auto& e : *found) errors.push_back(where(name) + e);
    found->clear();
  };
  Config cfg;
  cfg.schema_ = &schema;
  cfg.given_ = raw;
  cfg.given_tables_ = given_tables;
  std::vector<std::string> found;
  auto unknown = [&](const std::string& name) {
    // Name the known keys of the same section, so a typo is easy to fix.
    std::string hint;
    std::string section = name.substr(0, name.find('.'));
    for (const auto& [known, unused] : schema.keys()) {
      if (known.rfind(section + ".", 0) == 0) hint += (hint.empty() ? "" : ", ") + known;
    }
    found.push_back(name + ": unknown key" + (hint.empty() ? "" : " (known in '" + section + "': " + hint + ")"));
    add(name, &found);
  };
  for (const auto& [name, value] : raw) {
    const ConfigKey* key = schema.Find(name);
    if (key == nullptr) {
      unknown(name);
      continue;
    }
    std::string norm;
    if (Normalize(*key, value, &norm, &found)) cfg.values_[name] = norm;
    add(name, &found);
  }
  for (const auto& [name, rows] : given_tables) {
    const ConfigKey* key = schema.Find(name);
    if (key == nullptr) {
      unknown(name);
      continue;
    }
    if (key->type != ConfigType::kTable) {
      found.push_back(name + ": expected " + std::string(TypeName(key->type)) + ", got a list of maps");
      add(name, &found);
      continue;
    }
    std::vector<NormalRow> normal;
    NormalizeTable(*key, rows, &normal, &found);
    add(name, &found);
    std::vector<ConfigRow>& out = cfg.tables_[name];
    for (NormalRow& n : normal) {
      ConfigRow row;
      row.table_ = key;
      row.values_ = std::move(n.values);
      row.given_ = std::move(n.given);
      out.push_back(std::move(row));
    }
  }
  for (const auto& [name, key] : schema.keys()) {
    if (key.type == ConfigType::kTable) {
      cfg.tables_.try_emplace(name);
      continue;
    }
    if (raw.count(name)) continue;
    std::string norm;
    std::vector<std::string> default_errors;
    QR_CHECK(Normalize(key, key.default_value, &norm, &default_errors), "bad default for %s", name.c_str());
    cfg.values_[name] = norm;
  }
  if (!errors.empty()) {
    // A bounded message: a document of thousands of unknown keys gets the first of them.
    constexpr size_t kMaxListed = 50;
    std::string msg = "invalid configuration:";
    for (size_t i = 0; i < errors.size() && i < kMaxListed; ++i) msg += "\n  " + errors[i];
    if (errors.size() > kMaxListed) msg += "\n  ... and " + std::to_string(errors.size() - kMaxListed) + " more";
    return Status::InvalidArgument(msg);
  }
  return cfg;
}

Result<Config> Config::WithOverrides(const std::vector<std::string>& overrides) const {
  QR_CHECK(schema_ != nullptr, "Config used before Load");
  return FromRaw(*schema_, given_, given_tables_, overrides, {}, Source{});
}

Result<Config> Config::Parse(const ConfigSchema& schema, const std::string& yaml_text,
                             const std::vector<std::string>& overrides, const std::string& file) {
  const std::string file_label = file.empty() ? "" : file + ": ";
  if (yaml_text.size() > kConfigMaxFileBytes) {
    return Status::InvalidArgument(file_label + "the config is " + std::to_string(yaml_text.size()) +
                                   " bytes, more than the limit of " + std::to_string(kConfigMaxFileBytes) + " bytes");
  }
  std::map<std::string, std::string> given;
  std::map<std::string, RawRows> tables;
  std::vector<std::string> errors;
  FlattenState st;
  st.errors = &errors;
  try {
    YAML::Node root = YAML::Load(yaml_text);
    if (!root.IsNull() && !root.IsMap()) {
      errors.push_back("the document must be a mapping of sections to keys");
    } else {
      Flatten(root, "", &given, &tables, &st);
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(file_label + "YAML syntax error: " + e.what());
  }
  for (auto& e : errors) e = file_label + e;
  Source source;
  source.file = file;
  source.lines = std::move(st.lines);
  source.overrides_label = "command line: ";
  return FromRaw(schema, given, tables, overrides, std::move(errors), source);
}

Result<Config> Config::LoadString(const ConfigSchema& schema, const std::string& yaml_text,
                                  const std::vector<std::string>& overrides) {
  return Parse(schema, yaml_text, overrides, "");
}

Result<Config> Config::Load(const ConfigSchema& schema, const std::string& yaml_path,
                            const std::vector<std::string>& overrides) {
  if (yaml_path.empty()) return LoadString(schema, "", overrides);
  auto text = ReadConfigFile(yaml_path);
  if (!text.ok()) return text.status();
  return Parse(schema, text.value(), overrides, yaml_path);
}

Result<std::string> ReadConfigFile(const std::string& path) {
  // Checked before reading, so a directory, a device or a huge file is named, not read.
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) {
    return Status::NotFound("cannot open config file '" + path + "': " + std::strerror(errno));
  }
  if (S_ISDIR(sb.st_mode)) return Status::InvalidArgument("config file '" + path + "' is a directory");
  if (S_ISREG(sb.st_mode) && static_cast<uint64_t>(sb.st_size) > kConfigMaxFileBytes) {
    return Status::InvalidArgument("config file '" + path + "' is " + std::to_string(sb.st_size) +
                                   " bytes, more than the limit of " + std::to_string(kConfigMaxFileBytes) + " bytes");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open config file '" + path + "': " + std::strerror(errno));
  // Read at most one byte past the limit (a pipe or a device has no size to check up front).
  std::string text(kConfigMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Status::InvalidArgument("cannot read config file '" + path + "'");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kConfigMaxFileBytes) {
    return Status::InvalidArgument("config file '" + path + "' is more than the limit of " +
                                   std::to_string(kConfigMaxFileBytes) + " bytes");
  }
  return text;
}

const std::string& Config::Raw(const std::string& name, ConfigType type) const {
  QR_CHECK(schema_ != nullptr, "Config used before Load");
  const ConfigKey* key = schema_->Find(name);
  QR_CHECK(key != nullptr, "config key %s not in schema", name.c_str());
  QR_CHECK(key->type == type, "config key %s read as %s, declared %s", name.c_str(), TypeName(type),
           TypeName(key->type));
  return values_.at(name);
}

int64_t Config::GetInt(const std::string& name) const { return std::stoll(Raw(name, ConfigType::kInt)); }
double Config::GetDouble(const std::string& name) const { return std::stod(Raw(name, ConfigType::kDouble)); }
bool Config::GetBool(const std::string& name) const { return Raw(name, ConfigType::kBool) == "true"; }
const std::string& Config::GetString(const std::string& name) const { return Raw(name, ConfigType::kString); }
std::vector<std::string> Config::GetList(const std::string& name) const {
  return SplitList(Raw(name, ConfigType::kStringList));
}

const std::vector<ConfigRow>& Config::GetTable(const std::string& name) const {
  QR_CHECK(schema_ != nullptr, "Config used before Load");
  const ConfigKey* key = schema_->Find(name);
  QR_CHECK(key != nullptr && key->type == ConfigType::kTable, "config key %s is not a table in the schema", name.c_str());
  return tables_.at(name);
}

const std::string& ConfigRow::Raw(const std::string& column, ConfigType type) const {
  QR_CHECK(table_ != nullptr, "ConfigRow used before Load");
  auto it = std::find_if(table_->columns.begin(), table_->columns.end(), [&](const ConfigKey& c) { return c.name == column; });
  QR_CHECK(it != table_->columns.end(), "table %s has no column %s", table_->name.c_str(), column.c_str());
  QR_CHECK(it->type == type, "column %s.%s read as %s, declared %s", table_->name.c_str(), column.c_str(), TypeName(type),
           TypeName(it->type));
  return values_.at(column);
}
int64_t ConfigRow::GetInt(const std::string& c) const { return std::stoll(Raw(c, ConfigType::kInt)); }
double ConfigRow::GetDouble(const std::string& c) const { return std::stod(Raw(c, ConfigType::kDouble)); }
bool ConfigRow::GetBool(const std::string& c) const { return Raw(c, ConfigType::kBool) == "true"; }
const std::string& ConfigRow::GetString(const std::string& c) const { return Raw(c, ConfigType::kString); }

std::string Config::Dump() const {
  std::string out;
  for (const auto& [k, v] : values_) out += k + ": " + v + "\n";
  for (const auto& [k, rows] : tables_) {
    for (size_t i = 0; i < rows.size(); ++i) {
      out += k + "[" + std::to_string(i) + "]:";
      for (const auto& [c, v] : rows[i].values_) out += " " + c + "=" + v;
      out += "\n";
    }
  }
  return out;
}

namespace {
std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') { out += '\\'; out += c; }
    else if (static_cast<unsigned char>(c) < 0x20) { char buf[8]; std::snprintf(buf, sizeof buf, "\\u%04x", c); out += buf; }
    else out += c;
  }
  return out;
}
}  // namespace

std::string Config::DumpJson() const {
  std::string out = "{";
  for (const auto& [k, v] : values_) {
    out += (out.size() > 1 ? "," : "");
    out += "\"" + JsonEscape(k) + "\":\"" + JsonEscape(v) + "\"";
  }
  for (const auto& [k, rows] : tables_) {
    out += (out.size() > 1 ? "," : "");
    out += "\"" + JsonEscape(k) + "\":[";
    for (size_t i = 0; i < rows.size(); ++i) {
      out += i ? ",{" : "{";
      bool first = true;
      for (const auto& [c, v] : rows[i].values_) {
        out += (first ? "" : ",") + ("\"" + JsonEscape(c) + "\":\"" + JsonEscape(v) + "\"");
        first = false;
      }
      out += "}";
    }
    out += "]";
  }
  return out + "}";
}

}  // namespace qrstore
