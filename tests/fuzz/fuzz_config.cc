// Fuzz target: config files (common/config.h), YAML text as a server or client reads it with the
// cluster schema (cluster/config/cluster_config.h: every key of configs/cluster-*.yaml). The input is
// the file's text.
// Contract: Config::LoadString never crashes, never lets an exception out (yaml-cpp throws; the
// loader must convert), and neither blows up on anchors/aliases nor on deep nesting; it returns
// kInvalidArgument with a message, or a Config that validates again (WithOverrides with nothing
// gives the same effective config), whose every key reads with its declared type, and whose
// node table either makes a Topology or is refused with a message.
#include <cstdint>
#include <string>

#include "cluster/config/cluster_config.h"
#include "cluster/config/topology.h"
#include "common/check.h"
#include "common/config.h"

using namespace qrstore;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ConfigSchema* const schema = [] {
    auto* s = new ConfigSchema;  // lives for the process, like a program's schema
    cluster::AddClusterConfigKeys(s);
    return s;
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<Config> loaded = Config::LoadString(*schema, text, {});
  if (!loaded.ok()) {
    QR_CHECK(loaded.status().code() == StatusCode::kInvalidArgument && !loaded.status().message().empty(),
             "a refused config must be kInvalidArgument saying why: %s", loaded.status().ToString().c_str());
    return 0;
  }
  const Config& config = loaded.value();
  for (const auto& [name, key] : schema->keys()) {
    switch (key.type) {
      case ConfigType::kInt: (void)config.GetInt(name); break;
      case ConfigType::kDouble: (void)config.GetDouble(name); break;
      case ConfigType::kBool: (void)config.GetBool(name); break;
      case ConfigType::kString: (void)config.GetString(name); break;
      case ConfigType::kStringList: (void)config.GetList(name); break;
      case ConfigType::kTable: (void)config.GetTable(name); break;
    }
  }
  Result<Config> again = config.WithOverrides({});
  QR_CHECK(again.ok(), "a loaded config fails to validate again: %s", again.status().ToString().c_str());
  QR_CHECK(again.value().Dump() == config.Dump(), "validating a loaded config again changes it");
  Result<cluster::Topology> topology = cluster::Topology::FromConfig(config);
  if (!topology.ok()) QR_CHECK(!topology.status().message().empty());
  return 0;
}
