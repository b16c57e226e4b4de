#pragma once
// What every lanes daemon (FIB agent, host agent, VIP injector) does first:
// `--config FILE --state FILE [--log-level L]` and the JSON config (its
// EventLoop then stops on SIGTERM and SIGINT); and how it publishes its
// state file.

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

// Writes J to PATH atomically (a temporary file renamed over it).
void write_json_atomic(const std::string& path, const nlohmann::json& j);

// A daemon's state file, rewritten only when what it says changed: a
// thousand idle daemons then write nothing (each rewrite is a file
// created and renamed on the state dir's file system).
class StateFile {
 public:
  explicit StateFile(std::string path) : path_(std::move(path)) {}
  // true if J differed from the last one written and was written.
  bool publish(const nlohmann::json& j);
  uint64_t writes() const { return writes_; }

 private:
  std::string path_;
  std::string last_;
  uint64_t writes_ = 0;
};

}  // namespace lanes::testbed
