#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "common/mutex.h"

namespace qrstore {
namespace {
// Serializes creating a subsystem's logger and changing the level new loggers get.
Mutex g_mu;
spdlog::level::level_enum g_level GUARDED_BY(g_mu) = spdlog::level::info;
}  // namespace

std::shared_ptr<spdlog::logger> Logger(const std::string& subsystem) {
  MutexLock lock(g_mu);
  if (auto existing = spdlog::get(subsystem)) return existing;
  auto logger = spdlog::stderr_color_mt(subsystem);
  logger->set_pattern("%H:%M:%S.%e %^%L%$ [%n] %v");
  logger->set_level(g_level);
  return logger;
}

bool SetLogLevel(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") return false;
  MutexLock lock(g_mu);
  g_level = parsed;
  spdlog::set_level(parsed);
  return true;
}

}  // namespace qrstore
