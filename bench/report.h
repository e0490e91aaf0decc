// Output helpers shared by the benchmark programs (qrstore-bench, qrstore-client): number and
// hex formatting, and a flat JSON object built field by field (their --json last line).
// Pure functions and a value type; any thread.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>

namespace qrstore::bench {

inline std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// %.6g: compact, enough digits for measured figures.
inline std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

inline std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A flat JSON object built field by field, in insertion order.
class JsonObject {
 public:
  void Raw(const std::string& key, const std::string& json) {
    body_ += (body_.empty() ? "" : ",") + JsonString(key) + ":" + json;
  }
  void Str(const std::string& key, const std::string& v) { Raw(key, JsonString(v)); }
  void Int(const std::string& key, uint64_t v) { Raw(key, std::to_string(v)); }
  void Dbl(const std::string& key, double v) { Raw(key, Num(v)); }
  void Bool(const std::string& key, bool v) { Raw(key, v ? "true" : "false"); }
  bool empty() const { return body_.empty(); }
  std::string Done() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

}  // namespace qrstore::bench
