#include "common/cli.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstdio>
#include <sstream>

#include "common/exit_codes.h"
#include "common/logging.h"

namespace qrstore {

CommandLine::CommandLine(std::string program, std::string synopsis, std::string description)
    : program_(std::move(program)), synopsis_(std::move(synopsis)), description_(std::move(description)) {}

void CommandLine::AddValue(const std::string& name, const std::string& value_name, const std::string& help) {
  QR_CHECK(!value_name.empty());
  flags_[name] = Flag{value_name, help};
  order_.push_back(name);
}

void CommandLine::AddSwitch(const std::string& name, const std::string& help) {
  flags_[name] = Flag{"", help};
  order_.push_back(name);
}

Status CommandLine::Parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      positional_.push_back(arg);
      continue;
    }
    std::string body = arg.substr(2);
    std::string name = body;
    std::optional<std::string> value;
    size_t eq = body.find('=');
    if (eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) {
      if (name.find('.') != std::string::npos) {
        if (!value) {
          if (i + 1 >= argc) return Status::InvalidArgument("config override --" + name + " needs a value");
          value = argv[++i];
        }
        overrides_.push_back(name + "=" + *value);
        continue;
      }
      return Status::InvalidArgument("unknown flag --" + name + " (see " + program_ + " --help)");
    }
    if (it->second.value_name.empty()) {
      if (value) return Status::InvalidArgument("flag --" + name + " takes no value");
      values_[name] = "true";
      continue;
    }
    if (!value) {
      if (i + 1 >= argc) return Status::InvalidArgument("flag --" + name + " needs a value <" + it->second.value_name + ">");
      value = argv[++i];
    }
    values_[name] = *value;
  }
  return Status::Ok();
}

std::string CommandLine::Get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

Result<int64_t> CommandLine::GetInt(const std::string& name, int64_t def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  int64_t v = 0;
  const std::string& s = it->second;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) {
    return Status::InvalidArgument("flag --" + name + ": expected an integer, got '" + s + "'");
  }
  return v;
}

Result<double> CommandLine::GetDouble(const std::string& name, double def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(it->second.c_str(), &end);
  if (errno != 0 || it->second.empty() || end != it->second.c_str() + it->second.size()) {
    return Status::InvalidArgument("flag --" + name + ": expected a number, got '" + it->second + "'");
  }
  return v;
}

std::optional<int> CommandLine::ParseStandard(int argc, char** argv, const ConfigSchema* schema) {
  Status parsed = Parse(argc, argv);
  if (help_) {
    std::fputs(Usage(schema).c_str(), stdout);
    return kExitOk;
  }
  auto fail = [&](const std::string& msg) {
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), msg.c_str());
    return kExitBadInput;
  };
  if (!parsed.ok()) return fail(parsed.message());
  if (!positional_.empty()) return fail("unexpected argument '" + positional_[0] + "' (see " + program_ + " --help)");
  if (flags_.count("log-level") && Has("log-level") && !SetLogLevel(Get("log-level"))) {
    return fail("flag --log-level: unknown level '" + Get("log-level") + "'");
  }
  return std::nullopt;
}

std::string CommandLine::Usage(const ConfigSchema* schema) const {
  std::ostringstream os;
  os << "usage: " << program_ << " " << synopsis_ << "\n\n" << description_ << "\n\noptions:\n";
  for (const auto& name : order_) {
    const Flag& f = flags_.at(name);
    std::string left = "--" + name + (f.value_name.empty() ? "" : " <" + f.value_name + ">");
    os << "  " << left;
    if (left.size() < 28) os << std::string(28 - left.size(), ' ');
    else os << "\n" << std::string(30, ' ');
    os << f.help << "\n";
  }
  os << "  --help                      print this help\n";
  if (schema != nullptr) {
    os << "\nconfig keys (set in the YAML file or override as --key=value):\n" << schema->Describe();
  }
  return os.str();
}

}  // namespace qrstore
