#pragma once
// What every lanes daemon (FIB agent, host agent, VIP injector) does first:
// `--config FILE --state FILE [--log-level L]`, the JSON config, SIGTERM and
// SIGINT turned into a stop flag; and how it publishes its state file.

#include <atomic>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace lanes::testbed {

struct DaemonStart {
  std::string config_path;
  std::string state_path;
  nlohmann::json config;
};

// Parses the command line and reads the config. Returns the exit code to
// end with (0 after --help, 2 on bad input) when the daemon must not run.
std::optional<int> daemon_start(int argc, char** argv, const char* name, const char* what, DaemonStart& out);

// Set by SIGTERM or SIGINT once daemon_start has run.
const std::atomic<bool>& stop_requested();

// Writes J to PATH atomically (a temporary file renamed over it).
void write_json_atomic(const std::string& path, const nlohmann::json& j);

}  // namespace lanes::testbed
