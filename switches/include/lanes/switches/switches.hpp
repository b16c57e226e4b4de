#pragma once
// The emulated switches of a run. On a switch whose stack is gobgp (the
// default): gobgpd and lanes' FIB agent; deploy_switches renders their
// configurations and asks the run's supervisor for both daemons (gobgpd
// first, then the agent, which is ready once gobgpd answers it). On one
// whose stack is frr: FRR's zebra, then staticd and bgpd (frr.hpp).
// Either way lanes' bfdd answers the hosts' BFD.

#include <nlohmann/json.hpp>
#include <functional>
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
  // switch-stack="frr": FRR's own directory (owned by FRR's user, which
  // its daemons run as), with their configurations, pid files and sockets
  std::string frr_dir;        // <dir>/frr
  std::string bgpd_vty() const { return frr_dir + "/bgpd.vty"; }
};

SwitchFiles switch_files(const RunRegistry& reg, const std::string& run_id, const std::string& node);
bool has_switches(const Topology& topo);
// Renders and writes every switch's configuration (with HERE: those it
// says yes to, a machine's in a run over several); checks each with
// `gobgpd --dry-run`.
Status write_switch_configs(const Topology& topo, const RunRegistry& reg, const std::string& run_id,
                            const std::function<bool(int)>& here = nullptr);
// The switch role's deploy step: the configurations, then a gobgpd and a
// FIB agent request per switch.
Status deploy_switches(DeployContext& ctx);

// Where lanes asks a switch's BGP speaker: gobgpd's API in the switch's
// namespace, or bgpd's vty socket.
struct SpeakerRef {
  testbed::SwitchStack stack = testbed::SwitchStack::gobgp;
  int ns_fd = -1;   // gobgp: the switch's namespace
  std::string vty;  // frr: bgpd's vty socket
  const char* name() const { return stack == testbed::SwitchStack::frr ? "FRR's bgpd" : "gobgpd"; }
};
SpeakerRef speaker_of(const RunRegistry& reg, const std::string& run_id, const Node& node, int ns_fd);

// A switch's BGP session as its speaker has it, with the paths its import
// policy accepted and rejected (COUNT_RIB: counted from one RIB dump per
// family with GoBGP; 0 otherwise).
struct SessionPaths {
  BgpSession session;
  uint64_t accepted = 0, rejected = 0;
};
// The sessions of a switch's speaker, ordered by description and neighbor.
Result<std::vector<SessionPaths>> session_paths(const SpeakerRef& speaker, bool count_rib);
// The speaker's RIB of FAMILY (AF_INET or AF_INET6): every path of every
// prefix, or of PREFIX alone.
Result<std::vector<BgpRoute>> speaker_routes(const SpeakerRef& speaker, int family, const std::string& prefix = "");

// What `lanes status` shows for switch NODE of a running run: BGP sessions
// (state, received, accepted, rejected), the FIB agent's routes (gobgp), daemons.
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
