// ConfigSchema: the keys a program accepts, their types, ranges, defaults and help
// (common/config.h), and IntColumn / StringColumn for the columns of a table key.
#include <sstream>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/config_text.h"

namespace qrstore {

using config_text::FormatNumber;
using config_text::TypeName;

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

}  // namespace qrstore
