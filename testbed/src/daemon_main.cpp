#include "lanes/testbed/daemon_main.hpp"

#include <signal.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "lanes/testbed/log.hpp"

namespace lanes::testbed {
std::optional<int> daemon_start(int argc, char** argv, const char* name, const char* what, DaemonStart& out) {
  log::set_timestamps(true);  // its log is a file of the run's: lines that say when
  std::string usage = std::string("usage: ") + name + " --config FILE --state FILE [--log-level debug|info|warn|error]";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) {
      out.config_path = argv[++i];
    } else if (a == "--state" && i + 1 < argc) {
      out.state_path = argv[++i];
    } else if (a == "--log-level" && i + 1 < argc) {
      log::Level l;
      if (!log::parse_level(argv[++i], l)) {
        std::cerr << name << ": --log-level " << argv[i] << ": expected debug, info, warn or error\n";
        return 2;
      }
      log::set_level(l);
    } else if (a == "--help" || a == "-h") {
      std::cout << usage << "\n" << what << "\n";
      return 0;
    } else {
      std::cerr << name << ": unknown argument " << a << "\n" << usage << "\n";
      return 2;
    }
  }
  if (out.config_path.empty() || out.state_path.empty()) {
    std::cerr << usage << "\n";
    return 2;
  }
  try {
    std::ifstream in(out.config_path);
    if (!in) throw std::runtime_error("cannot read it");
    out.config = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    std::cerr << name << ": " << out.config_path << ": " << e.what() << "\n";
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);  // SIGTERM and SIGINT stop the daemon's EventLoop
  return std::nullopt;
}

void write_json_atomic(const std::string& path, const nlohmann::json& j) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream o(tmp, std::ios::trunc);
    o << j.dump(2) << "\n";
    if (!o) {
      log::warn("writing {} failed", tmp);
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) log::warn("replacing {} failed", path);
}

bool StateFile::publish(const nlohmann::json& j) {
  std::string text = j.dump(2);
  if (text == last_) return false;
  write_json_atomic(path_, j);
  last_ = std::move(text);
  ++writes_;
  return true;
}

}  // namespace lanes::testbed
