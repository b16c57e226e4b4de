#include "lanes/switches/switches.hpp"

#include <filesystem>
#include <fstream>

#include "lanes/bfd/bfdd.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/switches/switch_config.hpp"

namespace lanes::switches {

using namespace lanes::testbed;

SwitchFiles switch_files(const RunRegistry& reg, const std::string& run_id, const std::string& node) {
  SwitchFiles f;
  RunLayout run = reg.layout(run_id);
  f.dir = run.node_dir("switches", node);
  f.gobgp_config = f.dir + "/gobgpd.toml";
  f.agent_config = f.dir + "/fib-agent.json";
  f.agent_state = f.dir + "/fib-agent-state.json";
  f.gobgpd_log = run.daemon_log(node, "gobgpd");
  f.agent_log = run.daemon_log(node, "fib-agent");
  return f;
}

bool has_switches(const Topology& t) { return t.count(NodeKind::rack_switch) + t.count(NodeKind::spine) > 0; }

Status write_switch_configs(const Topology& t, const RunRegistry& reg, const std::string& run_id) {
  std::error_code ec;
  std::filesystem::create_directories(reg.layout(run_id).logs(), ec);
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (n.kind != NodeKind::rack_switch && n.kind != NodeKind::spine) continue;
    auto f = switch_files(reg, run_id, n.name);
    std::filesystem::create_directories(f.dir, ec);
    if (ec) return std::system_error(ec, "creating " + f.dir);
    {
      std::ofstream o(f.gobgp_config, std::ios::trunc);
      o << render_gobgp_config(t, static_cast<int>(i));
      if (!o) return errno_error("writing " + f.gobgp_config);
    }
    {
      std::ofstream o(f.agent_config, std::ios::trunc);
      auto agent = render_agent_config(t, static_cast<int>(i));
      // the verdicts of the switch's bfdd (deploy_switches starts it)
      if (!bfd::bfd_links(t, static_cast<int>(i)).empty()) agent.bfd_socket = bfd::bfdd_files(f.dir).socket;
      o << agent.to_json().dump(2) << "\n";
      if (!o) return errno_error("writing " + f.agent_config);
    }
    ProcessSpec check{"gobgpd --dry-run", {"gobgpd", "--dry-run", "-f", f.gobgp_config, "-t", "toml"}};
    check.log_path = f.gobgpd_log;
    check.new_session = false;
    auto r = run_capture(check, std::chrono::seconds(10));
    if (!r) return r.error();
    if (r.value().status != 0)
      return os_error(EINVAL, fmt::format("gobgpd rejects the configuration of {} ({}); see {}:\n{}", n.name,
                                          f.gobgp_config, f.gobgpd_log, log::tail_of(f.gobgpd_log, 3, "  ")));
  }
  return {};
}

Status deploy_switches(DeployContext& ctx) {
  const Topology& t = ctx.tb.topology();
  if (!has_switches(t)) return {};
  if (auto st = write_switch_configs(t, ctx.reg, ctx.run_id); !st) return st;
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (n.kind != NodeKind::rack_switch && n.kind != NodeKind::spine) continue;
    auto f = switch_files(ctx.reg, ctx.run_id, n.name);
    std::string netns = ctx.tb.netns_name(static_cast<int>(i));
    DaemonRequest gobgpd;
    gobgpd.node = n.name;
    gobgpd.name = "gobgpd";
    gobgpd.argv = {"gobgpd", "-f", f.gobgp_config, "-t", "toml", "-p", "-l", "info", "--api-hosts",
                   std::string(kGobgpApi), "--pprof-disable"};
    gobgpd.netns = netns;
    gobgpd.wave = kWaveFabric;
    // one Go scheduler thread: twenty gobgpds on two cores otherwise spend
    // their time waking each other's threads
    gobgpd.env = {{"GOMAXPROCS", "1"}};
    gobgpd.log = f.gobgpd_log;
    // gobgpd logs some configuration errors (a policy it cannot build) and
    // runs on without that part
    gobgpd.fatal_log = {"level=error", "level=fatal"};
    ctx.daemons.push_back(std::move(gobgpd));
    // BFD towards the job hosts, in a daemon of its own: a restarted FIB
    // agent must not take the hosts' paths out of use
    if (auto b = bfd::deploy_bfdd(ctx, static_cast<int>(i), f.dir, kWaveFabric); !b) return b.error();
    // the agent is ready once gobgpd answers it: the hosts' daemons start
    // after every switch can take their sessions
    DaemonRequest agent;
    agent.node = n.name;
    agent.name = "fib-agent";
    agent.argv = {ctx.bin_dir + "/lanes-fib-agent", "--config", f.agent_config, "--state", f.agent_state};
    agent.netns = netns;
    agent.wave = kWaveFabricAgents;
    agent.ready_file = f.agent_state;
    agent.log = f.agent_log;
    ctx.daemons.push_back(std::move(agent));
  }
  return {};
}

}  // namespace lanes::switches
