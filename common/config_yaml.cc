#include "common/config_yaml.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/config.h"

namespace qrstore {
namespace {

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

}  // namespace

Result<FlatYaml> FlattenYaml(const std::string& yaml_text) {
  if (yaml_text.size() > kConfigMaxFileBytes) {
    return Status::InvalidArgument("the config is " + std::to_string(yaml_text.size()) +
                                   " bytes, more than the limit of " + std::to_string(kConfigMaxFileBytes) + " bytes");
  }
  FlatYaml flat;
  FlattenState st;
  st.errors = &flat.errors;
  try {
    YAML::Node root = YAML::Load(yaml_text);
    if (!root.IsNull() && !root.IsMap()) {
      flat.errors.push_back("the document must be a mapping of sections to keys");
    } else {
      Flatten(root, "", &flat.values, &flat.tables, &st);
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("YAML syntax error: ") + e.what());
  }
  flat.lines = std::move(st.lines);
  return flat;
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

}  // namespace qrstore
