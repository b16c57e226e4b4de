#pragma once
// The emulated switches of a run: gobgpd and the FIB agent on every rack
// switch and spine. deploy_switches renders their configurations and asks
// the run's supervisor for both daemons (gobgpd first, then the agent,
// which is ready once gobgpd answers it).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lanes/switches/gobgp_client.hpp"
#include "lanes/testbed/deploy.hpp"
#include "lanes/testbed/model.hpp"
#include "lanes/testbed/result.hpp"
#include "lanes/testbed/role.hpp"
#include "lanes/testbed/run_registry.hpp"

namespace lanes::switches {

using testbed::DeployContext;
using testbed::Node;
using testbed::Role;
using testbed::RunRegistry;
using testbed::Result;
using testbed::Status;
using testbed::Topology;

struct SwitchFiles {
  std::string dir;            // <run>/switches/<node>
  std::string gobgp_config;   // gobgpd.toml
  std::string agent_config;   // fib-agent.json
  std::string agent_state;    // fib-agent-state.json (written by the agent)
  std::string gobgpd_log;     // <run>/logs/<node>-gobgpd.log
  std::string agent_log;      // <run>/logs/<node>-fib-agent.log
};

SwitchFiles switch_files(const RunRegistry& reg, const std::string& run_id, const std::string& node);
bool has_switches(const Topology& topo);
// Renders and writes every switch's configuration; checks each with
// `gobgpd --dry-run`.
Status write_switch_configs(const Topology& topo, const RunRegistry& reg, const std::string& run_id);
// The switch role's deploy step: the configurations, then a gobgpd and a
// FIB agent request per switch.
Status deploy_switches(DeployContext& ctx);

// A switch's BGP session as gobgpd has it, with the paths its import
// policy accepted and rejected (COUNT_RIB: counted from one RIB dump per
// family; 0 otherwise).
struct SessionPaths {
  BgpSession session;
  uint64_t accepted = 0, rejected = 0;
};
// The sessions of the gobgpd in namespace NS_FD, ordered by description
// and neighbor.
Result<std::vector<SessionPaths>> session_paths(int ns_fd, bool count_rib);

// What `lanes status` shows for switch NODE of a running run: BGP sessions
// (state, received, accepted, rejected), the FIB agent's routes, daemons.
// WITH_RIB: also read the RIB to count what import policy rejected.
nlohmann::json switch_status_json(const RunRegistry& reg, const std::string& run_id, const Node& node, int netns_fd,
                                  bool with_rib = true);

// The switch role: deploy_switches, and switch_status_json as its status.
class SwitchRole final : public Role {
 public:
  const char* name() const override { return "switches"; }
  Status deploy(DeployContext& ctx) const override { return deploy_switches(ctx); }
  const char* status_key() const override { return "bgp"; }
  nlohmann::json status(const RunRegistry& reg, const std::string& run_id, const Node& node, int netns_fd,
                        bool detailed) const override;
  void print_status(const nlohmann::json& view, const nlohmann::json& node, std::ostream& out) const override;
};

}  // namespace lanes::switches
