// Logging: one named spdlog logger per subsystem ("engine", "raft", "zk", "bench"...),
// writing to stderr so that a program's stdout stays machine-readable (--json). Messages
// put identity first: "[p1/r0] became leader term 3". Hot loops log nothing.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace qrstore {

// The logger for `subsystem`, created on first use (thread-safe).
std::shared_ptr<spdlog::logger> Logger(const std::string& subsystem);

// Sets the level of every logger, existing and future: trace|debug|info|warn|error|off.
// Returns false on an unknown level name.
bool SetLogLevel(const std::string& level);

}  // namespace qrstore
