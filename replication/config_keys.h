// The replication.* config keys, apart from the backends: a program that only reads configs links
// qrstore_replication_config, not raft or ZooKeeper. replication/factory.h builds the backends.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"

namespace qrstore::replication {

// Adds replication.* and every built-in backend's replication.<backend>.* keys.
void AddConfigKeys(ConfigSchema* schema);

// The backends built into this binary, e.g. {"none", "raft"}.
std::vector<std::string> BuiltBackends();

}  // namespace qrstore::replication
