#include "common/logging.h"

#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace qrstore {
namespace {
std::mutex g_mu;
spdlog::level::level_enum g_level = spdlog::level::info;
}  // namespace

std::shared_ptr<spdlog::logger> Logger(const std::string& subsystem) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (auto existing = spdlog::get(subsystem)) return existing;
  auto logger = spdlog::stderr_color_mt(subsystem);
  logger->set_pattern("%H:%M:%S.%e %^%L%$ [%n] %v");
  logger->set_level(g_level);
  return logger;
}

bool SetLogLevel(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") return false;
  std::lock_guard<std::mutex> lock(g_mu);
  g_level = parsed;
  spdlog::set_level(parsed);
  return true;
}

}  // namespace qrstore
