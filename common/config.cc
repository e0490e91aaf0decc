// Config: a program's effective configuration, from the YAML text (config_yaml.h) and --key=value
// overrides, checked and normalized against its ConfigSchema (config_schema.cc): every error at
// once, each naming where its value came from.
#include "common/config.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "common/config_text.h"
#include "common/config_yaml.h"

namespace qrstore {
namespace {

using config_text::FormatNumber;
using config_text::Trim;
using config_text::TypeName;

using RawRows = std::vector<std::map<std::string, std::string>>;

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
  auto flat = FlattenYaml(yaml_text);
  if (!flat.ok()) return Status::InvalidArgument(file_label + flat.status().message());
  FlatYaml& f = flat.value();
  for (auto& e : f.errors) e = file_label + e;
  Source source;
  source.file = file;
  source.lines = std::move(f.lines);
  source.overrides_label = "command line: ";
  return FromRaw(schema, f.values, f.tables, overrides, std::move(f.errors), source);
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
