// Text helpers shared by the config's schema (config_schema.cc) and its values (config.cc):
// type names for messages, trimming, and the canonical text of a number. Internal to common/.
#pragma once

#include <sstream>
#include <string>

#include "common/config.h"

namespace qrstore::config_text {

inline const char* TypeName(ConfigType t) {
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

inline std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

inline std::string FormatNumber(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace qrstore::config_text
