// lanes-fib-agent: runs inside a switch's namespace, follows gobgpd's best
// paths through its gRPC API (WatchEvent: the table, then every change, and
// the sessions' states) and programs resilient nexthop groups. Started and
// supervised by lanes.
//
// usage: lanes-fib-agent --config FILE --state FILE [--log-level L]

#include <iostream>

#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/switches/fib_agent_daemon.hpp"

using namespace lanes::testbed;
using namespace lanes::switches;
namespace lg = lanes::log;

int main(int argc, char** argv) {
  DaemonStart ds;
  if (auto rc = daemon_start(argc, argv, "lanes-fib-agent",
                             "Follows gobgpd's RIB in this namespace and programs resilient nexthop groups.", ds))
    return *rc;
  AgentConfig cfg;
  uint16_t port = kGobgpApiPort;
  try {
    cfg = AgentConfig::from_json(ds.config);
    if (auto colon = cfg.api.rfind(':'); colon != std::string::npos)
      port = static_cast<uint16_t>(std::stoul(cfg.api.substr(colon + 1)));
  } catch (const std::exception& e) {
    std::cerr << "lanes-fib-agent: " << ds.config_path << ": " << e.what() << "\n";
    return 2;
  }
  auto nl = Netlink::open_here(cfg.node);
  if (!nl) {
    lg::error("{}", nl.error().what());
    return 1;
  }
  NetlinkFib fib(std::move(nl).value());
  return FibAgentDaemon(std::move(cfg), port, fib, ds.state_path).run();
}
