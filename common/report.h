// Output helpers shared by the programs (qrstore-bench, qrstore-row-bench, qrstore-client) and the
// verifiers: number and hex formatting, and a flat JSON object built field by field (their
// --json last line). Pure functions and a value type; any thread.
//
// JSON produced here is always valid (RFC 8259): strings are escaped (quote, backslash, control
// characters), and a number that is not finite (NaN, +-inf: a mean over nothing, a division by
// a zero window) is written as null rather than as "nan", which no JSON parser accepts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qrstore {

// 16 lower-case hex digits.
std::string Hex(uint64_t v);
// %.6g: compact, enough digits for measured figures ("nan"/"inf" when not finite: for humans).
std::string Num(double v);
// A JSON number (%.6g), or null when `v` is not finite.
std::string JsonNumber(double v);
// A JSON string literal holding `s` (UTF-8 bytes are passed through).
std::string JsonString(const std::string& s);
// A JSON array of string literals.
std::string JsonStringArray(const std::vector<std::string>& items);

// A flat JSON object built field by field, in insertion order. Keys are not checked for
// duplicates (the callers use fixed, distinct keys).
class JsonObject {
 public:
  void Raw(const std::string& key, const std::string& json);  // `json` must be a JSON value
  void Str(const std::string& key, const std::string& v) { Raw(key, JsonString(v)); }
  void Int(const std::string& key, uint64_t v) { Raw(key, std::to_string(v)); }
  void Dbl(const std::string& key, double v) { Raw(key, JsonNumber(v)); }
  void Bool(const std::string& key, bool v) { Raw(key, v ? "true" : "false"); }
  bool empty() const { return body_.empty(); }
  std::string Done() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

}  // namespace qrstore
