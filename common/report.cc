#include "common/report.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace qrstore {

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string JsonNumber(double v) { return std::isfinite(v) ? Num(v) : "null"; }

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  out.reserve(s.size() + 2);
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string JsonStringArray(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + JsonString(items[i]);
  return out + "]";
}

void JsonObject::Raw(const std::string& key, const std::string& json) {
  if (!body_.empty()) body_ += ',';
  body_ += JsonString(key);
  body_ += ':';
  body_ += json;
}

}  // namespace qrstore
