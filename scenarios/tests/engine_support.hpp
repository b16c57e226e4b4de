#pragma once
// Runs lanes-traffic in a run's namespaces for the engine's tests and benchmark.

#include <filesystem>
#include <nlohmann/json.hpp>

#include "lanes/hostnet/hostnet.hpp"
#include "lanes/vip/deploy.hpp"
#include "root_support.hpp"

namespace lanes::test {

// hostnet's containers and the VIP injectors, as `lanes up` deploys them
inline testbed::Roles host_roles() {
  return {std::make_shared<hostnet::HostRole>(), std::make_shared<vip::InjectorRole>()};
}

inline std::string traffic_bin() {
  return std::filesystem::path(lanes_bin()).parent_path().string() + "/lanes-traffic";
}

// Starts a receiver for FLOWS flows on PORT in namespace NS_FD; its JSON
// lands in OUT.
// EXTRA: more flags (--mptcp)
inline testbed::Daemon start_receiver(int ns_fd, int port, int flows, const std::string& out,
                                      const std::string& extra = "") {
  testbed::ProcessSpec spec{"lanes-traffic recv", {"sh", "-c", traffic_bin() + " recv --port " + std::to_string(port) +
                                                                  " --flows " + std::to_string(flows) + " " + extra +
                                                                  " > " + out}};
  spec.netns_fd = ns_fd;
  auto d = testbed::Daemon::start(spec);
  if (!d) throw d.error();
  wait_listening(ns_fd, port);
  return std::move(d).value();
}

// EXTRA: more arguments (--congestion NAME)
inline nlohmann::json send(int ns_fd, const std::string& to, int port, int flows, uint64_t bytes,
                           const std::vector<std::string>& extra = {}) {
  testbed::ProcessSpec spec{"lanes-traffic send", {traffic_bin(), "send", "--to", to, "--port", std::to_string(port),
                                                   "--flows", std::to_string(flows), "--bytes", std::to_string(bytes)}};
  spec.argv.insert(spec.argv.end(), extra.begin(), extra.end());
  spec.netns_fd = ns_fd;
  spec.new_session = false;
  auto r = testbed::run_capture(spec, std::chrono::seconds(120));
  if (!r) return {};
  try {
    return nlohmann::json::parse(r.value().out);
  } catch (const std::exception&) {
    return {};
  }
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace lanes::test
