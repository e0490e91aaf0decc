// Reading a config's YAML text: the only yaml-cpp user. FlattenYaml turns a document into dotted
// keys (sequences of scalars into comma lists, sequences of maps into table rows), with the
// line of each key for messages, under the limits of common/config.h: the text's size
// (kConfigMaxFileBytes), the values and bytes it expands to through YAML aliases
// (kConfigMaxNodes, kConfigMaxExpandedBytes) and map nesting (kConfigMaxDepth). ReadConfigFile
// (declared in config.h) reads a file under the same size limit. What the keys mean is
// config.cc's business (the schema, normalizing, overrides). Plain functions: any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace qrstore {

struct FlatYaml {
  std::map<std::string, std::string> values;  // dotted key -> scalar (a list of scalars: "a,b,c")
  std::map<std::string, std::vector<std::map<std::string, std::string>>> tables;  // key -> rows
  std::map<std::string, int> lines;           // dotted key -> 1-based line
  // Problems of the document that do not stop the reading (a key given twice, a list item that
  // is not plain, a document over its expansion budget): reported with the schema's errors.
  std::vector<std::string> errors;
};

// kInvalidArgument for a text over kConfigMaxFileBytes, a YAML syntax error or a document that
// is not a mapping; messages carry no file name (the caller adds it).
Result<FlatYaml> FlattenYaml(const std::string& yaml_text);

}  // namespace qrstore
