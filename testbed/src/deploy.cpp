#include "lanes/testbed/deploy.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "lanes/testbed/log.hpp"

namespace lanes::testbed {
std::string daemon_requests_path(const RunRegistry& reg, const std::string& run_id) {
  return reg.layout(run_id).daemons();
}

Status write_daemon_requests(const RunRegistry& reg, const std::string& run_id, const std::vector<DaemonRequest>& d) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : d)
    j.push_back({{"node", r.node},
                 {"serves", r.serves},
                 {"name", r.name},
                 {"argv", r.argv},
                 {"netns", r.netns},
                 {"ready_file", r.ready_file},
                 {"wave", r.wave},
                 {"env", r.env},
                 {"log", r.log},
                 {"fatal_log", r.fatal_log}});
  std::ofstream o(daemon_requests_path(reg, run_id), std::ios::trunc);
  o << j.dump(2) << "\n";
  if (!o) return errno_error("writing " + daemon_requests_path(reg, run_id));
  return {};
}

std::vector<DaemonRequest> read_daemon_requests(const RunRegistry& reg, const std::string& run_id) {
  std::vector<DaemonRequest> out;
  std::ifstream in(daemon_requests_path(reg, run_id));
  if (!in) return out;
  try {
    for (const auto& r : nlohmann::json::parse(in)) {
      DaemonRequest d;
      d.node = r.value("node", "");
      d.serves = r.value("serves", std::vector<std::string>{});
      d.name = r.value("name", "");
      d.argv = r.value("argv", std::vector<std::string>{});
      d.netns = r.value("netns", "");
      d.ready_file = r.value("ready_file", "");
      d.wave = r.value("wave", kWaveHosts);
      d.env = r.value("env", std::vector<std::pair<std::string, std::string>>{});
      d.log = r.value("log", "");
      d.fatal_log = r.value("fatal_log", std::vector<std::string>{});
      out.push_back(std::move(d));
    }
  } catch (const std::exception& e) {
    log::error("reading {}: {}", daemon_requests_path(reg, run_id), e.what());
  }
  return out;
}

}  // namespace lanes::testbed
